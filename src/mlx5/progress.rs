//! SQ consumer progress shared by an SQ and the CQ poller(s) it completes on.
//!
//! The SQ records, per WQE, `{wr_id, nbb}` in the slot of the WQE's first
//! WQEBB; the poller reads the slot named by a CQE's `wqe_counter` and
//! publishes the new consumer index `wqe_counter + nbb`, which also retires
//! every earlier (unsignalled) WQE. One writer per field, relaxed/acquire
//! atomics (plain loads and stores on x86-64): no locks.

use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::Arc;

#[derive(Default)]
struct Slot {
    wr_id: AtomicU64,
    nbb: AtomicU16,
}

/// The SQ's view of the slot table during one post list.
#[derive(Clone, Copy)]
pub(crate) struct Recorder<'a> {
    /// Invariant: `slots.len() == mask as usize + 1` (see `SqProgress::new`).
    slots: &'a [Slot],
    mask: u16,
}

impl Recorder<'_> {
    /// Called by the SQ for every WQE it writes, before the doorbell.
    #[inline(always)]
    pub(crate) fn record(self, bb: u16, wr_id: u64, nbb: u16) {
        let i = (bb & self.mask) as usize;
        debug_assert!(i < self.slots.len());
        // SAFETY: i <= mask and the table has mask + 1 slots (struct
        // invariant), so the index is in bounds; saves a bounds check per WQE.
        let s = unsafe { self.slots.get_unchecked(i) };
        s.wr_id.store(wr_id, Ordering::Relaxed);
        s.nbb.store(nbb, Ordering::Relaxed);
    }
}

/// Per-SQ bookkeeping the CQ poller needs; shared through an `Arc`.
pub struct SqProgress {
    qpn: u32,
    mask: u16,
    /// Consumer index in WQEBBs (free-running, 16 bits): written by the
    /// poller, read by the SQ.
    ci: AtomicU16,
    slots: Box<[Slot]>,
}

impl SqProgress {
    /// `wqe_cnt` must be a power of two up to 32768 (the SQ checks it):
    /// the slot table then has exactly `mask + 1` entries.
    pub(crate) fn new(qpn: u32, wqe_cnt: u32) -> Arc<Self> {
        assert!(
            wqe_cnt.is_power_of_two() && wqe_cnt <= 1 << 16,
            "SqProgress: wqe_cnt {wqe_cnt} is not a power of two up to 65536"
        );
        Arc::new(Self {
            qpn,
            mask: (wqe_cnt - 1) as u16,
            ci: AtomicU16::new(0),
            slots: (0..wqe_cnt).map(|_| Slot::default()).collect(),
        })
    }

    /// The QP number CQEs of this SQ carry.
    pub fn qpn(&self) -> u32 {
        self.qpn
    }

    /// Consumer index published by the poller.
    #[inline(always)]
    pub fn ci(&self) -> u16 {
        self.ci.load(Ordering::Acquire)
    }

    /// The slot table, for the SQ's post loop (read once per post list).
    #[inline(always)]
    pub(crate) fn recorder(&self) -> Recorder<'_> {
        Recorder {
            slots: &self.slots,
            mask: self.mask,
        }
    }

    /// Called by the poller for a requester CQE: returns the WQE's `wr_id`
    /// and publishes the consumer index past it. A counter that names no
    /// recorded WQE (nbb 0) retires nothing and yields `None`.
    #[inline(always)]
    pub(crate) fn retire(&self, wqe_counter: u16) -> Option<u64> {
        let s = self.slots.get((wqe_counter & self.mask) as usize)?;
        let nbb = s.nbb.load(Ordering::Relaxed);
        if nbb == 0 {
            return None;
        }
        let wr_id = s.wr_id.load(Ordering::Relaxed);
        self.ci
            .store(wqe_counter.wrapping_add(nbb), Ordering::Release);
        Some(wr_id)
    }
}
