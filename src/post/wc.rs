//! Work completions as the run loops see them, whatever produced them
//! (libibverbs `ibv_wc`, or a CQE polled straight from an mlx5 CQ).
//! Values read back from the device are newtypes, never Rust enums: an unknown
//! value must stay representable.

use super::rx_offload::RxOffload;
use crate::newtype::value_newtype;
use std::collections::VecDeque;

value_newtype! {
    /// `enum ibv_wc_status` as a newtype.
    #[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
    pub struct WcStatus(u32);
    /// The libibverbs constant name (`IBV_WC_…`).
    name "IBV_WC_" or "UNKNOWN" {
        SUCCESS = 0,
        LOC_LEN_ERR = 1,
        LOC_QP_OP_ERR = 2,
        LOC_EEC_OP_ERR = 3,
        LOC_PROT_ERR = 4,
        WR_FLUSH_ERR = 5,
        MW_BIND_ERR = 6,
        BAD_RESP_ERR = 7,
        LOC_ACCESS_ERR = 8,
        REM_INV_REQ_ERR = 9,
        REM_ACCESS_ERR = 10,
        REM_OP_ERR = 11,
        RETRY_EXC_ERR = 12,
        RNR_RETRY_EXC_ERR = 13,
        LOC_RDD_VIOL_ERR = 14,
        REM_INV_RD_REQ_ERR = 15,
        REM_ABORT_ERR = 16,
        INV_EECN_ERR = 17,
        INV_EEC_STATE_ERR = 18,
        FATAL_ERR = 19,
        RESP_TIMEOUT_ERR = 20,
        GENERAL_ERR = 21,
        TM_ERR = 22,
        TM_RNDV_INCOMPLETE = 23,
    }
}

impl core::fmt::Debug for WcStatus {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}({})", self.name(), self.0)
    }
}

value_newtype! {
    /// `enum ibv_wc_opcode` as a newtype.
    #[derive(Clone, Copy, PartialEq, Eq, Hash, Default, Debug)]
    pub struct WcOpcode(u32);
    consts {
        SEND = 0,
        RDMA_WRITE = 1,
        RDMA_READ = 2,
        COMP_SWAP = 3,
        FETCH_ADD = 4,
        BIND_MW = 5,
        LOCAL_INV = 6,
        TSO = 7,
        RECV = 128,
        RECV_RDMA_WITH_IMM = 129,
    }
}

/// One completion. `vendor_err` is the provider's vendor syndrome (on mlx5,
/// `vendor_err_synd`); `syndrome` is the mlx5 PRM syndrome when the direct poller
/// produced it (0 otherwise).
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct Completion {
    pub wr_id: u64,
    pub status: WcStatus,
    pub opcode: WcOpcode,
    pub vendor_err: u32,
    pub syndrome: u8,
    pub byte_len: u32,
    pub qp_num: u32,
    /// Immediate data in network order as delivered (valid for *_WITH_IMM receives).
    pub imm: u32,
    /// UD receives: the sending QP's number (`ibv_wc.src_qp`).
    pub src_qp: u32,
    /// `ibv_wc.wc_flags` bits of a receive ([`WC_GRH`], [`WC_WITH_IMM`],
    /// [`WC_WITH_INV`]).
    pub wc_flags: u32,
    /// A receive on the direct path: what the CQE says about the frame's
    /// headers and checksums (raw Ethernet); [`RxOffload::NONE`] otherwise.
    pub rx: RxOffload,
}

/// A poll of completions held in software (a rig's or a mock's queue): moves
/// as many as `out` holds from the front of `queue` into `out`, oldest
/// first, and returns how many.
pub fn poll_queued(queue: &mut VecDeque<Completion>, out: &mut [Completion]) -> usize {
    let n = out.len().min(queue.len());
    for (slot, c) in out.iter_mut().zip(queue.drain(..n)) {
        *slot = c;
    }
    n
}

/// `IBV_WC_GRH`: a GRH precedes the payload in the receive buffer (UD).
pub const WC_GRH: u32 = 1 << 0;
/// `IBV_WC_WITH_IMM`: `imm` is valid.
pub const WC_WITH_IMM: u32 = 1 << 1;
/// `IBV_WC_WITH_INV`: a SEND with invalidate (the rkey it names was
/// invalidated at the receiver).
pub const WC_WITH_INV: u32 = 1 << 3;
