/* C reference of the direct mlx5 post path, for benches/post_path.rs; our own code.
 *
 * The bar the Rust direct path is measured against (see
 * shared/reference/post-path-anchors.md, "C anchor"): WQEs built with
 * rdma-core's public inline helpers (mlx5dv_set_ctrl_seg,
 * mlx5dv_set_data_seg; the raddr segment by hand), then rdma-core's
 * post_send_db() sequence (vendor/c_ref_ring.h).
 * Like the anchor it keeps no per-WQE bookkeeping (no wr_id table, no room
 * check): the ring simply wraps. The memory is whatever the caller passes
 * (the bench hands it a queue model's ring, record and UAR page).
 *
 * Symbols are prefixed rdmaperf_cref_.
 */
#include <endian.h>
#include <stdint.h>
#include <string.h>

#include <infiniband/mlx5dv.h>

#include "c_ref_ring.h"

/* Mirrored by `CrefQp` in benches/post_path.rs (repr(C)). */
struct rdmaperf_cref_qp {
	uint8_t *buf;          /* sq.buf */
	uint32_t wqe_cnt;      /* sq.wqe_cnt (power of two) */
	uint32_t qpn;
	uint32_t *dbrec;       /* &dbrec[MLX5_SND_DBR] */
	uint8_t *bf_reg;       /* bf.reg */
	uint32_t bf_size;      /* bf.size; 0 = 8-byte doorbells only */
	uint32_t bf_offset;    /* 0 or bf_size */
	uint32_t pi;           /* producer index in WQEBBs (16 bits used) */
	uint32_t ud;           /* nonzero: SENDs carry the address vector below */
	uint8_t av[48];        /* UD address vector, as laid out in the WQE */
};

/* Mirrored by `CrefWr` in benches/post_path.rs (repr(C)). */
struct rdmaperf_cref_wr {
	uint64_t wr_id;
	uint64_t laddr;
	uint64_t raddr;
	uint32_t lkey;
	uint32_t rkey;
	uint32_t len;
	uint8_t signaled;
	uint8_t inl;
	uint8_t pad[2];
};

static inline uint8_t *cref_bb(const struct rdmaperf_cref_qp *qp, uint32_t bb)
{
	return cref_ring_bb(qp->buf, qp->wqe_cnt, bb);
}

/* Inline payload after a 4-byte header, split at the ring end (as libmlx5's
 * memcpy_to_wqe); returns the 16-byte units taken. */
static inline uint32_t cref_inline(struct rdmaperf_cref_qp *qp, uint8_t *seg,
				   const struct rdmaperf_cref_wr *wr)
{
	uint8_t *qend = qp->buf + qp->wqe_cnt * CREF_WQEBB;
	struct mlx5_wqe_inl_data_seg *h = (struct mlx5_wqe_inl_data_seg *)seg;
	uint8_t *dst = seg + sizeof(*h);
	const uint8_t *src = (const uint8_t *)(uintptr_t)wr->laddr;
	uint32_t len = wr->len;

	if (dst + len <= qend) {
		memcpy(dst, src, len);
	} else {
		size_t room = (size_t)(qend - dst);
		memcpy(dst, src, room);
		memcpy(qp->buf, src + room, len - room);
	}
	h->byte_count = htobe32(len | MLX5_INLINE_SEG);
	return (len + sizeof(*h) + 15) / 16;
}

/* The doorbell: post_send_db() for a list ending with the WQE at `last`. */
static inline void cref_ring(struct rdmaperf_cref_qp *qp, uint32_t nreq, uint32_t last,
			     uint32_t last_ds)
{
	const struct cref_ring r = {qp->buf, qp->wqe_cnt, qp->dbrec, qp->bf_reg, qp->bf_size,
				    &qp->bf_offset};

	cref_ring_db(&r, qp->pi, nreq, last, last_ds);
}

/* One post list of RDMA WRITEs (data segment or inline), one doorbell. */
static inline void cref_post_write(struct rdmaperf_cref_qp *qp,
				   const struct rdmaperf_cref_wr *wrs, uint32_t n)
{
	uint32_t last = qp->pi, last_ds = 0;

	for (uint32_t i = 0; i < n; i++) {
		const struct rdmaperf_cref_wr *wr = &wrs[i];
		uint8_t *w = cref_bb(qp, qp->pi);
		struct mlx5_wqe_raddr_seg *r = (struct mlx5_wqe_raddr_seg *)(w + 16);
		uint32_t ds = 2;

		r->raddr = htobe64(wr->raddr);
		r->rkey = htobe32(wr->rkey);
		r->reserved = 0;
		if (wr->inl)
			ds += cref_inline(qp, w + 32, wr);
		else if (wr->len) {
			mlx5dv_set_data_seg((struct mlx5_wqe_data_seg *)(w + 32), wr->len, wr->lkey,
					    (uintptr_t)wr->laddr);
			ds += 1;
		}
		mlx5dv_set_ctrl_seg((struct mlx5_wqe_ctrl_seg *)w, qp->pi & 0xffff,
				    MLX5_OPCODE_RDMA_WRITE, 0, qp->qpn,
				    wr->signaled ? MLX5_WQE_CTRL_CQ_UPDATE : 0, ds, 0, 0);
		last = qp->pi;
		last_ds = ds;
		qp->pi += (ds + 3) / 4;
	}
	cref_ring(qp, n, last, last_ds);
}

/* One post list of UD SENDs (ctrl + address vector + data), one doorbell. */
static inline void cref_post_send_ud(struct rdmaperf_cref_qp *qp,
				     const struct rdmaperf_cref_wr *wrs, uint32_t n)
{
	uint32_t last = qp->pi, last_ds = 0;

	for (uint32_t i = 0; i < n; i++) {
		const struct rdmaperf_cref_wr *wr = &wrs[i];
		uint8_t *w = cref_bb(qp, qp->pi);
		uint32_t ds = 1 + 3;

		/* 48 bytes from the ctrl segment end at byte 64: never wraps. */
		memcpy(w + 16, qp->av, sizeof(qp->av));
		if (wr->len) {
			mlx5dv_set_data_seg((struct mlx5_wqe_data_seg *)cref_bb(qp, qp->pi + 1),
					    wr->len, wr->lkey, (uintptr_t)wr->laddr);
			ds += 1;
		}
		mlx5dv_set_ctrl_seg((struct mlx5_wqe_ctrl_seg *)w, qp->pi & 0xffff,
				    MLX5_OPCODE_SEND, 0, qp->qpn,
				    wr->signaled ? MLX5_WQE_CTRL_CQ_UPDATE : 0, ds, 0, 0);
		last = qp->pi;
		last_ds = ds;
		qp->pi += (ds + 3) / 4;
	}
	cref_ring(qp, n, last, last_ds);
}

/* `nlists` post lists of `batch` WRs each, taken in order from `wrs`
 * (nlists * batch entries): the loop the bench times. */
void rdmaperf_cref_run_write(struct rdmaperf_cref_qp *qp, const struct rdmaperf_cref_wr *wrs,
			     uint32_t batch, uint32_t nlists)
{
	for (uint32_t l = 0; l < nlists; l++)
		cref_post_write(qp, wrs + (size_t)l * batch, batch);
}

void rdmaperf_cref_run_send_ud(struct rdmaperf_cref_qp *qp, const struct rdmaperf_cref_wr *wrs,
			       uint32_t batch, uint32_t nlists)
{
	for (uint32_t l = 0; l < nlists; l++)
		cref_post_send_ud(qp, wrs + (size_t)l * batch, batch);
}

/* sizeof the mirrored structs, so the bench can check its layout. */
uint32_t rdmaperf_cref_sizeof_qp(void) { return sizeof(struct rdmaperf_cref_qp); }
uint32_t rdmaperf_cref_sizeof_wr(void) { return sizeof(struct rdmaperf_cref_wr); }
