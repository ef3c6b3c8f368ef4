//! SQ consumer progress shared by an SQ and the CQ poller(s) it completes on.
//!
//! The SQ records, per WQE, `wr_id` and `nbb` in the slot of the WQE's first
//! WQEBB (two parallel arrays, so the post loop addresses each with one
//! scaled index and no shift); the poller reads the slot named by a CQE's `wqe_counter` and
//! publishes the new consumer index `wqe_counter + nbb`, which also retires
//! every earlier (unsignalled) WQE. One writer per field, relaxed/acquire
//! atomics (plain loads and stores on x86-64): no locks.

use std::sync::atomic::{AtomicU16, AtomicU64, Ordering};
use std::sync::Arc;

/// The SQ's view of the slot table during one post list.
#[derive(Clone, Copy)]
pub(crate) struct Recorder<'a> {
    /// Invariant: `wr_ids.len() == nbbs.len() == mask as usize + 1` (see
    /// `SqProgress::new`).
    wr_ids: &'a [AtomicU64],
    nbbs: &'a [AtomicU16],
    mask: u16,
}

impl Recorder<'_> {
    /// Called by the SQ for every WQE it writes, before the doorbell.
    #[inline(always)]
    pub(crate) fn record(self, bb: u16, wr_id: u64, nbb: u16) {
        let i = (bb & self.mask) as usize;
        debug_assert!(i < self.wr_ids.len() && i < self.nbbs.len());
        // SAFETY: i <= mask and both tables have mask + 1 entries (struct
        // invariant), so the index is in bounds; saves two bounds checks per
        // WQE.
        let (w, n) = unsafe { (self.wr_ids.get_unchecked(i), self.nbbs.get_unchecked(i)) };
        w.store(wr_id, Ordering::Relaxed);
        n.store(nbb, Ordering::Relaxed);
    }

    /// As [`record`](Self::record) for a slot index the caller already
    /// masked (the SQ's ring index), saving the second mask.
    ///
    /// # Safety
    /// `i` must be at most `mask` (the SQ's `wqe_cnt - 1`, which is this
    /// table's too).
    #[inline(always)]
    pub(crate) unsafe fn record_at(self, i: usize, wr_id: u64, nbb: u16) {
        debug_assert!(i <= self.mask as usize);
        // SAFETY: i <= mask (caller contract) and both tables have mask + 1
        // entries (struct invariant).
        let (w, n) = unsafe { (self.wr_ids.get_unchecked(i), self.nbbs.get_unchecked(i)) };
        w.store(wr_id, Ordering::Relaxed);
        n.store(nbb, Ordering::Relaxed);
    }
}

/// Per-SQ bookkeeping the CQ poller needs; shared through an `Arc`.
pub struct SqProgress {
    qpn: u32,
    mask: u16,
    /// Consumer index in WQEBBs (free-running, 16 bits): written by the
    /// poller, read by the SQ.
    ci: AtomicU16,
    /// Per first WQEBB of a WQE: its `wr_id` and WQEBB count (0: none yet).
    wr_ids: Box<[AtomicU64]>,
    nbbs: Box<[AtomicU16]>,
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
            wr_ids: (0..wqe_cnt).map(|_| AtomicU64::new(0)).collect(),
            nbbs: (0..wqe_cnt).map(|_| AtomicU16::new(0)).collect(),
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
            wr_ids: &self.wr_ids,
            nbbs: &self.nbbs,
            mask: self.mask,
        }
    }

    /// Called by the poller for a requester CQE: returns the WQE's `wr_id`
    /// and publishes the consumer index past it. A counter that names no
    /// recorded WQE (nbb 0) retires nothing and yields `None`.
    #[inline(always)]
    pub(crate) fn retire(&self, wqe_counter: u16) -> Option<u64> {
        let i = (wqe_counter & self.mask) as usize;
        let nbb = self.nbbs.get(i)?.load(Ordering::Relaxed);
        if nbb == 0 {
            return None;
        }
        let wr_id = self.wr_ids.get(i)?.load(Ordering::Relaxed);
        self.ci
            .store(wqe_counter.wrapping_add(nbb), Ordering::Release);
        Some(wr_id)
    }
}
