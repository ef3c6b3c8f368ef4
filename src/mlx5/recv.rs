//! A receive ring as both of its users see it: the queue that posts into it
//! ([`DirectRq`](super::rq::DirectRq), [`DirectSrq`](super::srq::DirectSrq))
//! and the CQ poller that completes from it ([`DirectCq`](super::cq::DirectCq)).
//! Shared through an `Arc`, like the send side's [`SqProgress`](super::progress::SqProgress).
//!
//! Ring access for the receive side lives here: the slot addresses, the data
//! segments of a posted WQE (written by the queue, read back by the poller
//! for scatter-to-CQE, as libmlx5's `mlx5_copy_to_recv_wqe` does), and the
//! SRQ's linked list (`next_wqe_index`, freed by the poller as libmlx5 v44's
//! `mlx5_free_srq_wqe`). The posting side owns `head`; the poller owns
//! `done` and the SRQ tail; each is one writer, atomics between them (the
//! model's NIC runs on another thread, and `--threads` moves queues).
//!
//! Finding the WR: a responder CQE's `wqe_counter` names the WQE, for the RQ
//! masked by its size (rdma-core ≥ v55: newer firmware may consume RQ WQEs
//! out of order), for the SRQ as the WQE index itself.

use core::ptr::NonNull;
use std::sync::atomic::{AtomicU16, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use super::error::DirectError;
use super::keepalive::KeepAlive;

use super::mmio::Mmio;
use super::prm::INVALID_LKEY;
use crate::post::WcStatus;

/// Bytes of one data segment (`mlx5_wqe_data_seg`).
pub const DATA_SEG: usize = 16;
/// Bytes of the SRQ's next segment (`mlx5_wqe_srq_next_seg`) before its data.
pub const SRQ_NEXT_SEG: usize = 16;
/// Offset of `next_wqe_index` (big-endian 16 bits) in the SRQ next segment.
const NEXT_WQE_INDEX: usize = 2;

/// The receive doorbell: the posted count (16 bits, big-endian) into the
/// queue's record, after a store barrier so the NIC never sees a count that
/// covers a WQE it cannot read yet (`udma_to_device_barrier` in
/// `mlx5_post_recv` / `mlx5_post_srq_recv`). No MMIO register on the
/// receive side, but both stores go through the [`Mmio`] seam as the send
/// side's do, so the model records their order.
///
/// # Safety
/// `dbrec` must be the queue's valid, 4-byte aligned doorbell record.
#[inline(always)]
unsafe fn ring_record<M: Mmio>(mmio: &M, dbrec: NonNull<u32>, posted: u32) {
    mmio.store_fence_dma();
    let raw = u32::from_ne_bytes((posted & 0xffff).to_be_bytes());
    // SAFETY: the caller's contract.
    unsafe { mmio.write_dbrec(dbrec.as_ptr(), raw) };
}

/// What an RQ and an SRQ both post through: the ring record the CQ poller
/// completes from, and the receive doorbell record, stored through `M`.
pub(super) struct RecvDoor<M: Mmio> {
    pub(super) ring: Arc<RecvRing>,
    dbrec: NonNull<u32>,
    mmio: M,
    _keepalive: KeepAlive,
}

// SAFETY: the queue owns its ring's producer side and its record; moving it
// to another thread moves that ownership (the shared record is Sync).
unsafe impl<M: Mmio + Send> Send for RecvDoor<M> {}

impl<M: Mmio> RecvDoor<M> {
    /// The ring `ring` builds over `buf`, and the record at `dbrec`. The
    /// layout checks refuse a null `buf` or `dbrec` first; `null` names them
    /// for the internal error should one get here.
    ///
    /// # Safety
    /// `dbrec` must be the queue's valid, 4-byte aligned record, valid while
    /// the queue lives (`keepalive` may own it) and stored by nothing else.
    pub(super) unsafe fn new(
        (buf, dbrec): (*mut core::ffi::c_void, *mut u32),
        null: &'static str,
        ring: impl FnOnce(NonNull<u8>) -> RecvRing,
        keepalive: KeepAlive,
        mmio: M,
    ) -> Result<Self, DirectError> {
        let (Some(buf), Some(dbrec)) = (NonNull::new(buf.cast::<u8>()), NonNull::new(dbrec)) else {
            return Err(DirectError::Config {
                problem: null,
                fix: "report this",
            });
        };
        Ok(Self {
            ring: Arc::new(ring(buf)),
            dbrec,
            mmio,
            _keepalive: keepalive,
        })
    }

    /// Stores `posted` (16 bits) into the record, after the WQEs.
    #[inline(always)]
    pub(super) fn ring_at(&self, posted: u32) {
        // SAFETY: this queue's record, valid and aligned (constructor
        // contract).
        unsafe { ring_record(&self.mmio, self.dbrec, posted) };
    }
}

/// A receive queue's layout refused, with the fix both kinds give.
pub(crate) fn layout_error(
    what: &'static str,
    value: u64,
    expected: &'static str,
) -> super::error::DirectError {
    super::error::DirectError::Layout {
        what,
        value,
        expected,
        fix: "use --post wr-api on this device (and report the values)",
    }
}

/// Which kind of receive queue a ring is (our own choice, never read from
/// the device).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum RecvKind {
    /// A QP's own RQ: slots used in order, data segments at the slot start.
    Rq,
    /// A shared receive queue: slots linked by `next_wqe_index`, data after
    /// the 16-byte next segment.
    Srq,
}

/// The shared record of one receive ring.
pub struct RecvRing {
    kind: RecvKind,
    buf: NonNull<u8>,
    /// log2 of the WQE stride.
    stride_shift: u32,
    /// Slots - 1 (a power of two minus one).
    mask: u32,
    /// Data segments per WQE (`stride / 16`, less the SRQ next segment).
    max_gs: u32,
    /// `wr_id` of the WR posted into each slot.
    wr_ids: Box<[AtomicU64]>,
    /// Receives completed (free-running): the poller writes, the RQ reads
    /// it for room.
    done: AtomicU32,
    /// SRQ: the sentinel WQE (never posted): the poller links each freed
    /// WQE behind it and makes it the new tail.
    tail: AtomicU16,
}

// SAFETY: the ring memory is owned by the QP/SRQ this record was made for
// (kept alive by the queue's keep-alive); the fields shared between the
// posting thread and the poller are atomics, each with one writer.
unsafe impl Send for RecvRing {}
// SAFETY: as above.
unsafe impl Sync for RecvRing {}

/// The ring's geometry by value: the posting loop keeps it in registers
/// (through `&RecvRing` every volatile WQE store would force the fields to
/// be loaded again, as the store might alias them).
#[derive(Clone, Copy)]
pub(crate) struct Shape {
    buf: NonNull<u8>,
    stride_shift: u32,
    mask: u32,
    max_gs: u32,
    /// An SRQ WQE's data segments follow its 16-byte next segment.
    srq: bool,
    wr_ids: NonNull<AtomicU64>,
}

impl Shape {
    /// The WQE of `slot` (masked: the ring wraps).
    #[inline(always)]
    fn slot_ptr(self, slot: u32) -> *mut u8 {
        let off = ((slot & self.mask) as usize) << self.stride_shift;
        self.buf.as_ptr().wrapping_add(off)
    }

    /// Data segment `k` of `slot`'s WQE.
    #[inline(always)]
    fn seg_ptr(self, slot: u32, k: u32) -> *mut u8 {
        let first = if self.srq { SRQ_NEXT_SEG } else { 0 };
        self.slot_ptr(slot)
            .wrapping_add(first + k as usize * DATA_SEG)
    }

    /// Writes one WR's WQE into `slot`: one data segment (none for a
    /// zero-length RQ receive, which libmlx5 skips) and the invalid-lkey
    /// terminator where segments remain; records `wr_id`.
    #[inline(always)]
    pub(crate) fn write(self, slot: u32, wr_id: u64, addr: u64, lkey: u32, len: u32) {
        let mut k = 0;
        if len != 0 || self.srq {
            self.store_seg(slot, 0, len, lkey, addr);
            k = 1;
        }
        if k < self.max_gs {
            self.store_seg(slot, k, 0, INVALID_LKEY, 0);
        }
        let i = (slot & self.mask) as usize;
        // SAFETY: i <= mask and the table has mask + 1 entries (built so in
        // `RecvRing::new`, which owns it for the shape's life).
        unsafe { (*self.wr_ids.as_ptr().add(i)).store(wr_id, Ordering::Relaxed) };
    }

    #[inline(always)]
    fn store_seg(self, slot: u32, k: u32, len: u32, lkey: u32, addr: u64) {
        let p = self.seg_ptr(slot, k).cast::<u64>();
        // Two 8-byte stores in memory order (a volatile `[u8; 16]` would
        // be sixteen): byte_count and lkey big-endian, then the address.
        let (len, lkey) = (len.to_be_bytes(), lkey.to_be_bytes());
        let head = u64::from_ne_bytes([
            len[0], len[1], len[2], len[3], lkey[0], lkey[1], lkey[2], lkey[3],
        ]);
        let addr = u64::from_ne_bytes(addr.to_be_bytes());
        // SAFETY: `p` is segment k < max_gs of a slot inside the ring
        // (slot masked; k bounded by the stride), 16-byte aligned: 16
        // writable bytes the queue owns until it rings the doorbell record.
        unsafe {
            p.write_volatile(head);
            p.add(1).write_volatile(addr);
        }
    }
}

/// A payload the poller found in the CQE (scatter-to-CQE), to copy into the
/// WR's buffers.
#[derive(Clone, Copy)]
pub struct Inline {
    pub src: *const u8,
    pub len: u32,
}

/// An SRQ receive the NIC dropped on an ODP page fault, to post again as
/// it was (the one data segment this path's posts write).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Repost {
    pub wr_id: u64,
    pub addr: u64,
    pub lkey: u32,
    pub len: u32,
}

impl RecvRing {
    /// # Safety
    /// `buf` must hold `(mask + 1) << stride_shift` bytes that stay valid
    /// for the record's life and are written by nothing but this ring's
    /// queue (and, for WQEs it posted, read by the NIC).
    pub(crate) unsafe fn new(
        kind: RecvKind,
        buf: NonNull<u8>,
        stride_shift: u32,
        slots: u32,
        tail: u16,
    ) -> Self {
        let gs = (1u32 << stride_shift) / DATA_SEG as u32;
        Self {
            kind,
            buf,
            stride_shift,
            mask: slots - 1,
            max_gs: if kind == RecvKind::Srq { gs - 1 } else { gs },
            wr_ids: (0..slots).map(|_| AtomicU64::new(0)).collect(),
            done: AtomicU32::new(0),
            tail: AtomicU16::new(tail),
        }
    }

    /// RQ or SRQ.
    pub fn kind(&self) -> RecvKind {
        self.kind
    }
    /// Slots in the ring.
    pub fn slots(&self) -> u32 {
        self.mask + 1
    }
    /// Data segments one WQE holds.
    pub fn max_gs(&self) -> u32 {
        self.max_gs
    }
    /// Receives completed so far (free-running).
    pub fn done(&self) -> u32 {
        self.done.load(Ordering::Acquire)
    }
    /// SRQ: the current sentinel slot.
    pub fn tail(&self) -> u16 {
        self.tail.load(Ordering::Acquire)
    }

    /// The geometry for a posting loop (see [`Shape`]).
    #[inline(always)]
    pub(crate) fn shape(&self) -> Shape {
        Shape {
            buf: self.buf,
            stride_shift: self.stride_shift,
            mask: self.mask,
            max_gs: self.max_gs,
            srq: self.kind == RecvKind::Srq,
            // The table's length is mask + 1 (`new`).
            wr_ids: NonNull::from(&*self.wr_ids).cast(),
        }
    }

    /// SRQ: the slot after `slot` in the list.
    #[inline(always)]
    pub(crate) fn next_of(&self, slot: u16) -> u16 {
        let p = self
            .shape()
            .slot_ptr(slot as u32)
            .wrapping_add(NEXT_WQE_INDEX);
        // SAFETY: inside the slot's next segment; read atomically because
        // the poller links freed WQEs from another thread.
        let raw = unsafe { AtomicU16::from_ptr(p.cast()) }.load(Ordering::Acquire);
        u16::from_be(raw)
    }

    #[inline(always)]
    fn set_next(&self, slot: u16, next: u16) {
        let p = self
            .shape()
            .slot_ptr(slot as u32)
            .wrapping_add(NEXT_WQE_INDEX);
        // SAFETY: inside the slot's next segment (2-aligned: slots are at
        // least 32-byte aligned); the posting side reads it atomically.
        unsafe { AtomicU16::from_ptr(p.cast()) }.store(next.to_be(), Ordering::Release);
    }

    /// SRQ set-up: chains slots `0 -> 1 -> … -> tail` as libmlx5 does.
    pub(crate) fn link_all(&self, tail: u16) {
        for i in 0..tail {
            self.set_next(i, i + 1);
        }
    }

    /// The poller's side of one responder CQE: the WR the CQE's counter
    /// names, its payload copied from the CQE when it was scattered there,
    /// and (SRQ) the WQE given back to the list. Returns `wr_id` and the
    /// status (LOC_LEN_ERR when the inline payload does not fit the WR).
    #[inline(always)]
    pub(crate) fn complete(&self, counter: u16, inline: Option<Inline>) -> (u64, WcStatus) {
        let slot = counter as u32 & self.mask;
        let wr_id = self
            .wr_ids
            .get(slot as usize)
            .map_or(0, |w| w.load(Ordering::Relaxed));
        let status = match inline {
            Some(p) => self.scatter(slot, p),
            None => WcStatus::SUCCESS,
        };
        if self.kind == RecvKind::Srq {
            self.free_srq_wqe(slot as u16);
        }
        // One writer (the poller): a plain store, no locked add.
        let done = self.done.load(Ordering::Relaxed);
        self.done.store(done.wrapping_add(1), Ordering::Release);
        (wr_id, status)
    }

    /// libmlx5 v44 `mlx5_free_srq_wqe`: link `slot` behind the sentinel,
    /// then it is the sentinel.
    #[inline(always)]
    fn free_srq_wqe(&self, slot: u16) {
        self.set_next(self.tail.load(Ordering::Relaxed), slot);
        self.tail.store(slot, Ordering::Release);
    }

    /// The poller's side of an ODP page fault on an SRQ receive (RESP_ERR,
    /// REMOTE_ABORTED, vendor syndrome 0x93: the NIC dropped the WQE): the
    /// WR the WQE held, read back before the WQE is freed, so that it can
    /// be posted again (libmlx5 `mlx5_complete_odp_fault`/`srq_repost`).
    /// Not counted as done. `None` for an RQ (libmlx5 reposts only on an
    /// SRQ; an RQ's fault is reported as the error it is).
    #[cold]
    pub(crate) fn fault(&self, counter: u16) -> Option<Repost> {
        if self.kind != RecvKind::Srq {
            return None;
        }
        let slot = counter as u32 & self.mask;
        let wr_id = self.wr_ids.get(slot as usize)?.load(Ordering::Relaxed);
        // SAFETY: segment 0 of a posted slot, inside the ring; the NIC
        // dropped the WQE, so nothing writes it until it is freed below.
        let s = unsafe {
            self.shape()
                .seg_ptr(slot, 0)
                .cast::<[u8; 16]>()
                .read_volatile()
        };
        let rp = Repost {
            wr_id,
            len: u32::from_be_bytes([s[0], s[1], s[2], s[3]]),
            lkey: u32::from_be_bytes([s[4], s[5], s[6], s[7]]),
            addr: u64::from_be_bytes([s[8], s[9], s[10], s[11], s[12], s[13], s[14], s[15]]),
        };
        self.free_srq_wqe(slot as u16);
        Some(rp)
    }

    /// Copies a scattered payload into the data segments of `slot`, in
    /// order, until the terminator; LOC_LEN_ERR if they hold less.
    fn scatter(&self, slot: u32, p: Inline) -> WcStatus {
        let shape = self.shape();
        let mut left = p.len as usize;
        let mut src = p.src;
        for k in 0..self.max_gs {
            if left == 0 {
                break;
            }
            let seg = shape.seg_ptr(slot, k);
            // SAFETY: segment k of a posted slot, inside the ring.
            let s = unsafe { seg.cast::<[u8; 16]>().read_volatile() };
            let len = u32::from_be_bytes([s[0], s[1], s[2], s[3]]) as usize;
            let lkey = u32::from_be_bytes([s[4], s[5], s[6], s[7]]);
            let addr = u64::from_be_bytes([s[8], s[9], s[10], s[11], s[12], s[13], s[14], s[15]]);
            if lkey == INVALID_LKEY {
                break;
            }
            let n = len.min(left);
            // SAFETY: the WR posted `addr..addr+len` as a registered,
            // writable buffer of this process (the receive contract);
            // `src` holds `left` bytes inside the software-owned CQE.
            unsafe { core::ptr::copy_nonoverlapping(src, addr as *mut u8, n) };
            src = src.wrapping_add(n);
            left -= n;
        }
        if left == 0 {
            WcStatus::SUCCESS
        } else {
            WcStatus::LOC_LEN_ERR
        }
    }
}
