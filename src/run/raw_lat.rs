//! The raw Ethernet ping-pong (perftest's `run_iter_lat_send` on a raw
//! packet QP, raw_ethernet_lat): the client posts one frame and waits for
//! the peer's frame on its RQ; the server waits for a frame, then posts one
//! back. Each send is stamped before its post (`tposted`), so consecutive
//! stamps are round trips, as in the other latency tools; under `-D` the
//! round trips received inside the sample window are counted instead.
//!
//! As in perftest: every `-Q`-th send and the last one ask for a completion
//! and are waited for; a receive is posted again only while `rcnt + rx_depth
//! <= iters`, so none is left over; with `--flows` the sends walk the flows'
//! frames in turn. The send is any [`RawPost`] (verbs post-send or wr-api,
//! the mlx5 direct raw SQ), the receive any [`RecvQueue`], each with its own
//! CQ. Hot path: no allocation, lock, format, syscall or panic; every buffer
//! is handed in.

use super::lat::{wait_until, LatError, LatOutcome, Watch};
use super::raw_bw::RawPost;
use crate::mlx5::raw_sq::RawPkt;
use crate::post::{Completion, CompletionQueue, PostError, RecvQueue, WcOpcode};

/// A send completion's `wr_id` holds the frames posted up to it (the QP's
/// number above bit 48: `run::bw::wr_id`, the direct SQ's packet count).
const SEQ_MASK: u64 = (1 << 48) - 1;

/// The loop's numbers.
#[derive(Clone, Copy, Debug)]
pub struct RawLatConfig {
    /// Round trips (ignored under `-D`).
    pub iters: u64,
    /// The client sends first; the server first waits.
    pub initiator: bool,
    /// Every `cq_mod`-th send (and the last) is signalled and waited for.
    pub cq_mod: u64,
    /// Receives posted before the run.
    pub rx_depth: u64,
    /// Nothing on a CQ this long: a stall.
    pub stall_ticks: u64,
    /// Bytes of one frame (the watchdog's in-flight allowance).
    pub frame_len: u32,
    /// `-D`: the clock value the run ends at (0: iterations mode), and the
    /// sample window in which received round trips are counted.
    pub end: u64,
    pub sample_start: u64,
    pub sample_stop: u64,
}

impl RawLatConfig {
    #[inline(always)]
    fn ended(&self, t: u64) -> bool {
        self.end != 0 && t >= self.end
    }
}

/// The receive buffer: `slots` slots of `stride` bytes from `base` (an
/// address registered under `lkey`), each posted for `room` bytes.
#[derive(Clone, Copy, Debug)]
pub struct RxRing {
    pub base: u64,
    pub stride: u32,
    pub room: u32,
    pub slots: u32,
    pub lkey: u32,
}

impl RxRing {
    #[inline(always)]
    pub(crate) fn post<R: RecvQueue>(&self, rq: &mut R, slot: u64) -> Result<(), PostError> {
        let addr = self.base + slot * self.stride as u64;
        rq.post_recv(slot, addr, self.lkey, self.room)
    }

    /// Posts a receive on each of the first `n` slots (`wr_id` = slot).
    pub fn post_first<R: RecvQueue>(&self, rq: &mut R, n: u64) -> Result<(), PostError> {
        (0..n.min(self.slots as u64)).try_for_each(|s| self.post(rq, s))
    }
}

/// One raw packet QP as the latency loops drive it: its send queue and
/// CQ, its receive queue and CQ, the frames it sends (one per flow, in
/// turn) and its receive ring.
pub struct RawQp<'a, P, R, C, D> {
    pub sq: &'a mut P,
    pub scq: &'a mut C,
    pub rq: &'a mut R,
    pub rcq: &'a mut D,
    pub frames: &'a [RawPkt],
    pub rx: RxRing,
}

impl<'a, P, R, C, D> RawQp<'a, P, R, C, D> {
    /// The QP of a send queue and CQ, a receive queue and CQ, the frames
    /// and the receive ring.
    pub fn new(
        (sq, scq): (&'a mut P, &'a mut C),
        (rq, rcq): (&'a mut R, &'a mut D),
        (frames, rx): (&'a [RawPkt], RxRing),
    ) -> Self {
        RawQp {
            sq,
            scq,
            rq,
            rcq,
            frames,
            rx,
        }
    }
}

/// What the raw latency loops do with their QP: post frame `k`, post a
/// freed receive slot again, poll the send and receive CQs. [`RawQp`] is
/// the one there is; the loops take it through this so that their bounds
/// are written once.
pub trait LatQp {
    type Scq: CompletionQueue;
    type Rcq: CompletionQueue;
    /// Posts frame `k` (the flows' frames in turn).
    fn send(&mut self, k: u64, signal: bool) -> Result<(), LatError>;
    /// Posts the receive slot `wc` freed again.
    fn repost(&mut self, wc: &Completion) -> Result<(), LatError>;
    /// The send CQ and the receive CQ.
    fn cqs(&mut self) -> (&mut Self::Scq, &mut Self::Rcq);
}

impl<P, R, C, D> LatQp for RawQp<'_, P, R, C, D>
where
    P: RawPost,
    R: RecvQueue,
    C: CompletionQueue,
    D: CompletionQueue,
{
    type Scq = C;
    type Rcq = D;

    #[inline(always)]
    fn send(&mut self, k: u64, signal: bool) -> Result<(), LatError> {
        let i = (k % self.frames.len().max(1) as u64) as usize;
        let Some(pkt) = self.frames.get(i..=i) else {
            return Err(LatError::Post {
                err: PostError::Unsupported,
            });
        };
        self.sq
            .post_frames(pkt, k, signal)
            .map_err(|err| LatError::Post { err })
    }

    #[inline(always)]
    fn repost(&mut self, wc: &Completion) -> Result<(), LatError> {
        let slot = wc.wr_id % self.rx.slots.max(1) as u64;
        self.rx
            .post(self.rq, slot)
            .map_err(|err| LatError::Post { err })
    }

    #[inline(always)]
    fn cqs(&mut self) -> (&mut C, &mut D) {
        (self.scq, self.rcq)
    }
}

/// One side's ping-pong: its QP (a [`RawQp`]), the stamps and the clock.
pub struct RawLatLoop<'a, Q, F> {
    pub cfg: RawLatConfig,
    pub qp: Q,
    /// One stamp per send (iterations mode; may be empty under `-D`).
    pub tposted: &'a mut [u64],
    pub now: F,
}

/// What one wait ended with: `Ok(None)` when the `-D` run ended first.
type Waited = Result<Option<Completion>, LatError>;

impl<Q: LatQp, F: Fn() -> u64> RawLatLoop<'_, Q, F> {
    /// Runs the ping-pong; the receives must be posted
    /// ([`RxRing::post_first`] with `cfg.rx_depth`).
    pub fn run(mut self) -> LatOutcome {
        let cfg = self.cfg;
        let dur = cfg.end != 0;
        let iters = if dur { 0 } else { cfg.iters };
        let mut out = LatOutcome {
            t_start: (self.now)(),
            ..LatOutcome::default()
        };
        let (mut scnt, mut rcnt) = (0u64, 0u64);
        while scnt < iters || rcnt < iters || (dur && !cfg.ended((self.now)())) {
            if (rcnt < iters || dur) && !(scnt < 1 && cfg.initiator) {
                if let Err(e) = self.take_frame(rcnt + 1, dur, &mut out) {
                    out.error = e;
                    break;
                }
                rcnt += 1;
            }
            if scnt < iters || dur {
                if let Err(e) = self.send(&mut scnt, iters, dur) {
                    out.error = e;
                    break;
                }
            }
        }
        out.iters = scnt;
        out.t_end = (self.now)();
        out
    }

    /// Waits for the peer's frame `at`, counts it under `-D` and posts its
    /// slot again while perftest would. `Err(None)`: the `-D` run ended.
    #[inline(always)]
    fn take_frame(
        &mut self,
        at: u64,
        dur: bool,
        out: &mut LatOutcome,
    ) -> Result<(), Option<LatError>> {
        // A server waits for its client as long as it takes (Ctrl-C, -D):
        // only a silence once the ping-pong runs is a stall.
        let stall = if at == 1 && !self.cfg.initiator {
            u64::MAX
        } else {
            self.cfg.stall_ticks
        };
        let wc = match wait(self.qp.cqs().1, &self.now, (&self.cfg, stall), at, 0) {
            Ok(Some(wc)) => wc,
            Ok(None) => return Err(None),
            Err(e) => return Err(Some(e)),
        };
        if wc.opcode != WcOpcode::RECV {
            return Err(Some(LatError::Completion { wc }));
        }
        let t = (self.now)();
        if dur && t >= self.cfg.sample_start && t < self.cfg.sample_stop {
            out.measured += 1;
        }
        if dur || at + self.cfg.rx_depth <= self.cfg.iters {
            self.qp.repost(&wc).map_err(Some)?;
        }
        Ok(())
    }

    /// Stamps and posts the next frame; a signalled one is waited for.
    /// `Err(None)`: the `-D` run ended.
    #[inline(always)]
    fn send(&mut self, scnt: &mut u64, iters: u64, dur: bool) -> Result<(), Option<LatError>> {
        let t = (self.now)();
        if self.cfg.ended(t) {
            return Err(None);
        }
        if let Some(s) = self.tposted.get_mut(*scnt as usize) {
            *s = t;
        }
        let k = *scnt;
        *scnt += 1;
        let signal = *scnt % self.cfg.cq_mod.max(1) == 0 || (!dur && *scnt == iters);
        self.qp.send(k, signal).map_err(Some)?;
        if !signal {
            return Ok(());
        }
        let stall = self.cfg.stall_ticks;
        match wait(self.qp.cqs().0, &self.now, (&self.cfg, stall), *scnt, *scnt) {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err(None),
            Err(e) => Err(Some(e)),
        }
    }
}

/// Spins on `cq` until a completion arrives (with `upto` above 0: until a
/// send completion retires frame `upto`), watching Ctrl-C, the `-D` end and
/// the stall watchdog (`stall` ticks of silence); `at` names the round trip
/// in a stall.
#[inline(always)]
fn wait<C: CompletionQueue, F: Fn() -> u64>(
    cq: &mut C,
    now: &F,
    (cfg, stall): (&RawLatConfig, u64),
    at: u64,
    upto: u64,
) -> Waited {
    let watch = Watch {
        ended: |t| cfg.ended(t),
        stall_ticks: stall,
        bytes: cfg.frame_len as u64,
        at,
    };
    wait_until(cq, now, &watch, |wc| {
        upto == 0 || wc.wr_id & SEQ_MASK >= upto
    })
}
