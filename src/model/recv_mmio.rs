//! The receive side's stores through the [`Mmio`] seam, recorded as the
//! send side's are: [`ModelRecvMmio`] performs the store-barrier and the
//! record store of `mlx5::rq`/`mlx5::srq` into model memory and writes each
//! down, and flags a record stored without the barrier after the WQE
//! stores (`udma_to_device_barrier` in `mlx5_post_recv`), a record stored
//! elsewhere than the ring's own, and any doorbell register store (the
//! receive side has none). The NIC reads the record itself, as hardware
//! does; the recording is for the order.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use super::event::MmioEvent;
use super::handle::{events_of, lock, Model, Shared};
use crate::mlx5::{barrier, Mmio};

/// Records the stores of one receive ring (a peer QP's RQ, or the SRQ).
#[derive(Clone)]
pub struct ModelRecvMmio {
    shared: Arc<Shared>,
    /// The ring: the QP index for RQs, 0 for the SRQ.
    ring: usize,
}

impl ModelRecvMmio {
    fn record(&self, e: MmioEvent) -> Option<MmioEvent> {
        let mut log = lock(&self.shared.recv_log);
        if log.last.len() <= self.ring {
            log.last.resize(self.ring + 1, None);
        }
        let before = log.last[self.ring].replace(e);
        if self.shared.cfg.record_history {
            log.history.push((self.ring, e));
        }
        before
    }

    fn violation(&self, s: String) {
        lock(&self.shared.nic).violations.push(s);
    }
}

impl Mmio for ModelRecvMmio {
    fn store_fence_dma(&self) {
        barrier::store_fence_dma();
        self.record(MmioEvent::FenceDma);
    }
    fn store_fence_wc(&self) {
        barrier::store_fence_wc();
        self.record(MmioEvent::FenceWc);
    }
    unsafe fn write_dbrec(&self, dbrec: *mut u32, raw: u32) {
        // SAFETY: the trait contract: a valid aligned record in model
        // memory; atomic because the NIC thread reads it concurrently.
        unsafe { AtomicU32::from_ptr(dbrec) }.store(raw, Ordering::Release);
        let own = self.shared.mem.recv.get(self.ring).map(|m| m.dbrec.ptr());
        let offset = own.map_or(isize::MAX, |p| (dbrec as isize).wrapping_sub(p as isize));
        let value = u32::from_be_bytes(raw.to_ne_bytes());
        let before = self.record(MmioEvent::Dbrec { offset, value });
        if before != Some(MmioEvent::FenceDma) {
            self.violation(format!(
                "receive ring {}: doorbell record {value:#x} written without store_fence_dma \
                 after the WQE stores (previous store {before:?})",
                self.ring
            ));
        }
        if offset != 0 || value > 0xffff {
            self.violation(format!(
                "receive ring {}: record store at +{offset} of value {value:#x}; the record \
                 is word 0 of the ring's own, 16 bits",
                self.ring
            ));
        }
    }
    unsafe fn write_db64(&self, _: *mut u64, _: u64) {
        self.violation(format!(
            "receive ring {}: a doorbell register store",
            self.ring
        ));
    }
    unsafe fn write_bf64(&self, _: *mut u64, _: *const [u64; 8]) {
        self.violation(format!("receive ring {}: a BlueFlame store", self.ring));
    }
}

impl Model {
    /// The recorder to build receive ring `ring`'s queue with
    /// (`DirectRq::from_dv` for QP `ring`'s peer RQ, or
    /// `DirectSrq::from_dv` with ring 0 for the SRQ).
    pub fn recv_mmio(&self, ring: usize) -> ModelRecvMmio {
        ModelRecvMmio {
            shared: Arc::clone(&self.shared),
            ring,
        }
    }

    /// Every recorded store to receive ring `ring` (if `record_history`).
    pub fn recv_history(&self, ring: usize) -> Vec<MmioEvent> {
        events_of(&lock(&self.shared.recv_log).history, ring)
    }
}
