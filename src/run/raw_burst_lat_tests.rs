//! The burst latency loop on fakes: a peer that answers every
//! `--reply_every`-th frame (or stops answering), the bursts under `-t`,
//! the stamps, the signalled sends and the stall.

use std::cell::Cell;

use super::lat::LatError;
use super::raw_burst_lat::*;
use super::raw_lat_fakes::*;

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

type Ran = (super::lat::LatOutcome, BurstCounts, Vec<u64>, Vec<u64>);

fn run(c: BurstLatConfig, w: &Shared) -> Ran {
    let mut tposted = vec![0u64; c.replies() as usize];
    let mut tcompleted = vec![0u64; c.replies() as usize];
    let tick = Cell::new(0u64);
    let (mut sq, mut q) = (Sq(w.clone()), Queues::on(w));
    let (out, n) = BurstLatLoop {
        cfg: c,
        qp: q.qp(&mut sq, &ONE),
        tposted: &mut tposted,
        tcompleted: &mut tcompleted,
        now: ticking(&tick, 1),
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
        let w = answering(every);
        let (out, n, tp, tc) = run(cfg(iters, burst, every, true), &w);
        assert_eq!(out.error, None, "{iters}/{burst}/{every}");
        assert_eq!(n.sent, iters);
        assert_eq!(n.completed, iters);
        assert_eq!(n.received, iters / every);
        assert_eq!(
            w.borrow().reposts.len() as u64,
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
    let w = answering(1);
    w.borrow_mut().hold_sends = true;
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
    let w = answering(1);
    let mut c = cfg(10, 4, 1, true);
    c.cq_mod = 3;
    let (out, n, _, _) = run(c, &w);
    assert_eq!(out.error, None);
    assert_eq!(n.completed, 10);
    assert_eq!(signalled(&w), [3, 6, 9, 10]);
}

#[test]
fn a_dropped_reply_is_a_stall_naming_it() {
    let w = answering(4);
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
        assert!(w.borrow().posts.iter().all(|p| p.2), "each reply signalled");
        assert_eq!(w.borrow().reposts.len() as u64, iters);
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

/// A server with `-t 2` given 20 frames at once; its send completions
/// come at once, or (`hold`) never.
fn flooded_server(hold: bool) -> Ran {
    let w = Shared::default();
    w.borrow_mut().recvs.extend((0..20).map(recv_wc));
    w.borrow_mut().hold_sends = hold;
    let mut c = cfg(20, 8, 1, false);
    (c.tx_depth, c.stall_ticks) = (2, 500);
    run(c, &w)
}

#[test]
fn the_server_skips_a_reply_only_while_t_replies_are_in_flight() {
    // The send CQ is read before a reply is skipped: each frame answered.
    let (out, n, _, _) = flooded_server(false);
    assert_eq!(out.error, None);
    assert_eq!((n.received, n.sent, n.completed), (20, 20, 20));
    // Completions that never come: two replies, the rest skipped, and the
    // wait for those two's completions at the end is a stall.
    let (out, n, _, _) = flooded_server(true);
    assert_eq!((n.received, n.sent, n.completed), (20, 2, 0));
    assert_eq!(out.error, Some(LatError::Stalled { at: 20 }));
}
