//! The burst latency loop on fakes: a peer that answers every
//! `--reply_every`-th frame (or stops answering), the bursts under `-t`,
//! the stamps, the signalled sends and the stall.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::Rc;

use super::lat::LatError;
use super::raw_burst_lat::*;
use super::raw_bw::RawPost;
use super::raw_lat::RxRing;
use crate::mlx5::raw_sq::RawPkt;
use crate::post::wc::poll_queued;
use crate::post::{Completion, CompletionQueue, PostError, RecvQueue, WcOpcode, WcStatus};

#[derive(Default)]
struct Wire {
    /// (first, signal) per post.
    posts: Vec<(u64, bool)>,
    reposts: u64,
    sends: VecDeque<Completion>,
    recvs: VecDeque<Completion>,
    /// The fake peer: replies to every `every`-th frame (0: never).
    every: u64,
    /// No reply from this one on (1-based; 0: all).
    drop_from: u64,
    /// Send completions held back (the client's `-t` window).
    hold_sends: bool,
}
type Shared = Rc<RefCell<Wire>>;

fn recv_wc(slot: u64) -> Completion {
    Completion {
        wr_id: slot,
        opcode: WcOpcode::RECV,
        status: WcStatus::SUCCESS,
        byte_len: 60,
        ..Completion::default()
    }
}

struct Sq(Shared);
impl RawPost for Sq {
    fn post_frames(&mut self, _: &[RawPkt], first: u64, signal: bool) -> Result<(), PostError> {
        let mut w = self.0.borrow_mut();
        w.posts.push((first, signal));
        if signal && !w.hold_sends {
            w.sends.push_back(Completion {
                wr_id: first + 1,
                status: WcStatus::SUCCESS,
                ..Completion::default()
            });
        }
        let n = first + 1;
        let reply = w.every != 0 && n % w.every == 0;
        let r = n / w.every.max(1);
        if reply && (w.drop_from == 0 || r < w.drop_from) {
            w.recvs.push_back(recv_wc(r % 4));
        }
        Ok(())
    }
}
struct Rq(Shared);
impl RecvQueue for Rq {
    fn post_recv(&mut self, _: u64, _: u64, _: u32, _: u32) -> Result<(), PostError> {
        self.0.borrow_mut().reposts += 1;
        Ok(())
    }
}
struct Scq(Shared);
impl CompletionQueue for Scq {
    fn poll(&mut self, out: &mut [Completion]) -> Result<usize, PostError> {
        Ok(poll_queued(&mut self.0.borrow_mut().sends, out))
    }
}
struct Rcq(Shared);
impl CompletionQueue for Rcq {
    fn poll(&mut self, out: &mut [Completion]) -> Result<usize, PostError> {
        Ok(poll_queued(&mut self.0.borrow_mut().recvs, out))
    }
}

fn cfg(iters: u64, burst: u64, every: u64, initiator: bool) -> BurstLatConfig {
    BurstLatConfig {
        iters,
        initiator,
        burst,
        reply_every: every,
        tx_depth: 128,
        cq_mod: 1,
        stall_ticks: 10_000,
        frame_len: 60,
    }
}

const RX: RxRing = RxRing {
    base: 0x10_000,
    stride: 128,
    room: 128,
    slots: 4,
    lkey: 7,
};
const ONE: [RawPkt; 1] = [RawPkt {
    addr: 0x1000,
    len: 60,
}];

type Ran = (super::lat::LatOutcome, BurstCounts, Vec<u64>, Vec<u64>);

fn run(c: BurstLatConfig, w: &Shared) -> Ran {
    let mut tposted = vec![0u64; c.replies() as usize];
    let mut tcompleted = vec![0u64; c.replies() as usize];
    let tick = Cell::new(0u64);
    let (mut sq, mut rq) = (Sq(w.clone()), Rq(w.clone()));
    let (mut scq, mut rcq) = (Scq(w.clone()), Rcq(w.clone()));
    let (out, n) = BurstLatLoop {
        cfg: c,
        sq: &mut sq,
        scq: &mut scq,
        rq: &mut rq,
        rcq: &mut rcq,
        frames: &ONE,
        rx: RX,
        tposted: &mut tposted,
        tcompleted: &mut tcompleted,
        now: || {
            tick.set(tick.get() + 1);
            tick.get()
        },
    }
    .run();
    (out, n, tposted, tcompleted)
}

#[test]
fn the_client_sends_n_and_takes_n_over_reply_every() {
    for (iters, burst, every) in [
        (100, 10, 1),
        (100, 16, 4),
        (96, 32, 8),
        (50, 7, 3),
        (9, 1, 9),
    ] {
        let w = Shared::default();
        w.borrow_mut().every = every;
        let (out, n, tp, tc) = run(cfg(iters, burst, every, true), &w);
        assert_eq!(out.error, None, "{iters}/{burst}/{every}");
        assert_eq!(n.sent, iters);
        assert_eq!(n.completed, iters);
        assert_eq!(n.received, iters / every);
        assert_eq!(
            w.borrow().reposts,
            iters / every,
            "every receive posted again"
        );
        // Each reply arrives after its stamped send.
        assert!(
            tp.iter().zip(&tc).all(|(p, c)| *p > 0 && c > p),
            "{tp:?} {tc:?}"
        );
    }
}

#[test]
fn a_burst_stops_at_tx_depth_until_completions_come() {
    let w = Shared::default();
    w.borrow_mut().hold_sends = true;
    w.borrow_mut().every = 1;
    let mut c = cfg(40, 32, 1, true);
    c.tx_depth = 8;
    c.stall_ticks = 500;
    let (out, n, _, _) = run(c, &w);
    assert_eq!(n.sent, 8, "no more than -t outstanding");
    assert_eq!(n.received, 8);
    assert_eq!(out.error, Some(LatError::Stalled { at: 9 }));
}

#[test]
fn every_cq_mod_th_send_and_the_last_are_signalled() {
    let w = Shared::default();
    w.borrow_mut().every = 1;
    let mut c = cfg(10, 4, 1, true);
    c.cq_mod = 3;
    let (out, n, _, _) = run(c, &w);
    assert_eq!(out.error, None);
    assert_eq!(n.completed, 10);
    let sig: Vec<u64> = w
        .borrow()
        .posts
        .iter()
        .filter(|p| p.1)
        .map(|p| p.0 + 1)
        .collect();
    assert_eq!(sig, [3, 6, 9, 10]);
}

#[test]
fn a_dropped_reply_is_a_stall_naming_it() {
    let w = Shared::default();
    w.borrow_mut().every = 4;
    w.borrow_mut().drop_from = 5;
    let (out, n, _, _) = run(cfg(64, 16, 4, true), &w);
    assert_eq!(out.error, Some(LatError::Stalled { at: 5 }));
    assert_eq!((n.sent, n.received), (64, 4));
}

#[test]
fn the_server_replies_every_reply_every_th_frame() {
    for (iters, every) in [(100, 1), (100, 4), (50, 3)] {
        let w = Shared::default();
        w.borrow_mut()
            .recvs
            .extend((0..iters).map(|k| recv_wc(k % 4)));
        let (out, n, _, _) = run(cfg(iters, 8, every, false), &w);
        assert_eq!(out.error, None);
        assert_eq!((n.received, n.sent), (iters, iters / every));
        assert!(w.borrow().posts.iter().all(|p| p.1), "each reply signalled");
        assert_eq!(w.borrow().reposts, iters);
    }
}

#[test]
fn the_server_waits_for_its_first_frame_then_stalls_on_a_gap() {
    let w = Shared::default();
    w.borrow_mut().recvs.extend((0..3).map(recv_wc));
    let mut c = cfg(10, 8, 1, false);
    c.stall_ticks = 500;
    let (out, n, _, _) = run(c, &w);
    assert_eq!(out.error, Some(LatError::Stalled { at: 4 }));
    assert_eq!(n.received, 3);
}
