//! What a raw packet post list is made of, shared by the per-packet SEND
//! path (`raw_sq.rs`) and the multi-packet one (`mpw.rs`): the packets, the
//! last WQE the doorbell names, and the sparse-completion stamp.

use super::prm::fm_ce_se;

/// One frame to send: `len` bytes (CRC excluded) at `addr`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RawPkt {
    pub addr: u64,
    pub len: u32,
}

/// A WQE's place and size, for the doorbell after a list.
#[derive(Clone, Copy)]
pub(crate) struct Last {
    pub(crate) bb: u16,
    pub(crate) ds: u8,
}

/// The `fm_ce_se` of the next WQE: CQ_UPDATE on every `every`-th.
#[inline(always)]
pub(crate) fn next_fm(quiet: &mut u32, every: u32) -> u8 {
    *quiet += 1;
    if *quiet >= every {
        *quiet = 0;
        fm_ce_se::CQ_UPDATE
    } else {
        0
    }
}
