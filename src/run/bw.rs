//! The bandwidth sender loop (perftest `run_iter_bw`), generic over the post
//! method so it is monomorphised per method. Hot path: no allocation, no locks,
//! no formatting, no panics; every buffer it touches is handed in.
//!
//! Differences from perftest, on purpose: completions are attributed exactly
//! (each WR's id carries its QP and sequence number, so a CQE retires exactly
//! the WRs before it, whatever cq_mod is), and the duration state machine runs
//! on clock deadlines checked in the loop instead of SIGALRM.

use super::pace::{Pace, Unpaced};
use super::period::{PeriodClock, PeriodLog};
use super::stop;
use super::watchdog::{self, Expiry};
use crate::post::{
    Completion, CompletionQueue, Op, PostError, SendQueue, WcOpcode, WcStatus, WrDesc,
};

/// Per-QP addressing, fixed for the run.
#[derive(Clone, Copy, Debug, Default)]
pub struct QpTarget {
    pub laddr: u64,
    pub lkey: u32,
    pub raddr: u64,
    pub rkey: u32,
}

/// Loop parameters (perftest's names).
#[derive(Clone, Copy, Debug)]
pub struct BwConfig {
    pub op: Op,
    pub size: u32,
    /// Messages per QP; 0 in duration mode.
    pub iters: u64,
    pub post_list: u32,
    pub tx_depth: u32,
    pub cq_mod: u32,
    pub inline: bool,
    /// Address positions per QP before wrapping (1 = no cycling) and the step.
    pub positions: u64,
    pub step: u64,
    /// Give up when no completion arrives for this many ticks with work outstanding.
    pub stall_ticks: u64,
    /// Measure the CPU cost of each post call (two clock reads around it).
    pub cost: bool,
}

/// Duration-mode deadlines, in clock ticks (perftest: margin, D-2*margin, margin).
#[derive(Clone, Copy, Debug)]
pub struct Deadlines {
    pub sample_start: u64,
    pub sample_stop: u64,
    pub end: u64,
}

/// Why the loop stopped early. Small and `Copy`: built inside the hot loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunError {
    Completion {
        qp: u32,
        wr_id: u64,
        wc: Completion,
    },
    Post {
        qp: u32,
        err: PostError,
    },
    Poll {
        err: PostError,
    },
    Stalled {
        qp: u32,
        outstanding: u64,
        last_completed: u64,
        idle_ticks: u64,
    },
    Interrupted,
    /// The peer's control connection closed mid-run and nothing completed since.
    PeerExited,
    /// The peer sent its next control message (its run is over) while we
    /// still wait: the sides' -n (or -q) differ.
    PeerFinished,
}

impl RunError {
    /// The error for a watchdog verdict about the peer (None: not about the peer).
    #[cold]
    pub fn of_peer(e: Expiry) -> Option<RunError> {
        match e {
            Expiry::PeerExited => Some(RunError::PeerExited),
            Expiry::PeerFinished => Some(RunError::PeerFinished),
            Expiry::Stalled | Expiry::No => None,
        }
    }

    /// An error completion, unless a stop was requested: then the error is
    /// the stop's consequence (the peer saw us go, or our QPs moved to ERR).
    #[cold]
    pub fn completion(qp: u32, wc: Completion) -> RunError {
        if stop::requested() {
            RunError::Interrupted
        } else {
            RunError::Completion {
                qp,
                wr_id: wc.wr_id,
                wc,
            }
        }
    }
}

/// What the loop measured.
#[derive(Clone, Copy, Debug, Default)]
pub struct BwOutcome {
    /// Messages posted / completed over all QPs.
    pub posted: u64,
    pub completed: u64,
    /// Ticks of the measured window and its start/end.
    pub t_start: u64,
    pub t_end: u64,
    /// Messages completed inside the measured window (duration: the sample; else all).
    pub measured: u64,
    pub error: Option<RunError>,
    /// Clock ticks spent inside post calls and the number of calls (when `cost`).
    pub post_ticks: u64,
    pub post_calls: u64,
}

impl BwOutcome {
    /// A stop request (Ctrl-C) seen at the top of a pass, recorded as the error; `true`
    /// ends the loop.
    #[inline(always)]
    pub(super) fn stop_requested(&mut self) -> bool {
        let stop = stop::requested();
        if stop {
            self.error = Some(RunError::Interrupted);
        }
        stop
    }

    /// An iteration run's end: all `total` messages posted and completed.
    #[inline(always)]
    pub(super) const fn all_done(&self, total: u64) -> bool {
        self.posted >= total && self.completed >= total
    }
}

/// Per-QP counters, handed in so the loop allocates nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct QpCount {
    pub scnt: u64,
    pub ccnt: u64,
}

const QP_SHIFT: u32 = 48;
const SEQ_MASK: u64 = (1 << QP_SHIFT) - 1;

/// `wr_id` of the message with 0-based sequence `k` on QP `qp`: the completion
/// of this WR means `k + 1` messages of that QP are done.
#[inline(always)]
pub const fn wr_id(qp: u32, k: u64) -> u64 {
    ((qp as u64) << QP_SHIFT) | (k + 1)
}

/// Whether perftest signals message `k` (0-based) of a QP.
#[inline(always)]
pub const fn signaled(k: u64, j: u32, cfg: &BwConfig) -> bool {
    if cfg.post_list == 1 {
        k % cfg.cq_mod as u64 == cfg.cq_mod as u64 - 1 || (cfg.iters != 0 && k == cfg.iters - 1)
    } else {
        (j + 1) % cfg.cq_mod == 0
    }
}

/// Everything the loop works on, borrowed from the caller.
pub struct BwLoop<'a, S, C, F> {
    pub cfg: BwConfig,
    pub sqs: &'a mut [S],
    pub cq: &'a mut C,
    pub targets: &'a [QpTarget],
    pub counts: &'a mut [QpCount],
    /// Scratch for one post list (len >= post_list).
    pub list: &'a mut [WrDesc],
    /// Scratch for one poll.
    pub wcs: &'a mut [Completion],
    /// Peak timestamps (len = total messages) or empty when the peak is off.
    pub tposted: &'a mut [u64],
    pub tcompleted: &'a mut [u64],
    pub deadlines: Option<Deadlines>,
    /// `--run_infinitely`: publish a period row every `period_ticks` (None otherwise).
    pub periods: Option<&'a PeriodLog>,
    pub now: F,
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Phase {
    Warmup,
    Sample,
    Cooldown,
}

/// A send loop's place in the duration window and its idle stretch, shared by the RDMA and
/// the raw Ethernet bandwidth loops (the same phases, the same measured window).
pub(super) struct Window {
    pub(super) phase: Phase,
    /// Completions at the sample's start.
    pub(super) base: u64,
    pub(super) idle: watchdog::Idle,
}

impl Window {
    /// A duration run (`timed`) starts in the warm-up; an iteration run samples from the start.
    pub(super) fn new(timed: bool) -> Self {
        Window {
            phase: if timed { Phase::Warmup } else { Phase::Sample },
            base: 0,
            idle: watchdog::Idle::default(),
        }
    }

    /// Moves the duration window on at time `t`; `true` at its end. `rx`:
    /// messages received so far, measured with the send completions (a
    /// duplex loop's, perftest's `run_iter_bi`); 0 for a sender.
    #[inline(always)]
    pub(super) fn advance(&mut self, d: &Deadlines, t: u64, out: &mut BwOutcome, rx: u64) -> bool {
        if self.phase == Phase::Warmup && t >= d.sample_start {
            self.phase = Phase::Sample;
            out.t_start = t;
            self.base = out.completed + rx;
        } else if self.phase == Phase::Sample && t >= d.sample_stop {
            self.phase = Phase::Cooldown;
            out.t_end = t;
            out.measured = out.completed + rx - self.base;
        } else if self.phase == Phase::Cooldown && t >= d.end {
            return true;
        }
        false
    }

    /// The times and count the report uses, by how the loop ended (`timed`: with deadlines;
    /// `rx` as in [`advance`](Self::advance)).
    pub(super) fn close<F: Fn() -> u64>(
        &self,
        out: &mut BwOutcome,
        (timed, rx): (bool, u64),
        t0: u64,
        now: &F,
    ) {
        let sample_done = timed && self.phase == Phase::Cooldown;
        if out.error.is_some() && !sample_done {
            // Stopped early (error, stall, Ctrl-C): the partial result is every
            // message completed, from the loop's start to the last completion,
            // whatever phase the duration state machine was in.
            out.t_start = t0;
            out.t_end = self.idle.last_progress(now).max(t0 + 1);
            out.measured = out.completed;
        } else if !timed {
            out.t_end = now();
            out.measured = out.completed;
        } else if self.phase == Phase::Sample {
            // The run ended inside the sample window (end came before stop).
            out.t_end = now();
            out.measured = out.completed + rx - self.base;
        }
    }
}

/// The stall error: names the first QP with WRs outstanding (QP 0 where none is).
pub(super) fn stalled(counts: &[QpCount], idle_ticks: u64) -> RunError {
    let (qp, c) = counts
        .iter()
        .enumerate()
        .find(|(_, c)| c.scnt > c.ccnt)
        .map(|(i, c)| (i as u32, *c))
        .unwrap_or((0, QpCount::default()));
    RunError::Stalled {
        qp,
        outstanding: c.scnt - c.ccnt,
        last_completed: c.ccnt,
        idle_ticks,
    }
}

impl<S: SendQueue, C: CompletionQueue, F: Fn() -> u64> BwLoop<'_, S, C, F> {
    /// Run to completion (all iterations, or the duration's end), an error, or a stop request.
    pub fn run(&mut self) -> BwOutcome {
        self.run_paced(&mut Unpaced)
    }

    /// [`run`](Self::run) with the posts paced by `pace` (the SW rate limiter). One pass: the
    /// clock's arms (periods, the duration window), every QP's TX window filled, the CQ
    /// drained, the watchdog. The steps are `#[inline(always)]`, so the pass compiles as the
    /// one loop it was (`tests/disasm_bf.rs` reads the BlueFlame copy inside it).
    pub fn run_paced<P: Pace>(&mut self, pace: &mut P) -> BwOutcome {
        let total = self.cfg.iters * self.sqs.len() as u64;
        let mut out = BwOutcome::default();
        let t0 = (self.now)();
        out.t_start = t0;
        let mut k = Ticks {
            win: Window::new(self.deadlines.is_some()),
            period: self
                .periods
                .map(|l| (l, PeriodClock::new(t0, l.period_ticks()))),
            // A paced run reads the clock every pass: its spin is the pacing.
            paced: pace.paced(),
            fresh: true,
            t: t0,
        };
        loop {
            if out.stop_requested() || self.clock_says_end(&mut k, &mut out) {
                break;
            }
            if self.deadlines.is_none() && out.all_done(total) {
                break;
            }
            let posted_before = out.posted;
            if self.fill_windows(pace, k.t, &mut out).is_err() {
                break;
            }
            if self.drain(&mut k, &mut out, posted_before).is_err() {
                break;
            }
        }
        k.win
            .close(&mut out, (self.deadlines.is_some(), 0), t0, &self.now);
        out
    }

    /// Reads the clock where a reading is due (see [`Ticks`]) and runs its arms: a
    /// `--run_infinitely` period row, the duration window's phase. `true` ends the loop.
    #[inline(always)]
    fn clock_says_end(&mut self, k: &mut Ticks<'_>, out: &mut BwOutcome) -> bool {
        let timed = self.deadlines.is_some() || k.period.is_some();
        let read = k.paced || (timed && k.fresh);
        if !read {
            return false;
        }
        k.fresh = false;
        k.t = (self.now)();
        if !timed {
            return false;
        }
        let t = k.t;
        if let Some((log, clock)) = k.period.as_mut() {
            if let Some(s) = clock.tick(t, out.completed) {
                log.publish(&s);
            }
        }
        match self.deadlines {
            Some(d) => k.win.advance(&d, t, out, 0),
            None => false,
        }
    }

    /// Keeps every QP's TX window full (`scnt - ccnt + post_list <= tx_depth`), as far as
    /// `pace` lets it at time `t`.
    #[inline(always)]
    fn fill_windows<P: Pace>(
        &mut self,
        pace: &mut P,
        t: u64,
        out: &mut BwOutcome,
    ) -> Result<(), Ended> {
        let cfg = self.cfg;
        let pl = cfg.post_list as u64;
        let peak = !self.tposted.is_empty();
        for q in 0..self.sqs.len() {
            if !pace.may_post(t) {
                // Rate limited: poll until the next burst is due.
                continue;
            }
            while (cfg.iters == 0 || self.counts[q].scnt < cfg.iters)
                && self.counts[q].scnt + pl <= cfg.tx_depth as u64 + self.counts[q].ccnt
                && pace.in_burst()
            {
                fill_list(
                    self.list,
                    &cfg,
                    q,
                    self.targets[q],
                    self.counts[q].scnt,
                    true,
                );
                if peak {
                    if let Some(slot) = self.tposted.get_mut(out.posted as usize) {
                        *slot = (self.now)();
                    }
                }
                let t_post = if cfg.cost { (self.now)() } else { 0 };
                let posted = self.sqs[q].post(cfg.op, &self.list[..cfg.post_list as usize]);
                if cfg.cost {
                    out.post_ticks += (self.now)().wrapping_sub(t_post);
                    out.post_calls += 1;
                }
                if let Err(err) = posted {
                    out.error = Some(RunError::Post { qp: q as u32, err });
                    return Err(Ended);
                }
                self.counts[q].scnt += pl;
                out.posted += pl;
                pace.posted(pl);
            }
        }
        Ok(())
    }

    /// One poll of the CQ when sends are outstanding: each completion retires its QP's WRs up
    /// to its sequence number; no progress for long asks the watchdog.
    #[inline(always)]
    fn drain(
        &mut self,
        k: &mut Ticks<'_>,
        out: &mut BwOutcome,
        posted_before: u64,
    ) -> Result<(), Ended> {
        if out.completed >= out.posted {
            k.win.idle.progress();
            k.fresh = true;
            return Ok(());
        }
        let n = match self.cq.poll(self.wcs) {
            Ok(n) => n,
            Err(err) => {
                out.error = Some(RunError::Poll { err });
                return Err(Ended);
            }
        };
        self.retire(n, out)?;
        if n > 0 || out.posted > posted_before {
            k.win.idle.progress();
            k.fresh = true;
            return Ok(());
        }
        let Some((_, idle_ticks)) = k.win.idle.empty(&self.now) else {
            return Ok(());
        };
        k.fresh = true;
        self.watch(idle_ticks, out)
    }

    /// The first `n` completions of the poll scratch, retired against their QPs' counts.
    #[inline(always)]
    fn retire(&mut self, n: usize, out: &mut BwOutcome) -> Result<(), Ended> {
        let peak = !self.tposted.is_empty();
        for wc in &self.wcs[..n] {
            let q = (wc.wr_id >> QP_SHIFT) as usize;
            // A receive completion (a responder CQE on a shared CQ,
            // whose wr_id is an RQ index) must not count for QP 0.
            if wc.status != WcStatus::SUCCESS
                || q >= self.counts.len()
                || wc.opcode.0 >= WcOpcode::RECV.0
            {
                out.error = Some(RunError::completion(q as u32, *wc));
                return Err(Ended);
            }
            let done = wc.wr_id & SEQ_MASK;
            let c = &mut self.counts[q];
            if done > c.ccnt {
                out.completed += done - c.ccnt;
                c.ccnt = done;
            }
            if peak && out.completed > 0 {
                let ts = (self.now)();
                if let Some(slot) = self.tcompleted.get_mut(out.completed as usize - 1) {
                    *slot = ts;
                }
            }
        }
        Ok(())
    }

    /// An idle stretch with sends outstanding: the peer gone or finished, or a stall naming
    /// the first QP with WRs outstanding.
    #[inline(always)]
    fn watch(&self, idle_ticks: u64, out: &mut BwOutcome) -> Result<(), Ended> {
        let in_flight = (out.posted - out.completed).saturating_mul(self.cfg.size as u64);
        let e = watchdog::check(idle_ticks, self.cfg.stall_ticks, in_flight);
        if e == Expiry::No {
            return Ok(());
        }
        if let Some(p) = RunError::of_peer(e) {
            out.error = Some(p);
            return Err(Ended);
        }
        out.error = Some(stalled(self.counts, idle_ticks));
        Err(Ended)
    }
}

/// The loop's place in time. The clock is read only where a reading is needed (see
/// `watchdog::SPINS_PER_CLOCK`): with deadlines or periods after each pass that made progress
/// and once per idle stretch of spins; the watchdog on its own idle readings; a paced run
/// every pass.
struct Ticks<'a> {
    win: Window,
    period: Option<(&'a PeriodLog, PeriodClock)>,
    paced: bool,
    fresh: bool,
    /// The last reading.
    t: u64,
}

/// The loop must stop; why is already in the outcome.
pub(super) struct Ended;

/// The next post list of QP `q` from its send count `scnt` on, into `list`: each WR at its
/// message position (one WR per list; a list reuses offset 0, as perftest does). `remote_step`:
/// the remote address moves with the local one (write/read), else it stays (SEND, duplex).
#[inline(always)]
pub(super) fn fill_list(
    list: &mut [WrDesc],
    cfg: &BwConfig,
    q: usize,
    tg: QpTarget,
    scnt: u64,
    remote_step: bool,
) {
    for j in 0..cfg.post_list {
        let k = scnt + j as u64;
        let off = if cfg.post_list == 1 {
            (k % cfg.positions) * cfg.step
        } else {
            0
        };
        list[j as usize] = WrDesc {
            wr_id: wr_id(q as u32, k),
            laddr: tg.laddr + off,
            lkey: tg.lkey,
            len: cfg.size,
            raddr: tg.raddr + if remote_step { off } else { 0 },
            rkey: tg.rkey,
            imm: 0,
            // perftest's atomics: FETCH_AND_ADD adds 1, CMP_AND_SWAP 0/0.
            swap_add: u64::from(cfg.op == Op::FetchAdd),
            compare: 0,
            signaled: signaled(k, j, cfg),
            inline: cfg.inline,
        };
    }
}
