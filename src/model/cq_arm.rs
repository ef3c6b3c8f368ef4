//! The model's CQ arming (`-e`): [`ModelCqMmio`] is the [`Mmio`] a
//! `DirectCq::arm` stores through; the NIC reads the request from the UAR
//! doorbell store (sequence number, command, consumer index, CQN) the way
//! hardware does, checks that the arm record holds the same word, and
//! raises one completion event at the first CQE written after it (at once
//! when unpolled CQEs already wait past the consumer index), as a device
//! would before `ibv_get_cq_event` returns. [`Model::wait_cq_event`] is
//! that `ibv_get_cq_event`. The arm's sequence number must count the events
//! delivered so far (mod 4: libmlx5 bumps it in `mlx5_cq_event`); an arm
//! that did not bump it is a violation.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::handle::{lock, Model, Shared};
use super::nic::Arm;
use crate::mlx5::Mmio;

/// Stores of `DirectCq::arm` into the model's CQ record and UAR.
#[derive(Clone)]
pub struct ModelCqMmio {
    pub(crate) shared: Arc<Shared>,
}

impl Mmio for ModelCqMmio {
    fn store_fence_dma(&self) {}
    fn store_fence_wc(&self) {}
    unsafe fn write_dbrec(&self, dbrec: *mut u32, raw: u32) {
        // SAFETY: the trait contract: the CQ's arm record in model memory.
        unsafe { AtomicU32::from_ptr(dbrec) }.store(raw, Ordering::Release);
    }
    unsafe fn write_db64(&self, reg: *mut u64, raw: u64) {
        // SAFETY: the trait contract: an aligned address in the CQ's UAR.
        unsafe { reg.write_volatile(raw) };
        let v = u64::from_be(raw);
        let word = (v >> 32) as u32;
        let cqn = v as u32;
        let mut nic = lock(&self.shared.nic);
        let record = self.shared.cq_arm_record();
        let uar_off = (reg as usize).wrapping_sub(self.shared.mem.cq_uar.ptr() as usize);
        if uar_off != 0x20 || cqn != 1 || record != word {
            nic.violations.push(format!(
                "CQ arm doorbell at UAR offset {uar_off:#x} for CQN {cqn}, word {word:#x} \
                 (arm record {record:#x})"
            ));
            return;
        }
        let (sn, taken) = (word >> 28 & 3, nic.events_taken);
        if sn != taken & 3 {
            nic.violations.push(format!(
                "CQ armed with sequence number {sn} after {taken} events delivered (expected {}: \
                 the number is bumped once per event taken, DirectCq::event_consumed)",
                taken & 3
            ));
        }
        nic.arm(Arm {
            sn,
            solicited: word & 1 << 24 != 0,
            ci: word & 0x00ff_ffff,
        });
        drop(nic);
        self.shared.events_cv.notify_all();
    }
    unsafe fn write_bf64(&self, _: *mut u64, _: *const [u64; 8]) {
        lock(&self.shared.nic)
            .violations
            .push("BlueFlame store through the CQ's arm doorbell".into());
    }
}

impl Model {
    /// The [`Mmio`] to arm this model's CQ with (`DirectCq::arm`).
    pub fn cq_mmio(&self) -> ModelCqMmio {
        ModelCqMmio {
            shared: Arc::clone(&self.shared),
        }
    }

    /// Waits for one completion event of an armed CQ (`ibv_get_cq_event`);
    /// `false` when none came within `timeout`.
    pub fn wait_cq_event(&self, timeout: Duration) -> bool {
        let end = Instant::now() + timeout;
        let mut nic = lock(&self.shared.nic);
        loop {
            if nic.events > 0 {
                nic.events -= 1;
                nic.events_taken += 1;
                return true;
            }
            let left = end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            nic = self
                .shared
                .events_cv
                .wait_timeout(nic, left.min(Duration::from_millis(5)))
                .map_or_else(|e| e.into_inner().0, |g| g.0);
        }
    }

    /// Completion events raised so far and not yet waited for.
    pub fn pending_cq_events(&self) -> u32 {
        lock(&self.shared.nic).events
    }
}
