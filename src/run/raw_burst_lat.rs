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
//! received `-n` frames and its replies have completed (so the last reply
//! has left before the QP goes). Every receive is posted again, as
//! perftest. The client asks a completion every `-Q`-th send and on the
//! last; a completion's `wr_id` holds the frames posted up to it, so
//! unsignalled sends are counted when a later one completes. The server
//! signals each reply and skips one while `-t` of them are outstanding,
//! as perftest (it reads its send CQ first). The client polls both CQs
//! between bursts until neither has anything, and blocks only when it can
//! post nothing; every block is `lat::wait_until` on both CQs, watching
//! Ctrl-C and the stall watchdog (silence for `stall_ticks` names the
//! reply, on the server the frame, awaited). No rate limit: the tool
//! refuses those flags. Hot path: no allocation, lock, format, syscall or
//! panic; every buffer is handed in.

use super::lat::{wait_until, LatError, LatOutcome, Watch};
use super::raw_lat::LatQp;
use crate::post::{Completion, CompletionQueue, PostError, WcOpcode, WcStatus};

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

/// One side's loop: its QP (a [`super::raw_lat::RawQp`]), the stamps and
/// the clock.
pub struct BurstLatLoop<'a, Q, F> {
    pub cfg: BurstLatConfig,
    pub qp: Q,
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

/// Both CQs polled as one, the receive CQ first, one completion at a
/// time; `recv` says which CQ gave the last one.
struct Both<'a, C, D> {
    scq: &'a mut C,
    rcq: &'a mut D,
    recv: bool,
}

impl<C: CompletionQueue, D: CompletionQueue> CompletionQueue for Both<'_, C, D> {
    #[inline(always)]
    fn poll(&mut self, out: &mut [Completion]) -> Result<usize, PostError> {
        let k = out.len().min(1);
        let one = &mut out[..k];
        self.recv = self.rcq.poll(one)? > 0;
        if self.recv {
            return Ok(1);
        }
        self.scq.poll(one)
    }
}

impl<Q: LatQp, F: Fn() -> u64> BurstLatLoop<'_, Q, F> {
    /// Runs this side; the receives must be posted
    /// ([`super::raw_lat::RxRing::post_first`]). `outcome.iters` is the
    /// frames sent, `outcome.measured` those received.
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
        let every = c.reply_every.max(1);
        let mut left_in_burst = 0u64;
        loop {
            if left_in_burst == 0 {
                left_in_burst = c.burst.max(1);
            }
            while left_in_burst > 0 && self.can_send(n) {
                let signal = (n.sent + 1) % c.cq_mod.max(1) == 0 || n.sent + 1 == c.iters;
                self.qp.send(n.sent, signal)?;
                n.sent += 1;
                left_in_burst -= 1;
                if n.sent % every == 0 {
                    let t = (self.now)();
                    if let Some(s) = self.tposted.get_mut((n.sent / every - 1) as usize) {
                        *s = t;
                    }
                }
            }
            self.drain(n)?;
            if n.received >= n.sent / every && n.completed >= c.iters {
                return Ok(());
            }
            if !self.can_send(n) {
                self.wait(n, n.received + 1)?;
            }
        }
    }

    /// perftest's `run_iter_lat_burst_server`, then the wait for the
    /// replies' completions.
    fn server(&mut self, n: &mut BurstCounts) -> Result<(), LatError> {
        while n.received < self.cfg.iters {
            self.wait(n, n.received + 1)?;
        }
        while n.completed < n.sent {
            self.wait(n, n.received)?;
        }
        Ok(())
    }

    #[inline(always)]
    fn can_send(&self, n: &BurstCounts) -> bool {
        n.sent < self.cfg.iters && n.sent.saturating_sub(n.completed) < self.cfg.tx_depth
    }

    /// Takes completions from both CQs until neither has one (perftest's
    /// poll between bursts); Ctrl-C stops it.
    #[inline(always)]
    fn drain(&mut self, n: &mut BurstCounts) -> Result<(), LatError> {
        let mut wc = [Completion::default()];
        loop {
            let (scq, rcq) = self.qp.cqs();
            let mut both = Both {
                scq,
                rcq,
                recv: false,
            };
            let got = both.poll(&mut wc).map_err(|err| LatError::Poll { err })?;
            if got == 0 {
                break;
            }
            let recv = both.recv;
            check(wc[0])?;
            self.take(wc[0], recv, n)?;
        }
        if super::stop::requested() {
            return Err(LatError::Interrupted);
        }
        Ok(())
    }

    /// Spins until either CQ has a completion and takes it
    /// (`lat::wait_until`: Ctrl-C, the stall watchdog); `at` names the
    /// reply or frame awaited in a stall. A server waits for its client's
    /// first frame as long as it takes.
    #[inline(always)]
    fn wait(&mut self, n: &mut BurstCounts, at: u64) -> Result<(), LatError> {
        let first = !self.cfg.initiator && n.received == 0;
        let watch = Watch {
            ended: |_| false,
            stall_ticks: if first {
                u64::MAX
            } else {
                self.cfg.stall_ticks
            },
            bytes: self.cfg.frame_len as u64,
            at,
        };
        let (scq, rcq) = self.qp.cqs();
        let mut both = Both {
            scq,
            rcq,
            recv: false,
        };
        let got = wait_until(&mut both, &self.now, &watch, |_| true)?;
        let recv = both.recv;
        match got {
            Some(wc) => self.take(wc, recv, n),
            None => Ok(()),
        }
    }

    /// One completion: a send's counts the frames up to it; a received
    /// frame is stamped (client) or answered (server, every
    /// `--reply_every`-th while fewer than `-t` replies are outstanding),
    /// and its slot posted again.
    #[inline(always)]
    fn take(&mut self, wc: Completion, recv: bool, n: &mut BurstCounts) -> Result<(), LatError> {
        if !recv {
            n.completed = n.completed.max(wc.wr_id & SEQ_MASK);
            return Ok(());
        }
        if wc.opcode != WcOpcode::RECV {
            return Err(LatError::Completion { wc });
        }
        n.received += 1;
        if self.cfg.initiator {
            let t = (self.now)();
            if let Some(s) = self.tcompleted.get_mut((n.received - 1) as usize) {
                *s = t;
            }
        } else if n.received % self.cfg.reply_every.max(1) == 0 && self.reply_room(n)? {
            self.qp.send(n.sent, true)?;
            n.sent += 1;
        }
        self.qp.repost(&wc)
    }

    /// Whether the server may reply (fewer than `-t` replies outstanding).
    /// A full window first takes what the send CQ holds: perftest polls
    /// it between its receive batches, so only replies still in flight
    /// make it skip one.
    #[inline(always)]
    fn reply_room(&mut self, n: &mut BurstCounts) -> Result<bool, LatError> {
        let mut wc = [Completion::default()];
        while n.sent.saturating_sub(n.completed) >= self.cfg.tx_depth {
            let got = self
                .qp
                .cqs()
                .0
                .poll(&mut wc)
                .map_err(|err| LatError::Poll { err })?;
            if got == 0 {
                return Ok(false);
            }
            check(wc[0])?;
            n.completed = n.completed.max(wc[0].wr_id & SEQ_MASK);
        }
        Ok(true)
    }
}

/// A completion's status: a failure is the run's error (Ctrl-C's flush
/// is an interruption).
#[inline(always)]
fn check(wc: Completion) -> Result<(), LatError> {
    if wc.status == WcStatus::SUCCESS {
        Ok(())
    } else if super::stop::requested() {
        Err(LatError::Interrupted)
    } else {
        Err(LatError::Completion { wc })
    }
}
