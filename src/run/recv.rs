//! The SEND receiver loop (perftest `run_iter_bw_server`), generic over the
//! receive queue and CQ so it is monomorphised like the sender. Hot path: no
//! allocation, no locks, no formatting, no panics.
//!
//! Receives are pre-posted ([`prepost`], before the per-size barrier, as
//! perftest does); the loop polls the receive CQ, reposts one receive per
//! completion while the QP still expects more messages, and cycles the
//! receive address through the buffer like the sender does. The measured
//! interval starts at the first receive (perftest `set_on_first_rx_packet`);
//! in duration mode the warm-up/sample/cool-down window also starts there.

use super::bw::RunError;
use super::stop;
use super::watchdog::{self, Expiry};
use crate::post::{Completion, CompletionQueue, RecvList, RecvQueue, WcStatus};

/// Where QP `q`'s receives land: the first address and the MR's key.
#[derive(Clone, Copy, Debug, Default)]
pub struct RecvBuf {
    pub addr: u64,
    pub lkey: u32,
}

/// Loop parameters.
#[derive(Clone, Copy, Debug)]
pub struct RecvConfig {
    /// Messages per QP; 0 in duration mode.
    pub iters: u64,
    /// Receives kept posted per QP (perftest rx_depth, clamped to iters).
    pub rx_depth: u64,
    /// Receive length: the message size (+40 for the UD GRH).
    pub len: u32,
    /// Address positions per QP before wrapping (1 = no cycling) and the step.
    pub positions: u64,
    pub step: u64,
    /// Give up when no receive arrives for this many ticks while more are expected.
    pub stall_ticks: u64,
    /// Duration mode: the window, in ticks after the first receive.
    pub window: Option<Window>,
    /// `--recv_post_list`: receives posted per call (1: one at a time).
    pub list: u64,
    /// Measure the receiver's CPU cost per message: a clock read before
    /// each poll, and one after a poll that found completions and their
    /// reposts (`compare` reports it; off with --no-cost).
    pub cost: bool,
}

/// perftest's duration states, relative to the first receive: sample from
/// `margin`, stop sampling at `sample_stop`, end at `end`.
#[derive(Clone, Copy, Debug)]
pub struct Window {
    pub margin: u64,
    pub sample_stop: u64,
    pub end: u64,
}

/// Per-QP receive counters, handed in so the loop allocates nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct RxCount {
    pub posted: u64,
    pub received: u64,
    /// Receives completed but not reposted yet (a post list is not full).
    pub owed: u64,
}

/// What the receiver measured.
#[derive(Clone, Copy, Debug, Default)]
pub struct RecvOutcome {
    /// Messages received over all QPs.
    pub received: u64,
    /// Start (first receive, or the sample start) and end of the measured window.
    pub t_start: u64,
    pub t_end: u64,
    /// Messages received inside the window (duration: the sample; else all).
    pub measured: u64,
    pub error: Option<RunError>,
    /// With `cost`: ticks spent in polls that found completions plus their
    /// reposts, and the messages they took.
    pub busy_ticks: u64,
    pub busy_msgs: u64,
}

/// Post QP `q`'s next receives at their cycling addresses: one, or with
/// `LIST` a whole `cfg.list` in one call. `wr_id` = the QP index.
#[inline(always)]
pub(crate) fn post_next<const LIST: bool>(
    rq: &mut impl RecvQueue,
    q: usize,
    buf: RecvBuf,
    c: &mut RxCount,
    cfg: &RecvConfig,
) -> Result<(), RunError> {
    let first = c.posted;
    let addr = |k: usize| buf.addr + ((first + k as u64) % cfg.positions) * cfg.step;
    let (res, n) = if LIST {
        let list = RecvList {
            n: cfg.list as usize,
            wr_id: q as u64,
            lkey: buf.lkey,
            len: cfg.len,
            addr,
        };
        (rq.post_recv_list(&list), cfg.list)
    } else {
        (rq.post_recv(q as u64, addr(0), buf.lkey, cfg.len), 1)
    };
    res.map_err(|err| RunError::Post { qp: q as u32, err })?;
    c.posted += n;
    Ok(())
}

/// Whether QP `c` should get another receive (iterations: never more than it will be sent).
#[inline(always)]
pub(crate) const fn wants_more(c: &RxCount, cfg: &RecvConfig) -> bool {
    cfg.iters == 0 || c.posted < cfg.iters
}

/// With a receive post list: whether QP `c` owes a whole list and may take
/// one (perftest: `posted + recv_post_list <= iters`).
#[inline(always)]
const fn wants_list(c: &RxCount, cfg: &RecvConfig) -> bool {
    c.owed >= cfg.list && (cfg.iters == 0 || c.posted + cfg.list <= cfg.iters)
}

/// perftest `ctx_set_recv_wqes`: fill every QP's receive queue up to rx_depth
/// (never past iters). Resets `counts`. Runs before the barrier, outside the timing.
pub fn prepost<R: RecvQueue>(
    rqs: &mut [R],
    bufs: &[RecvBuf],
    counts: &mut [RxCount],
    cfg: &RecvConfig,
) -> Result<(), RunError> {
    for (q, rq) in rqs.iter_mut().enumerate() {
        let c = &mut counts[q];
        *c = RxCount::default();
        if cfg.list > 1 {
            // perftest: rx_depth / recv_post_list lists.
            while c.posted + cfg.list <= cfg.rx_depth
                && (cfg.iters == 0 || c.posted + cfg.list <= cfg.iters)
            {
                post_next::<true>(rq, q, bufs[q], c, cfg)?;
            }
            continue;
        }
        while c.posted < cfg.rx_depth && wants_more(c, cfg) {
            post_next::<false>(rq, q, bufs[q], c, cfg)?;
        }
    }
    Ok(())
}

/// Everything the loop works on, borrowed from the caller.
pub struct RecvLoop<'a, R, C, F> {
    pub cfg: RecvConfig,
    pub rqs: &'a mut [R],
    pub cq: &'a mut C,
    pub bufs: &'a [RecvBuf],
    /// As left by [`prepost`].
    pub counts: &'a mut [RxCount],
    /// Scratch for one poll.
    pub wcs: &'a mut [Completion],
    pub now: F,
}

/// perftest's duration phases, from the window's origin; `BeforeFirst`:
/// waiting for the first receive (the receiver, a duplex server).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    BeforeFirst,
    Warmup,
    Sample,
    Cooldown,
}

/// A loop's place in time (this receiver's and the duplex loop's): the
/// window's phase, where its sample started, and when the clock may be read
/// (see `watchdog::SPINS_PER_CLOCK`: in duration mode after each pass that
/// made progress and once per idle stretch of spins; with -n only for the
/// watchdog, as perftest's receiver reads none).
pub(super) struct Ticks {
    pub(super) phase: Phase,
    /// The window's origin: the first receive, or a duplex client's start.
    pub(super) t_first: u64,
    /// What was counted (received; duplex: completed + received) at the
    /// sample's start.
    pub(super) sample_base: u64,
    pub(super) idle: watchdog::Idle,
    pub(super) fresh: bool,
}

impl Ticks {
    /// In `phase`, with the window's origin at `t_first`.
    pub(super) fn new(phase: Phase, t_first: u64) -> Self {
        Self {
            phase,
            t_first,
            sample_base: 0,
            idle: watchdog::Idle::default(),
            fresh: true,
        }
    }
}

/// The loop must stop; why is already in the outcome.
struct Ended;

impl<R: RecvQueue, C: CompletionQueue, F: Fn() -> u64> RecvLoop<'_, R, C, F> {
    /// Run until every expected message arrived (or the duration window
    /// ended), an error, a stall, or a stop request. One pass: the window's
    /// phase, one poll, each receive counted and reposted. The steps are
    /// `#[inline(always)]`: the pass compiles as the one loop it was.
    pub fn run(&mut self) -> RecvOutcome {
        let nqp = self.rqs.len().min(self.counts.len()).min(self.bufs.len());
        let total = self.cfg.iters * nqp as u64;
        let mut out = RecvOutcome::default();
        let mut k = Ticks::new(Phase::BeforeFirst, 0);
        loop {
            if stop::requested() {
                out.error = Some(RunError::Interrupted);
                break;
            }
            if self.window_over(&mut k, &mut out, total) {
                break;
            }
            let t_poll = if self.cfg.cost { (self.now)() } else { 0 };
            let n = match self.cq.poll(self.wcs) {
                Ok(n) => n,
                Err(err) => {
                    out.error = Some(RunError::Poll { err });
                    break;
                }
            };
            if n == 0 {
                match self.idle(&mut k, &mut out, nqp) {
                    Ok(()) => continue,
                    Err(Ended) => break,
                }
            }
            self.first_receive(&mut k, &mut out);
            if self.take(n, &mut out, nqp).is_err() {
                break;
            }
            if self.cfg.cost {
                out.busy_ticks += (self.now)().wrapping_sub(t_poll);
                out.busy_msgs += n as u64;
            }
        }
        self.close(&mut out, &k);
        out
    }

    /// The duration window's arms (on a fresh reading, once receiving), or -n's end: `true`
    /// ends the loop.
    #[inline(always)]
    fn window_over(&mut self, k: &mut Ticks, out: &mut RecvOutcome, total: u64) -> bool {
        let Some(w) = self.cfg.window else {
            return out.received >= total;
        };
        if !k.fresh || k.phase == Phase::BeforeFirst {
            return false;
        }
        k.fresh = false;
        let t = (self.now)();
        match k.phase {
            Phase::Warmup if t.wrapping_sub(k.t_first) >= w.margin => {
                k.phase = Phase::Sample;
                out.t_start = t;
                k.sample_base = out.received;
            }
            Phase::Sample if t.wrapping_sub(k.t_first) >= w.sample_stop => {
                k.phase = Phase::Cooldown;
                out.t_end = t;
                out.measured = out.received - k.sample_base;
            }
            Phase::Cooldown if t.wrapping_sub(k.t_first) >= w.end => return true,
            _ => {}
        }
        false
    }

    /// An empty poll: once per idle stretch, the watchdog (peer gone, finished, or stalled).
    #[inline(always)]
    fn idle(&mut self, k: &mut Ticks, out: &mut RecvOutcome, nqp: usize) -> Result<(), Ended> {
        let Some((_, idle_ticks)) = k.idle.empty(&self.now) else {
            return Ok(());
        };
        k.fresh = true;
        // Up to rx_depth messages per QP may be on their way.
        let in_flight = (nqp as u64 * self.cfg.rx_depth).saturating_mul(self.cfg.len as u64);
        match watchdog::check(idle_ticks, self.cfg.stall_ticks, in_flight) {
            Expiry::No => return Ok(()),
            e @ (Expiry::PeerExited | Expiry::PeerFinished) => out.error = RunError::of_peer(e),
            Expiry::Stalled => out.error = Some(self.stalled(idle_ticks)),
        }
        Err(Ended)
    }

    /// A poll found messages: progress for the watchdog; the first one starts the window.
    #[inline(always)]
    fn first_receive(&mut self, k: &mut Ticks, out: &mut RecvOutcome) {
        k.idle.progress();
        k.fresh = true;
        if k.phase != Phase::BeforeFirst {
            return;
        }
        k.t_first = (self.now)();
        out.t_start = k.t_first;
        k.phase = if self.cfg.window.is_some() {
            Phase::Warmup
        } else {
            Phase::Sample
        };
    }

    /// The first `n` completions of the poll scratch: each counted for its QP and its
    /// receive posted again (one by one, or in lists of `--recv_post_list`).
    #[inline(always)]
    fn take(&mut self, n: usize, out: &mut RecvOutcome, nqp: usize) -> Result<(), Ended> {
        let cfg = self.cfg;
        for i in 0..n {
            let wc = self.wcs[i];
            let q = wc.wr_id as usize;
            if wc.status != WcStatus::SUCCESS || q >= nqp {
                out.error = Some(RunError::completion(q.min(u32::MAX as usize) as u32, wc));
                return Err(Ended);
            }
            out.received += 1;
            let c = &mut self.counts[q];
            c.received += 1;
            let reposted = if cfg.list > 1 {
                c.owed += 1;
                if wants_list(c, &cfg) {
                    c.owed -= cfg.list;
                    post_next::<true>(&mut self.rqs[q], q, self.bufs[q], c, &cfg)
                } else {
                    Ok(())
                }
            } else if wants_more(c, &cfg) {
                post_next::<false>(&mut self.rqs[q], q, self.bufs[q], c, &cfg)
            } else {
                Ok(())
            };
            if let Err(e) = reposted {
                out.error = Some(e);
                return Err(Ended);
            }
        }
        Ok(())
    }

    /// The times and count the report uses, by the phase the loop ended in.
    fn close(&self, out: &mut RecvOutcome, k: &Ticks) {
        let t = (self.now)();
        match (self.cfg.window, k.phase) {
            // Stopped before any message: an empty window.
            (_, Phase::BeforeFirst) => {
                out.t_start = t;
                out.t_end = t;
                out.measured = 0;
            }
            (None, _) | (Some(_), Phase::Warmup) => {
                out.t_end = t;
                out.measured = out.received;
            }
            (Some(_), Phase::Sample) => {
                out.t_end = t;
                out.measured = out.received - k.sample_base;
            }
            (Some(_), Phase::Cooldown) => {}
        }
    }

    /// The first QP still waiting for messages, for the stall report.
    fn stalled(&self, idle_ticks: u64) -> RunError {
        let iters = self.cfg.iters;
        recv_stall(self.counts, iters, iters == 0, idle_ticks)
    }
}

/// The first QP of `counts` still short of `per_qp` messages (0: the first
/// QP, there is no end), as a stall. It still expects the rest of `per_qp`,
/// or with `open_ended` the receives it has posted and not completed.
pub(crate) fn recv_stall(
    counts: &[RxCount],
    per_qp: u64,
    open_ended: bool,
    idle_ticks: u64,
) -> RunError {
    let (qp, c) = counts
        .iter()
        .enumerate()
        .find(|(_, c)| per_qp == 0 || c.received < per_qp)
        .map(|(i, c)| (i as u32, *c))
        .unwrap_or((0, RxCount::default()));
    RunError::Stalled {
        qp,
        outstanding: if open_ended {
            c.posted - c.received
        } else {
            per_qp - c.received
        },
        last_completed: c.received,
        idle_ticks,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::post::PostError;
    use std::cell::{Cell, RefCell};
    use std::collections::VecDeque;
    use std::rc::Rc;

    /// A wire with `to_send[q]` messages for QP q; a message lands in QP q's
    /// oldest posted receive (or is dropped when none is posted, like UD).
    #[derive(Default)]
    struct Wire {
        to_send: Vec<u64>,
        posted: Vec<VecDeque<(u64, u64, u32)>>,
        addrs: Vec<Vec<u64>>,
        fail_status: Option<WcStatus>,
    }

    /// A wire with `to_send[q]` messages for QP q and nothing else set.
    fn wire(to_send: Vec<u64>) -> Rc<RefCell<Wire>> {
        Rc::new(RefCell::new(Wire {
            to_send,
            ..Default::default()
        }))
    }

    struct Rq(Rc<RefCell<Wire>>, usize);
    struct Cq(Rc<RefCell<Wire>>);

    impl RecvQueue for Rq {
        fn post_recv(
            &mut self,
            wr_id: u64,
            addr: u64,
            _lkey: u32,
            len: u32,
        ) -> Result<(), PostError> {
            let mut w = self.0.borrow_mut();
            w.posted[self.1].push_back((wr_id, addr, len));
            w.addrs[self.1].push(addr);
            Ok(())
        }
    }

    impl CompletionQueue for Cq {
        fn poll(&mut self, out: &mut [Completion]) -> Result<usize, PostError> {
            let mut w = self.0.borrow_mut();
            let mut k = 0;
            for q in 0..w.to_send.len() {
                if k < out.len() && w.to_send[q] > 0 {
                    w.to_send[q] -= 1;
                    if let Some((wr_id, _, _)) = w.posted[q].pop_front() {
                        out[k] = Completion {
                            wr_id,
                            status: w.fail_status.unwrap_or(WcStatus::SUCCESS),
                            ..Default::default()
                        };
                        k += 1;
                    }
                }
            }
            Ok(k)
        }
    }

    fn cfg(iters: u64, rx_depth: u64) -> RecvConfig {
        RecvConfig {
            iters,
            rx_depth,
            len: 104,
            positions: 3,
            step: 64,
            stall_ticks: 1000,
            window: None,
            list: 1,
            cost: false,
        }
    }

    fn run(wire: &Rc<RefCell<Wire>>, cfg: RecvConfig, nqp: usize) -> (RecvOutcome, Vec<RxCount>) {
        {
            let mut w = wire.borrow_mut();
            w.posted = vec![VecDeque::new(); nqp];
            w.addrs = vec![Vec::new(); nqp];
        }
        let mut rqs: Vec<Rq> = (0..nqp).map(|q| Rq(wire.clone(), q)).collect();
        let bufs: Vec<RecvBuf> = (0..nqp)
            .map(|q| RecvBuf {
                addr: 0x10000 * (q as u64 + 1) + 24,
                lkey: 7,
            })
            .collect();
        let mut counts = vec![RxCount::default(); nqp];
        prepost(&mut rqs, &bufs, &mut counts, &cfg).unwrap();
        let o = run_loop(wire, &mut rqs, &bufs, &mut counts, cfg);
        (o, counts)
    }

    /// The loop over `rqs` (preposted) and `wire`'s CQ, on a clock that
    /// ticks once per reading.
    fn run_loop<R: RecvQueue>(
        wire: &Rc<RefCell<Wire>>,
        rqs: &mut [R],
        bufs: &[RecvBuf],
        counts: &mut [RxCount],
        cfg: RecvConfig,
    ) -> RecvOutcome {
        let mut cq = Cq(wire.clone());
        let mut wcs = [Completion::default(); 4];
        let clock = Cell::new(0u64);
        RecvLoop {
            cfg,
            rqs,
            cq: &mut cq,
            bufs,
            counts,
            wcs: &mut wcs,
            now: || {
                clock.set(clock.get() + 1);
                clock.get()
            },
        }
        .run()
    }

    #[test]
    fn receives_everything_and_never_posts_past_iters() {
        let wire = wire(vec![10, 10]);
        let (o, counts) = run(&wire, cfg(10, 4), 2);
        assert_eq!(o.error, None);
        assert_eq!((o.received, o.measured), (20, 20));
        assert!(o.t_end > o.t_start && o.t_start > 0);
        for (q, c) in counts.iter().enumerate() {
            assert_eq!((c.posted, c.received), (10, 10), "qp {q}");
        }
        let w = wire.borrow();
        // Addresses cycle through 3 positions, 64 bytes apart, from each QP's base.
        let base = 0x20000 + 24;
        assert_eq!(
            w.addrs[1][..5],
            [base, base + 64, base + 128, base, base + 64]
        );
        assert!(w.posted.iter().all(|p| p.is_empty()));
    }

    #[test]
    fn receive_post_lists_are_whole_and_never_pass_iters() {
        /// Counts the list calls and their sizes, then posts through `Rq`.
        struct Lists(Rq, Rc<RefCell<Vec<usize>>>);
        impl RecvQueue for Lists {
            fn post_recv(&mut self, w: u64, a: u64, k: u32, l: u32) -> Result<(), PostError> {
                self.0.post_recv(w, a, k, l)
            }
            fn post_recv_list(
                &mut self,
                l: &RecvList<impl Fn(usize) -> u64>,
            ) -> Result<(), PostError> {
                self.1.borrow_mut().push(l.n);
                l.post_each(&mut self.0)
            }
        }
        let wire = Rc::new(RefCell::new(Wire {
            to_send: vec![12],
            posted: vec![VecDeque::new()],
            addrs: vec![Vec::new()],
            ..Default::default()
        }));
        let calls = Rc::new(RefCell::new(Vec::new()));
        let mut rqs = vec![Lists(Rq(wire.clone(), 0), calls.clone())];
        let bufs = [RecvBuf {
            addr: 0x10000,
            lkey: 7,
        }];
        let mut counts = vec![RxCount::default()];
        // 12 messages, 9 receives of room, lists of 4: two lists up front
        // (rx_depth rounds down, as in perftest), one more after 4 arrive.
        let c = RecvConfig {
            list: 4,
            cost: false,
            ..cfg(12, 9)
        };
        prepost(&mut rqs, &bufs, &mut counts, &c).unwrap();
        assert_eq!(counts[0].posted, 8);
        let o = run_loop(&wire, &mut rqs, &bufs, &mut counts, c);
        assert_eq!((o.error, o.received), (None, 12));
        assert_eq!(*calls.borrow(), [4, 4, 4]);
        assert_eq!((counts[0].posted, counts[0].received), (12, 12));
        // The addresses keep cycling across lists: 3 positions, 64 bytes apart.
        let a = &wire.borrow().addrs[0];
        assert_eq!(a[3..6], [0x10000, 0x10040, 0x10080]);
    }

    #[test]
    fn a_missing_message_is_a_stall_naming_the_qp() {
        let wire = wire(vec![10, 7]);
        let (o, _) = run(&wire, cfg(10, 10), 2);
        match o.error {
            Some(RunError::Stalled {
                qp,
                outstanding,
                last_completed,
                ..
            }) => assert_eq!((qp, outstanding, last_completed), (1, 3, 7)),
            e => panic!("want a stall, got {e:?}"),
        }
        assert_eq!(o.received, 17);
    }

    #[test]
    fn an_error_completion_stops_the_loop() {
        let wire = Rc::new(RefCell::new(Wire {
            to_send: vec![5],
            fail_status: Some(WcStatus::LOC_LEN_ERR),
            ..Default::default()
        }));
        let (o, _) = run(&wire, cfg(5, 5), 1);
        match o.error {
            Some(RunError::Completion { qp: 0, wc, .. }) => {
                assert_eq!(wc.status, WcStatus::LOC_LEN_ERR)
            }
            e => panic!("want an error completion, got {e:?}"),
        }
    }

    #[test]
    fn duration_window_starts_at_the_first_receive() {
        let wire = wire(vec![u64::MAX]);
        let mut c = cfg(0, 4);
        c.window = Some(Window {
            margin: 100,
            sample_stop: 300,
            end: 400,
        });
        let (o, counts) = run(&wire, c, 1);
        assert_eq!(o.error, None);
        assert!(o.measured > 0 && o.measured < o.received);
        assert!(o.t_end > o.t_start);
        // Reposted all along: rx_depth stays posted.
        assert_eq!(counts[0].posted, counts[0].received + 4);
    }
}
