/* Test oracle for rdmaperf's mlx5 encoder (tests/mlx5_seg.rs); our own glue.
 *
 * 1. The SSE variants of rdma-core's mlx5dv.h segment helpers
 *    (mlx5dv_x86_set_ctrl_seg / _set_data_seg), which bindgen cannot wrap:
 *    they use _mm_shuffle_epi8 (SSSE3), so this file enables SSSE3 for the
 *    header; callers must check rdmaperf_oracle_have_x86() first.
 * 2. sizeof/offsetof of every mlx5 struct the Rust code mirrors, straight
 *    from the installed headers.
 */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__x86_64__)
#pragma GCC push_options
#pragma GCC target("ssse3")
#endif
#include <infiniband/mlx5dv.h>

#if defined(__x86_64__) && defined(__SSE3__)
#define RDMAPERF_HAVE_X86_HELPERS 1
void rdmaperf_oracle_x86_set_ctrl_seg(void *seg, uint16_t pi, uint8_t opcode, uint8_t opmod,
				      uint32_t qp_num, uint8_t fm_ce_se, uint8_t ds,
				      uint8_t signature, uint32_t imm)
{
	mlx5dv_x86_set_ctrl_seg(seg, pi, opcode, opmod, qp_num, fm_ce_se, ds, signature, imm);
}

void rdmaperf_oracle_x86_set_data_seg(void *seg, uint32_t length, uint32_t lkey,
				      uint64_t address)
{
	mlx5dv_x86_set_data_seg(seg, length, lkey, (uintptr_t)address);
}
#else
#define RDMAPERF_HAVE_X86_HELPERS 0
void rdmaperf_oracle_x86_set_ctrl_seg(void *seg, uint16_t pi, uint8_t opcode, uint8_t opmod,
				      uint32_t qp_num, uint8_t fm_ce_se, uint8_t ds,
				      uint8_t signature, uint32_t imm)
{
	(void)seg; (void)pi; (void)opcode; (void)opmod; (void)qp_num;
	(void)fm_ce_se; (void)ds; (void)signature; (void)imm;
}

void rdmaperf_oracle_x86_set_data_seg(void *seg, uint32_t length, uint32_t lkey,
				      uint64_t address)
{
	(void)seg; (void)length; (void)lkey; (void)address;
}
#endif

#if defined(__x86_64__)
#pragma GCC pop_options
#endif

/* 1 when the SSE helpers are compiled in and this CPU can run them. */
int rdmaperf_oracle_have_x86(void)
{
#if RDMAPERF_HAVE_X86_HELPERS
	__builtin_cpu_init();
	return __builtin_cpu_supports("ssse3") ? 1 : 0;
#else
	return 0;
#endif
}

struct rdmaperf_layout {
	const char *name;
	size_t value;
};

#define SZ(T) { #T, sizeof(struct T) }
#define OFF(T, f) { #T "." #f, offsetof(struct T, f) }

static const struct rdmaperf_layout layouts[] = {
	SZ(mlx5_wqe_ctrl_seg),
	OFF(mlx5_wqe_ctrl_seg, opmod_idx_opcode),
	OFF(mlx5_wqe_ctrl_seg, qpn_ds),
	OFF(mlx5_wqe_ctrl_seg, signature),
#ifdef RDMAPERF_CTRL_DCI_STREAM
	OFF(mlx5_wqe_ctrl_seg, dci_stream_channel_id),
#else
	/* rdma-core before 37 names these two bytes rsvd[2] (build.rs reads mlx5dv.h). */
	{ "mlx5_wqe_ctrl_seg.dci_stream_channel_id", offsetof(struct mlx5_wqe_ctrl_seg, rsvd) },
#endif
	OFF(mlx5_wqe_ctrl_seg, fm_ce_se),
	OFF(mlx5_wqe_ctrl_seg, imm),
	SZ(mlx5_wqe_raddr_seg),
	OFF(mlx5_wqe_raddr_seg, raddr),
	OFF(mlx5_wqe_raddr_seg, rkey),
	OFF(mlx5_wqe_raddr_seg, reserved),
	SZ(mlx5_wqe_data_seg),
	OFF(mlx5_wqe_data_seg, byte_count),
	OFF(mlx5_wqe_data_seg, lkey),
	OFF(mlx5_wqe_data_seg, addr),
	SZ(mlx5_wqe_atomic_seg),
	OFF(mlx5_wqe_atomic_seg, swap_add),
	OFF(mlx5_wqe_atomic_seg, compare),
	SZ(mlx5_wqe_inl_data_seg),
	OFF(mlx5_wqe_inl_data_seg, byte_count),
	SZ(mlx5_wqe_datagram_seg),
	SZ(mlx5_wqe_av),
	OFF(mlx5_wqe_av, key),
	OFF(mlx5_wqe_av, key.qkey.qkey),
	OFF(mlx5_wqe_av, dqp_dct),
	OFF(mlx5_wqe_av, stat_rate_sl),
	OFF(mlx5_wqe_av, fl_mlid),
	OFF(mlx5_wqe_av, rlid),
	OFF(mlx5_wqe_av, reserved0),
	OFF(mlx5_wqe_av, rmac),
	OFF(mlx5_wqe_av, tclass),
	OFF(mlx5_wqe_av, hop_limit),
	OFF(mlx5_wqe_av, grh_gid_fl),
	OFF(mlx5_wqe_av, rgid),
	SZ(mlx5_cqe64),
	OFF(mlx5_cqe64, srqn_uidx),
	OFF(mlx5_cqe64, imm_inval_pkey),
	OFF(mlx5_cqe64, app),
	OFF(mlx5_cqe64, app_op),
	OFF(mlx5_cqe64, app_info),
	OFF(mlx5_cqe64, byte_cnt),
	OFF(mlx5_cqe64, timestamp),
	OFF(mlx5_cqe64, sop_drop_qpn),
	OFF(mlx5_cqe64, wqe_counter),
	OFF(mlx5_cqe64, signature),
	OFF(mlx5_cqe64, op_own),
	SZ(mlx5_err_cqe),
	OFF(mlx5_err_cqe, srqn),
	OFF(mlx5_err_cqe, vendor_err_synd),
	OFF(mlx5_err_cqe, syndrome),
	OFF(mlx5_err_cqe, s_wqe_opcode_qpn),
	OFF(mlx5_err_cqe, wqe_counter),
	OFF(mlx5_err_cqe, signature),
	OFF(mlx5_err_cqe, op_own),
};

/* Entry i of the table: returns 0 and fills name/value, or -1 past the end. */
int rdmaperf_oracle_layout(size_t i, const char **name, size_t *value)
{
	if (i >= sizeof(layouts) / sizeof(layouts[0]))
		return -1;
	*name = layouts[i].name;
	*value = layouts[i].value;
	return 0;
}
