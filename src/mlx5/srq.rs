//! A shared receive queue posted directly (`mlx5_post_srq_recv` without
//! libmlx5, rdma-core v44's linked list): each WQE starts with a next segment
//! whose `next_wqe_index` chains the free WQEs from `head` to the sentinel
//! `tail`, which is never posted (`head == tail`: full). Posting takes the
//! WQE at `head` and moves `head` along its link; the CQ poller gives a
//! completed WQE back by linking it behind the sentinel and making it the new
//! sentinel (`RecvRing::complete`). The doorbell record is one word: the
//! 16-bit count of WQEs posted (libmlx5's value; UCX writes one less).
//!
//! The ring is `tail + 1` WQEs (libmlx5 creates the SRQ with head 0 and
//! `tail = roundup_pow2(max_wr + 1) - 1`; the ODP wait queue behind them is
//! never used here). Memory ordering as the RQ: WQE stores, store barrier,
//! record.

use core::cell::Cell;
use std::rc::Rc;
use std::sync::Arc;

use super::error::DirectError;
use super::keepalive::KeepAlive;
use super::mmio::{HwMmio, Mmio};
use super::recv::{layout_error, RecvDoor, RecvKind, RecvRing, DATA_SEG, SRQ_NEXT_SEG};
use crate::post::{PostError, RecvList, RecvQueue};
use crate::sys::mlx5dv_srq;

/// A directly posted SRQ; completions come through every
/// [`DirectCq`](super::cq::DirectCq) one of its QPs completes on.
pub struct DirectSrq<M: Mmio = HwMmio> {
    /// The ring and the record (one word).
    door: RecvDoor<M>,
    /// Next free WQE. The producer state is in `Cell`s so that posting
    /// takes `&self`: the ports of a shared SRQ ([`SrqPort`]) each post
    /// through a shared reference, never a `&mut` that another port's post
    /// could alias.
    head: Cell<u16>,
    /// WQEs posted (16 bits, as the record holds them).
    counter: Cell<u16>,
    srqn: u32,
}

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

impl<M: Mmio> DirectSrq<M> {
    /// Builds the SRQ from what `mlx5dv_init_obj` returned, storing the
    /// record through `mmio` ([`HwMmio`] on a device, the model's recorder
    /// in tests), and links its WQEs `0 -> 1 -> … -> tail` (as libmlx5 did
    /// at create).
    ///
    /// # Safety
    /// The SRQ's buffer and record must stay valid while this lives
    /// (`keepalive`), nothing may be posted yet, and nothing else may post
    /// to it (no `ibv_post_srq_recv`).
    pub unsafe fn from_dv(
        srq: &mlx5dv_srq,
        srqn: u32,
        keepalive: KeepAlive,
        mmio: M,
    ) -> Result<Self, DirectError> {
        check_srq_layout(srq)?;
        let tail = srq.tail as u16;
        let shift = srq.stride.trailing_zeros();
        // SAFETY: tail + 1 strides (checked), exclusive (caller contract),
        // and so is the record.
        let door = unsafe {
            RecvDoor::new(
                (srq.buf, srq.dbrec),
                "srq.buf/dbrec is null (internal: checked by check_srq_layout)",
                |buf| RecvRing::new(RecvKind::Srq, buf, shift, tail as u32 + 1, tail),
                keepalive,
                mmio,
            )
        }?;
        door.ring.link_all(tail);
        Ok(Self {
            door,
            head: Cell::new(0),
            counter: Cell::new(0),
            srqn,
        })
    }

    /// The record the CQ poller completes from (attach it per QP).
    pub fn ring(&self) -> &Arc<RecvRing> {
        &self.door.ring
    }
    /// The SRQ number.
    pub fn srqn(&self) -> u32 {
        self.srqn
    }
    /// WQEs posted so far (16 bits).
    pub fn posted(&self) -> u16 {
        self.counter.get()
    }

    /// Writes one WR into the WQE at `head` and moves `head` along its link
    /// (no doorbell). Runs no caller code between reading and moving
    /// `head`.
    #[inline(always)]
    fn take(&self, wr_id: u64, addr: u64, lkey: u32, len: u32) -> Result<(), PostError> {
        let (slot, ring) = (self.head.get(), &self.door.ring);
        if slot == ring.tail() {
            return Err(PostError::QueueFull);
        }
        ring.shape().write(slot as u32, wr_id, addr, lkey, len);
        self.head.set(ring.next_of(slot));
        self.counter.set(self.counter.get().wrapping_add(1));
        Ok(())
    }

    #[inline(always)]
    fn doorbell(&self) {
        self.door.ring_at(self.counter.get() as u32);
    }

    /// Posts one receive and rings the record.
    #[inline(always)]
    fn post_one(&self, wr_id: u64, addr: u64, lkey: u32, len: u32) -> Result<(), PostError> {
        self.take(wr_id, addr, lkey, len)?;
        self.doorbell();
        Ok(())
    }

    /// Posts `n` receives, one record store for the list; a full SRQ ends
    /// it early (the WRs before are posted and rung, as libmlx5 reports
    /// ENOMEM for the first WR that did not fit). `addr(k)` runs before
    /// each WQE is taken, never while one is half written.
    #[inline(always)]
    fn post_list(&self, list: &RecvList<impl Fn(usize) -> u64>) -> Result<(), PostError> {
        let mut res = Ok(());
        let start = self.counter.get();
        for k in 0..list.n {
            let a = (list.addr)(k);
            res = self.take(list.wr_id, a, list.lkey, list.len);
            if res.is_err() {
                break;
            }
        }
        if self.counter.get() != start {
            self.doorbell();
        }
        res
    }
}

impl<M: Mmio> RecvQueue for DirectSrq<M> {
    #[inline]
    fn post_recv(&mut self, wr_id: u64, addr: u64, lkey: u32, len: u32) -> Result<(), PostError> {
        self.post_one(wr_id, addr, lkey, len)
    }

    #[inline]
    fn post_recv_list(&mut self, list: &RecvList<impl Fn(usize) -> u64>) -> Result<(), PostError> {
        self.post_list(list)
    }
}

/// One QP's handle on an SRQ that several QPs post to ([`DirectSrq::share`]):
/// the receive loops keep one receive queue per QP and post to the one
/// whose message completed, as they do with verbs' per-QP SRQ posters.
/// All ports of one SRQ live on one thread (`Rc`: neither `Send` nor
/// `Sync`); each posts through `&DirectSrq` (its producer state is in
/// `Cell`s), so a port holds no `&mut` that a post through another port,
/// even one made from inside a post list's address closure, could alias.
pub struct SrqPort<M: Mmio = HwMmio> {
    srq: Rc<DirectSrq<M>>,
}

impl<M: Mmio> DirectSrq<M> {
    /// `n` ports on this SRQ (one per QP); the SRQ lives until the last
    /// port is dropped.
    pub fn share(self, n: usize) -> Vec<SrqPort<M>> {
        let srq = Rc::new(self);
        (0..n)
            .map(|_| SrqPort {
                srq: Rc::clone(&srq),
            })
            .collect()
    }
}

impl<M: Mmio> SrqPort<M> {
    /// The ring record the CQ poller completes this SRQ's WQEs from.
    pub fn ring(&self) -> &Arc<RecvRing> {
        &self.srq.door.ring
    }
    /// WQEs posted to the SRQ so far, through any port (16 bits).
    pub fn posted(&self) -> u16 {
        self.srq.posted()
    }
}

impl<M: Mmio> RecvQueue for SrqPort<M> {
    #[inline(always)]
    fn post_recv(&mut self, wr_id: u64, addr: u64, lkey: u32, len: u32) -> Result<(), PostError> {
        self.srq.post_one(wr_id, addr, lkey, len)
    }

    #[inline(always)]
    fn post_recv_list(&mut self, list: &RecvList<impl Fn(usize) -> u64>) -> Result<(), PostError> {
        self.srq.post_list(list)
    }
}
