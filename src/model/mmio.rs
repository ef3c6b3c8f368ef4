//! The model's side of the [`Mmio`] seam: performs the same stores as the
//! hardware implementation, into model memory, and records each one (and
//! each barrier) so that the NIC can act on doorbells and tests can assert
//! their exact order.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use super::event::MmioEvent;
use super::handle::Shared;
use crate::mlx5::{barrier, Mmio};

/// Records stores into one QP's memory of a [`Model`](super::handle::Model).
#[derive(Clone)]
pub struct ModelMmio {
    pub(crate) shared: Arc<Shared>,
    /// The QP whose doorbell record and UAR this recorder stores to.
    pub(crate) qp: usize,
}

impl ModelMmio {
    fn offset_from(p: *const u8, base: *const u8) -> isize {
        (p as isize).wrapping_sub(base as isize)
    }
}

impl Mmio for ModelMmio {
    fn store_fence_dma(&self) {
        barrier::store_fence_dma();
        self.shared.push(self.qp, MmioEvent::FenceDma);
    }
    fn store_fence_wc(&self) {
        barrier::store_fence_wc();
        self.shared.push(self.qp, MmioEvent::FenceWc);
    }
    unsafe fn write_dbrec(&self, dbrec: *mut u32, raw: u32) {
        // SAFETY: the trait contract: dbrec is a valid aligned record (model
        // memory); atomic because the NIC thread may read it concurrently.
        unsafe { AtomicU32::from_ptr(dbrec) }.store(raw, Ordering::Release);
        self.shared.push(
            self.qp,
            MmioEvent::Dbrec {
                offset: Self::offset_from(dbrec.cast(), self.shared.mem.qps[self.qp].dbrec.ptr()),
                value: u32::from_be_bytes(raw.to_ne_bytes()),
            },
        );
    }
    unsafe fn write_db64(&self, reg: *mut u64, raw: u64) {
        // SAFETY: the trait contract: reg is an aligned address in the
        // model's UAR page.
        unsafe { reg.write_volatile(raw) };
        self.shared.push(
            self.qp,
            MmioEvent::Db64 {
                offset: Self::offset_from(reg.cast(), self.shared.bf_reg(self.qp)),
                bytes: raw.to_ne_bytes(),
            },
        );
    }
    unsafe fn write_bf64(&self, reg: *mut u64, src: *const [u64; 8]) {
        // SAFETY: the trait contract: src readable and aligned.
        let words = unsafe { src.read() };
        let mut bytes = [0u8; 64];
        for (i, w) in words.iter().enumerate() {
            // SAFETY: the trait contract: 64 aligned bytes of room at reg.
            unsafe { reg.add(i).write_volatile(*w) };
            bytes[i * 8..i * 8 + 8].copy_from_slice(&w.to_ne_bytes());
        }
        self.shared.push(
            self.qp,
            MmioEvent::Bf64 {
                offset: Self::offset_from(reg.cast(), self.shared.bf_reg(self.qp)),
                bytes,
            },
        );
    }
}
