//! The raw Ethernet burst latency loop (perftest's `run_iter_lat_burst`
//! and `run_iter_lat_burst_server`, raw_ethernet_burst_lat): the client
//! posts bursts of `--burst_size` frames (at most `-t` outstanding) and
//! the server answers every `--reply_every`-th frame it receives with one
//! frame. The client stamps the send of each `--reply_every`-th frame
//! (`tposted`, after its post, as perftest) and the arrival of each reply
//! (`tcompleted`); sample `i` is `tcompleted[i] - tposted[i]`.
//!
//! The client ends when every send has completed and every reply it is
//! owed (`sent / reply_every`) has arrived; the server when it has
//! received `-n` frames. Every receive is posted again, as perftest. The
//! client asks a completion every `-Q`-th send and on the last; a
//! completion's `wr_id` holds the frames posted up to it, so unsignalled
//! sends are counted when a later one completes. The server signals each
//! reply and skips a reply when `-t` of them are outstanding (perftest
//! does the same). Silence for `stall_ticks` while something is owed is a
//! stall naming the reply (client) or frame (server) awaited. No rate
//! limit: the tool refuses those flags. Hot path: no allocation, lock,
//! format, syscall or panic; every buffer is handed in.

use super::lat::{LatError, LatOutcome};
use super::raw_bw::RawPost;
use super::raw_lat::RxRing;
use super::stop;
use super::watchdog::{self, Expiry};
use crate::mlx5::raw_sq::RawPkt;
use crate::post::{Completion, CompletionQueue, PostError, RecvQueue, WcOpcode, WcStatus};

/// A send completion's `wr_id`: the frames posted up to it below bit 48.
const SEQ_MASK: u64 = (1 << 48) - 1;

/// The loop's numbers.
#[derive(Clone, Copy, Debug)]
pub struct BurstLatConfig {
    /// `-n`: frames the client sends, the server receives.
    pub iters: u64,
    /// The client sends bursts; the server replies.
    pub initiator: bool,
    /// `--burst_size` (at least 1).
    pub burst: u64,
    /// `--reply_every` (at least 1).
    pub reply_every: u64,
    /// `-t`: sends outstanding at most.
    pub tx_depth: u64,
    /// `-Q`: every `cq_mod`-th client send (and the last) is signalled.
    pub cq_mod: u64,
    /// Nothing on either CQ this long while something is owed: a stall.
    pub stall_ticks: u64,
    /// Bytes of one frame (the watchdog's in-flight allowance).
    pub frame_len: u32,
}

impl BurstLatConfig {
    /// Replies the server sends and the client samples (perftest's
    /// `iters / reply_every`).
    pub fn replies(&self) -> u64 {
        self.iters / self.reply_every.max(1)
    }
}

/// One side's loop: its send, receive and CQs, the frames it sends (one
/// per flow, in turn), the receive ring, the stamps and the clock.
pub struct BurstLatLoop<'a, P, R, C, D, F> {
    pub cfg: BurstLatConfig,
    pub sq: &'a mut P,
    pub scq: &'a mut C,
    pub rq: &'a mut R,
    pub rcq: &'a mut D,
    pub frames: &'a [RawPkt],
    pub rx: RxRing,
    /// Client: one stamp per `--reply_every`-th send (`cfg.replies()`).
    pub tposted: &'a mut [u64],
    /// Client: one stamp per reply received (`cfg.replies()`).
    pub tcompleted: &'a mut [u64],
    pub now: F,
}

/// The counters of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BurstCounts {
    /// Frames posted.
    pub sent: u64,
    /// Sends completed.
    pub completed: u64,
    /// Frames received.
    pub received: u64,
}

impl<P, R, C, D, F> BurstLatLoop<'_, P, R, C, D, F>
where
    P: RawPost,
    R: RecvQueue,
    C: CompletionQueue,
    D: CompletionQueue,
    F: Fn() -> u64,
{
    /// Runs this side; the receives must be posted ([`RxRing::post_first`]).
    /// `outcome.iters` is the frames sent.
    pub fn run(mut self) -> (LatOutcome, BurstCounts) {
        let mut out = LatOutcome {
            t_start: (self.now)(),
            ..LatOutcome::default()
        };
        let mut n = BurstCounts::default();
        let r = if self.cfg.initiator {
            self.client(&mut n)
        } else {
            self.server(&mut n)
        };
        out.error = r.err();
        out.iters = n.sent;
        out.measured = n.received;
        out.t_end = (self.now)();
        (out, n)
    }

    /// perftest's `run_iter_lat_burst`.
    fn client(&mut self, n: &mut BurstCounts) -> Result<(), LatError> {
        let c = self.cfg;
        let (burst, every) = (c.burst.max(1), c.reply_every.max(1));
        let mut idle = watchdog::Idle::default();
        let mut left_in_burst = 0u64;
        while n.received < n.sent / every || n.completed < c.iters {
            if left_in_burst == 0 {
                left_in_burst = burst;
            }
            while n.sent < c.iters && n.sent - n.completed < c.tx_depth && left_in_burst > 0 {
                let signal = (n.sent + 1) % c.cq_mod.max(1) == 0 || n.sent + 1 == c.iters;
                self.post(n.sent, signal)?;
                n.sent += 1;
                left_in_burst -= 1;
                if n.sent % every == 0 {
                    let t = (self.now)();
                    if let Some(s) = self.tposted.get_mut((n.sent / every - 1) as usize) {
                        *s = t;
                    }
                }
                idle.progress();
            }
            let owed = n.received + 1;
            self.drain(n, &mut idle, owed)?;
        }
        Ok(())
    }

    /// perftest's `run_iter_lat_burst_server`.
    fn server(&mut self, n: &mut BurstCounts) -> Result<(), LatError> {
        let c = self.cfg;
        let every = c.reply_every.max(1);
        let mut idle = watchdog::Idle::default();
        while n.received < c.iters {
            let before = n.received;
            self.drain(n, &mut idle, before + 1)?;
            for k in before + 1..=n.received {
                if k % every == 0 && n.sent - n.completed < c.tx_depth {
                    self.post(n.sent, true)?;
                    n.sent += 1;
                }
            }
        }
        Ok(())
    }

    #[inline(always)]
    fn post(&mut self, k: u64, signal: bool) -> Result<(), LatError> {
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

    /// Polls both CQs until neither has anything (perftest's `do { } while
    /// (ne != 0)`), then checks Ctrl-C and the stall watchdog; `owed`
    /// names what a stall waits for.
    #[inline(always)]
    fn drain(
        &mut self,
        n: &mut BurstCounts,
        idle: &mut watchdog::Idle,
        owed: u64,
    ) -> Result<(), LatError> {
        let mut wc = [Completion::default()];
        loop {
            let got = self
                .rcq
                .poll(&mut wc)
                .map_err(|err| LatError::Poll { err })?;
            if got == 1 {
                self.take_frame(wc[0], n)?;
                idle.progress();
            }
            let sent = self
                .scq
                .poll(&mut wc)
                .map_err(|err| LatError::Poll { err })?;
            if sent == 1 {
                check(wc[0])?;
                n.completed = n.completed.max(wc[0].wr_id & SEQ_MASK);
                idle.progress();
            }
            if got == 0 && sent == 0 {
                break;
            }
        }
        if stop::requested() {
            return Err(LatError::Interrupted);
        }
        let Some((_, idle_ticks)) = idle.empty(&self.now) else {
            return Ok(());
        };
        match watchdog::check(idle_ticks, self.stall(n), self.cfg.frame_len as u64) {
            Expiry::No => Ok(()),
            Expiry::PeerExited => Err(LatError::PeerExited { at: owed }),
            Expiry::PeerFinished => Err(LatError::PeerFinished { at: owed }),
            Expiry::Stalled => Err(LatError::Stalled { at: owed }),
        }
    }

    /// A server waits for its client's first frame as long as it takes.
    #[inline(always)]
    fn stall(&self, n: &BurstCounts) -> u64 {
        if !self.cfg.initiator && n.received == 0 {
            u64::MAX
        } else {
            self.cfg.stall_ticks
        }
    }

    /// One received frame: stamped (client), its slot posted again.
    #[inline(always)]
    fn take_frame(&mut self, wc: Completion, n: &mut BurstCounts) -> Result<(), LatError> {
        check(wc)?;
        if wc.opcode != WcOpcode::RECV {
            return Err(LatError::Completion { wc });
        }
        if self.cfg.initiator {
            let t = (self.now)();
            if let Some(s) = self.tcompleted.get_mut(n.received as usize) {
                *s = t;
            }
        }
        n.received += 1;
        let slot = wc.wr_id % self.rx.slots.max(1) as u64;
        self.rx
            .post(self.rq, slot)
            .map_err(|err| LatError::Post { err })
    }
}

#[inline(always)]
fn check(wc: Completion) -> Result<(), LatError> {
    if wc.status == WcStatus::SUCCESS {
        Ok(())
    } else if stop::requested() {
        Err(LatError::Interrupted)
    } else {
        Err(LatError::Completion { wc })
    }
}
