//! mlx5 data the model tests feed the direct path.

use rdmaperf::mlx5::seg::DatagramSeg;
use rdmaperf::mlx5::Mmio;

/// An AV as libmlx5 lays one out for an IB AH (LID 1, SL 0, no GRH).
pub fn libmlx5_av() -> [u8; 48] {
    DatagramSeg::new(0, 0, 0, 0, 0, 0x0001, [0; 6], 0, 64, 0, [0; 16]).to_bytes()
}

/// An `Mmio` that forgets the store → doorbell-record fence (`store_fence_dma`)
/// and forwards everything else: a recorder's order check must catch it.
pub struct NoDmaFence<M: Mmio>(pub M);

impl<M: Mmio> Mmio for NoDmaFence<M> {
    fn store_fence_dma(&self) {}
    fn store_fence_wc(&self) {
        self.0.store_fence_wc()
    }
    unsafe fn write_dbrec(&self, d: *mut u32, v: u32) {
        // SAFETY: forwarded contract.
        unsafe { self.0.write_dbrec(d, v) }
    }
    unsafe fn write_db64(&self, r: *mut u64, v: u64) {
        // SAFETY: forwarded contract.
        unsafe { self.0.write_db64(r, v) }
    }
    unsafe fn write_bf64(&self, r: *mut u64, s: *const [u64; 8]) {
        // SAFETY: forwarded contract.
        unsafe { self.0.write_bf64(r, s) }
    }
}
