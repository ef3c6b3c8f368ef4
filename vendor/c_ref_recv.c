/* C reference of the direct mlx5 receive path, for benches/recv_path.rs; our own code.
 *
 * What rdma-core does for one receive, without libmlx5's locks and generality:
 * post (mlx5_post_recv): the WR's data segment through rdma-core's public
 *   mlx5dv_set_data_seg, the invalid-lkey terminator when the stride holds
 *   more segments, the wr_id in a per-slot table, then for the list
 *   udma_to_device_barrier (a compiler barrier on x86-64, dmb oshst on
 *   aarch64) and the 16-bit posted count into the receive doorbell record;
 * poll (mlx5_poll_cq's responder path): owner and opcode through the public
 *   mlx5dv_get_cqe_owner / mlx5dv_get_cqe_opcode, the read barrier
 *   (udma_from_device_barrier: lfence / dmb oshld), the WR from
 *   wqe_counter (rdma-core >= v55), byte count and QPN, then the consumer
 *   index into the CQ's doorbell record once per poll.
 * The memory is whatever the caller passes (the bench's rings).
 * Symbols are prefixed rdmaperf_cref_.
 */
#include <endian.h>
#include <stdint.h>

#include <infiniband/mlx5dv.h>

/* Mirrored by `CrefRq` in benches/recv_path.rs (repr(C)). */
struct rdmaperf_cref_rq {
	uint8_t *buf;       /* rq.buf */
	uint64_t *wr_ids;   /* wqe_cnt entries */
	uint32_t *dbrec;    /* &dbrec[MLX5_RCV_DBR] */
	uint32_t wqe_cnt;   /* power of two */
	uint32_t shift;     /* log2(rq.stride) */
	uint32_t head;      /* WQEs posted */
	uint32_t tail;      /* WQEs completed */
};

/* Mirrored by `CrefCq` in benches/recv_path.rs (repr(C)). */
struct rdmaperf_cref_cq {
	uint8_t *buf;
	uint32_t *dbrec;    /* &dbrec[MLX5_CQ_SET_CI] */
	uint32_t cqe_cnt;
	uint32_t ci;
};

/* Mirrored by `CrefWc` (repr(C)). */
struct rdmaperf_cref_wc {
	uint64_t wr_id;
	uint32_t byte_len;
	uint32_t qp_num;
	uint8_t opcode;
	uint8_t status; /* 0 ok, 1 error CQE */
	uint8_t pad[6];
};

static inline void cref_to_device_barrier(void)
{
#if defined(__x86_64__)
	asm volatile("" ::: "memory");
#elif defined(__aarch64__)
	asm volatile("dmb oshst" ::: "memory");
#else
	__sync_synchronize();
#endif
}

static inline void cref_from_device_barrier(void)
{
#if defined(__x86_64__)
	asm volatile("lfence" ::: "memory");
#elif defined(__aarch64__)
	asm volatile("dmb oshld" ::: "memory");
#else
	__sync_synchronize();
#endif
}

/* Posts `n` receives of `len` bytes at addr + k * step, one record store. */
int rdmaperf_cref_post_recv_list(struct rdmaperf_cref_rq *rq, uint64_t addr, uint64_t step,
				 uint32_t lkey, uint32_t len, uint64_t wr_id, uint32_t n)
{
	uint32_t max_gs = (1u << rq->shift) / 16;

	if (rq->head - rq->tail + n > rq->wqe_cnt)
		return -1;
	for (uint32_t k = 0; k < n; k++) {
		uint32_t slot = (rq->head + k) & (rq->wqe_cnt - 1);
		struct mlx5_wqe_data_seg *seg =
			(struct mlx5_wqe_data_seg *)(rq->buf + ((size_t)slot << rq->shift));
		mlx5dv_set_data_seg(seg, len, lkey, addr + k * step);
		if (max_gs > 1) {
			seg[1].byte_count = 0;
			seg[1].lkey = htobe32(MLX5_INVALID_LKEY);
			seg[1].addr = 0;
		}
		rq->wr_ids[slot] = wr_id + k;
	}
	rq->head += n;
	cref_to_device_barrier();
	*(volatile uint32_t *)rq->dbrec = htobe32(rq->head & 0xffff);
	return 0;
}

/* Polls up to `max` responder CQEs of a 64-byte-CQE CQ. */
int rdmaperf_cref_poll_recv(struct rdmaperf_cref_cq *cq, struct rdmaperf_cref_rq *rq,
			    struct rdmaperf_cref_wc *wc, int max)
{
	int n = 0;

	for (; n < max; n++) {
		struct mlx5_cqe64 *cqe =
			(struct mlx5_cqe64 *)(cq->buf + (size_t)(cq->ci & (cq->cqe_cnt - 1)) * 64);
		uint8_t opcode = mlx5dv_get_cqe_opcode(cqe);

		if (opcode == MLX5_CQE_INVALID ||
		    mlx5dv_get_cqe_owner(cqe) != !!(cq->ci & cq->cqe_cnt))
			break;
		cref_from_device_barrier();
		uint16_t ctr = be16toh(cqe->wqe_counter);
		wc[n].wr_id = rq->wr_ids[ctr & (rq->wqe_cnt - 1)];
		wc[n].byte_len = be32toh(cqe->byte_cnt);
		wc[n].qp_num = be32toh(cqe->sop_drop_qpn) & 0xffffff;
		wc[n].opcode = opcode;
		wc[n].status = opcode == MLX5_CQE_RESP_ERR;
		rq->tail++;
		cq->ci++;
	}
	if (n)
		*(volatile uint32_t *)cq->dbrec = htobe32(cq->ci & 0xffffff);
	return n;
}

uint32_t rdmaperf_cref_sizeof_rq(void) { return sizeof(struct rdmaperf_cref_rq); }
uint32_t rdmaperf_cref_sizeof_cq(void) { return sizeof(struct rdmaperf_cref_cq); }
uint32_t rdmaperf_cref_sizeof_wc(void) { return sizeof(struct rdmaperf_cref_wc); }
