//! The raw Ethernet sender loop (perftest's `run_iter_bw` on a raw packet
//! QP, the client side of raw_ethernet_bw): frames already built in the
//! buffer (`raw::slots`) go out in lists of `-l`, as far as the TX window
//! lets them, over a [`RawPost`] chosen once outside the loop. Hot path: no
//! allocation, lock, format, syscall or panic; every buffer is handed in.
//!
//! Shared with the RDMA bw loop: the outcome and error types, the duration
//! window ([`Deadlines`]: warm-up, sample, cool-down), `wr_id`'s encoding of
//! QP and sequence, the stop flag and the stall watchdog.

use super::bw::{stalled, wr_id, BwOutcome, Deadlines, QpCount, RunError, Window};
use super::pace::{Pace, Unpaced};
use super::watchdog::{self, Expiry};
use crate::mlx5::raw_sq::{RawPkt, RawSq};
use crate::mlx5::Mmio;
use crate::post::{
    Completion, CompletionQueue, Op, PostError, SendQueue, WcOpcode, WcStatus, WrDesc,
};
use crate::raw::slots::Slots;

/// Where a completion's `wr_id` puts the QP's index (below it: the frames
/// of that QP the completion retires, counted from 1).
pub const QP_SHIFT: u32 = 48;
const SEQ_MASK: u64 = (1 << QP_SHIFT) - 1;

/// Posting a list of frames. `first` is the 0-based sequence number of
/// `pkts[0]` on this QP; with `signal` the list's last frame asks for a
/// completion that retires every frame up to it.
pub trait RawPost {
    fn post_frames(&mut self, pkts: &[RawPkt], first: u64, signal: bool) -> Result<(), PostError>;
}

/// `direct`: one SEND WQE per frame ([`RawSq::post_send`]). Completions
/// carry the SQ's packet count, which is QP 0's `wr_id`; with several QPs
/// on one CQ, poll it through `run::raw_qpn::ByQpn`, which puts each
/// completion's QP index in.
pub struct Direct<M: Mmio>(pub RawSq<M>);

/// `direct-mpw`: enhanced multi-packet WQEs by pointer ([`RawSq::post_mpw`]).
pub struct DirectMpw<M: Mmio>(pub RawSq<M>);

impl<M: Mmio> RawPost for Direct<M> {
    #[inline(always)]
    fn post_frames(&mut self, pkts: &[RawPkt], _first: u64, signal: bool) -> Result<(), PostError> {
        if signal {
            self.0.signal_list_end();
        }
        self.0.post_send(pkts)
    }
}

impl<M: Mmio> RawPost for DirectMpw<M> {
    #[inline(always)]
    fn post_frames(&mut self, pkts: &[RawPkt], _first: u64, signal: bool) -> Result<(), PostError> {
        if signal {
            self.0.signal_list_end();
        }
        self.0.post_mpw(pkts, false)
    }
}

/// `post-send` and `wr-api`: a SEND with one SGE per frame through a verbs
/// [`SendQueue`] (perftest's forced `ibv_post_send`, or `ibv_wr_send` with
/// `ibv_wr_set_sge`). `descs` is the scratch for one list (len ≥ `-l`).
pub struct Verbs<S: SendQueue> {
    pub sq: S,
    pub qp: u32,
    pub lkey: u32,
    /// `-I`: frames up to this many bytes go inline.
    pub inline_max: u32,
    pub descs: Box<[WrDesc]>,
}

impl<S: SendQueue> RawPost for Verbs<S> {
    #[inline(always)]
    fn post_frames(&mut self, pkts: &[RawPkt], first: u64, signal: bool) -> Result<(), PostError> {
        let n = pkts.len();
        let Some(descs) = self.descs.get_mut(..n) else {
            return Err(PostError::Unsupported);
        };
        for (j, (d, p)) in descs.iter_mut().zip(pkts).enumerate() {
            *d = WrDesc {
                wr_id: wr_id(self.qp, first + j as u64),
                laddr: p.addr,
                lkey: self.lkey,
                len: p.len,
                signaled: signal && j + 1 == n,
                inline: p.len <= self.inline_max,
                ..WrDesc::default()
            };
        }
        self.sq.post(Op::Send, descs)
    }
}

/// What else each pass of the send loop does: the receive side of `-b`
/// (`run::raw_duplex`). Its errors are its own to keep and report.
pub trait Beside {
    /// One turn of the other side; false ends the loop.
    fn pass(&mut self) -> bool;
    /// Whether sends may go out (a duplex server holds them until its first
    /// frame); by default they may (a constant the loop folds away).
    fn may_send(&self) -> bool {
        true
    }
    /// Whether the other side has all it waits for; by default it waits
    /// for nothing.
    fn done(&self) -> bool {
        true
    }
    /// What the other side counted so far (frames received): a duration
    /// run measures them with the send completions inside its sample
    /// window, as perftest's `run_iter_bi`; none by default.
    fn counted(&self) -> u64 {
        0
    }
}

/// Nothing beside the sender (one way).
pub struct Alone;

impl Beside for Alone {
    #[inline(always)]
    fn pass(&mut self) -> bool {
        true
    }
}

/// The loop's numbers (perftest's names).
#[derive(Clone, Copy, Debug)]
pub struct RawBwConfig {
    /// Frames per QP; 0 in duration mode.
    pub iters: u64,
    pub post_list: u32,
    pub tx_depth: u32,
    pub cq_mod: u32,
    /// Give up after this many ticks without a completion, work outstanding.
    pub stall_ticks: u64,
}

/// Whether the list of `n` frames from `first` on asks for a completion:
/// it holds perftest's every `cq_mod`-th frame, or the run's last one.
#[inline(always)]
pub const fn signals(first: u64, n: u64, cfg: &RawBwConfig) -> bool {
    let m = cfg.cq_mod as u64;
    let last = first + n - 1;
    (last + 1) / m > first / m || (cfg.iters != 0 && last == cfg.iters - 1)
}

/// Everything the loop works on, borrowed from the caller.
pub struct RawBwLoop<'a, P, C, F> {
    pub cfg: RawBwConfig,
    pub posts: &'a mut [P],
    pub cq: &'a mut C,
    /// Each QP's buffer start and layout.
    pub bases: &'a [u64],
    pub slots: Slots,
    pub counts: &'a mut [QpCount],
    /// Scratch for one list (len ≥ post_list).
    pub list: &'a mut [RawPkt],
    pub wcs: &'a mut [Completion],
    /// perftest's peak stamps, indexed by frame over every QP: `tposted`
    /// at each list's first frame as it is posted, `tcompleted` at the
    /// last frame a completion retires (len = `-n` × QPs). Empty: the peak
    /// is off (`-N`, `-D`) and the loop reads no clock for them.
    pub tposted: &'a mut [u64],
    pub tcompleted: &'a mut [u64],
    pub deadlines: Option<Deadlines>,
    pub now: F,
}

impl<P: RawPost, C: CompletionQueue, F: Fn() -> u64> RawBwLoop<'_, P, C, F> {
    /// Runs to the last frame's completion (or the window's end), an error
    /// or a stop request.
    pub fn run(&mut self) -> BwOutcome {
        self.run_paced(&mut Unpaced)
    }

    /// [`run`](Self::run) with the posts paced by `pace` (the SW rate
    /// limiter, perftest's `--rate_limit_type=SW`). With [`Unpaced`] the
    /// pacing folds away and no clock is read for it.
    pub fn run_paced<Q: Pace>(&mut self, pace: &mut Q) -> BwOutcome {
        self.run_beside(pace, &mut Alone)
    }

    /// [`run_paced`](Self::run_paced) with `beside` (the receive side of
    /// `-b`) given a pass after each of the sender's: the loop ends when
    /// both are done, sends start once `beside` lets them (the run's clock
    /// starts there), and the end is the last send completion (perftest's
    /// `tcompleted`), however long the receives took after it.
    pub fn run_beside<Q: Pace, B: Beside>(&mut self, pace: &mut Q, beside: &mut B) -> BwOutcome {
        let total = self.cfg.iters * self.posts.len() as u64;
        let t0 = (self.now)();
        let mut out = BwOutcome {
            t_start: t0,
            ..BwOutcome::default()
        };
        // The slices the loop indexes, checked once so the loop cannot panic.
        let q = self.posts.len();
        if self.bases.len() < q
            || self.counts.len() < q
            || self.list.len() < self.cfg.post_list as usize
            || self.wcs.is_empty()
            || self.cfg.post_list == 0
            || self.cfg.cq_mod == 0
        {
            out.error = Some(RunError::Post {
                qp: 0,
                err: PostError::Unsupported,
            });
            return out;
        }
        let mut w = Window::new(self.deadlines.is_some());
        let mut gated = !beside.may_send();
        let mut t_sent = 0;
        loop {
            // A held server's window waits for its first frame.
            let rx = beside.counted();
            if out.stop_requested() || (!gated && self.window_over(&mut w, &mut out, rx)) {
                break;
            }
            let sent = self.deadlines.is_none() && out.all_done(total);
            if sent && t_sent == 0 {
                t_sent = (self.now)();
            }
            if sent && beside.done() {
                break;
            }
            if gated && beside.may_send() {
                gated = false;
                out.t_start = self.open(t0);
            }
            let before = out.posted;
            // A paced run reads the clock every pass: its spin is the pacing.
            let t = if pace.paced() { (self.now)() } else { 0 };
            if (!gated && self.fill(pace, t, &mut out).is_err())
                || self.drain(&mut w, &mut out, before).is_err()
                || !beside.pass()
            {
                break;
            }
        }
        let t_first = out.t_start;
        let timed = (self.deadlines.is_some(), beside.counted());
        w.close(&mut out, timed, t_first, &self.now);
        if t_sent != 0 && out.error.is_none() {
            out.t_end = t_sent;
        }
        out
    }

    /// The duration window's phases; true at its end. `rx`: the frames
    /// the receive side counted, measured with the sends.
    #[inline(always)]
    fn window_over(&mut self, w: &mut Window, out: &mut BwOutcome, rx: u64) -> bool {
        let Some(d) = self.deadlines else {
            return false;
        };
        w.advance(&d, (self.now)(), out, rx)
    }

    /// Sends let go (a duplex server's first frame) at the time returned:
    /// the clock starts there, and so does a duration window, moved on by
    /// the wait since the loop's start `t0` (perftest's duplex server
    /// starts its duration state at its first frame).
    fn open(&mut self, t0: u64) -> u64 {
        let t = (self.now)();
        if let Some(d) = &mut self.deadlines {
            let wait = t.wrapping_sub(t0);
            d.sample_start = d.sample_start.wrapping_add(wait);
            d.sample_stop = d.sample_stop.wrapping_add(wait);
            d.end = d.end.wrapping_add(wait);
        }
        t
    }

    /// Every QP's window filled: `scnt + list <= tx_depth + ccnt`, as far
    /// as `pace` lets it at time `t`. A full ring (`QueueFull`) waits for
    /// completions instead.
    #[inline(always)]
    fn fill<Q: Pace>(&mut self, pace: &mut Q, t: u64, out: &mut BwOutcome) -> Result<(), ()> {
        let cfg = self.cfg;
        let pl = cfg.post_list as u64;
        for q in 0..self.posts.len() {
            if !pace.may_post(t) {
                // Rate limited: poll until the next burst is due.
                continue;
            }
            while pace.in_burst() {
                let c = self.counts[q];
                // The last list of an iterations run is cut at -n.
                let n = if cfg.iters != 0 {
                    pl.min(cfg.iters.saturating_sub(c.scnt))
                } else {
                    pl
                };
                if n == 0 || c.scnt + n > cfg.tx_depth as u64 + c.ccnt {
                    break;
                }
                let base = self.bases[q];
                let list = &mut self.list[..n as usize];
                for (j, p) in list.iter_mut().enumerate() {
                    let k = c.scnt + j as u64;
                    *p = RawPkt {
                        addr: base + self.slots.offset(k),
                        len: self.slots.frame_len,
                    };
                }
                let sig = signals(c.scnt, n, &cfg);
                if let Some(slot) = self.tposted.get_mut(out.posted as usize) {
                    *slot = (self.now)();
                }
                match self.posts[q].post_frames(list, c.scnt, sig) {
                    Ok(()) => {}
                    Err(PostError::QueueFull) => break,
                    Err(err) => {
                        out.error = Some(RunError::Post { qp: q as u32, err });
                        return Err(());
                    }
                }
                self.counts[q].scnt += n;
                out.posted += n;
                pace.posted(n);
            }
        }
        Ok(())
    }

    /// One poll when frames are outstanding; each completion retires its
    /// QP's frames up to its sequence number.
    #[inline(always)]
    fn drain(&mut self, w: &mut Window, out: &mut BwOutcome, before: u64) -> Result<(), ()> {
        if out.completed >= out.posted {
            w.idle.progress();
            return Ok(());
        }
        let n = match self.cq.poll(self.wcs) {
            Ok(n) => n,
            Err(err) => {
                out.error = Some(RunError::Poll { err });
                return Err(());
            }
        };
        for wc in &self.wcs[..n] {
            let q = (wc.wr_id >> QP_SHIFT) as usize;
            // A receive completion would not be ours to count (an eMPW
            // WQE's CQE carries its own opcode, 0x100 | 0x29: a send).
            let recv = matches!(wc.opcode, WcOpcode::RECV | WcOpcode::RECV_RDMA_WITH_IMM);
            if wc.status != WcStatus::SUCCESS || q >= self.counts.len() || recv {
                out.error = Some(RunError::completion(q as u32, *wc));
                return Err(());
            }
            let done = wc.wr_id & SEQ_MASK;
            let c = &mut self.counts[q];
            if done > c.ccnt {
                out.completed += done - c.ccnt;
                c.ccnt = done;
                if let Some(slot) = self.tcompleted.get_mut(out.completed as usize - 1) {
                    *slot = (self.now)();
                }
            }
        }
        if n > 0 || out.posted > before {
            w.idle.progress();
            return Ok(());
        }
        let Some((_, idle_ticks)) = w.idle.empty(&self.now) else {
            return Ok(());
        };
        let in_flight = (out.posted - out.completed).saturating_mul(self.slots.frame_len as u64);
        if watchdog::check(idle_ticks, self.cfg.stall_ticks, in_flight) == Expiry::No {
            return Ok(());
        }
        out.error = Some(stalled(self.counts, idle_ticks));
        Err(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(iters: u64, cq_mod: u32) -> RawBwConfig {
        RawBwConfig {
            iters,
            post_list: 1,
            tx_depth: 128,
            cq_mod,
            stall_ticks: u64::MAX,
        }
    }

    #[test]
    fn signals_every_cq_mod_th_and_the_last() {
        let c = cfg(10, 4);
        let s: Vec<u64> = (0..10).filter(|&k| signals(k, 1, &c)).collect();
        assert_eq!(s, [3, 7, 9]);
        let d = cfg(0, 4);
        assert!(!signals(9, 1, &d), "no last frame in duration mode");
        assert!(signals(0, 8, &d) && signals(2, 4, &d) && !signals(4, 3, &d));
    }

    /// A queue that records its lists; a signalled list completes at once.
    struct Rec<'a> {
        lists: Vec<(u64, usize, bool)>,
        done: &'a std::cell::Cell<u64>,
    }
    impl RawPost for Rec<'_> {
        fn post_frames(&mut self, p: &[RawPkt], first: u64, signal: bool) -> Result<(), PostError> {
            self.lists.push((first, p.len(), signal));
            if signal {
                self.done.set(first + p.len() as u64);
            }
            Ok(())
        }
    }
    struct Cq<'a>(&'a std::cell::Cell<u64>);
    impl CompletionQueue for Cq<'_> {
        fn poll(&mut self, out: &mut [Completion]) -> Result<usize, PostError> {
            let d = self.0.replace(0);
            if d == 0 {
                return Ok(0);
            }
            out[0] = Completion {
                wr_id: d,
                status: WcStatus::SUCCESS,
                ..Completion::default()
            };
            Ok(1)
        }
    }

    #[test]
    fn iterations_post_each_frame_once_and_end_signalled() {
        let done = std::cell::Cell::new(0);
        let mut posts = [Rec {
            lists: vec![],
            done: &done,
        }];
        let mut cq = Cq(&done);
        let mut counts = [QpCount::default()];
        let mut list = [RawPkt::default(); 4];
        let mut wcs = [Completion::default(); 4];
        let mut c = cfg(22, 8);
        c.post_list = 2;
        c.tx_depth = 8;
        let out = RawBwLoop {
            cfg: c,
            posts: &mut posts,
            cq: &mut cq,
            bases: &[0x1000],
            slots: Slots::new(64, 1, 1, 2, 4096),
            counts: &mut counts,
            list: &mut list,
            wcs: &mut wcs,
            tposted: &mut [],
            tcompleted: &mut [],
            deadlines: None,
            now: || 0,
        }
        .run();
        assert_eq!(out.error, None);
        assert_eq!((out.posted, out.completed, out.measured), (22, 22, 22));
        let firsts: Vec<u64> = posts[0].lists.iter().map(|l| l.0).collect();
        assert_eq!(firsts, (0..22).step_by(2).collect::<Vec<_>>());
        assert!(
            posts[0].lists.last().unwrap().2,
            "the last list asks for a completion"
        );
        assert_eq!((counts[0].scnt, counts[0].ccnt), (22, 22));
    }

    fn run_rec(
        c: RawBwConfig,
        deadlines: Option<Deadlines>,
        now: impl Fn() -> u64,
    ) -> (BwOutcome, Vec<(u64, usize, bool)>) {
        run_rec_beside(c, deadlines, now, &mut Alone, (&mut [], &mut []))
    }

    fn run_rec_beside(
        c: RawBwConfig,
        deadlines: Option<Deadlines>,
        now: impl Fn() -> u64,
        beside: &mut impl Beside,
        (tposted, tcompleted): (&mut [u64], &mut [u64]),
    ) -> (BwOutcome, Vec<(u64, usize, bool)>) {
        let done = std::cell::Cell::new(0);
        let mut posts = [Rec {
            lists: vec![],
            done: &done,
        }];
        let mut counts = [QpCount::default()];
        let mut list = [RawPkt::default(); 8];
        let mut wcs = [Completion::default(); 4];
        let out = RawBwLoop {
            cfg: c,
            posts: &mut posts,
            cq: &mut Cq(&done),
            bases: &[0],
            slots: Slots::new(64, 1, 1, c.post_list, 4096),
            counts: &mut counts,
            list: &mut list,
            wcs: &mut wcs,
            tposted,
            tcompleted,
            deadlines,
            now,
        }
        .run_beside(&mut Unpaced, beside);
        let [p] = posts;
        (out, p.lists)
    }

    /// A receive side that lets sends go after `open` passes and is done
    /// after `done`.
    struct Gate {
        passes: u64,
        open: u64,
        done: u64,
    }
    impl Beside for Gate {
        fn pass(&mut self) -> bool {
            self.passes += 1;
            true
        }
        fn may_send(&self) -> bool {
            self.passes >= self.open
        }
        fn done(&self) -> bool {
            self.passes >= self.done
        }
    }

    #[test]
    fn beside_holds_the_sends_and_the_end_and_the_clock_runs_from_the_first_send() {
        let t = std::cell::Cell::new(0u64);
        let mut gate = Gate {
            passes: 0,
            open: 5,
            done: 200,
        };
        let now = || {
            t.set(t.get() + 1);
            t.get()
        };
        let (out, lists) = run_rec_beside(cfg(22, 4), None, now, &mut gate, (&mut [], &mut []));
        assert_eq!(out.error, None);
        assert_eq!((out.posted, out.completed, lists.len()), (22, 22, 22));
        assert_eq!(
            gate.passes, 200,
            "the loop ran until the receive side was done"
        );
        // Ticks: the loop's start reads 1; the sends start after 5 passes.
        assert!(out.t_start > 1, "the clock starts at the first send");
        assert!(
            out.t_end < t.get(),
            "the end is the last send completion ({}), not the loop's end ({})",
            out.t_end,
            t.get()
        );
    }

    /// A run of 22 frames in lists of 2, a window of 4, a completion every
    /// 4th, with the peak stamps given (or empty): the outcome and the
    /// clock's readings.
    fn run_stamped(tposted: &mut [u64], tcompleted: &mut [u64]) -> (BwOutcome, u64) {
        let t = std::cell::Cell::new(0u64);
        let mut c = cfg(22, 4);
        c.post_list = 2;
        // One completion in flight at a time (the fake CQ keeps the last).
        c.tx_depth = 4;
        let now = || {
            t.set(t.get() + 1);
            t.get()
        };
        let (out, _) = run_rec_beside(c, None, now, &mut Alone, (tposted, tcompleted));
        (out, t.get())
    }

    #[test]
    fn peak_stamps_at_each_list_and_each_completion_and_none_when_off() {
        let (mut tp, mut tc) = ([0u64; 22], [0u64; 22]);
        let (out, reads) = run_stamped(&mut tp, &mut tc);
        assert_eq!(out.error, None);
        assert_eq!((out.posted, out.completed), (22, 22));
        let posted: Vec<usize> = (0..22).filter(|&i| tp[i] != 0).collect();
        assert_eq!(posted, (0..22).step_by(2).collect::<Vec<_>>(), "{tp:?}");
        // Every 4th frame's completion, and the last frame's (22 is no
        // multiple of 4): perftest's `tcompleted[totccnt - 1]`.
        let completed: Vec<usize> = (0..22).filter(|&j| tc[j] != 0).collect();
        assert_eq!(completed, [3, 7, 11, 15, 19, 21], "{tc:?}");
        for &j in &completed {
            for &i in posted.iter().filter(|&&i| i <= j) {
                assert!(tc[j] > tp[i], "frame {j} completed before {i} was posted");
            }
        }
        let (off, off_reads) = run_stamped(&mut [], &mut []);
        assert_eq!((off.posted, off.completed), (22, 22));
        assert_eq!(
            reads - off_reads,
            (posted.len() + completed.len()) as u64,
            "without stamps the loop reads the clock only for its own ends"
        );
    }

    #[test]
    fn the_last_list_is_cut_at_n() {
        let mut c = cfg(23, 8);
        c.post_list = 4;
        let (out, lists) = run_rec(c, None, || 0);
        assert_eq!((out.posted, out.completed), (23, 23));
        assert_eq!(lists.last().copied(), Some((20, 3, true)));
    }

    #[test]
    fn duration_mode_measures_the_sample_window() {
        let t = std::cell::Cell::new(0u64);
        let d = Deadlines {
            sample_start: 100,
            sample_stop: 300,
            end: 400,
        };
        let (out, lists) = run_rec(cfg(0, 4), Some(d), || {
            t.set(t.get() + 1);
            t.get()
        });
        assert_eq!(out.error, None);
        assert!(
            out.t_start >= 100 && out.t_end >= 300 && out.t_end < 400,
            "{out:?}"
        );
        assert!(out.measured > 0 && out.measured < out.completed, "{out:?}");
        assert_eq!(lists.len() as u64, out.posted);
    }

    /// A receive side that counts a frame each pass (noting the clock at
    /// each, a tick a pass) and lets sends go after `open` passes (noting
    /// when).
    struct Rx<'a> {
        t: &'a std::cell::Cell<u64>,
        open: u64,
        frames: Vec<u64>,
        opened_at: u64,
    }
    impl Beside for Rx<'_> {
        fn pass(&mut self) -> bool {
            self.frames.push(self.t.get());
            if self.frames.len() as u64 == self.open {
                self.opened_at = self.t.get();
            }
            // A poll takes a tick.
            self.t.set(self.t.get() + 1);
            true
        }
        fn may_send(&self) -> bool {
            self.frames.len() as u64 >= self.open
        }
        fn counted(&self) -> u64 {
            self.frames.len() as u64
        }
    }

    const WINDOW: Deadlines = Deadlines {
        sample_start: 100,
        sample_stop: 300,
        end: 400,
    };

    /// A `-b -D` run (`WINDOW`) beside [`Rx`] letting sends go after
    /// `open` passes: the outcome, the frames' times, when the sends were
    /// let go, and the clock's last reading.
    fn run_rx(c: RawBwConfig, open: u64) -> (BwOutcome, Vec<u64>, u64, u64) {
        let t = std::cell::Cell::new(0u64);
        let mut rx = Rx {
            t: &t,
            open,
            frames: vec![],
            opened_at: 0,
        };
        let now = || {
            t.set(t.get() + 1);
            t.get()
        };
        let (out, _) = run_rec_beside(c, Some(WINDOW), now, &mut rx, (&mut [], &mut []));
        (out, rx.frames, rx.opened_at, t.get())
    }

    /// `-b -D`: the frames received inside the sample window are measured
    /// with the sends (none complete here: none is signalled, `-Q` being
    /// beyond any count).
    #[test]
    fn duplex_duration_measures_the_frames_received_in_the_window() {
        let (out, frames, _, _) = run_rx(cfg(0, u32::MAX), 0);
        assert_eq!(out.error, None);
        assert_eq!(out.completed, 0);
        let inside = frames
            .iter()
            .filter(|&&f| f >= out.t_start && f < out.t_end)
            .count() as u64;
        assert!(
            inside > 0 && (out.t_start, out.t_end) >= (100, 300),
            "{out:?}"
        );
        assert_eq!(out.measured, inside, "{out:?}");
    }

    /// A duplex server's window starts at its first frame (perftest starts
    /// its duration state there), not at the loop's start.
    #[test]
    fn a_held_servers_window_starts_when_its_sends_do() {
        let (out, _, wait, last) = run_rx(cfg(0, 4), 150);
        assert_eq!(out.error, None);
        assert!(wait >= 150, "opened at {wait}");
        assert!(
            out.t_start >= wait + 98 && out.t_end >= wait + 298 && last >= wait + 398,
            "the window from {wait}: {out:?}"
        );
        assert!(out.measured > 0 && out.posted > 0, "{out:?}");
    }

    #[test]
    fn verbs_posts_one_send_per_frame() {
        struct Sq(Vec<(Op, WrDesc)>);
        impl SendQueue for Sq {
            fn post(&mut self, op: Op, wrs: &[WrDesc]) -> Result<(), PostError> {
                self.0.extend(wrs.iter().map(|w| (op, *w)));
                Ok(())
            }
        }
        let mut v = Verbs {
            sq: Sq(vec![]),
            qp: 3,
            lkey: 0x77,
            inline_max: 100,
            descs: vec![WrDesc::default(); 4].into_boxed_slice(),
        };
        let pkts = [
            RawPkt {
                addr: 0x1000,
                len: 60,
            },
            RawPkt {
                addr: 0x1040,
                len: 124,
            },
        ];
        v.post_frames(&pkts, 10, true).unwrap();
        v.post_frames(&pkts[..1], 12, false).unwrap();
        let got: Vec<(u64, u64, u32, bool, bool)> =
            v.sq.0
                .iter()
                .map(|(op, w)| {
                    assert_eq!((*op, w.lkey), (Op::Send, 0x77));
                    (w.wr_id, w.laddr, w.len, w.signaled, w.inline)
                })
                .collect();
        assert_eq!(
            got,
            [
                (wr_id(3, 10), 0x1000, 60, false, true),
                (wr_id(3, 11), 0x1040, 124, true, false),
                (wr_id(3, 12), 0x1000, 60, false, true),
            ]
        );
        let five = [RawPkt::default(); 5];
        assert_eq!(v.post_frames(&five, 0, false), Err(PostError::Unsupported));
    }

    #[test]
    fn short_scratch_is_refused_before_the_loop() {
        let mut c = cfg(8, 4);
        c.post_list = 4;
        let done = std::cell::Cell::new(0);
        let mut posts = [Rec {
            lists: vec![],
            done: &done,
        }];
        let out = RawBwLoop {
            cfg: c,
            posts: &mut posts,
            cq: &mut Cq(&done),
            bases: &[0],
            slots: Slots::new(64, 1, 1, 4, 4096),
            counts: &mut [QpCount::default()],
            list: &mut [RawPkt::default(); 2],
            wcs: &mut [Completion::default(); 4],
            tposted: &mut [],
            tcompleted: &mut [],
            deadlines: None,
            now: || 0,
        }
        .run();
        assert!(matches!(out.error, Some(RunError::Post { .. })), "{out:?}");
        assert!(posts[0].lists.is_empty());
    }
}
