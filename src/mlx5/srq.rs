//! A shared receive queue posted directly (`mlx5_post_srq_recv` without
//! libmlx5, rdma-core v44's linked list): each WQE starts with a next segment
//! whose `next_wqe_index` chains the free WQEs from `head` to the sentinel
//! `tail`, which is never posted (`head == tail`: full). Posting takes the
//! WQE at `head` and moves `head` along its link; the CQ poller gives a
//! completed WQE back by linking it behind the sentinel and making it the new
//! sentinel ([`RecvRing::complete`]). The doorbell record is one word: the
//! 16-bit count of WQEs posted (libmlx5's value; UCX writes one less).
//!
//! The ring is `tail + 1` WQEs (libmlx5 creates the SRQ with head 0 and
//! `tail = roundup_pow2(max_wr + 1) - 1`; the ODP wait queue behind them is
//! never used here). Memory ordering as the RQ: WQE stores, store barrier,
//! record.

use core::cell::UnsafeCell;
use core::ptr::NonNull;
use std::rc::Rc;
use std::sync::Arc;

use super::error::DirectError;
use super::keepalive::KeepAlive;
use super::recv::{layout_error, ring_record, RecvKind, RecvRing, DATA_SEG, SRQ_NEXT_SEG};
use crate::post::{PostError, RecvQueue};
use crate::sys::mlx5dv_srq;

/// A directly posted SRQ; completions come through every
/// [`DirectCq`](super::cq::DirectCq) one of its QPs completes on.
pub struct DirectSrq {
    ring: Arc<RecvRing>,
    dbrec: NonNull<u32>,
    /// Next free WQE.
    head: u16,
    /// WQEs posted (16 bits, as the record holds them).
    counter: u16,
    srqn: u32,
    _keepalive: KeepAlive,
}

// SAFETY: as DirectRq: the producer side moves with the value.
unsafe impl Send for DirectSrq {}

/// The SRQ layout checks alone (UCX's `uct_ib_mlx5_verbs_srq_init` checks).
pub fn check_srq_layout(srq: &mlx5dv_srq) -> Result<(), DirectError> {
    let layout = layout_error;
    if srq.head != 0 {
        return Err(layout("srq.head", srq.head as u64, "0 (a fresh SRQ)"));
    }
    let slots = srq.tail as u64 + 1;
    if !slots.is_power_of_two() || !(2..=1 << 15).contains(&slots) {
        return Err(layout(
            "srq.tail",
            srq.tail as u64,
            "a power of two minus one",
        ));
    }
    let s = srq.stride;
    if !s.is_power_of_two() || (s as usize) < SRQ_NEXT_SEG + DATA_SEG || s > 1024 {
        return Err(layout("srq.stride", s as u64, "a power of two, 32..1024"));
    }
    if srq.buf.is_null() || srq.buf as usize % 64 != 0 {
        return Err(layout(
            "srq.buf",
            srq.buf as u64,
            "a 64-byte aligned buffer",
        ));
    }
    if srq.dbrec.is_null() || srq.dbrec as usize % 4 != 0 {
        return Err(layout(
            "srq.dbrec",
            srq.dbrec as u64,
            "a 4-byte aligned record",
        ));
    }
    Ok(())
}

impl DirectSrq {
    /// Builds the SRQ from what `mlx5dv_init_obj` returned, and links its
    /// WQEs `0 -> 1 -> … -> tail` (as libmlx5 did at create).
    ///
    /// # Safety
    /// The SRQ's buffer and record must stay valid while this lives
    /// (`keepalive`), nothing may be posted yet, and nothing else may post
    /// to it (no `ibv_post_srq_recv`).
    pub unsafe fn from_dv(
        srq: &mlx5dv_srq,
        srqn: u32,
        keepalive: KeepAlive,
    ) -> Result<Self, DirectError> {
        check_srq_layout(srq)?;
        let (Some(buf), Some(dbrec)) =
            (NonNull::new(srq.buf.cast::<u8>()), NonNull::new(srq.dbrec))
        else {
            return Err(DirectError::Config {
                problem: "srq.buf/dbrec is null (internal: checked by check_srq_layout)",
                fix: "report this",
            });
        };
        let tail = srq.tail as u16;
        // SAFETY: tail + 1 strides (checked), exclusive (caller contract).
        let ring = unsafe {
            RecvRing::new(
                RecvKind::Srq,
                buf,
                srq.stride.trailing_zeros(),
                tail as u32 + 1,
                tail,
            )
        };
        ring.link_all(tail);
        Ok(Self {
            ring: Arc::new(ring),
            dbrec,
            head: 0,
            counter: 0,
            srqn,
            _keepalive: keepalive,
        })
    }

    /// The record the CQ poller completes from (attach it per QP).
    pub fn ring(&self) -> &Arc<RecvRing> {
        &self.ring
    }
    /// The SRQ number.
    pub fn srqn(&self) -> u32 {
        self.srqn
    }
    /// WQEs posted so far (16 bits).
    pub fn posted(&self) -> u16 {
        self.counter
    }

    #[inline(always)]
    fn take(&mut self, wr_id: u64, addr: u64, lkey: u32, len: u32) -> Result<(), PostError> {
        if self.head == self.ring.tail() {
            return Err(PostError::QueueFull);
        }
        let slot = self.head;
        self.ring.shape().write(slot as u32, wr_id, addr, lkey, len);
        self.head = self.ring.next_of(slot);
        self.counter = self.counter.wrapping_add(1);
        Ok(())
    }

    #[inline(always)]
    fn doorbell(&self) {
        // SAFETY: this queue's record, valid and aligned (constructor
        // contract).
        unsafe { ring_record(self.dbrec, self.counter as u32) };
    }
}

impl RecvQueue for DirectSrq {
    #[inline]
    fn post_recv(&mut self, wr_id: u64, addr: u64, lkey: u32, len: u32) -> Result<(), PostError> {
        self.take(wr_id, addr, lkey, len)?;
        self.doorbell();
        Ok(())
    }

    /// One doorbell record store for the list; a full SRQ ends it early
    /// (the WRs before are posted and rung, as libmlx5 reports ENOMEM for
    /// the first WR that did not fit).
    #[inline]
    fn post_recv_list(
        &mut self,
        n: usize,
        wr_id: u64,
        lkey: u32,
        len: u32,
        addr: impl Fn(usize) -> u64,
    ) -> Result<(), PostError> {
        let mut res = Ok(());
        let start = self.counter;
        for k in 0..n {
            res = self.take(wr_id, addr(k), lkey, len);
            if res.is_err() {
                break;
            }
        }
        if self.counter != start {
            self.doorbell();
        }
        res
    }
}
/// One QP's handle on an SRQ that several QPs post to ([`DirectSrq::share`]):
/// the receive loops keep one receive queue per QP and post to the one
/// whose message completed, as they do with verbs' per-QP SRQ posters.
/// All ports of one SRQ live on one thread (`Rc`: neither `Send` nor
/// `Sync`), and a post never calls back into another port.
pub struct SrqPort {
    srq: Rc<UnsafeCell<DirectSrq>>,
    /// The SRQ's ring record, held apart so that reading it never borrows
    /// the SRQ a post may be borrowing mutably.
    ring: Arc<RecvRing>,
}

impl DirectSrq {
    /// `n` ports on this SRQ (one per QP); the SRQ lives until the last
    /// port is dropped.
    pub fn share(self, n: usize) -> Vec<SrqPort> {
        let ring = Arc::clone(&self.ring);
        let srq = Rc::new(UnsafeCell::new(self));
        (0..n)
            .map(|_| SrqPort {
                srq: Rc::clone(&srq),
                ring: Arc::clone(&ring),
            })
            .collect()
    }
}

impl SrqPort {
    /// The ring record the CQ poller completes this SRQ's WQEs from.
    pub fn ring(&self) -> &Arc<RecvRing> {
        &self.ring
    }

    #[inline(always)]
    fn with<T>(&mut self, f: impl FnOnce(&mut DirectSrq) -> T) -> T {
        // SAFETY: the only reference into the SRQ while `f` runs: nothing
        // outside this function ever borrows it (`ring` is held apart), all
        // ports are on this thread (Rc is neither Send nor Sync), and `f`,
        // a post of this module, does not reach another port.
        f(unsafe { &mut *self.srq.get() })
    }
}

impl RecvQueue for SrqPort {
    #[inline(always)]
    fn post_recv(&mut self, wr_id: u64, addr: u64, lkey: u32, len: u32) -> Result<(), PostError> {
        self.with(|s| s.post_recv(wr_id, addr, lkey, len))
    }

    #[inline(always)]
    fn post_recv_list(
        &mut self,
        n: usize,
        wr_id: u64,
        lkey: u32,
        len: u32,
        addr: impl Fn(usize) -> u64,
    ) -> Result<(), PostError> {
        self.with(|s| s.post_recv_list(n, wr_id, lkey, len, addr))
    }
}
