//! Work completions as the run loops see them, whatever produced them
//! (libibverbs `ibv_wc`, or a CQE polled straight from an mlx5 CQ).
//! Values read back from the device are newtypes, never Rust enums: an unknown
//! value must stay representable.

/// `enum ibv_wc_status` as a newtype.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(transparent)]
pub struct WcStatus(pub u32);

impl WcStatus {
    pub const SUCCESS: Self = Self(0);
    pub const LOC_LEN_ERR: Self = Self(1);
    pub const LOC_QP_OP_ERR: Self = Self(2);
    pub const LOC_EEC_OP_ERR: Self = Self(3);
    pub const LOC_PROT_ERR: Self = Self(4);
    pub const WR_FLUSH_ERR: Self = Self(5);
    pub const MW_BIND_ERR: Self = Self(6);
    pub const BAD_RESP_ERR: Self = Self(7);
    pub const LOC_ACCESS_ERR: Self = Self(8);
    pub const REM_INV_REQ_ERR: Self = Self(9);
    pub const REM_ACCESS_ERR: Self = Self(10);
    pub const REM_OP_ERR: Self = Self(11);
    pub const RETRY_EXC_ERR: Self = Self(12);
    pub const RNR_RETRY_EXC_ERR: Self = Self(13);
    pub const LOC_RDD_VIOL_ERR: Self = Self(14);
    pub const REM_INV_RD_REQ_ERR: Self = Self(15);
    pub const REM_ABORT_ERR: Self = Self(16);
    pub const INV_EECN_ERR: Self = Self(17);
    pub const INV_EEC_STATE_ERR: Self = Self(18);
    pub const FATAL_ERR: Self = Self(19);
    pub const RESP_TIMEOUT_ERR: Self = Self(20);
    pub const GENERAL_ERR: Self = Self(21);
    pub const TM_ERR: Self = Self(22);
    pub const TM_RNDV_INCOMPLETE: Self = Self(23);

    /// The libibverbs constant name (`IBV_WC_…`), or "UNKNOWN".
    pub const fn name(self) -> &'static str {
        const NAMES: [&str; 24] = [
            "IBV_WC_SUCCESS",
            "IBV_WC_LOC_LEN_ERR",
            "IBV_WC_LOC_QP_OP_ERR",
            "IBV_WC_LOC_EEC_OP_ERR",
            "IBV_WC_LOC_PROT_ERR",
            "IBV_WC_WR_FLUSH_ERR",
            "IBV_WC_MW_BIND_ERR",
            "IBV_WC_BAD_RESP_ERR",
            "IBV_WC_LOC_ACCESS_ERR",
            "IBV_WC_REM_INV_REQ_ERR",
            "IBV_WC_REM_ACCESS_ERR",
            "IBV_WC_REM_OP_ERR",
            "IBV_WC_RETRY_EXC_ERR",
            "IBV_WC_RNR_RETRY_EXC_ERR",
            "IBV_WC_LOC_RDD_VIOL_ERR",
            "IBV_WC_REM_INV_RD_REQ_ERR",
            "IBV_WC_REM_ABORT_ERR",
            "IBV_WC_INV_EECN_ERR",
            "IBV_WC_INV_EEC_STATE_ERR",
            "IBV_WC_FATAL_ERR",
            "IBV_WC_RESP_TIMEOUT_ERR",
            "IBV_WC_GENERAL_ERR",
            "IBV_WC_TM_ERR",
            "IBV_WC_TM_RNDV_INCOMPLETE",
        ];
        if (self.0 as usize) < NAMES.len() {
            NAMES[self.0 as usize]
        } else {
            "UNKNOWN"
        }
    }
}

impl core::fmt::Debug for WcStatus {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{}({})", self.name(), self.0)
    }
}

/// `enum ibv_wc_opcode` as a newtype.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, Debug)]
#[repr(transparent)]
pub struct WcOpcode(pub u32);

impl WcOpcode {
    pub const SEND: Self = Self(0);
    pub const RDMA_WRITE: Self = Self(1);
    pub const RDMA_READ: Self = Self(2);
    pub const COMP_SWAP: Self = Self(3);
    pub const FETCH_ADD: Self = Self(4);
    pub const BIND_MW: Self = Self(5);
    pub const LOCAL_INV: Self = Self(6);
    pub const TSO: Self = Self(7);
    pub const RECV: Self = Self(128);
    pub const RECV_RDMA_WITH_IMM: Self = Self(129);
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
}

/// `IBV_WC_GRH`: a GRH precedes the payload in the receive buffer (UD).
pub const WC_GRH: u32 = 1 << 0;
/// `IBV_WC_WITH_IMM`: `imm` is valid.
pub const WC_WITH_IMM: u32 = 1 << 1;
/// `IBV_WC_WITH_INV`: a SEND with invalidate (the rkey it names was
/// invalidated at the receiver).
pub const WC_WITH_INV: u32 = 1 << 3;
