//! Latency loops (perftest `run_iter_lat_write`, `run_iter_lat`,
//! `run_iter_lat_send`), generic over the post method. In iterations mode each
//! loop stamps `tposted[i]` before post i and the report turns consecutive
//! stamps into samples; in duration mode (`end != 0`) it counts the round trips
//! that complete inside the sample window instead.
//!
//! Who starts a ping-pong follows perftest (4.5 and master alike): in
//! write-lat the *server* writes first and the client first waits; in
//! send-lat the *client* sends first and the server first waits.

use super::stop;
use super::watchdog::{self, Expiry};
use crate::post::{
    Completion, CompletionQueue, Op, PostError, RecvQueue, SendQueue, WcStatus, WrDesc,
};

/// The write-lat wire contract: the last byte of each write carries the low 8
/// bits of the sender's sequence number (1, 2, …, 255, 0, 1, …). The tool
/// implements this over the registered buffers with volatile accesses.
pub trait Mailbox {
    /// The last byte of the local region the peer writes into.
    fn received(&self) -> u8;
    /// Set the last byte of the local send buffer before posting.
    fn stamp(&mut self, seq: u8);
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LatError {
    Completion {
        wc: Completion,
    },
    Post {
        err: PostError,
    },
    Poll {
        err: PostError,
    },
    /// Nothing from the peer (or the NIC) for `stall_ticks`; `at` is the
    /// round trip (1-based) that was being waited for.
    Stalled {
        at: u64,
    },
    /// The peer's control connection closed while round trip `at` was awaited.
    PeerExited {
        at: u64,
    },
    /// The peer sent its next control message (its loop ended) while round
    /// trip `at` was awaited: the sides' -n differ.
    PeerFinished {
        at: u64,
    },
    Interrupted,
}

#[derive(Clone, Copy, Debug)]
pub struct LatConfig {
    pub op: Op,
    pub size: u32,
    /// Iterations (ignored in duration mode).
    pub iters: u64,
    pub inline: bool,
    /// true: this side posts first; false: it first waits for the peer.
    pub initiator: bool,
    pub stall_ticks: u64,
    /// Duration mode: stop when the clock passes this (0 = iterations mode).
    pub end: u64,
    /// Duration mode: round trips completing in `[sample_start, sample_stop)`
    /// are counted in [`LatOutcome::measured`].
    pub sample_start: u64,
    pub sample_stop: u64,
    /// send-lat: receives pre-posted; in iterations mode a receive is reposted
    /// only while `rcnt + rx_depth <= iters` (perftest), so none is left over.
    pub rx_depth: u64,
    /// `--latency_gap` in ticks: busy-wait this long before each post (0: none).
    pub gap_ticks: u64,
}

/// The clock before a post, after `--latency_gap`'s busy-wait of
/// `cfg.gap_ticks`, and the ticks waited. The loops take the waits off their
/// stamps, so a sample is the round trip alone (perftest's consecutive-post
/// stamps include the gap).
#[inline(always)]
fn gap_then_now<F: Fn() -> u64>(cfg: &LatConfig, now: &F) -> (u64, u64) {
    let start = now();
    if cfg.gap_ticks == 0 {
        return (start, 0);
    }
    let end = start + cfg.gap_ticks;
    let mut t = start;
    while t < end {
        core::hint::spin_loop();
        t = now();
    }
    (t, t - start)
}

impl LatConfig {
    fn duration(&self) -> bool {
        self.end != 0
    }
    #[inline(always)]
    fn ended(&self, t: u64) -> bool {
        self.end != 0 && t >= self.end
    }
    #[inline(always)]
    fn sampled(&self, t: u64) -> bool {
        t >= self.sample_start && t < self.sample_stop
    }
}

/// What the loop did.
#[derive(Clone, Copy, Debug, Default)]
pub struct LatOutcome {
    /// Messages this side posted (stamps written in iterations mode).
    pub iters: u64,
    /// Duration mode: round trips completed inside the sample window.
    pub measured: u64,
    pub t_start: u64,
    pub t_end: u64,
    pub error: Option<LatError>,
}

/// Every loop's start: the outcome stamped `t_start`, whether `-D` runs it, and the
/// iterations mode's count of round trips (0 under `-D`: time ends the run).
#[inline(always)]
fn start(cfg: &LatConfig, t_start: u64) -> (LatOutcome, bool, u64) {
    let out = LatOutcome {
        t_start,
        ..Default::default()
    };
    let dur = cfg.duration();
    (out, dur, if dur { 0 } else { cfg.iters })
}

impl LatOutcome {
    /// The run over: `iters` posted, ended at `t_end`.
    #[inline(always)]
    fn ended(mut self, iters: u64, t_end: u64) -> Self {
        self.iters = iters;
        self.t_end = t_end;
        self
    }
}

fn wr(cfg: &LatConfig, id: u64, laddr: u64, lkey: u32, raddr: u64, rkey: u32) -> WrDesc {
    WrDesc {
        wr_id: id,
        laddr,
        lkey,
        len: cfg.size,
        raddr,
        rkey,
        imm: 0,
        swap_add: if cfg.op == Op::FetchAdd { 1 } else { 0 },
        compare: 0,
        signaled: true,
        inline: cfg.inline,
    }
}

/// Spin until one completion arrives. `Ok(None)`: the duration ended first.
/// `at` names the round trip in a stall error.
#[inline(always)]
fn wait_one<C: CompletionQueue, F: Fn() -> u64>(
    cq: &mut C,
    now: &F,
    cfg: &LatConfig,
    at: u64,
) -> Result<Option<Completion>, LatError> {
    let watch = Watch {
        ended: |t| cfg.ended(t),
        stall_ticks: cfg.stall_ticks,
        bytes: cfg.size as u64,
        at,
    };
    wait_until(cq, now, &watch, |_| true)
}

/// What a latency wait watches besides its CQ: the `-D` end (`ended` at a
/// clock reading), the stall watchdog (`stall_ticks` of silence, a message
/// of `bytes`) and the round trip `at` to name in a stall error.
pub(crate) struct Watch<E> {
    pub ended: E,
    pub stall_ticks: u64,
    pub bytes: u64,
    pub at: u64,
}

/// Spin until a successful completion `accept` takes arrives (one it does
/// not take counts as progress and the spin goes on), watching Ctrl-C, the
/// `-D` end and the stall watchdog. `Ok(None)`: the duration ended first.
#[inline(always)]
pub(crate) fn wait_until<C, F, E, A>(
    cq: &mut C,
    now: &F,
    watch: &Watch<E>,
    accept: A,
) -> Result<Option<Completion>, LatError>
where
    C: CompletionQueue,
    F: Fn() -> u64,
    E: Fn(u64) -> bool,
    A: Fn(&Completion) -> bool,
{
    let at = watch.at;
    let mut wc = [Completion::default()];
    // No clock reading per empty poll (see `watchdog::SPINS_PER_CLOCK`).
    let mut idle = watchdog::Idle::default();
    loop {
        match cq.poll(&mut wc) {
            Ok(1) if wc[0].status == WcStatus::SUCCESS => {
                if accept(&wc[0]) {
                    return Ok(Some(wc[0]));
                }
                idle.progress();
                continue;
            }
            Ok(1) if stop::requested() => return Err(LatError::Interrupted),
            Ok(1) => return Err(LatError::Completion { wc: wc[0] }),
            Ok(_) => {}
            Err(err) => return Err(LatError::Poll { err }),
        }
        if stop::requested() {
            return Err(LatError::Interrupted);
        }
        let Some((t, idle_ticks)) = idle.empty(now) else {
            continue;
        };
        if (watch.ended)(t) {
            return Ok(None);
        }
        match watchdog::check(idle_ticks, watch.stall_ticks, watch.bytes) {
            Expiry::No => {}
            Expiry::PeerExited => return Err(LatError::PeerExited { at }),
            Expiry::PeerFinished => return Err(LatError::PeerFinished { at }),
            Expiry::Stalled => return Err(LatError::Stalled { at }),
        }
    }
}

/// Local and remote addressing for a latency test.
#[derive(Clone, Copy, Debug, Default)]
pub struct LatTarget {
    pub laddr: u64,
    pub lkey: u32,
    pub raddr: u64,
    pub rkey: u32,
    /// Receive buffer (send-lat).
    pub recv_addr: u64,
    pub recv_len: u32,
}

/// A wait's outcome folded into the run: `true` goes on, `false` ends it (the `-D` window
/// closed, or an error now in `out.error`). Shared by every ping-pong's waits.
#[inline(always)]
fn went_on<T>(r: Result<Option<T>, LatError>, out: &mut LatOutcome) -> bool {
    match r {
        Ok(Some(_)) => true,
        Ok(None) => false,
        Err(e) => {
            out.error = Some(e);
            false
        }
    }
}

/// [`went_on`] for a [`stamped_post`]: `Ok(false)` (the window ended) ends the run.
#[inline(always)]
fn post_went_on(r: Result<bool, LatError>, out: &mut LatOutcome) -> bool {
    went_on(r.map(|p| p.then_some(())), out)
}

/// The sending half of every ping-pong: `--latency_gap`'s wait, the sample's start stamp
/// (less the waits so far, so the gap is not in the sample), then the post of `list`.
/// `mark` runs between the count and the post (write-lat stamps its mailbox there). `Ok(false)`
/// when the `-D` window ended before the post.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn stamped_post<S: SendQueue, F: Fn() -> u64>(
    cfg: &LatConfig,
    sq: &mut S,
    list: &[WrDesc],
    tposted: &mut [u64],
    n: &mut u64,
    skew: &mut u64,
    now: &F,
    mark: impl FnOnce(u64),
) -> Result<bool, LatError> {
    let (stamp, waited) = gap_then_now(cfg, now);
    *skew += waited;
    if cfg.ended(stamp) {
        return Ok(false);
    }
    if let Some(s) = tposted.get_mut(*n as usize) {
        *s = stamp - *skew;
    }
    *n += 1;
    mark(*n);
    sq.post(cfg.op, list)
        .map_err(|err| LatError::Post { err })?;
    Ok(true)
}

/// write-lat's receive: spin until the peer's write bumps the mailbox to `want`, watching
/// Ctrl-C, the `-D` window and the peer's liveness. `Ok(None)`: the window ended.
#[inline(always)]
fn wait_mailbox<M: Mailbox, F: Fn() -> u64>(
    cfg: &LatConfig,
    mb: &M,
    want: u64,
    now: &F,
) -> Result<Option<()>, LatError> {
    let mut idle = watchdog::Idle::default();
    while mb.received() != want as u8 {
        if stop::requested() {
            return Err(LatError::Interrupted);
        }
        let Some((ts, idle_ticks)) = idle.empty(now) else {
            core::hint::spin_loop();
            continue;
        };
        if cfg.ended(ts) {
            return Ok(None);
        }
        match watchdog::check(idle_ticks, cfg.stall_ticks, cfg.size as u64) {
            Expiry::No => {}
            Expiry::PeerExited => return Err(LatError::PeerExited { at: want }),
            Expiry::PeerFinished => return Err(LatError::PeerFinished { at: want }),
            Expiry::Stalled => return Err(LatError::Stalled { at: want }),
        }
        core::hint::spin_loop();
    }
    Ok(Some(()))
}

/// A completion that may be sampled: under `-D` it counts when it lands in the window.
#[inline(always)]
fn count_sampled<F: Fn() -> u64>(cfg: &LatConfig, dur: bool, now: &F, out: &mut LatOutcome) {
    if dur && cfg.sampled(now()) {
        out.measured += 1;
    }
}

/// write-lat ping-pong (both sides run it).
pub fn write_lat<S: SendQueue, C: CompletionQueue, M: Mailbox, F: Fn() -> u64>(
    cfg: &LatConfig,
    sq: &mut S,
    cq: &mut C,
    mb: &mut M,
    t: &LatTarget,
    tposted: &mut [u64],
    now: F,
) -> LatOutcome {
    let (mut out, dur, iters) = start(cfg, now());
    let (mut scnt, mut ccnt, mut rcnt) = (0u64, 0u64, 0u64);
    let mut skew = 0u64;
    let list = [wr(cfg, 1, t.laddr, t.lkey, t.raddr, t.rkey)];
    while scnt < iters || ccnt < iters || rcnt < iters || (dur && !cfg.ended(now())) {
        if (rcnt < iters || dur) && !(scnt < 1 && cfg.initiator) {
            rcnt += 1;
            if !went_on(wait_mailbox(cfg, mb, rcnt, &now), &mut out) {
                break;
            }
        }
        if scnt < iters || dur {
            let mark = |n: u64| mb.stamp(n as u8);
            let posted = stamped_post(cfg, sq, &list, tposted, &mut scnt, &mut skew, &now, mark);
            if !post_went_on(posted, &mut out) {
                break;
            }
        }
        if ccnt < iters || dur {
            if !went_on(wait_one(cq, &now, cfg, scnt), &mut out) {
                break;
            }
            ccnt += 1;
            count_sampled(cfg, dur, &now, &mut out);
        }
    }
    out.ended(scnt, now())
}

/// read-lat / atomic-lat (client only): post one, wait for its completion.
pub fn rdma_lat<S: SendQueue, C: CompletionQueue, F: Fn() -> u64>(
    cfg: &LatConfig,
    sq: &mut S,
    cq: &mut C,
    t: &LatTarget,
    tposted: &mut [u64],
    now: F,
) -> LatOutcome {
    let (mut out, dur, _) = start(cfg, now());
    let list = [wr(cfg, 1, t.laddr, t.lkey, t.raddr, t.rkey)];
    let (mut n, mut skew) = (0u64, 0u64);
    while dur || n < cfg.iters {
        let posted = stamped_post(cfg, sq, &list, tposted, &mut n, &mut skew, &now, |_| {});
        if !post_went_on(posted, &mut out) || !went_on(wait_one(cq, &now, cfg, n), &mut out) {
            break;
        }
        count_sampled(cfg, dur, &now, &mut out);
    }
    out.ended(n, now())
}

/// send-lat ping-pong (both sides): wait for a receive (unless this side
/// starts), repost it, then send and wait for the send's completion. The
/// receives (`rx_depth` of them) must be posted before the run.
#[allow(clippy::too_many_arguments)]
pub fn send_lat<
    S: SendQueue,
    R: RecvQueue,
    C: CompletionQueue,
    D: CompletionQueue,
    F: Fn() -> u64,
>(
    cfg: &LatConfig,
    sq: &mut S,
    scq: &mut C,
    rq: &mut R,
    rcq: &mut D,
    t: &LatTarget,
    tposted: &mut [u64],
    now: F,
) -> LatOutcome {
    let (mut out, dur, iters) = start(cfg, now());
    let list = [wr(cfg, 1, t.laddr, t.lkey, 0, 0)];
    let (mut scnt, mut rcnt) = (0u64, 0u64);
    let mut skew = 0u64;
    while scnt < iters || rcnt < iters || (dur && !cfg.ended(now())) {
        if (rcnt < iters || dur) && !(scnt < 1 && cfg.initiator) {
            if !went_on(wait_one(rcq, &now, cfg, rcnt + 1), &mut out) {
                break;
            }
            rcnt += 1;
            count_sampled(cfg, dur, &now, &mut out);
            if dur || rcnt + cfg.rx_depth <= iters {
                if let Err(err) = rq.post_recv(rcnt, t.recv_addr, t.lkey, t.recv_len) {
                    out.error = Some(LatError::Post { err });
                    break;
                }
            }
        }
        if scnt < iters || dur {
            let posted = stamped_post(cfg, sq, &list, tposted, &mut scnt, &mut skew, &now, |_| {});
            if !post_went_on(posted, &mut out) || !went_on(wait_one(scq, &now, cfg, scnt), &mut out)
            {
                break;
            }
        }
    }
    out.ended(scnt, now())
}
