//! The fakes both raw latency loops' tests drive (`raw_lat_tests`,
//! `raw_burst_lat_tests`): one wire shared by a send queue, a receive
//! queue and two CQs, with a fake peer that answers every `every`-th frame
//! (or stops answering from a reply on), and a ticking clock.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

use super::raw_bw::RawPost;
use super::raw_lat::{RawQp, RxRing};
use crate::mlx5::raw_sq::RawPkt;
use crate::post::wc::poll_queued;
use crate::post::{Completion, CompletionQueue, PostError, RecvQueue, WcOpcode, WcStatus};

#[derive(Default)]
pub struct Wire {
    /// (addr, first, signal) per post.
    pub posts: Vec<(u64, u64, bool)>,
    /// (wr_id, addr) per receive posted.
    pub reposts: Vec<(u64, u64)>,
    pub sends: VecDeque<Completion>,
    pub recvs: VecDeque<Completion>,
    /// The fake peer answers every `every`-th frame (0: never).
    pub every: u64,
    /// No reply from this one on (1-based; 0: all).
    pub drop_from: u64,
    /// Send completions held back (a client's `-t` window fills).
    pub hold_sends: bool,
}
pub type Shared = Rc<RefCell<Wire>>;

/// A wire whose peer answers every `every`-th frame.
pub fn answering(every: u64) -> Shared {
    let w = Shared::default();
    w.borrow_mut().every = every;
    w
}

/// The frames (1-based) whose post asked for a completion.
pub fn signalled(w: &Shared) -> Vec<u64> {
    let w = w.borrow();
    w.posts.iter().filter(|p| p.2).map(|p| p.1 + 1).collect()
}

/// A received frame in receive slot `slot`.
pub fn recv_wc(slot: u64) -> Completion {
    Completion {
        wr_id: slot,
        opcode: WcOpcode::RECV,
        status: WcStatus::SUCCESS,
        byte_len: 60,
        ..Completion::default()
    }
}

/// Each signalled post completes with the frames posted up to it; reply
/// `r` lands in slot `(r - 1) % 4`.
pub struct Sq(pub Shared);
impl RawPost for Sq {
    fn post_frames(&mut self, p: &[RawPkt], first: u64, signal: bool) -> Result<(), PostError> {
        let mut w = self.0.borrow_mut();
        w.posts.push((p[0].addr, first, signal));
        if signal && !w.hold_sends {
            w.sends.push_back(Completion {
                wr_id: first + 1,
                status: WcStatus::SUCCESS,
                ..Completion::default()
            });
        }
        let n = first + 1;
        let r = n / w.every.max(1);
        if w.every != 0 && n % w.every == 0 && (w.drop_from == 0 || r < w.drop_from) {
            w.recvs.push_back(recv_wc((r - 1) % 4));
        }
        Ok(())
    }
}
pub struct Rq(pub Shared);
impl RecvQueue for Rq {
    fn post_recv(&mut self, wr_id: u64, addr: u64, _: u32, _: u32) -> Result<(), PostError> {
        self.0.borrow_mut().reposts.push((wr_id, addr));
        Ok(())
    }
}
pub struct Scq(pub Shared);
impl CompletionQueue for Scq {
    fn poll(&mut self, out: &mut [Completion]) -> Result<usize, PostError> {
        Ok(poll_queued(&mut self.0.borrow_mut().sends, out))
    }
}
pub struct Rcq(pub Shared);
impl CompletionQueue for Rcq {
    fn poll(&mut self, out: &mut [Completion]) -> Result<usize, PostError> {
        Ok(poll_queued(&mut self.0.borrow_mut().recvs, out))
    }
}

/// Four receive slots of 128 bytes.
pub const RX: RxRing = RxRing {
    base: 0x10_000,
    stride: 128,
    room: 128,
    slots: 4,
    lkey: 7,
};
pub const ONE: [RawPkt; 1] = [RawPkt {
    addr: 0x1000,
    len: 60,
}];

/// The fake QP's receive queue and CQs on one wire.
pub struct Queues(pub Rq, pub Scq, pub Rcq);

impl Queues {
    pub fn on(w: &Shared) -> Queues {
        Queues(Rq(w.clone()), Scq(w.clone()), Rcq(w.clone()))
    }

    /// The QP a loop drives, sending `frames` with `sq`.
    pub fn qp<'a, P>(
        &'a mut self,
        sq: &'a mut P,
        frames: &'a [RawPkt],
    ) -> RawQp<'a, P, Rq, Scq, Rcq> {
        let Queues(rq, scq, rcq) = self;
        RawQp::new((sq, scq), (rq, rcq), (frames, RX))
    }
}

/// A clock that moves `step` ticks at each reading.
pub fn ticking(tick: &Cell<u64>, step: u64) -> impl Fn() -> u64 + '_ {
    move || {
        tick.set(tick.get() + step);
        tick.get()
    }
}
