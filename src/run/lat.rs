//! Latency loops (perftest `run_iter_lat_write`, `run_iter_lat`,
//! `run_iter_lat_send`), generic over the post method. Each loop stamps
//! `tposted[i]` before post i; the report turns consecutive stamps into samples.

use super::stop;
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
    /// Nothing from the peer for too long.
    Stalled {
        at: u64,
    },
    Interrupted,
}

#[derive(Clone, Copy, Debug)]
pub struct LatConfig {
    pub op: Op,
    pub size: u32,
    /// Iterations; in duration mode the loop stops at `end` ticks instead.
    pub iters: u64,
    pub inline: bool,
    /// true: this side starts (client); false: it first waits (server).
    pub initiator: bool,
    pub stall_ticks: u64,
    /// Duration mode: stop when the clock passes this (0 = iterations mode).
    pub end: u64,
}

/// What the loop did.
#[derive(Clone, Copy, Debug, Default)]
pub struct LatOutcome {
    /// Iterations completed (stamps written).
    pub iters: u64,
    pub t_start: u64,
    pub t_end: u64,
    pub error: Option<LatError>,
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

/// Spin until one completion arrives; errors and stalls end the wait.
#[inline(always)]
fn wait_one<C: CompletionQueue, F: Fn() -> u64>(
    cq: &mut C,
    now: &F,
    stall: u64,
) -> Result<Completion, LatError> {
    let mut wc = [Completion::default()];
    let t0 = now();
    loop {
        match cq.poll(&mut wc) {
            Ok(1) if wc[0].status == WcStatus::SUCCESS => return Ok(wc[0]),
            Ok(1) => return Err(LatError::Completion { wc: wc[0] }),
            Ok(_) => {}
            Err(err) => return Err(LatError::Poll { err }),
        }
        if stop::requested() {
            return Err(LatError::Interrupted);
        }
        let t = now();
        if t.wrapping_sub(t0) > stall {
            return Err(LatError::Stalled { at: t });
        }
    }
}

fn done(cfg: &LatConfig, n: u64, t: u64) -> bool {
    if cfg.end != 0 {
        t >= cfg.end
    } else {
        n >= cfg.iters
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

/// write-lat ping-pong (both sides).
pub fn write_lat<S: SendQueue, C: CompletionQueue, M: Mailbox, F: Fn() -> u64>(
    cfg: &LatConfig,
    sq: &mut S,
    cq: &mut C,
    mb: &mut M,
    t: &LatTarget,
    tposted: &mut [u64],
    now: F,
) -> LatOutcome {
    let mut out = LatOutcome {
        t_start: now(),
        ..Default::default()
    };
    let (mut scnt, mut rcnt) = (0u64, 0u64);
    let list = [wr(cfg, 1, t.laddr, t.lkey, t.raddr, t.rkey)];
    loop {
        let ts = now();
        let sending = !done(cfg, scnt, ts) || (cfg.end == 0 && scnt < cfg.iters);
        if !sending && rcnt >= scnt {
            break;
        }
        if (scnt > 0 || !cfg.initiator) && rcnt < scnt + u64::from(!cfg.initiator) {
            rcnt += 1;
            let want = rcnt as u8;
            let t0 = now();
            while mb.received() != want {
                if stop::requested() {
                    out.error = Some(LatError::Interrupted);
                    break;
                }
                if now().wrapping_sub(t0) > cfg.stall_ticks {
                    out.error = Some(LatError::Stalled { at: rcnt });
                    break;
                }
                core::hint::spin_loop();
            }
            if out.error.is_some() {
                break;
            }
        }
        if !sending {
            break;
        }
        let stamp = now();
        if let Some(s) = tposted.get_mut(scnt as usize) {
            *s = stamp;
        }
        scnt += 1;
        mb.stamp(scnt as u8);
        if let Err(err) = sq.post(cfg.op, &list) {
            out.error = Some(LatError::Post { err });
            break;
        }
        if let Err(e) = wait_one(cq, &now, cfg.stall_ticks) {
            out.error = Some(e);
            break;
        }
    }
    out.iters = scnt;
    out.t_end = now();
    out
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
    let mut out = LatOutcome {
        t_start: now(),
        ..Default::default()
    };
    let list = [wr(cfg, 1, t.laddr, t.lkey, t.raddr, t.rkey)];
    let mut n = 0u64;
    loop {
        let stamp = now();
        if done(cfg, n, stamp) {
            break;
        }
        if let Some(s) = tposted.get_mut(n as usize) {
            *s = stamp;
        }
        if let Err(err) = sq.post(cfg.op, &list) {
            out.error = Some(LatError::Post { err });
            break;
        }
        if let Err(e) = wait_one(cq, &now, cfg.stall_ticks) {
            out.error = Some(e);
            break;
        }
        n += 1;
    }
    out.iters = n;
    out.t_end = now();
    out
}

/// send-lat ping-pong (both sides): wait for a receive (unless we start),
/// repost it, then send and wait for the send's completion.
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
    let mut out = LatOutcome {
        t_start: now(),
        ..Default::default()
    };
    let list = [wr(cfg, 1, t.laddr, t.lkey, 0, 0)];
    let (mut scnt, mut rcnt) = (0u64, 0u64);
    loop {
        let ts = now();
        let sending = !done(cfg, scnt, ts);
        if (scnt > 0 || !cfg.initiator) && (rcnt < scnt + u64::from(!cfg.initiator)) {
            if let Err(e) = wait_one(rcq, &now, cfg.stall_ticks) {
                out.error = Some(e);
                break;
            }
            rcnt += 1;
            if let Err(err) = rq.post_recv(rcnt, t.recv_addr, t.lkey, t.recv_len) {
                out.error = Some(LatError::Post { err });
                break;
            }
        }
        if !sending {
            break;
        }
        let stamp = now();
        if let Some(s) = tposted.get_mut(scnt as usize) {
            *s = stamp;
        }
        scnt += 1;
        if let Err(err) = sq.post(cfg.op, &list) {
            out.error = Some(LatError::Post { err });
            break;
        }
        if let Err(e) = wait_one(scq, &now, cfg.stall_ticks) {
            out.error = Some(e);
            break;
        }
    }
    out.iters = scnt;
    out.t_end = now();
    out
}
