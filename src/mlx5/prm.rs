//! mlx5 PRM constants used by the encoder and the CQ poller: WQE units,
//! opcodes, control-segment flags, CQE opcodes and error syndromes.
//!
//! Values read back from the device (CQE opcode, syndromes) are newtypes so
//! that an unknown value stays representable.

use crate::newtype::value_newtype;
use crate::post::WcStatus;

/// One WQE basic block (`MLX5_SEND_WQE_BB`): every WQE starts on one.
pub const WQEBB: usize = 64;
/// log2 of [`WQEBB`].
pub const WQEBB_SHIFT: u32 = 6;
/// The unit of the control segment's `ds` field ("octoword").
pub const DS_BYTES: usize = 16;
/// `ds` is a 6-bit field.
pub const MAX_DS: u8 = 63;
/// Largest WQE the `ds` field can describe (63 · 16 B).
pub const MAX_WQE_BYTES: usize = MAX_DS as usize * DS_BYTES;
/// Marks an inline-data segment header (`MLX5_INLINE_SEG`).
pub const INLINE_SEG: u32 = 0x8000_0000;
/// Set in a datagram segment's `dqp_dct` for the extended UD address vector.
pub const EXTENDED_UD_AV: u32 = 0x8000_0000;
/// Offset of the first BlueFlame register inside a 4 KiB UAR page.
pub const BF_OFFSET: usize = 0x800;
/// The ctrl segment's WQE index and the CQE `wqe_counter` are 16 bits wide.
pub const WQE_INDEX_MASK: u32 = 0xffff;
/// The CQ consumer index in the doorbell record is 24 bits wide.
pub const CQ_CI_MASK: u32 = 0x00ff_ffff;
/// Largest SQ the 16-bit WQE counter can track unambiguously.
pub const MAX_SQ_WQEBBS: u32 = 1 << 15;

value_newtype! {
    /// Send WQE opcode (`MLX5_OPCODE_*`), the low byte of `opmod_idx_opcode`.
    #[derive(Clone, Copy, PartialEq, Eq, Hash, Default, Debug)]
    pub struct Opcode(u8);
    /// The rdma-core constant name.
    name "MLX5_OPCODE_" or "UNKNOWN" {
        NOP = 0x00,
        SEND_INVAL = 0x01,
        RDMA_WRITE = 0x08,
        RDMA_WRITE_IMM = 0x09,
        SEND = 0x0a,
        SEND_IMM = 0x0b,
        RDMA_READ = 0x10,
        ATOMIC_CS = 0x11,
        ATOMIC_FA = 0x12,
        ENHANCED_MPSW = 0x29,
    }
}

/// `MLX5_INVALID_LKEY`: the lkey of the segment that ends a receive WQE's
/// scatter list when it uses fewer segments than the stride holds.
pub const INVALID_LKEY: u32 = 0x100;

/// Bits of the control segment's `fm_ce_se` byte.
pub mod fm_ce_se {
    /// CE = 2: always generate a CQE (otherwise only on error).
    pub const CQ_UPDATE: u8 = 2 << 2;
    /// Solicited event at the responder.
    pub const SOLICITED: u8 = 1 << 1;
    /// Fence mode "small and fence" (`IBV_SEND_FENCE`).
    pub const FENCE: u8 = 4 << 5;
    /// Initiator small fence.
    pub const INITIATOR_SMALL_FENCE: u8 = 1 << 5;
}

value_newtype! {
    /// CQE opcode: the high nibble of `op_own`.
    #[derive(Clone, Copy, PartialEq, Eq, Hash, Default, Debug)]
    pub struct CqeOpcode(u8);
    consts {
        REQ = 0,
        RESP_WR_IMM = 1,
        RESP_SEND = 2,
        RESP_SEND_IMM = 3,
        RESP_SEND_INV = 4,
        RESIZE_CQ = 5,
        NO_PACKET = 6,
        SIG_ERR = 12,
        REQ_ERR = 13,
        RESP_ERR = 14,
        /// Software-initialised, never written by hardware.
        INVALID = 15,
    }
}

/// Masks of the CQE `op_own` byte.
pub mod op_own {
    pub const OWNER: u8 = 0x01;
    pub const SE: u8 = 0x02;
    pub const FORMAT: u8 = 0x0c;
    pub const FORMAT_SHIFT: u32 = 2;
    pub const OPCODE_SHIFT: u32 = 4;
}

/// CQE format (bits 3:2 of `op_own`).
pub mod cqe_format {
    pub const NORMAL: u8 = 0;
    /// Payload scattered into bytes 0..31 of this CQE.
    pub const INLINE_SCATTER_32: u8 = 1;
    /// Payload scattered into the preceding 64 bytes (128-byte CQEs).
    pub const INLINE_SCATTER_64: u8 = 2;
    /// Part of a compressed block (mini-CQEs).
    pub const COMPRESSED: u8 = 3;
}

value_newtype! {
    /// Error-CQE syndrome (`MLX5_CQE_SYNDROME_*`).
    #[derive(Clone, Copy, PartialEq, Eq, Hash, Default, Debug)]
    pub struct Syndrome(u8);
    /// The rdma-core constant name.
    name "MLX5_CQE_SYNDROME_" or "UNKNOWN" {
        LOCAL_LENGTH_ERR = 0x01,
        LOCAL_QP_OP_ERR = 0x02,
        LOCAL_PROT_ERR = 0x04,
        WR_FLUSH_ERR = 0x05,
        MW_BIND_ERR = 0x06,
        BAD_RESP_ERR = 0x10,
        LOCAL_ACCESS_ERR = 0x11,
        REMOTE_INVAL_REQ_ERR = 0x12,
        REMOTE_ACCESS_ERR = 0x13,
        REMOTE_OP_ERR = 0x14,
        TRANSPORT_RETRY_EXC_ERR = 0x15,
        RNR_RETRY_EXC_ERR = 0x16,
        REMOTE_ABORTED_ERR = 0x22,
    }
}

impl Syndrome {
    /// The `ibv_wc_status` libmlx5 reports for this syndrome
    /// (`mlx5_handle_error_cqe`): unknown syndromes are `GENERAL_ERR`.
    pub const fn wc_status(self) -> WcStatus {
        match self.0 {
            0x01 => WcStatus::LOC_LEN_ERR,
            0x02 => WcStatus::LOC_QP_OP_ERR,
            0x04 => WcStatus::LOC_PROT_ERR,
            0x05 => WcStatus::WR_FLUSH_ERR,
            0x06 => WcStatus::MW_BIND_ERR,
            0x10 => WcStatus::BAD_RESP_ERR,
            0x11 => WcStatus::LOC_ACCESS_ERR,
            0x12 => WcStatus::REM_INV_REQ_ERR,
            0x13 => WcStatus::REM_ACCESS_ERR,
            0x14 => WcStatus::REM_OP_ERR,
            0x15 => WcStatus::RETRY_EXC_ERR,
            0x16 => WcStatus::RNR_RETRY_EXC_ERR,
            0x22 => WcStatus::REM_ABORT_ERR,
            _ => WcStatus::GENERAL_ERR,
        }
    }

    /// What usually causes this syndrome and what to check (for error reports).
    pub const fn hint(self) -> &'static str {
        match self.0 {
            0x01 => "a length exceeded the local buffer or the port MTU (UD); check message size",
            0x02 => {
                "the NIC rejected the WQE itself (bad opcode, ds, QPN or WQE index); \
                     a direct-path encoding bug or an opcode the QP type does not support"
            }
            0x04 => {
                "the local key or address range was rejected; check lkey and that the \
                     buffer lies inside the registered MR"
            }
            0x05 => {
                "flushed because the QP had already entered the error state; \
                     look at the first error completion"
            }
            0x11 => "local access error; check the MR's access flags",
            0x12 => {
                "the responder rejected the request (length, alignment or opcode); \
                     check remote buffer size and atomic alignment"
            }
            0x13 => {
                "the remote key or address range was rejected; check the rkey/raddr \
                     exchanged with the peer and the remote MR's access flags"
            }
            0x14 => "the responder could not execute the operation",
            0x15 => "transport retries exhausted; check the link and the peer QP state",
            0x16 => "receiver not ready retries exhausted; the peer has no receive posted",
            _ => "see the mlx5 PRM for this syndrome",
        }
    }
}

/// A short description of a vendor syndrome where a public source names it,
/// or `None`. Vendor syndromes are not publicly documented; these come from
/// rdma-core/UCX sources and public bug reports.
pub const fn vendor_syndrome_hint(v: u8) -> Option<&'static str> {
    match v {
        // rdma-core/UCX handle 0x93 as an on-demand-paging page fault.
        0x93 => Some("ODP page fault"),
        // Seen with LOCAL_QP_OP_ERR for an opcode the QP does not support (UCX #1151).
        0x68 => Some("unsupported or malformed WQE opcode (reported)"),
        // Seen with REMOTE_ACCESS_ERR for a bad rkey / range (SPDK #964 dump).
        0x88 => Some("remote key or range rejected (reported)"),
        // Seen with WR_FLUSH_ERR after a QP entered the error state.
        0xf4 | 0xf9 => Some("flushed in error state (reported)"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn syndrome_maps_like_libmlx5() {
        assert_eq!(
            Syndrome::REMOTE_ACCESS_ERR.wc_status(),
            WcStatus::REM_ACCESS_ERR
        );
        assert_eq!(Syndrome::WR_FLUSH_ERR.wc_status(), WcStatus::WR_FLUSH_ERR);
        assert_eq!(
            Syndrome::LOCAL_QP_OP_ERR.wc_status(),
            WcStatus::LOC_QP_OP_ERR
        );
        assert_eq!(Syndrome(0x99).wc_status(), WcStatus::GENERAL_ERR);
        assert_eq!(Syndrome(0x99).name(), "UNKNOWN");
    }

    #[test]
    fn flag_values_match_mlx5dv_h() {
        assert_eq!(
            fm_ce_se::CQ_UPDATE,
            crate::sys::MLX5_WQE_CTRL_CQ_UPDATE as u8
        );
        assert_eq!(
            fm_ce_se::SOLICITED,
            crate::sys::MLX5_WQE_CTRL_SOLICITED as u8
        );
        assert_eq!(fm_ce_se::FENCE, crate::sys::MLX5_WQE_CTRL_FENCE as u8);
        assert_eq!(
            fm_ce_se::INITIATOR_SMALL_FENCE,
            crate::sys::MLX5_WQE_CTRL_INITIATOR_SMALL_FENCE as u8
        );
        assert_eq!(INLINE_SEG, crate::sys::MLX5_INLINE_SEG);
        assert_eq!(EXTENDED_UD_AV, crate::sys::MLX5_EXTENDED_UD_AV);
        assert_eq!(WQEBB, crate::sys::MLX5_SEND_WQE_BB as usize);
        assert_eq!(WQEBB_SHIFT, crate::sys::MLX5_SEND_WQE_SHIFT);
    }

    /// The names error messages print: rdma-core's and libibverbs'
    /// constant names, "UNKNOWN" for a value this build does not know.
    #[test]
    fn names_are_the_library_constants() {
        assert_eq!(Opcode::RDMA_WRITE_IMM.name(), "MLX5_OPCODE_RDMA_WRITE_IMM");
        assert_eq!(Opcode(0x7f).name(), "UNKNOWN");
        assert_eq!(
            Syndrome::REMOTE_ACCESS_ERR.name(),
            "MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR"
        );
        assert_eq!(Syndrome(0x99).name(), "UNKNOWN");
        assert_eq!(WcStatus::SUCCESS.name(), "IBV_WC_SUCCESS");
        assert_eq!(
            WcStatus::TM_RNDV_INCOMPLETE.name(),
            "IBV_WC_TM_RNDV_INCOMPLETE"
        );
        assert_eq!(WcStatus(24).name(), "UNKNOWN");
        assert_eq!(
            format!("{:?}", WcStatus::WR_FLUSH_ERR),
            "IBV_WC_WR_FLUSH_ERR(5)"
        );
    }

    #[test]
    fn opcodes_and_syndromes_match_mlx5dv_h() {
        use crate::sys as s;
        let ops = [
            (Opcode::NOP, s::MLX5_OPCODE_NOP),
            (Opcode::SEND_INVAL, s::MLX5_OPCODE_SEND_INVAL),
            (Opcode::RDMA_WRITE, s::MLX5_OPCODE_RDMA_WRITE),
            (Opcode::RDMA_WRITE_IMM, s::MLX5_OPCODE_RDMA_WRITE_IMM),
            (Opcode::SEND, s::MLX5_OPCODE_SEND),
            (Opcode::SEND_IMM, s::MLX5_OPCODE_SEND_IMM),
            (Opcode::RDMA_READ, s::MLX5_OPCODE_RDMA_READ),
            (Opcode::ATOMIC_CS, s::MLX5_OPCODE_ATOMIC_CS),
            (Opcode::ATOMIC_FA, s::MLX5_OPCODE_ATOMIC_FA),
        ];
        for (ours, theirs) in ops {
            assert_eq!(ours.0 as u32, theirs, "{}", ours.name());
        }
        let cqe = [
            (CqeOpcode::REQ, s::MLX5_CQE_REQ),
            (CqeOpcode::RESP_WR_IMM, s::MLX5_CQE_RESP_WR_IMM),
            (CqeOpcode::RESP_SEND, s::MLX5_CQE_RESP_SEND),
            (CqeOpcode::RESP_SEND_IMM, s::MLX5_CQE_RESP_SEND_IMM),
            (CqeOpcode::RESP_SEND_INV, s::MLX5_CQE_RESP_SEND_INV),
            (CqeOpcode::RESIZE_CQ, s::MLX5_CQE_RESIZE_CQ),
            (CqeOpcode::NO_PACKET, s::MLX5_CQE_NO_PACKET),
            (CqeOpcode::SIG_ERR, s::MLX5_CQE_SIG_ERR),
            (CqeOpcode::REQ_ERR, s::MLX5_CQE_REQ_ERR),
            (CqeOpcode::RESP_ERR, s::MLX5_CQE_RESP_ERR),
            (CqeOpcode::INVALID, s::MLX5_CQE_INVALID),
        ];
        for (ours, theirs) in cqe {
            assert_eq!(ours.0 as u32, theirs);
        }
        let syn = [
            (
                Syndrome::LOCAL_LENGTH_ERR,
                s::MLX5_CQE_SYNDROME_LOCAL_LENGTH_ERR,
            ),
            (
                Syndrome::LOCAL_QP_OP_ERR,
                s::MLX5_CQE_SYNDROME_LOCAL_QP_OP_ERR,
            ),
            (
                Syndrome::LOCAL_PROT_ERR,
                s::MLX5_CQE_SYNDROME_LOCAL_PROT_ERR,
            ),
            (Syndrome::WR_FLUSH_ERR, s::MLX5_CQE_SYNDROME_WR_FLUSH_ERR),
            (Syndrome::MW_BIND_ERR, s::MLX5_CQE_SYNDROME_MW_BIND_ERR),
            (Syndrome::BAD_RESP_ERR, s::MLX5_CQE_SYNDROME_BAD_RESP_ERR),
            (
                Syndrome::LOCAL_ACCESS_ERR,
                s::MLX5_CQE_SYNDROME_LOCAL_ACCESS_ERR,
            ),
            (
                Syndrome::REMOTE_INVAL_REQ_ERR,
                s::MLX5_CQE_SYNDROME_REMOTE_INVAL_REQ_ERR,
            ),
            (
                Syndrome::REMOTE_ACCESS_ERR,
                s::MLX5_CQE_SYNDROME_REMOTE_ACCESS_ERR,
            ),
            (Syndrome::REMOTE_OP_ERR, s::MLX5_CQE_SYNDROME_REMOTE_OP_ERR),
            (
                Syndrome::TRANSPORT_RETRY_EXC_ERR,
                s::MLX5_CQE_SYNDROME_TRANSPORT_RETRY_EXC_ERR,
            ),
            (
                Syndrome::RNR_RETRY_EXC_ERR,
                s::MLX5_CQE_SYNDROME_RNR_RETRY_EXC_ERR,
            ),
            (
                Syndrome::REMOTE_ABORTED_ERR,
                s::MLX5_CQE_SYNDROME_REMOTE_ABORTED_ERR,
            ),
        ];
        for (ours, theirs) in syn {
            assert_eq!(ours.0 as u32, theirs, "{}", ours.name());
            assert_ne!(ours.name(), "UNKNOWN");
        }
        assert_eq!(op_own::OWNER as u32, s::MLX5_CQE_OWNER_MASK);
        assert_eq!(
            (cqe_format::INLINE_SCATTER_32 << op_own::FORMAT_SHIFT) as u32,
            s::MLX5_INLINE_SCATTER_32
        );
        assert_eq!(
            (cqe_format::INLINE_SCATTER_64 << op_own::FORMAT_SHIFT) as u32,
            s::MLX5_INLINE_SCATTER_64
        );
        assert_eq!(
            vendor_syndrome_hint(s::MLX5_CQE_VENDOR_SYNDROME_ODP_PFAULT as u8),
            Some("ODP page fault")
        );
    }
}
