/* What the C references of the direct post paths share (vendor/c_ref_post.c,
 * vendor/c_ref_raw.c); our own code. rdma-core's post_send_db() sequence
 * after a post list:
 *   compiler barrier (udma_to_device_barrier on x86-64),
 *   dbrec[MLX5_SND_DBR] = htobe32(pi & 0xffff),
 *   sfence (mmio_wc_start),
 *   one WQE that fits bf_size: BlueFlame copy in 64-byte chunks of eight
 *   explicit 8-byte stores (mmio_memcpy_x64 on x86-64; on aarch64 its
 *   NEON vst4q_u64(vld4q_u64) pair), else one 8-byte
 *   doorbell store of the last ctrl segment's first 8 bytes,
 *   sfence (mmio_flush_writes), toggle the BlueFlame half.
 */
#ifndef RDMAPERF_C_REF_RING_H
#define RDMAPERF_C_REF_RING_H

#include <endian.h>
#include <stdint.h>

#if defined(__aarch64__)
#include <arm_neon.h>
#endif

#define CREF_WQEBB 64u

/* The SQ's ring and doorbell, as mlx5dv_qp gives them. */
struct cref_ring {
	uint8_t *buf;          /* sq.buf */
	uint32_t wqe_cnt;      /* sq.wqe_cnt (power of two) */
	uint32_t *dbrec;       /* &dbrec[MLX5_SND_DBR] */
	uint8_t *bf_reg;       /* bf.reg */
	uint32_t bf_size;      /* bf.size; 0 = 8-byte doorbells only */
	uint32_t *bf_offset;   /* 0 or bf_size: the half the next doorbell uses */
};

static inline uint8_t *cref_ring_bb(uint8_t *buf, uint32_t wqe_cnt, uint32_t bb)
{
	return buf + ((bb & (wqe_cnt - 1)) * CREF_WQEBB);
}

static inline void cref_wc_fence(void)
{
#if defined(__x86_64__)
	asm volatile("sfence" ::: "memory");
#elif defined(__aarch64__)
	asm volatile("dsb st" ::: "memory");
#else
	__sync_synchronize();
#endif
}

static inline void cref_dma_fence(void)
{
#if defined(__x86_64__)
	asm volatile("" ::: "memory");
#elif defined(__aarch64__)
	asm volatile("dmb oshst" ::: "memory");
#else
	__sync_synchronize();
#endif
}

/* The doorbell for a list of `nreq` WQEs ending with the WQE at WQEBB `last`
 * of `last_ds` units; `pi` is the producer index after the list. */
static inline void cref_ring_db(const struct cref_ring *r, uint32_t pi, uint32_t nreq,
				uint32_t last, uint32_t last_ds)
{
	uint8_t *dst = r->bf_reg + *r->bf_offset;
	const uint32_t bytes = last_ds * 16;

	cref_dma_fence();
	*(volatile uint32_t *)r->dbrec = htobe32(pi & 0xffff);
	cref_wc_fence();
	if (nreq == 1 && r->bf_size && last_ds > 1 && bytes <= r->bf_size) {
		uint32_t chunks = (bytes + CREF_WQEBB - 1) / CREF_WQEBB;
		for (uint32_t c = 0; c < chunks; c++) {
			const uint64_t *s =
				(const uint64_t *)cref_ring_bb(r->buf, r->wqe_cnt, last + c);
			volatile uint64_t *d = (volatile uint64_t *)(dst + c * CREF_WQEBB);
#if defined(__aarch64__)
			vst4q_u64((uint64_t *)d, vld4q_u64(s));
#else
			d[0] = s[0]; d[1] = s[1]; d[2] = s[2]; d[3] = s[3];
			d[4] = s[4]; d[5] = s[5]; d[6] = s[6]; d[7] = s[7];
#endif
		}
	} else {
		*(volatile uint64_t *)dst =
			*(const uint64_t *)cref_ring_bb(r->buf, r->wqe_cnt, last);
	}
	cref_wc_fence();
	*r->bf_offset ^= r->bf_size;
}

#endif
