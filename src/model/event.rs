//! What the recording MMIO layer writes down: one store or barrier, in
//! program order (the NIC follows the doorbell protocol from these; tests
//! assert their order).

/// One recorded store or barrier, in program order.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum MmioEvent {
    /// `store_fence_dma` (WQEs → doorbell record).
    FenceDma,
    /// `store_fence_wc` (before / after the write-combining stores).
    FenceWc,
    /// Doorbell-record store: `offset` in bytes from `dbrec` (the SQ record
    /// is at 4), `value` the producer index as stored (decoded from BE).
    Dbrec { offset: isize, value: u32 },
    /// 8-byte doorbell store at `offset` from `bf.reg`.
    Db64 { offset: isize, bytes: [u8; 8] },
    /// 64-byte BlueFlame chunk at `offset` from `bf.reg`.
    Bf64 { offset: isize, bytes: [u8; 64] },
}
