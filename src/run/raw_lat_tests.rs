//! The raw ping-pong on fakes: a peer that answers each frame at once (or
//! drops one), the stamps, the signalled sends, the reposts and the stall.

use std::cell::Cell;

use super::lat::LatError;
use super::raw_lat::*;
use super::raw_lat_fakes::*;
use crate::mlx5::raw_sq::RawPkt;
use crate::post::{Completion, PostError, WcStatus};

fn cfg(iters: u64, initiator: bool, cq_mod: u64) -> RawLatConfig {
    RawLatConfig {
        iters,
        initiator,
        cq_mod,
        rx_depth: 4,
        stall_ticks: 10_000,
        frame_len: 60,
        end: 0,
        sample_start: 0,
        sample_stop: 0,
    }
}

fn run(c: RawLatConfig, w: &Shared, frames: &[RawPkt]) -> (super::lat::LatOutcome, Vec<u64>) {
    let mut tposted = vec![0u64; c.iters as usize];
    let tick = Cell::new(0u64);
    let (mut sq, mut q) = (Sq(w.clone()), Queues::on(w));
    let out = RawLatLoop {
        cfg: c,
        qp: q.qp(&mut sq, frames),
        tposted: &mut tposted,
        now: ticking(&tick, 1),
    }
    .run();
    (out, tposted)
}

#[test]
fn the_client_sends_first_and_takes_every_reply() {
    let w = answering(1);
    let (out, tposted) = run(cfg(10, true, 1), &w, &ONE);
    assert_eq!(out.error, None);
    assert_eq!(out.iters, 10);
    let w = w.borrow();
    assert_eq!(w.posts.len(), 10);
    assert!(
        w.posts.iter().all(|p| p.2),
        "cq_mod 1: every send signalled"
    );
    assert!(
        w.recvs.is_empty() && w.sends.is_empty(),
        "every reply taken"
    );
    assert!(tposted.windows(2).all(|s| s[1] > s[0]), "{tposted:?}");
    // rcnt + rx_depth <= iters: replies 1..=6 post their slot again.
    assert_eq!(w.reposts.len(), 6);
    assert_eq!(w.reposts[0], (0, RX.base));
    assert_eq!(w.reposts[1], (1, RX.base + 128));
}

#[test]
fn the_server_waits_first() {
    let w = answering(1);
    w.borrow_mut().recvs.push_back(recv_wc(3));
    let (out, _) = run(cfg(5, false, 1), &w, &ONE);
    assert_eq!(out.error, None);
    assert_eq!(out.iters, 5);
    let w = w.borrow();
    assert_eq!(w.posts.len(), 5);
    // The fake answers the 5th reply too: one frame left, as a client's
    // next frame would be.
    assert_eq!(w.recvs.len(), 1);
    assert_eq!(w.reposts[0], (3, RX.base + 3 * 128));
}

#[test]
fn every_cq_mod_th_send_and_the_last_are_signalled() {
    let w = answering(1);
    let (out, _) = run(cfg(10, true, 3), &w, &ONE);
    assert_eq!(out.error, None);
    assert_eq!(signalled(&w), [3, 6, 9, 10]);
}

#[test]
fn the_flows_frames_go_in_turn() {
    let frames = [0x1000, 0x2000, 0x3000].map(|addr| RawPkt { addr, len: 60 });
    let w = answering(1);
    let (out, _) = run(cfg(5, true, 1), &w, &frames);
    assert_eq!(out.error, None);
    let addrs: Vec<u64> = w.borrow().posts.iter().map(|p| p.0).collect();
    assert_eq!(addrs, [0x1000, 0x2000, 0x3000, 0x1000, 0x2000]);
}

#[test]
fn a_lost_frame_is_a_stall_at_its_round_trip() {
    let w = answering(1);
    w.borrow_mut().drop_from = 4;
    let (out, _) = run(cfg(10, true, 1), &w, &ONE);
    assert_eq!(out.error, Some(LatError::Stalled { at: 4 }));
    assert_eq!(out.iters, 4, "frame 4 was sent, its reply never came");
}

#[test]
fn a_send_waits_for_its_own_completion() {
    // An unasked CQE for frame 1 (the direct SQ's own cadence) does not
    // stand for frame 3's.
    let w = answering(1);
    w.borrow_mut().sends.push_back(Completion {
        wr_id: 1,
        status: WcStatus::SUCCESS,
        ..Completion::default()
    });
    let (out, _) = run(cfg(6, true, 3), &w, &ONE);
    assert_eq!(out.error, None);
    assert!(w.borrow().sends.is_empty());
}

#[test]
fn a_failed_send_stops_the_run() {
    let w = answering(1);
    w.borrow_mut().sends.push_back(Completion {
        wr_id: 1,
        status: WcStatus(4),
        ..Completion::default()
    });
    let (out, _) = run(cfg(6, true, 1), &w, &ONE);
    assert!(matches!(out.error, Some(LatError::Completion { .. })));
    assert_eq!(out.iters, 1);
}

#[test]
fn a_server_waits_for_its_client_without_a_stall() {
    // Nothing ever arrives: far past the stall allowance, the server is
    // still waiting when its -D time ends; a client would have stalled.
    let w = answering(1);
    let mut c = cfg(10, false, 1);
    (c.end, c.sample_start, c.sample_stop) = (2_000_000, 1, 2);
    let tick = Cell::new(0u64);
    let (mut sq, mut q) = (Sq(w.clone()), Queues::on(&w));
    let mut run = |c: RawLatConfig| {
        RawLatLoop {
            cfg: c,
            qp: q.qp(&mut sq, &ONE),
            tposted: &mut [],
            now: ticking(&tick, 1000),
        }
        .run()
    };
    let out = run(c);
    assert_eq!(out.error, None);
    assert!(tick.get() >= 2_000_000, "ended by -D");
    assert_eq!(out.iters, 0);
    // The client's first reply has the stall allowance.
    (c.initiator, c.end) = (true, 0);
    w.borrow_mut().drop_from = 1;
    let out = run(c);
    assert_eq!(out.error, Some(LatError::Stalled { at: 1 }));
}

/// A verbs send queue: each signalled SEND completes with its own `wr_id`
/// (as `ibv_poll_cq` gives it back); the peer answers each frame.
struct VerbsSq(Shared);
impl crate::post::SendQueue for VerbsSq {
    fn post(&mut self, op: crate::post::Op, wrs: &[crate::post::WrDesc]) -> Result<(), PostError> {
        assert_eq!(op, crate::post::Op::Send);
        let mut w = self.0.borrow_mut();
        for d in wrs {
            w.posts.push((d.laddr, d.wr_id, d.signaled));
            if d.signaled {
                w.sends.push_back(Completion {
                    wr_id: d.wr_id,
                    status: WcStatus::SUCCESS,
                    ..Completion::default()
                });
            }
            w.recvs.push_back(recv_wc(0));
        }
        Ok(())
    }
}

#[test]
fn the_verbs_posts_wr_ids_retire_their_own_frames() {
    // post-send/wr-api (`raw_bw::Verbs`): the wr_id of frame k is k + 1,
    // the count the loop waits for; with -Q 4 only every 4th is asked.
    let w = answering(1);
    let mut sq = super::raw_bw::Verbs {
        sq: VerbsSq(w.clone()),
        qp: 0,
        lkey: 1,
        inline_max: 0,
        descs: vec![crate::post::WrDesc::default(); 1].into_boxed_slice(),
    };
    let mut q = Queues::on(&w);
    let tick = Cell::new(0u64);
    let out = RawLatLoop {
        cfg: cfg(9, true, 4),
        qp: q.qp(&mut sq, &ONE),
        tposted: &mut [0; 9],
        now: ticking(&tick, 1),
    }
    .run();
    assert_eq!(out.error, None);
    let w = w.borrow();
    let asked: Vec<u64> = w.posts.iter().filter(|p| p.2).map(|p| p.1).collect();
    assert_eq!(asked, [4, 8, 9]);
    assert!(w.sends.is_empty(), "every asked completion taken");
}
