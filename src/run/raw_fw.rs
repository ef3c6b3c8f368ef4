//! raw-eth-bw `-v` (perftest's `run_iter_fw`): MAC forwarding on one raw
//! packet QP. Frames are received into the receive buffer's slots; each
//! one's source and destination MAC are swapped in place and that same slot
//! is sent back out (the send names the received frame). As perftest: a
//! frame is never sent before it arrived (`rcnt - scnt > 0`), the TX window
//! (`-t`) holds, a slot's receive is posted again only once its send has
//! completed (`rwqe_sent - totccnt < rx_depth`), and the run ends when
//! `-n` frames have arrived and `-n` sends completed, or, under `-D`, at
//! the end of a window that starts at the first frame (warm-up, sample,
//! cool-down: perftest's duration states on a server).
//!
//! `-l`: held frames go in lists of `-l`, each frame swapped and named by
//! its own entry (perftest posts its fixed list chained behind one swap;
//! see docs/raw-ethernet.md). A short list goes when the receive CQ was
//! empty on its last poll, and asks for a completion.
//!
//! Generic over the post method ([`RawPost`], the send CQ) and the receive
//! queue, its CQ and classification ([`RxClassify`], as the server counts).
//! Hot path: no allocation, lock, format, syscall or panic; every buffer is
//! handed in. Stops: Ctrl-C ([`stop`]), a failed completion, or (by
//! iterations) silence on both CQs for `stall_ticks` once the first frame
//! is in (before it, the wait has no limit, as the server's).

use super::bw::{BwOutcome, Deadlines, Phase, RunError, Window};
use super::raw_bw::{signals, RawBwConfig, RawPost};
use super::raw_recv::{take, RawRecvCfg, RawRecvCounts, RawRecvError, RxClassify};
use super::stop;
use crate::mlx5::raw_sq::RawPkt;
use crate::post::{Completion, CompletionQueue, PostError, RecvQueue, WcOpcode, WcStatus};
use core::marker::PhantomData;

/// A send completion's `wr_id` below the QP index: the frames completed
/// (`run::bw::wr_id`'s layout; the direct SQ's packet count on QP 0).
const SEQ_MASK: u64 = (1 << 48) - 1;

/// The receive buffer, written by the loop (the MAC swap) as well as the NIC.
pub struct FwBuf {
    cfg: RawRecvCfg,
    base: *mut u8,
}

impl FwBuf {
    /// # Safety
    /// `cfg`'s buffer must be memory this process may write (registered for
    /// local write), alive while a loop runs over it, and touched meanwhile
    /// only by the NIC and that loop. The loop writes a slot only between
    /// its receive completion and its send's post, when the NIC neither
    /// writes it (no receive is posted on it) nor reads it (no send yet).
    pub unsafe fn new(cfg: RawRecvCfg) -> Self {
        let base = cfg.addr(0) as *mut u8;
        Self { cfg, base }
    }

    pub fn cfg(&self) -> &RawRecvCfg {
        &self.cfg
    }

    /// Swaps the frame in `slot`'s destination and source MAC (perftest's
    /// `switch_smac_dmac`); a frame shorter than both is left alone.
    #[inline(always)]
    fn swap_macs(&self, slot: u32, len: u32) {
        if len < 12 || slot >= self.cfg.slots() {
            return;
        }
        let at = slot as usize * self.cfg.stride() as usize;
        // `slot` is inside the buffer (checked above, `new`'s contract) and
        // the frame's first 12 bytes lie in its slot (a receive is posted
        // for at most the stride).
        // SAFETY: as said; between this slot's receive completion and its
        // send nothing else touches it (`new`).
        unsafe {
            let p = self.base.add(at);
            core::ptr::swap_nonoverlapping(p, p.add(6), 6);
        }
    }
}

/// Why the forwarding stopped early.
#[derive(Debug, PartialEq, Eq)]
pub enum FwError {
    /// Receive side: a poll or post failed, or the QP flushed.
    Recv(RawRecvError),
    /// A receive completed with an error status (perftest stops there).
    RecvFailed(WcStatus),
    /// Send side: a post, poll or completion failed, or Ctrl-C.
    Send(RunError),
    /// No completion on either CQ for the stall time, after the first frame.
    Stalled {
        received: u64,
        sent: u64,
        completed: u64,
    },
}

/// What the loop did: the send numbers (the table's), frames received.
#[derive(Debug, Default)]
pub struct FwOutcome {
    /// `posted`/`completed`: frames forwarded. By iterations `t_start` is
    /// the first send, `t_end` the last send completion, `measured` every
    /// completion; under `-D` they are the sample window's (its edges and
    /// the send completions inside it, perftest's `iters` in
    /// `SAMPLE_STATE`).
    pub sent: BwOutcome,
    /// Every frame taken off the receive CQ (perftest's `totrcnt`): above
    /// `-n` where the peer sent more and the last poll took them.
    pub received: u64,
    /// Receives posted again (each after its frame's send completed).
    pub reposted: u64,
    pub error: Option<FwError>,
}

/// Everything the loop works on, borrowed from the caller.
pub struct FwLoop<'a, P, S, R, C, K, F> {
    /// `iters` (0 under `-D`), `post_list`, `tx_depth` (at least
    /// `post_list`), `cq_mod`, `stall_ticks`.
    pub cfg: RawBwConfig,
    /// `-D`: the window's deadlines counted from the first frame (perftest's
    /// server starts its duration state there); `None` by iterations.
    pub window: Option<Deadlines>,
    pub post: &'a mut P,
    pub send_cq: &'a mut S,
    pub rq: &'a mut R,
    pub recv_cq: &'a mut C,
    pub buf: &'a FwBuf,
    pub counts: &'a mut RawRecvCounts,
    /// The received frames in order of arrival, `(slot, length)`; as long
    /// as the buffer has slots (at most that many are held at once).
    pub held: &'a mut [(u32, u32)],
    /// Scratch for one list of forwards (len ≥ `post_list`).
    pub list: &'a mut [RawPkt],
    /// Scratch for one poll.
    pub wc: &'a mut [Completion],
    pub now: F,
    pub classify: PhantomData<K>,
}

/// The loop's own state between passes.
struct Turn {
    /// `-D`'s deadlines once the first frame is in.
    deadlines: Option<Deadlines>,
    window: Window,
    /// The last receive poll found nothing (or every frame is in): a short
    /// list may go rather than wait to fill.
    quiet: bool,
}

impl Turn {
    /// Whether the first send and the last completion stamp the outcome:
    /// by iterations (its times), and under `-D` before the sample (a run
    /// stopped there reports over them); the window's edges are the
    /// sample's times.
    #[inline(always)]
    fn stamps(&self) -> bool {
        self.deadlines.is_none() || self.window.phase == Phase::Warmup
    }
}

impl<P, S, R, C, K, F> FwLoop<'_, P, S, R, C, K, F>
where
    P: RawPost,
    S: CompletionQueue,
    R: RecvQueue,
    C: CompletionQueue,
    K: RxClassify,
    F: Fn() -> u64,
{
    /// Forwards until `iters` frames are in and their sends completed (by
    /// iterations) or the window's end (`-D`), or a stop. Every slot's
    /// receive must have been posted.
    pub fn run(&mut self) -> FwOutcome {
        let mut o = FwOutcome::default();
        let n = self.buf.cfg.slots() as usize;
        let pl = self.cfg.post_list as usize;
        if n == 0
            || self.held.len() < n
            || self.wc.is_empty()
            || self.cfg.cq_mod == 0
            || pl == 0
            || self.list.len() < pl
        {
            o.error = Some(FwError::Send(RunError::Post {
                qp: 0,
                err: PostError::Unsupported,
            }));
            return o;
        }
        let timed = self.window.is_some();
        let mut turn = Turn {
            deadlines: None,
            window: Window::new(timed),
            quiet: true,
        };
        let mut last = 0;
        while !self.over(&mut o, &mut turn) {
            if stop::requested() {
                o.error = Some(FwError::Send(RunError::Interrupted));
                break;
            }
            let before = (o.received, o.sent.completed);
            if let Err(e) = self.pass(&mut o, &mut turn) {
                o.error = Some(e);
                break;
            }
            if (o.received, o.sent.completed) != before {
                last = (self.now)();
                self.first_frame(&o, &mut turn, last);
            } else if !timed && last != 0 && (self.now)().wrapping_sub(last) > self.cfg.stall_ticks
            {
                // Under -D silence is no error: the window's end ends the run.
                o.error = Some(FwError::Stalled {
                    received: o.received,
                    sent: o.sent.posted,
                    completed: o.sent.completed,
                });
                break;
            }
        }
        self.close(&mut o, &turn);
        o
    }

    /// Whether the run is over: `-n` in and completed, or (`-D`) the
    /// window moved on and at its end.
    #[inline(always)]
    fn over(&self, o: &mut FwOutcome, turn: &mut Turn) -> bool {
        let Some(d) = turn.deadlines else {
            let iters = self.cfg.iters;
            return self.window.is_none() && o.received >= iters && o.sent.completed >= iters;
        };
        turn.window.advance(&d, (self.now)(), &mut o.sent, 0)
    }

    /// Under `-D`, the window starts at the first frame.
    #[inline(always)]
    fn first_frame(&self, o: &FwOutcome, turn: &mut Turn, t: u64) {
        if let (Some(w), None, true) = (self.window, turn.deadlines, o.received > 0) {
            turn.deadlines = Some(Deadlines {
                sample_start: t.wrapping_add(w.sample_start),
                sample_stop: t.wrapping_add(w.sample_stop),
                end: t.wrapping_add(w.end),
            });
        }
    }

    /// The measured numbers by how the run ended: by iterations every
    /// completion; under `-D` the sample window's, or, stopped inside it,
    /// up to now; stopped before it, every completion (as by iterations).
    fn close(&self, o: &mut FwOutcome, turn: &Turn) {
        let s = &mut o.sent;
        match (self.window.is_some(), turn.window.phase) {
            (true, Phase::Cooldown) => {}
            (true, Phase::Sample) => {
                s.t_end = (self.now)();
                s.measured = s.completed - turn.window.base;
            }
            // Stopped before the sample: every completion, over the times
            // the forwards and completions had.
            _ => s.measured = s.completed,
        }
    }

    /// One turn: forward what may go, take arrivals, retire sends, repost.
    #[inline(always)]
    fn pass(&mut self, o: &mut FwOutcome, turn: &mut Turn) -> Result<(), FwError> {
        self.forward(o, turn)?;
        let iters = self.cfg.iters;
        if self.window.is_some() || o.received < iters {
            turn.quiet = self.receive(o)? == 0;
        } else {
            turn.quiet = true;
        }
        if o.sent.completed < o.sent.posted {
            self.complete(o, turn)?;
        }
        self.repost(o)
    }

    /// Sends the held frames, oldest first, in lists of `-l` while the
    /// window has room for a whole list; a shorter list (what is held)
    /// goes only when the receive side is `quiet`, and asks for a
    /// completion, so that its slots come back; so does a list that
    /// leaves no room for another.
    #[inline(always)]
    fn forward(&mut self, o: &mut FwOutcome, turn: &Turn) -> Result<(), FwError> {
        let cfg = self.cfg;
        let (pl, depth) = (cfg.post_list as u64, cfg.tx_depth as u64);
        loop {
            let s = &o.sent;
            let want = match cfg.iters {
                0 => pl,
                iters => pl.min(iters.saturating_sub(s.posted)),
            };
            let k = want.min(o.received - s.posted);
            if k == 0 || (k < want && !turn.quiet) || s.posted - s.completed + k > depth {
                return Ok(());
            }
            // A list after which no whole list fits asks for a completion
            // too: else, with -Q above the room left, the next list could
            // wait for ever on frames that never complete.
            let full = pl > 1 && s.posted - s.completed + k + pl > depth;
            let sig = k < want || full || signals(s.posted, k, &cfg);
            if !self.post_list(s.posted, k, sig)? {
                return Ok(());
            }
            if o.sent.posted == 0 && turn.stamps() {
                o.sent.t_start = (self.now)();
            }
            o.sent.posted += k;
        }
    }

    /// Frames `first..first + k` swapped and posted as one list; false
    /// when the ring was full (the swaps undone: they go again next pass).
    #[inline(always)]
    fn post_list(&mut self, first: u64, k: u64, sig: bool) -> Result<bool, FwError> {
        let n = self.held.len() as u64;
        let list = &mut self.list[..k as usize];
        for (j, p) in list.iter_mut().enumerate() {
            let (slot, len) = self.held[((first + j as u64) % n) as usize];
            self.buf.swap_macs(slot, len);
            *p = RawPkt {
                addr: self.buf.cfg.addr(slot as u64),
                len,
            };
        }
        match self.post.post_frames(list, first, sig) {
            Ok(()) => Ok(true),
            Err(PostError::QueueFull) => {
                for j in 0..k {
                    let (slot, len) = self.held[((first + j) % n) as usize];
                    self.buf.swap_macs(slot, len);
                }
                Ok(false)
            }
            Err(err) => Err(FwError::Send(RunError::Post { qp: 0, err })),
        }
    }

    /// One poll of the receive CQ: each frame counted and held to forward;
    /// the frames it took.
    #[inline(always)]
    fn receive(&mut self, o: &mut FwOutcome) -> Result<usize, FwError> {
        let got = self.recv_cq.poll(self.wc);
        let got = got.map_err(|e| FwError::Recv(RawRecvError::Poll(e)))?;
        let n = self.held.len() as u64;
        for c in &self.wc[..got] {
            take::<K>(c, &self.buf.cfg, self.counts).map_err(FwError::Recv)?;
            if c.status != WcStatus::SUCCESS {
                return Err(FwError::RecvFailed(c.status));
            }
            if c.opcode != WcOpcode::RECV {
                continue;
            }
            let slot = (c.wr_id % self.buf.cfg.slots() as u64) as u32;
            let len = c.byte_len.min(self.buf.cfg.room());
            self.held[(o.received % n) as usize] = (slot, len);
            o.received += 1;
        }
        Ok(got)
    }

    /// One poll of the send CQ: each completion retires its frames.
    #[inline(always)]
    fn complete(&mut self, o: &mut FwOutcome, turn: &Turn) -> Result<(), FwError> {
        let got = self.send_cq.poll(self.wc);
        let got = got.map_err(|err| FwError::Send(RunError::Poll { err }))?;
        for c in &self.wc[..got] {
            let recv = matches!(c.opcode, WcOpcode::RECV | WcOpcode::RECV_RDMA_WITH_IMM);
            if c.status != WcStatus::SUCCESS || recv {
                return Err(FwError::Send(RunError::completion(0, *c)));
            }
            let done = (c.wr_id & SEQ_MASK).min(o.sent.posted);
            if done > o.sent.completed {
                o.sent.completed = done;
                if turn.stamps() {
                    o.sent.t_end = (self.now)();
                }
            }
        }
        Ok(())
    }

    /// Each slot whose send completed gets its receive back, in order.
    #[inline(always)]
    fn repost(&mut self, o: &mut FwOutcome) -> Result<(), FwError> {
        let n = self.held.len() as u64;
        let cfg = &self.buf.cfg;
        while o.reposted < o.sent.completed {
            let (slot, _) = self.held[(o.reposted % n) as usize];
            let s = slot as u64;
            self.rq
                .post_recv(s, cfg.addr(s), cfg.lkey(), cfg.room())
                .map_err(|e| FwError::Recv(RawRecvError::Post(e)))?;
            o.reposted += 1;
        }
        Ok(())
    }
}
