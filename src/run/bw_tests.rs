//! Tests of the bw loop against a mock queue pair that completes signaled WRs
//! after a configurable lag and checks the window is never exceeded.

use super::bw::*;
use super::period::PeriodLog;
use crate::post::{Completion, CompletionQueue, Op, PostError, SendQueue, WcStatus, WrDesc};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

#[derive(Default)]
struct Nic {
    pending: VecDeque<Completion>,
    posted: Vec<WrDesc>,
    outstanding: u64,
    max_outstanding: u64,
    fail_at: Option<u64>,
}

struct MockSq(Rc<RefCell<Nic>>);
struct MockCq(Rc<RefCell<Nic>>);

impl SendQueue for MockSq {
    fn post(&mut self, op: Op, wrs: &[WrDesc]) -> Result<(), PostError> {
        assert_eq!(op, Op::Write);
        let mut n = self.0.borrow_mut();
        for w in wrs {
            n.outstanding += 1;
            n.max_outstanding = n.max_outstanding.max(n.outstanding);
            let idx = n.posted.len() as u64;
            n.posted.push(*w);
            if w.signaled || n.fail_at == Some(idx) {
                let status = if n.fail_at == Some(idx) {
                    WcStatus::REM_ACCESS_ERR
                } else {
                    WcStatus::SUCCESS
                };
                n.pending.push_back(Completion {
                    wr_id: w.wr_id,
                    status,
                    vendor_err: 0x88,
                    ..Default::default()
                });
            }
        }
        Ok(())
    }
}

impl CompletionQueue for MockCq {
    fn poll(&mut self, out: &mut [Completion]) -> Result<usize, PostError> {
        let mut n = self.0.borrow_mut();
        let k = out.len().min(n.pending.len());
        for (slot, c) in out.iter_mut().zip(n.pending.drain(..k)) {
            *slot = c;
        }
        // Retire everything up to the last completion (all earlier WRs are done).
        if k > 0 {
            let done = n
                .posted
                .iter()
                .position(|w| w.wr_id == out[k - 1].wr_id)
                .unwrap() as u64
                + 1;
            let posted = n.posted.len() as u64;
            n.outstanding = posted - done;
        }
        Ok(k)
    }
}

fn cfg(iters: u64, post_list: u32, cq_mod: u32) -> BwConfig {
    BwConfig {
        op: Op::Write,
        size: 64,
        iters,
        post_list,
        tx_depth: 16,
        cq_mod,
        inline: false,
        positions: 64,
        step: 64,
        stall_ticks: u64::MAX,
        cost: true,
    }
}

fn run(c: BwConfig, nic: Rc<RefCell<Nic>>, peak: bool) -> (BwOutcome, Vec<u64>) {
    let n = if peak { c.iters as usize } else { 0 };
    let (mut tp, mut tc) = (vec![0u64; n], vec![0u64; n]);
    let sq = MockSq(nic.clone());
    let out = with_loop(
        c,
        sq,
        &mut MockCq(nic),
        (&mut tp, &mut tc),
        (None, None),
        |l| l.run(),
    );
    (out, tc)
}

/// The timestamps a loop fills (empty: none), and its duration window and
/// `--run_infinitely` log.
type Stamps<'a> = (&'a mut [u64], &'a mut [u64]);
type Timing<'a> = (Option<Deadlines>, Option<&'a PeriodLog>);

/// Builds the loop over one QP (`sq`) and `cq`, on a clock that ticks once
/// per reading, and hands it to `go`.
fn with_loop<C: CompletionQueue, R>(
    cfg: BwConfig,
    sq: MockSq,
    cq: &mut C,
    (tposted, tcompleted): Stamps<'_>,
    (deadlines, periods): Timing<'_>,
    go: impl FnOnce(&mut BwLoop<'_, MockSq, C, &dyn Fn() -> u64>) -> R,
) -> R {
    let targets = [QpTarget {
        laddr: 0x1000,
        lkey: 1,
        raddr: 0x10_0000,
        rkey: 2,
    }];
    let mut list = vec![WrDesc::default(); cfg.post_list as usize];
    let tick = std::cell::Cell::new(0u64);
    let now = || {
        tick.set(tick.get() + 1);
        tick.get()
    };
    go(&mut BwLoop {
        cfg,
        sqs: &mut [sq],
        cq,
        targets: &targets,
        counts: &mut [QpCount::default()],
        list: &mut list,
        wcs: &mut [Completion::default(); 16],
        tposted,
        tcompleted,
        deadlines,
        periods,
        now: &now,
    })
}

#[test]
fn iterations_complete_with_cq_mod_and_window() {
    let nic = Rc::new(RefCell::new(Nic::default()));
    let (out, _) = run(cfg(1000, 1, 10), nic.clone(), false);
    assert_eq!(out.error, None);
    assert_eq!(out.posted, 1000);
    assert_eq!(out.completed, 1000);
    let n = nic.borrow();
    assert!(
        n.max_outstanding <= 16,
        "window exceeded: {}",
        n.max_outstanding
    );
    let sig: Vec<usize> = n
        .posted
        .iter()
        .enumerate()
        .filter(|(_, w)| w.signaled)
        .map(|(i, _)| i)
        .collect();
    assert_eq!(sig.len(), 100);
    assert!(sig.iter().all(|i| i % 10 == 9));
    // Addresses cycle through 64 slots of 64 B, local and remote alike.
    assert_eq!(n.posted[1].raddr, 0x10_0000 + 64);
    assert_eq!(n.posted[64].raddr, 0x10_0000);
    assert_eq!(n.posted[65].laddr, 0x1000 + 64);
}

#[test]
fn last_message_is_always_signaled() {
    let nic = Rc::new(RefCell::new(Nic::default()));
    let (out, _) = run(cfg(25, 1, 10), nic.clone(), false);
    assert_eq!((out.posted, out.completed, out.error), (25, 25, None));
    assert!(nic.borrow().posted[24].signaled);
}

#[test]
fn post_lists_signal_statically_and_do_not_cycle() {
    let nic = Rc::new(RefCell::new(Nic::default()));
    let (out, _) = run(cfg(64, 8, 4), nic.clone(), false);
    assert_eq!((out.posted, out.completed), (64, 64));
    let n = nic.borrow();
    assert!(n.posted.iter().all(|w| w.raddr == 0x10_0000));
    let pattern: Vec<bool> = n.posted[..8].iter().map(|w| w.signaled).collect();
    assert_eq!(
        pattern,
        [false, false, false, true, false, false, false, true]
    );
}

#[test]
fn error_completion_stops_with_details() {
    let nic = Rc::new(RefCell::new(Nic {
        fail_at: Some(37),
        ..Default::default()
    }));
    let (out, _) = run(cfg(1000, 1, 10), nic, false);
    match out.error {
        Some(RunError::Completion { qp: 0, wr_id, wc }) => {
            assert_eq!(wr_id, wr_id_of(37));
            assert_eq!(wc.status, WcStatus::REM_ACCESS_ERR);
            assert_eq!(wc.vendor_err, 0x88);
        }
        other => panic!("expected an error completion, got {other:?}"),
    }
    assert!(out.completed < 1000);
}

fn wr_id_of(k: u64) -> u64 {
    wr_id(0, k)
}

#[test]
fn peak_timestamps_filled() {
    let nic = Rc::new(RefCell::new(Nic::default()));
    let (out, tc) = run(cfg(100, 1, 1), nic, true);
    assert_eq!(out.completed, 100);
    // One timed post call per message (post_list 1); the mock clock ticks once per read.
    assert_eq!(out.post_calls, 100);
    assert!(out.post_ticks >= out.post_calls);
    assert!(tc.iter().all(|&t| t > 0));
    assert!(tc.windows(2).all(|w| w[0] <= w[1]));
}

#[test]
fn stall_is_reported() {
    struct DeadCq;
    impl CompletionQueue for DeadCq {
        fn poll(&mut self, _: &mut [Completion]) -> Result<usize, PostError> {
            Ok(0)
        }
    }
    let nic = Rc::new(RefCell::new(Nic::default()));
    let mut c = cfg(100, 1, 1);
    c.stall_ticks = 1000;
    let out = with_loop(
        c,
        MockSq(nic),
        &mut DeadCq,
        (&mut [], &mut []),
        (None, None),
        |l| l.run(),
    );
    match out.error {
        Some(RunError::Stalled {
            qp: 0,
            outstanding: 16,
            last_completed: 0,
            ..
        }) => {}
        other => panic!("expected a stall, got {other:?}"),
    }
}

#[test]
fn run_infinitely_publishes_one_period_per_boundary() {
    let nic = Rc::new(RefCell::new(Nic::default()));
    // Periods of 1000 ticks; the run ends (like a stop would) at tick 3500.
    let log = PeriodLog::new(1000);
    let window = Deadlines {
        sample_start: 0,
        sample_stop: 3500,
        end: 3500,
    };
    let sq = MockSq(nic.clone());
    let timing = (Some(window), Some(&log));
    let out = with_loop(
        cfg(0, 1, 4),
        sq,
        &mut MockCq(nic),
        (&mut [], &mut []),
        timing,
        |l| l.run(),
    );
    let mut seen = 0;
    let rows: Vec<_> = std::iter::from_fn(|| log.next(&mut seen)).collect();
    assert_eq!(rows.len(), 3, "{rows:?}");
    for (i, r) in rows.iter().enumerate() {
        assert_eq!(r.index, i as u64);
        assert!(r.messages > 0 && r.t_end > r.t_start);
        if i > 0 {
            assert_eq!(r.t_start, rows[i - 1].t_end);
        }
    }
    // The periods account for every message completed up to the last boundary.
    let sum: u64 = rows.iter().map(|r| r.messages).sum();
    assert!(
        sum <= out.completed && out.completed - sum < 1000,
        "{sum} vs {}",
        out.completed
    );
}

/// A receive completion on the send CQ (a responder CQE, wr_id an RQ index
/// that reads as QP 0's message 5) stops the run instead of counting as five
/// of QP 0's messages.
#[test]
fn a_receive_completion_is_not_counted_for_qp_0() {
    let nic = Rc::new(RefCell::new(Nic::default()));
    nic.borrow_mut().pending.push_back(Completion {
        wr_id: 5,
        opcode: crate::post::WcOpcode::RECV,
        qp_num: 0x99,
        ..Default::default()
    });
    let (out, _) = run(cfg(1000, 1, 10), nic, false);
    match out.error {
        Some(RunError::Completion { wr_id: 5, wc, .. }) => {
            assert_eq!(wc.opcode, crate::post::WcOpcode::RECV);
        }
        other => panic!("expected the receive completion to stop the run, got {other:?}"),
    }
    assert_eq!(out.completed, 0, "the receive was counted");
}

/// The SW rate limiter in the loop: with `burst` messages every `gap` ticks
/// the run of N messages takes at least (N / burst - 1) gaps, and every
/// the same loop unpaced is much faster; the TX window still holds.
#[test]
fn sw_pace_holds_the_rate() {
    use super::pace::SwPace;
    let paced = |gap: Option<u64>| {
        let nic = Rc::new(RefCell::new(Nic::default()));
        let (sq, mut cq) = (MockSq(nic.clone()), MockCq(nic.clone()));
        let stamps: Stamps = (&mut [], &mut []);
        let out = with_loop(
            cfg(400, 1, 4),
            sq,
            &mut cq,
            stamps,
            (None, None),
            |lp| match gap {
                Some(g) => lp.run_paced(&mut SwPace::new(g, 8, 0)),
                None => lp.run(),
            },
        );
        assert_eq!((out.error, out.completed), (None, 400));
        let max = nic.borrow().max_outstanding;
        (out.t_end - out.t_start, max)
    };
    let (fast, _) = paced(None);
    let (slow, max) = paced(Some(1000));
    // 400 messages in bursts of 8: 50 bursts, 49 gaps at least.
    assert!(slow >= 49 * 1000, "paced run took {slow} ticks");
    assert!(slow > 10 * fast, "paced {slow} vs unpaced {fast}");
    assert!(max <= 16, "window {max}");
}
