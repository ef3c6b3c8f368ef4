//! The bidirectional SEND loop (perftest `run_iter_bi`): one loop that keeps
//! the TX window full on every QP (`scnt - ccnt + post_list <= tx_depth`)
//! while it polls the receive CQ and reposts receives. Generic over the post
//! method, the receive queue and the CQs, so it is monomorphised like the
//! other loops. Hot path: no allocation, no locks, no formatting, no panics.
//!
//! As in perftest, the server does not transmit before its first receive
//! (so a UC/UD client is never flooded before it has started), and its
//! duration window starts there; the client's starts at the loop's start.
//! In duration mode the measured count is receives plus send completions
//! inside the sample window, which is what perftest reports as iterations.
//! (The write/read duplex tests need no special loop: both sides run
//! [`super::bw::BwLoop`].)

use super::bw::{fill_list, BwConfig, BwOutcome, QpCount, QpTarget, RunError};
use super::recv::{
    post_next, recv_stall, wants_more, Phase, RecvBuf, RecvConfig, RxCount, Ticks, Window,
};
use super::watchdog::{self, Expiry};
use crate::post::{Completion, CompletionQueue, RecvQueue, SendQueue, WcStatus, WrDesc};

/// `wr_id` layout of [`wr_id`]: QP index above bit 48, 1-based sequence below.
const QP_SHIFT: u32 = 48;
const SEQ_MASK: u64 = (1 << QP_SHIFT) - 1;

/// Loop parameters: the send side, the receive side, and the role rule.
#[derive(Clone, Copy, Debug)]
pub struct DuplexConfig {
    /// `tx.iters` = messages per QP each way (0: duration).
    pub tx: BwConfig,
    pub rx: RecvConfig,
    /// Server: hold the first send until the first receive.
    pub wait_first_rx: bool,
    /// Duration mode: the window, relative to the start (client: loop start,
    /// server: first receive).
    pub window: Option<Window>,
}

/// What the loop measured. `tx` is the sender's view (perftest's report is
/// computed from it); in duration mode `tx.measured` counts sends completed
/// plus messages received inside the sample window.
#[derive(Clone, Copy, Debug, Default)]
pub struct DuplexOutcome {
    pub tx: BwOutcome,
    pub received: u64,
    /// `tx.error` came from the receive side (a receive completion or post).
    pub rx_error: bool,
}

/// Everything the loop works on, borrowed from the caller.
/// `C` is the send CQ's poller, `D` the receive CQ's (the direct receive
/// CQ also reposts ODP-faulted SRQ receives, so it may be another type).
pub struct DuplexLoop<'a, S, R, C, D, F> {
    pub cfg: DuplexConfig,
    pub sqs: &'a mut [S],
    pub rqs: &'a mut [R],
    pub scq: &'a mut C,
    pub rcq: &'a mut D,
    pub targets: &'a [QpTarget],
    pub bufs: &'a [RecvBuf],
    pub counts: &'a mut [QpCount],
    /// As left by [`super::recv::prepost`].
    pub rx_counts: &'a mut [RxCount],
    /// Scratch for one post list (len >= post_list).
    pub list: &'a mut [WrDesc],
    /// Scratch for one poll of each CQ.
    pub wcs: &'a mut [Completion],
    pub rwcs: &'a mut [Completion],
    /// Peak timestamps (len = total messages sent) or empty when the peak is off.
    pub tposted: &'a mut [u64],
    pub tcompleted: &'a mut [u64],
    pub now: F,
}

/// The loop must stop; why is already in the outcome (`tx.error`, `rx_error`).
struct Ended;

impl<S: SendQueue, R: RecvQueue, C: CompletionQueue, D: CompletionQueue, F: Fn() -> u64>
    DuplexLoop<'_, S, R, C, D, F>
{
    /// Run until every message was sent and received (or the duration's
    /// end), an error, a stall, or a stop request. One pass: the window's
    /// phase, every QP's TX window filled, the receive CQ drained (each
    /// receive reposted), the send CQ drained, the watchdog. The steps are
    /// `#[inline(always)]`: the pass compiles as the one loop it was.
    pub fn run(&mut self) -> DuplexOutcome {
        let nqp = self.nqp();
        let total = self.cfg.tx.iters * nqp as u64;
        let mut out = DuplexOutcome::default();
        let t0 = (self.now)();
        out.tx.t_start = t0;
        let mut p = Ticks::new(self.first_phase(), t0);
        loop {
            if out.tx.stop_requested() || self.window_over(&mut p, &mut out, total) {
                break;
            }
            if p.phase != Phase::BeforeFirst && self.fill_windows(&mut out, nqp).is_err() {
                break;
            }
            let Ok(rx_progress) = self.drain_receives(&mut p, &mut out, nqp) else {
                break;
            };
            let Ok(tx_progress) = self.drain_sends(&mut out, nqp) else {
                break;
            };
            if self
                .watch(&mut p, &mut out, rx_progress || tx_progress, total)
                .is_err()
            {
                break;
            }
        }
        self.close(&mut out, &p, t0);
        out
    }

    /// QPs the loop drives: every per-QP slice must have one.
    fn nqp(&self) -> usize {
        self.sqs
            .len()
            .min(self.rqs.len())
            .min(self.counts.len())
            .min(self.rx_counts.len())
            .min(self.bufs.len())
            .min(self.targets.len())
    }

    fn first_phase(&self) -> Phase {
        if self.cfg.wait_first_rx {
            Phase::BeforeFirst
        } else if self.cfg.window.is_some() {
            Phase::Warmup
        } else {
            Phase::Sample
        }
    }

    /// The duration window's arms (on a fresh clock reading only), or -n's end: `true` ends
    /// the loop.
    #[inline(always)]
    fn window_over(&mut self, p: &mut Ticks, out: &mut DuplexOutcome, total: u64) -> bool {
        let cfg = self.cfg;
        let (t, window) = if cfg.window.is_some() && p.fresh {
            p.fresh = false;
            ((self.now)(), cfg.window)
        } else {
            (0, None)
        };
        let done = out.tx.completed + out.received;
        match (window, p.phase) {
            (Some(w), Phase::Warmup) if t.wrapping_sub(p.t_first) >= w.margin => {
                p.phase = Phase::Sample;
                out.tx.t_start = t;
                p.sample_base = done;
            }
            (Some(w), Phase::Sample) if t.wrapping_sub(p.t_first) >= w.sample_stop => {
                p.phase = Phase::Cooldown;
                out.tx.t_end = t;
                out.tx.measured = done - p.sample_base;
            }
            (Some(w), Phase::Cooldown) if t.wrapping_sub(p.t_first) >= w.end => return true,
            (None, _) => {
                return cfg.window.is_none()
                    && out.tx.posted >= total
                    && out.tx.completed >= total
                    && out.received >= total
            }
            _ => {}
        }
        false
    }

    /// Keeps every QP's TX window full (`scnt - ccnt + post_list <= tx_depth`).
    #[inline(always)]
    fn fill_windows(&mut self, out: &mut DuplexOutcome, nqp: usize) -> Result<(), Ended> {
        let tx = self.cfg.tx;
        let pl = tx.post_list as u64;
        let peak = !self.tposted.is_empty();
        for q in 0..nqp {
            while (tx.iters == 0 || self.counts[q].scnt < tx.iters)
                && self.counts[q].scnt + pl <= tx.tx_depth as u64 + self.counts[q].ccnt
            {
                fill_list(
                    self.list,
                    &tx,
                    q,
                    self.targets[q],
                    self.counts[q].scnt,
                    false,
                );
                if peak {
                    if let Some(slot) = self.tposted.get_mut(out.tx.posted as usize) {
                        *slot = (self.now)();
                    }
                }
                let t_post = if tx.cost { (self.now)() } else { 0 };
                let posted = self.sqs[q].post(tx.op, &self.list[..tx.post_list as usize]);
                if tx.cost {
                    out.tx.post_ticks += (self.now)().wrapping_sub(t_post);
                    out.tx.post_calls += 1;
                }
                if let Err(err) = posted {
                    out.tx.error = Some(RunError::Post { qp: q as u32, err });
                    return Err(Ended);
                }
                self.counts[q].scnt += pl;
                out.tx.posted += pl;
            }
        }
        Ok(())
    }

    /// One poll of the receive CQ: each receive counted and reposted. The server's first
    /// receive starts its window. `Ok(true)`: something arrived.
    #[inline(always)]
    fn drain_receives(
        &mut self,
        p: &mut Ticks,
        out: &mut DuplexOutcome,
        nqp: usize,
    ) -> Result<bool, Ended> {
        let n = match self.rcq.poll(self.rwcs) {
            Ok(n) => n,
            Err(err) => {
                out.tx.error = Some(RunError::Poll { err });
                return Err(Ended);
            }
        };
        if n > 0 && p.phase == Phase::BeforeFirst {
            p.t_first = (self.now)();
            p.phase = if self.cfg.window.is_some() {
                Phase::Warmup
            } else {
                Phase::Sample
            };
        }
        for i in 0..n {
            let wc = self.rwcs[i];
            let q = wc.wr_id as usize;
            if wc.status != WcStatus::SUCCESS || q >= nqp {
                out.tx.error = Some(RunError::completion(q.min(u32::MAX as usize) as u32, wc));
                out.rx_error = true;
                return Err(Ended);
            }
            out.received += 1;
            let c = &mut self.rx_counts[q];
            c.received += 1;
            if wants_more(c, &self.cfg.rx) {
                if let Err(e) =
                    post_next::<false>(&mut self.rqs[q], q, self.bufs[q], c, &self.cfg.rx)
                {
                    out.tx.error = Some(e);
                    out.rx_error = true;
                    return Err(Ended);
                }
            }
        }
        Ok(n > 0)
    }

    /// One poll of the send CQ (when sends are outstanding): each completion retires its
    /// QP's WRs up to its sequence number. `Ok(true)`: something completed.
    #[inline(always)]
    fn drain_sends(&mut self, out: &mut DuplexOutcome, nqp: usize) -> Result<bool, Ended> {
        if out.tx.completed >= out.tx.posted {
            return Ok(false);
        }
        let n = match self.scq.poll(self.wcs) {
            Ok(n) => n,
            Err(err) => {
                out.tx.error = Some(RunError::Poll { err });
                return Err(Ended);
            }
        };
        let peak = !self.tposted.is_empty();
        let mut progress = false;
        for wc in &self.wcs[..n] {
            let q = (wc.wr_id >> QP_SHIFT) as usize;
            if wc.status != WcStatus::SUCCESS || q >= nqp {
                out.tx.error = Some(RunError::completion(q as u32, *wc));
                return Err(Ended);
            }
            let seq = wc.wr_id & SEQ_MASK;
            let c = &mut self.counts[q];
            if seq > c.ccnt {
                out.tx.completed += seq - c.ccnt;
                c.ccnt = seq;
                progress = true;
            }
            if peak && out.tx.completed > 0 {
                let ts = (self.now)();
                if let Some(slot) = self.tcompleted.get_mut(out.tx.completed as usize - 1) {
                    *slot = ts;
                }
            }
        }
        Ok(progress)
    }

    /// After a pass: progress resets the idle stretch; a long idle stretch with work
    /// outstanding asks the watchdog (peer gone, peer finished, or stalled).
    #[inline(always)]
    fn watch(
        &mut self,
        p: &mut Ticks,
        out: &mut DuplexOutcome,
        progress: bool,
        total: u64,
    ) -> Result<(), Ended> {
        let tx = self.cfg.tx;
        let waiting = out.tx.completed < out.tx.posted
            || tx.iters == 0
            || out.received < total
            || p.phase == Phase::BeforeFirst;
        if progress || !waiting {
            p.idle.progress();
            p.fresh = true;
            return Ok(());
        }
        let Some((_, idle_ticks)) = p.idle.empty(&self.now) else {
            return Ok(());
        };
        p.fresh = true;
        let rx = self.cfg.rx;
        let in_flight = (out.tx.posted - out.tx.completed)
            .saturating_mul(tx.size as u64)
            .saturating_add((self.nqp() as u64 * rx.rx_depth).saturating_mul(rx.len as u64));
        match watchdog::check(idle_ticks, tx.stall_ticks, in_flight) {
            Expiry::No => return Ok(()),
            e @ (Expiry::PeerExited | Expiry::PeerFinished) => out.tx.error = RunError::of_peer(e),
            Expiry::Stalled => out.tx.error = Some(self.stalled(idle_ticks, total)),
        }
        Err(Ended)
    }

    /// The times and count the report uses, by how the loop ended.
    fn close(&self, out: &mut DuplexOutcome, p: &Ticks, t0: u64) {
        let t = (self.now)();
        let sample_done = self.cfg.window.is_some() && p.phase == Phase::Cooldown;
        if out.tx.error.is_some() && !sample_done {
            // Stopped early: every message done, from the start to the last progress.
            out.tx.t_start = t0;
            out.tx.t_end = p.idle.last_progress(&self.now).max(t0 + 1);
            out.tx.measured = out.tx.completed;
        } else if self.cfg.window.is_none() {
            out.tx.t_end = t;
            out.tx.measured = out.tx.completed;
        } else if p.phase == Phase::Sample {
            out.tx.t_end = t;
            out.tx.measured = out.tx.completed + out.received - p.sample_base;
        } else if p.phase != Phase::Cooldown {
            // Ended before the sample started: an empty window.
            out.tx.t_start = t;
            out.tx.t_end = t;
            out.tx.measured = 0;
        }
    }

    /// The first QP with sends outstanding or receives missing, for the stall report.
    fn stalled(&self, idle_ticks: u64, total: u64) -> RunError {
        let per_qp = self.cfg.tx.iters;
        if let Some((q, c)) = self
            .counts
            .iter()
            .enumerate()
            .find(|(_, c)| c.scnt > c.ccnt)
        {
            return RunError::Stalled {
                qp: q as u32,
                outstanding: c.scnt - c.ccnt,
                last_completed: c.ccnt,
                idle_ticks,
            };
        }
        recv_stall(
            self.rx_counts,
            per_qp,
            per_qp == 0 || total == 0,
            idle_ticks,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::post::{Op, PostError};
    use crate::run::bw::wr_id;
    use std::cell::{Cell, RefCell};
    use std::collections::VecDeque;
    use std::rc::Rc;

    /// Both directions of a loop-back wire: our signaled sends complete on the
    /// send CQ; the peer sends `peer_left[q]` messages, each landing in QP q's
    /// oldest posted receive (dropped when none is posted).
    #[derive(Default)]
    struct Wire {
        send_done: VecDeque<u64>,
        peer_left: Vec<u64>,
        posted: Vec<VecDeque<u64>>,
        max_posted: Vec<usize>,
        fail_recv: bool,
    }

    type W = Rc<RefCell<Wire>>;
    struct Sq(W);
    struct Rq(W, usize);
    struct Scq(W);
    enum Cq {
        Send(Scq),
        Recv(W),
    }

    impl SendQueue for Sq {
        fn post(&mut self, _op: Op, wrs: &[WrDesc]) -> Result<(), PostError> {
            let mut w = self.0.borrow_mut();
            for wr in wrs.iter().filter(|wr| wr.signaled) {
                w.send_done.push_back(wr.wr_id);
            }
            Ok(())
        }
    }

    impl RecvQueue for Rq {
        fn post_recv(&mut self, wr_id: u64, _a: u64, _k: u32, _l: u32) -> Result<(), PostError> {
            let mut w = self.0.borrow_mut();
            w.posted[self.1].push_back(wr_id);
            let n = w.posted[self.1].len();
            w.max_posted[self.1] = w.max_posted[self.1].max(n);
            Ok(())
        }
    }

    impl CompletionQueue for Cq {
        fn poll(&mut self, out: &mut [Completion]) -> Result<usize, PostError> {
            let mut k = 0;
            match self {
                Cq::Send(Scq(w)) => {
                    let mut w = w.borrow_mut();
                    while k < out.len() {
                        let Some(id) = w.send_done.pop_front() else {
                            break;
                        };
                        out[k] = Completion {
                            wr_id: id,
                            ..Default::default()
                        };
                        k += 1;
                    }
                }
                Cq::Recv(w) => {
                    let mut w = w.borrow_mut();
                    for q in 0..w.peer_left.len() {
                        if k < out.len() && w.peer_left[q] > 0 {
                            w.peer_left[q] -= 1;
                            if let Some(id) = w.posted[q].pop_front() {
                                out[k] = Completion {
                                    wr_id: id,
                                    status: if w.fail_recv {
                                        WcStatus(4)
                                    } else {
                                        WcStatus::SUCCESS
                                    },
                                    ..Default::default()
                                };
                                k += 1;
                            }
                        }
                    }
                }
            }
            Ok(k)
        }
    }

    fn cfg(iters: u64, wait_first_rx: bool) -> DuplexConfig {
        DuplexConfig {
            tx: BwConfig {
                op: Op::Send,
                size: 64,
                iters,
                post_list: 1,
                tx_depth: 8,
                cq_mod: 4,
                inline: true,
                positions: 4,
                step: 64,
                stall_ticks: 1000,
                cost: false,
            },
            rx: RecvConfig {
                iters,
                rx_depth: 16,
                len: 64,
                positions: 4,
                step: 64,
                stall_ticks: 1000,
                window: None,
                list: 1,
                cost: false,
            },
            wait_first_rx,
            window: None,
        }
    }

    /// Runs the loop over `nqp` QPs with the peer sending `peer` messages per QP.
    fn run(c: DuplexConfig, nqp: usize, peer: u64, fail_recv: bool) -> (DuplexOutcome, W) {
        let w: W = Rc::new(RefCell::new(Wire {
            peer_left: vec![peer; nqp],
            posted: vec![VecDeque::new(); nqp],
            max_posted: vec![0; nqp],
            fail_recv,
            ..Default::default()
        }));
        let mut sqs: Vec<Sq> = (0..nqp).map(|_| Sq(w.clone())).collect();
        let mut rqs: Vec<Rq> = (0..nqp).map(|q| Rq(w.clone(), q)).collect();
        let bufs = vec![RecvBuf { addr: 0, lkey: 1 }; nqp];
        let mut rx_counts = vec![RxCount::default(); nqp];
        super::super::recv::prepost(&mut rqs, &bufs, &mut rx_counts, &c.rx).unwrap();
        let total = (c.tx.iters * nqp as u64) as usize;
        let (mut tp, mut tc) = (vec![0u64; total], vec![0u64; total]);
        let clock = Cell::new(0u64);
        let o = DuplexLoop {
            cfg: c,
            sqs: &mut sqs,
            rqs: &mut rqs,
            scq: &mut Cq::Send(Scq(w.clone())),
            rcq: &mut Cq::Recv(w.clone()),
            targets: &vec![QpTarget::default(); nqp],
            bufs: &bufs,
            counts: &mut vec![QpCount::default(); nqp],
            rx_counts: &mut rx_counts,
            list: &mut [WrDesc::default(); 1],
            wcs: &mut [Completion::default(); 4],
            rwcs: &mut [Completion::default(); 4],
            tposted: &mut tp,
            tcompleted: &mut tc,
            now: || {
                clock.set(clock.get() + 1);
                clock.get()
            },
        }
        .run();
        if o.tx.error.is_none() {
            // Every post is stamped; the last completion after the last post.
            assert!(tp.iter().all(|p| *p > 0));
            assert!(tc.last() >= tp.last());
        }
        (o, w)
    }

    #[test]
    fn sends_and_receives_every_message_each_way() {
        for wait in [false, true] {
            let (o, w) = run(cfg(50, wait), 2, 50, false);
            assert_eq!(o.tx.error, None);
            assert_eq!((o.tx.posted, o.tx.completed, o.received), (100, 100, 100));
            assert_eq!(o.tx.measured, 100);
            let w = w.borrow();
            // Never more receives posted than rx_depth, none left over.
            assert!(w.max_posted.iter().all(|&m| m <= 16));
            assert!(w.posted.iter().all(|p| p.is_empty()));
        }
    }

    #[test]
    fn the_server_holds_its_sends_until_the_first_receive() {
        let (o, _) = run(cfg(50, true), 1, 0, false);
        assert!(matches!(o.tx.error, Some(RunError::Stalled { .. })));
        assert_eq!(o.tx.posted, 0);
        // The client side sends without waiting, then stalls on the missing receives.
        let (o, _) = run(cfg(50, false), 1, 0, false);
        assert_eq!(o.tx.posted, 50);
        assert_eq!(o.tx.completed, 50);
        match o.tx.error {
            Some(RunError::Stalled {
                outstanding,
                last_completed,
                ..
            }) => assert_eq!((outstanding, last_completed), (50, 0)),
            e => panic!("want a stall on the receive side, got {e:?}"),
        }
    }

    #[test]
    fn a_failed_receive_stops_the_run() {
        let (o, _) = run(cfg(50, false), 1, 50, true);
        assert!(matches!(
            o.tx.error,
            Some(RunError::Completion { qp: 0, .. })
        ));
        assert!(o.rx_error);
    }

    #[test]
    fn wr_id_layout_matches_the_bw_loop() {
        let id = wr_id(3, 41);
        assert_eq!((id >> QP_SHIFT, id & SEQ_MASK), (3, 42));
    }

    #[test]
    fn duration_counts_both_directions_in_the_window() {
        let mut c = cfg(0, false);
        c.rx.iters = 0;
        c.window = Some(Window {
            margin: 100,
            sample_stop: 600,
            end: 700,
        });
        let (o, _) = run(c, 1, 10_000, false);
        assert_eq!(o.tx.error, None);
        assert!(o.tx.measured > 0);
        assert!(o.tx.measured <= o.tx.completed + o.received);
        assert!(o.tx.t_end > o.tx.t_start);
    }
}
