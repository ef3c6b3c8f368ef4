/* C reference of the raw packet post paths, for benches/raw_post.rs; our own code.
 *
 * (a) One SEND WQE per frame, as libmlx5's _mlx5_post_send writes it for an
 *     IBV_QPT_RAW_PACKET QP: the control segment, the Ethernet segment
 *     zeroed with the frame's first MLX5_ETH_L2_INLINE_HEADER_SIZE (18)
 *     bytes inline (or none: `inl_hdr` 0, what a device without a minimum
 *     inline header takes), one data segment for the rest of the frame.
 * (b) Enhanced multi-packet WQEs as DPDK's mlx5 driver lays them out
 *     (mlx5_prm.h: opcode ENHANCED_MPSW 0x29, opmod 0): control segment,
 *     Ethernet segment without inline header, then one data segment per
 *     frame, or the frame inline (byte count | MLX5_INLINE_SEG, the bytes,
 *     padded to 16) for frames of up to 256 bytes. A session closes at 32
 *     packets or when the next frame would take it past 60 units; sessions
 *     never span two post lists. Written front to back, the control segment
 *     last, once the session's ds is known.
 * The segments come from rdma-core's public inline helpers
 * (mlx5dv_set_ctrl_seg, mlx5dv_set_eth_seg, mlx5dv_set_data_seg); one
 * doorbell per post list (vendor/c_ref_ring.h). Every `cq_every`-th WQE asks
 * for a CQE, as the Rust raw SQ stamps them. Like the RDMA reference it
 * keeps no per-WQE bookkeeping (no wr_id table, no room check): the ring
 * simply wraps. The memory is whatever the caller passes (the bench hands it
 * a queue model's ring, record and UAR page).
 *
 * Symbols are prefixed rdmaperf_cref_raw_.
 */
#include <endian.h>
#include <stdint.h>
#include <string.h>

#include <infiniband/mlx5dv.h>

#include "c_ref_ring.h"

/* Values from DPDK's mlx5_prm.h / mlx5_tx.h (mlx5dv.h has no eMPW). */
#define CREF_OPCODE_ENHANCED_MPSW 0x29u
#define CREF_EMPW_MAX_PACKETS 32u
#define CREF_EMPW_MAX_DS 60u
#define CREF_EMPW_MAX_INLINE 256u
/* MLX5_ETH_L2_INLINE_HEADER_SIZE (libmlx5's mlx5.h). */
#define CREF_L2_INLINE 18u

/* Mirrored by `CrefRawSq` in benches/raw_post.rs (repr(C)). */
struct rdmaperf_cref_raw_sq {
	uint8_t *buf;          /* sq.buf */
	uint32_t *dbrec;       /* &dbrec[MLX5_SND_DBR] */
	uint8_t *bf_reg;       /* bf.reg */
	uint32_t wqe_cnt;      /* sq.wqe_cnt (power of two) */
	uint32_t qpn;
	uint32_t bf_size;      /* bf.size; 0 = 8-byte doorbells only */
	uint32_t bf_offset;    /* 0 or bf_size */
	uint32_t pi;           /* producer index in WQEBBs (16 bits used) */
	uint32_t lkey;         /* of the frames' buffer */
	uint32_t inl_hdr;      /* SEND: 18 (libmlx5) or 0 inline header bytes */
	uint32_t cq_every;     /* one WQE in this many asks for a CQE */
	uint32_t quiet;        /* WQEs since the last that asked */
	uint32_t pad;
};

/* Mirrored by `CrefPkt` in benches/raw_post.rs (repr(C)). */
struct rdmaperf_cref_pkt {
	uint64_t addr;
	uint32_t len;
	uint32_t pad;
};

static inline uint8_t cref_raw_fm(struct rdmaperf_cref_raw_sq *sq)
{
	if (++sq->quiet >= sq->cq_every) {
		sq->quiet = 0;
		return MLX5_WQE_CTRL_CQ_UPDATE;
	}
	return 0;
}

/* The 16-byte unit `u` of the ring (wraps at its end). */
static inline uint8_t *cref_raw_unit(const struct rdmaperf_cref_raw_sq *sq, uint32_t u)
{
	return sq->buf + ((u & (sq->wqe_cnt * 4 - 1)) * 16);
}

static inline void cref_raw_ring(struct rdmaperf_cref_raw_sq *sq, uint32_t nreq, uint32_t last,
				 uint32_t last_ds)
{
	const struct cref_ring r = {sq->buf, sq->wqe_cnt, sq->dbrec, sq->bf_reg, sq->bf_size,
				    &sq->bf_offset};

	cref_ring_db(&r, sq->pi, nreq, last, last_ds);
}

/* (a) One post list of raw SENDs with `inl` (a constant: 18 or 0) header
 * bytes inline. */
static inline void cref_raw_send(struct rdmaperf_cref_raw_sq *sq,
				 const struct rdmaperf_cref_pkt *pkts, uint32_t n,
				 const uint32_t inl)
{
	const uint32_t eth = (16 + inl) & ~0xfu;  /* 32 with the header, 16 without */
	const uint32_t ds = (16 + eth + 16) / 16;
	uint32_t last = sq->pi;

	for (uint32_t i = 0; i < n; i++) {
		const struct rdmaperf_cref_pkt *p = &pkts[i];
		uint8_t *w = cref_ring_bb(sq->buf, sq->wqe_cnt, sq->pi);
		struct mlx5_wqe_eth_seg *e = (struct mlx5_wqe_eth_seg *)(w + 16);

		memset(e, 0, eth);
		mlx5dv_set_eth_seg(e, 0, 0, inl, (uint8_t *)(uintptr_t)p->addr);
		mlx5dv_set_data_seg((struct mlx5_wqe_data_seg *)(w + 16 + eth), p->len - inl,
				    sq->lkey, p->addr + inl);
		mlx5dv_set_ctrl_seg((struct mlx5_wqe_ctrl_seg *)w, sq->pi & 0xffff,
				    MLX5_OPCODE_SEND, 0, sq->qpn, cref_raw_fm(sq), ds, 0, 0);
		last = sq->pi;
		sq->pi += 1;
	}
	cref_raw_ring(sq, n, last, ds);
}

/* A short copy the way DPDK's rte_memcpy does one (fixed-size moves, the
 * last one overlapping), not left to the compiler: for a length it cannot
 * see, gcc -O2 expands memcpy into `rep movsq`, slow for 60 bytes. */
static inline void cref_copy(uint8_t *dst, const uint8_t *src, size_t n)
{
	if (n >= 16) {
		for (size_t i = 0; i + 16 < n; i += 16)
			__builtin_memcpy(dst + i, src + i, 16);
		__builtin_memcpy(dst + n - 16, src + n - 16, 16);
	} else if (n >= 8) {
		__builtin_memcpy(dst, src, 8);
		__builtin_memcpy(dst + n - 8, src + n - 8, 8);
	} else {
		for (size_t i = 0; i < n; i++)
			dst[i] = src[i];
	}
}

/* A frame inline at unit `u`: its byte count, its bytes (split at the ring
 * end); the pad is left as it is. */
static inline void cref_raw_inline(const struct rdmaperf_cref_raw_sq *sq, uint32_t u,
				   const struct rdmaperf_cref_pkt *p)
{
	uint8_t *seg = cref_raw_unit(sq, u);
	uint8_t *end = sq->buf + sq->wqe_cnt * CREF_WQEBB;
	uint8_t *dst = seg + sizeof(struct mlx5_wqe_inl_data_seg);
	const uint8_t *src = (const uint8_t *)(uintptr_t)p->addr;

	((struct mlx5_wqe_inl_data_seg *)seg)->byte_count = htobe32(p->len | MLX5_INLINE_SEG);
	if (dst + p->len <= end) {
		cref_copy(dst, src, p->len);
	} else {
		size_t room = (size_t)(end - dst);
		cref_copy(dst, src, room);
		cref_copy(sq->buf, src + room, p->len - room);
	}
}

/* (b) One post list in eMPW sessions; `inl` (a constant) puts frames of up
 * to 256 bytes inline. */
static inline void cref_raw_empw(struct rdmaperf_cref_raw_sq *sq,
				 const struct rdmaperf_cref_pkt *pkts, uint32_t n, const int inl)
{
	uint32_t i = 0, nwqe = 0, last = sq->pi, ds = 0;

	while (i < n) {
		const uint32_t start = sq->pi;
		uint32_t u = start * 4 + 2, k = 0;
		uint8_t *w = cref_ring_bb(sq->buf, sq->wqe_cnt, start);
		struct mlx5_wqe_eth_seg *e = (struct mlx5_wqe_eth_seg *)(w + 16);

		ds = 2;
		for (; i < n && k < CREF_EMPW_MAX_PACKETS; i++, k++) {
			const struct rdmaperf_cref_pkt *p = &pkts[i];

			if (inl && p->len <= CREF_EMPW_MAX_INLINE) {
				uint32_t need = (p->len + 4 + 15) / 16;

				if (ds + need > CREF_EMPW_MAX_DS)
					break;
				cref_raw_inline(sq, u, p);
				u += need;
				ds += need;
			} else {
				if (ds + 1 > CREF_EMPW_MAX_DS)
					break;
				mlx5dv_set_data_seg((struct mlx5_wqe_data_seg *)cref_raw_unit(sq, u),
						    p->len, sq->lkey, p->addr);
				u += 1;
				ds += 1;
			}
		}
		memset(e, 0, 16);
		mlx5dv_set_eth_seg(e, 0, 0, 0, w);
		mlx5dv_set_ctrl_seg((struct mlx5_wqe_ctrl_seg *)w, start & 0xffff,
				    CREF_OPCODE_ENHANCED_MPSW, 0, sq->qpn, cref_raw_fm(sq), ds, 0,
				    0);
		last = start;
		nwqe++;
		sq->pi = start + (ds + 3) / 4;
	}
	cref_raw_ring(sq, nwqe, last, ds);
}

/* `nlists` post lists of `batch` frames each, taken in order from `pkts`
 * (nlists * batch entries): the loops the bench times. */
void rdmaperf_cref_raw_run_send(struct rdmaperf_cref_raw_sq *sq,
				const struct rdmaperf_cref_pkt *pkts, uint32_t batch,
				uint32_t nlists)
{
	for (uint32_t l = 0; l < nlists; l++) {
		if (sq->inl_hdr)
			cref_raw_send(sq, pkts + (size_t)l * batch, batch, CREF_L2_INLINE);
		else
			cref_raw_send(sq, pkts + (size_t)l * batch, batch, 0);
	}
}

void rdmaperf_cref_raw_run_empw(struct rdmaperf_cref_raw_sq *sq,
				const struct rdmaperf_cref_pkt *pkts, uint32_t batch,
				uint32_t nlists, uint32_t inl)
{
	for (uint32_t l = 0; l < nlists; l++) {
		if (inl)
			cref_raw_empw(sq, pkts + (size_t)l * batch, batch, 1);
		else
			cref_raw_empw(sq, pkts + (size_t)l * batch, batch, 0);
	}
}

/* sizeof the mirrored structs, so the bench can check its layout. */
uint32_t rdmaperf_cref_raw_sizeof_sq(void) { return sizeof(struct rdmaperf_cref_raw_sq); }
uint32_t rdmaperf_cref_raw_sizeof_pkt(void) { return sizeof(struct rdmaperf_cref_pkt); }
