//! Running one case on a [`Rig`] (a requester QP and its peer in loopback,
//! posting through one post method) and checking everything it did: the
//! bytes where they landed (a pattern, byte for byte), the requester's
//! completions (count, wr_ids, status, opcode), the peer's receive
//! completions (count, wr_ids, opcode, byte_len, immediate), and for the bad
//! rkey the error status, its decoded syndrome and the QP after recovery.
//! Control path: allocation and formatting are fine here.

use std::time::{Duration, Instant};

use super::cases::{Case, Shape, Tr};
use crate::post::{Completion, Op, PostError, WcOpcode, WcStatus, WrDesc};

/// A registered buffer of a rig: where it is and its key.
#[derive(Clone, Copy, Debug)]
pub struct BufRef {
    pub addr: u64,
    pub key: u32,
    pub len: usize,
}

/// A requester QP, its peer and their buffers, posting through one method.
pub trait Rig {
    fn tr(&self) -> Tr;
    /// The requester QP's inline maximum (bytes).
    fn max_inline(&self) -> u32;
    /// WRs the send queue holds: the wrap case posts twice as many.
    fn sq_depth(&self) -> u32;
    /// The requester's buffer (gather source, READ/atomic destination) and
    /// the peer's (WRITE/READ/atomic target, receive buffers).
    fn local(&self) -> BufRef;
    fn remote(&self) -> BufRef;
    fn local_bytes(&mut self) -> &mut [u8];
    fn remote_bytes(&mut self) -> &mut [u8];
    fn post(&mut self, op: Op, wrs: &[WrDesc]) -> Result<(), PostError>;
    fn poll(&mut self, out: &mut [Completion]) -> Result<usize, PostError>;
    /// A receive at the peer into its buffer.
    fn post_recv(&mut self, wr_id: u64, addr: u64, len: u32) -> Result<(), String>;
    /// Receive completions at the peer so far (drained).
    fn poll_recv(&mut self, out: &mut Vec<Completion>) -> Result<(), String>;
    /// Lets a software NIC run (the model); nothing on a device.
    fn progress(&mut self) {}
    /// Bytes of GRH in front of a UD receive.
    fn grh(&self) -> u32;
    /// Moves both QPs through RESET back to RTS after an error and drains
    /// what the error flushed.
    fn recover(&mut self) -> Result<(), String>;
    /// Fault injection (the model): lose the next `n` WQEs; false where
    /// the rig cannot.
    fn inject_drop(&mut self, _n: u32) -> bool {
        false
    }
    /// The error completion decoded (status and syndrome as this method
    /// reports them).
    fn describe_error(&self, c: &Completion) -> String;
}

/// How long a case waits for room, completions or receives.
pub(super) const WAIT: Duration = Duration::from_secs(20);
const SLOT: usize = 64;
const IMM: u32 = 0x1234_5678;

/// Runs `case`; `Err` says what was wrong.
pub fn run_case(rig: &mut dyn Rig, case: &Case) -> Result<(), String> {
    match case.shape {
        Shape::BadRkey => bad_rkey(rig),
        Shape::Single => burst(rig, case.op, 1, len_of(case.op, 64), false, 1),
        Shape::List(n) => burst(rig, case.op, n, len_of(case.op, 64), false, n),
        Shape::Inline(n) => burst(rig, case.op, 1, n, true, 1),
        Shape::Wrap => {
            // Two laps of the ring in lists of 8 (one signaled WR each).
            let lists = (2 * rig.sq_depth()).div_ceil(8) + 1;
            burst(rig, case.op, 8 * lists, len_of(case.op, 8), false, 8)
        }
        Shape::RecvSize(n) => burst(rig, case.op, 1, n, false, 1),
        Shape::LateRecv => late_recv(rig),
    }
}

/// A SEND before its receive: no completion while the peer has no receive
/// (it answers RNR), then, once the receive is posted, the SEND completes
/// and its bytes land.
fn late_recv(rig: &mut dyn Rig) -> Result<(), String> {
    let (l, r) = (rig.local(), rig.remote());
    fill(rig.local_bytes(), seed());
    rig.remote_bytes().fill(0);
    let wr = WrDesc {
        wr_id: 0x1a7e,
        laddr: l.addr,
        lkey: l.key,
        len: 64,
        signaled: true,
        ..WrDesc::default()
    };
    post_with_room(rig, Op::Send, &[wr])?;
    let t0 = Instant::now();
    let mut buf = [Completion::default(); 4];
    while t0.elapsed() < Duration::from_millis(50) {
        rig.progress();
        let n = rig
            .poll(&mut buf)
            .map_err(|e| format!("poll failed: {e:?}"))?;
        if n > 0 {
            return Err(format!(
                "the SEND completed before any receive was posted: wr_id {:#x}: {}",
                buf[0].wr_id,
                rig.describe_error(&buf[0])
            ));
        }
    }
    rig.post_recv(0x1a7f, r.addr, 64)?;
    wait_completions(rig, Op::Send, &[0x1a7e])?;
    wait_receives(rig, Op::Send, &[0x1a7f], 64)?;
    let (got, want) = (
        &rig.remote_bytes()[..64].to_vec(),
        &rig.local_bytes()[..64].to_vec(),
    );
    if got != want {
        return Err("the late receive's buffer does not hold the SEND's bytes".into());
    }
    Ok(())
}

fn len_of(op: Op, len: u32) -> u32 {
    if matches!(op, Op::FetchAdd | Op::CmpSwap) {
        8
    } else {
        len
    }
}

/// A fresh pattern for a case (differs between cases, so stale bytes of an
/// earlier case never pass).
fn fill(bytes: &mut [u8], seed: u64) {
    let mut x = seed | 1;
    for b in bytes.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = x as u8;
    }
}

fn seed() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0x9e37_79b9_7f4a_7c15);
    N.fetch_add(0x2545_f491_4f6c_dd1d, Ordering::Relaxed)
}

fn ne64(b: &[u8], off: usize) -> u64 {
    u64::from_ne_bytes(b[off..off + 8].try_into().unwrap_or([0; 8]))
}

/// Posts `n` WRs of `len` bytes in post lists of `per_list` (the last of
/// each list signaled), waits for every completion and checks all.
fn burst(
    rig: &mut dyn Rig,
    op: Op,
    n: u32,
    len: u32,
    inline: bool,
    per_list: u32,
) -> Result<(), String> {
    let recv = matches!(op, Op::Send | Op::SendImm | Op::WriteImm);
    let grh = if rig.tr() == Tr::Ud { rig.grh() } else { 0 };
    // Each WR has its own slot in both buffers (wrapping for the long case).
    // (A zero-byte SEND still takes a slot.)
    let stride = (len as usize + grh as usize).max(1).div_ceil(SLOT) * SLOT;
    let (l, r) = (rig.local(), rig.remote());
    let slots = (l.len.min(r.len) / stride).min(4096);
    if slots == 0 {
        return Err(format!(
            "internal: buffers of {} B hold no {stride}-byte slot",
            l.len
        ));
    }
    prime(rig, op, stride);
    let before_local = rig.local_bytes().to_vec();
    let before_remote = rig.remote_bytes().to_vec();
    let b = Burst {
        op,
        len,
        inline,
        grh,
        stride,
        slots,
        recv,
    };
    let mut touched = vec![None::<u32>; slots];
    let mut sent = 0u32;
    while sent < n {
        let k = per_list.min(n - sent);
        b.one_list(rig, sent, k, &before_remote, &mut touched)?;
        sent += k;
    }
    check_bytes(
        rig,
        op,
        len,
        stride,
        grh,
        &touched,
        &before_local,
        &before_remote,
    )
}

/// The buffers before a burst: the local one a seeded pattern; the remote one zeroed, or
/// for reads and atomics a pattern of its own (atomics' slots made to compare equal to
/// their first 8 bytes reversed, so CMP_AND_SWAP has a known outcome).
fn prime(rig: &mut dyn Rig, op: Op, stride: usize) {
    let s = seed();
    fill(rig.local_bytes(), s);
    if !matches!(op, Op::Read | Op::FetchAdd | Op::CmpSwap) {
        rig.remote_bytes().fill(0);
        return;
    }
    fill(rig.remote_bytes(), s ^ 0xdead_beef);
    if op != Op::Read {
        for slot in rig.remote_bytes().chunks_exact_mut(stride) {
            for k in 0..4 {
                slot[7 - k] = slot[k];
            }
        }
    }
}

/// One burst's shape: the verb, sizes, and where each WR's slot is.
struct Burst {
    op: Op,
    len: u32,
    inline: bool,
    grh: u32,
    stride: usize,
    slots: usize,
    recv: bool,
}

impl Burst {
    /// WRs `first..first + k` as one post list (the last signaled), their receives posted
    /// first; waits for the list's completions (and receives) before returning, so the ring
    /// never overflows and the receives are never short.
    fn one_list(
        &self,
        rig: &mut dyn Rig,
        first: u32,
        k: u32,
        before_remote: &[u8],
        touched: &mut [Option<u32>],
    ) -> Result<(), String> {
        let (l, r) = (rig.local(), rig.remote());
        let mut wrs = Vec::with_capacity(k as usize);
        let mut expect_rx = Vec::new();
        for j in 0..k {
            let i = first + j;
            let slot = i as usize % self.slots;
            let off = (slot * self.stride) as u64;
            let wr_id = 0x5c00_0000 + i as u64;
            if self.recv {
                rig.post_recv(wr_id, r.addr + off, self.len + self.grh)?;
                expect_rx.push(wr_id);
            }
            let init = ne64(before_remote, slot * self.stride);
            wrs.push(WrDesc {
                wr_id,
                laddr: l.addr + off,
                lkey: l.key,
                len: self.len,
                raddr: r.addr + off,
                rkey: r.key,
                imm: IMM,
                swap_add: if self.op == Op::CmpSwap {
                    !init
                } else {
                    i as u64 + 1
                },
                compare: init,
                signaled: j + 1 == k,
                inline: self.inline,
            });
            touched[slot] = Some(i);
        }
        post_with_room(rig, self.op, &wrs)?;
        let last = wrs.last().map(|w| w.wr_id);
        wait_completions(rig, self.op, last.as_slice())?;
        if self.recv {
            let rx_len = if self.op == Op::WriteImm {
                self.len
            } else {
                self.len + self.grh
            };
            wait_receives(rig, self.op, &expect_rx, rx_len)?;
        }
        Ok(())
    }
}

fn post_with_room(rig: &mut dyn Rig, op: Op, wrs: &[WrDesc]) -> Result<(), String> {
    let what = ("WRs", wrs.len());
    let progress = |r: &mut _| {
        Rig::progress(r);
        Ok(())
    };
    retry_while_full(rig, |r| r.post(op, wrs), progress, what)
}

/// `post` retried while the queue is full (up to [`WAIT`]), `progress` between tries; any
/// other error, or a queue full for that long, fails naming the `what.1` `what.0` posted
/// (the rigs of the RDMA and the raw Ethernet cases).
pub(super) fn retry_while_full<R: ?Sized>(
    rig: &mut R,
    mut post: impl FnMut(&mut R) -> Result<(), PostError>,
    mut progress: impl FnMut(&mut R) -> Result<(), String>,
    what: (&str, usize),
) -> Result<(), String> {
    let t0 = Instant::now();
    loop {
        match post(rig) {
            Ok(()) => return Ok(()),
            Err(PostError::QueueFull) if t0.elapsed() < WAIT => progress(rig)?,
            Err(e) => return Err(format!("post of {} {} failed: {e:?}", what.1, what.0)),
        }
    }
}

fn wc_opcode(op: Op) -> WcOpcode {
    match op {
        Op::Write | Op::WriteImm => WcOpcode::RDMA_WRITE,
        Op::Send | Op::SendImm => WcOpcode::SEND,
        Op::Read => WcOpcode::RDMA_READ,
        Op::FetchAdd => WcOpcode::FETCH_ADD,
        Op::CmpSwap => WcOpcode::COMP_SWAP,
    }
}

/// Polls with `poll` until `got` holds `n` completions, or fails naming how
/// many of the `what` came within [`WAIT`].
fn wait_for(
    rig: &mut dyn Rig,
    got: &mut Vec<Completion>,
    n: usize,
    what: &str,
    poll: fn(&mut dyn Rig, &mut Vec<Completion>) -> Result<(), String>,
) -> Result<(), String> {
    let t0 = Instant::now();
    while got.len() < n {
        rig.progress();
        poll(rig, got)?;
        if t0.elapsed() > WAIT {
            return Err(format!(
                "{} of {n} {what} after {}s",
                got.len(),
                WAIT.as_secs()
            ));
        }
    }
    Ok(())
}

/// One poll of the send CQ, its completions appended to `got`.
fn poll_sends(rig: &mut dyn Rig, got: &mut Vec<Completion>) -> Result<(), String> {
    let mut buf = [Completion::default(); 16];
    let n = rig
        .poll(&mut buf)
        .map_err(|e| format!("poll failed: {e:?}"))?;
    got.extend_from_slice(&buf[..n]);
    Ok(())
}

/// Polls until `want.len()` completions came, each successful, in order,
/// with the expected wr_id and opcode, and nothing more arrives.
fn wait_completions(rig: &mut dyn Rig, op: Op, want: &[u64]) -> Result<(), String> {
    let mut got = Vec::new();
    wait_for(rig, &mut got, want.len(), "completions", poll_sends)?;
    rig.progress();
    poll_sends(rig, &mut got)?;
    if got.len() != want.len() {
        return Err(format!(
            "{} completions, {} expected (extra: {:?})",
            got.len(),
            want.len(),
            &got[want.len()..]
        ));
    }
    for (i, (c, &w)) in got.iter().zip(want).enumerate() {
        if c.status != WcStatus::SUCCESS {
            return Err(format!(
                "completion {i} (wr_id {:#x}): {}",
                c.wr_id,
                rig.describe_error(c)
            ));
        }
        if c.wr_id != w {
            return Err(format!(
                "completion {i}: wr_id {:#x}, expected {w:#x}",
                c.wr_id
            ));
        }
        if c.opcode != wc_opcode(op) {
            return Err(format!(
                "completion {i}: opcode {}, expected {}",
                c.opcode.0,
                wc_opcode(op).0
            ));
        }
    }
    Ok(())
}

fn wait_receives(rig: &mut dyn Rig, op: Op, want: &[u64], byte_len: u32) -> Result<(), String> {
    let mut got = Vec::new();
    wait_for(
        rig,
        &mut got,
        want.len(),
        "receive completions at the peer",
        |r, g| r.poll_recv(g),
    )?;
    let (opcode, imm) = match op {
        Op::WriteImm => (WcOpcode::RECV_RDMA_WITH_IMM, true),
        Op::SendImm => (WcOpcode::RECV, true),
        _ => (WcOpcode::RECV, false),
    };
    for (i, (c, &w)) in got.iter().zip(want).enumerate() {
        if c.status != WcStatus::SUCCESS || c.wr_id != w || c.opcode != opcode {
            return Err(format!(
                "receive {i}: wr_id {:#x} status {} opcode {}, expected wr_id {w:#x} success \
                 opcode {}",
                c.wr_id,
                c.status.name(),
                c.opcode.0,
                opcode.0
            ));
        }
        // WRITE_IMM: the RDMA WRITE's length (its payload went to the
        // target address, not into the receive buffer).
        let want_len = byte_len;
        if c.byte_len != want_len {
            return Err(format!(
                "receive {i}: byte_len {}, expected {want_len}",
                c.byte_len
            ));
        }
        if imm && u32::from_be(c.imm) != IMM {
            return Err(format!(
                "receive {i}: immediate {:#x}, expected {IMM:#x}",
                u32::from_be(c.imm)
            ));
        }
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn check_bytes(
    rig: &mut dyn Rig,
    op: Op,
    len: u32,
    stride: usize,
    grh: u32,
    touched: &[Option<u32>],
    before_local: &[u8],
    before_remote: &[u8],
) -> Result<(), String> {
    let local = rig.local_bytes().to_vec();
    let remote = rig.remote_bytes().to_vec();
    let len = len as usize;
    for (slot, t) in touched.iter().enumerate() {
        let Some(i) = *t else { continue };
        let at = slot * stride;
        let (got, want, what): (Vec<u8>, Vec<u8>, &str) = match op {
            Op::Write | Op::WriteImm => (
                remote[at..at + len].to_vec(),
                local[at..at + len].to_vec(),
                "peer buffer",
            ),
            Op::Send | Op::SendImm => {
                let g = at + grh as usize;
                (
                    remote[g..g + len].to_vec(),
                    local[at..at + len].to_vec(),
                    "peer receive buffer",
                )
            }
            Op::Read => (
                local[at..at + len].to_vec(),
                remote[at..at + len].to_vec(),
                "local buffer (READ)",
            ),
            Op::FetchAdd | Op::CmpSwap => {
                // The targets are byte palindromes (see `burst`), so the
                // compare operand matches whichever byte order the device
                // gives atomics; the fetch-add result is accepted in either.
                let init = ne64(before_remote, at);
                let (now, old) = (ne64(&remote, at), ne64(&local, at));
                let add = i as u64 + 1;
                let ok_now = match op {
                    Op::FetchAdd => {
                        now == init.wrapping_add(add)
                            || u64::from_be(now) == u64::from_be(init).wrapping_add(add)
                    }
                    _ => now == !init,
                };
                if old != init {
                    return Err(format!(
                        "WR {i}: the atomic's old value in the local buffer is {old:#x}, the \
                         target held {init:#x}"
                    ));
                }
                if !ok_now {
                    return Err(format!(
                        "WR {i}: the target holds {now:#x} after the atomic, {init:#x} before"
                    ));
                }
                continue;
            }
        };
        if got != want {
            let k = got.iter().zip(&want).position(|(a, b)| a != b).unwrap_or(0);
            return Err(format!(
                "WR {i}: {what} differs at byte {k} of {len}: {:#04x}, expected {:#04x}",
                got[k], want[k]
            ));
        }
    }
    // Nothing outside the touched slots changed at the target.
    let (after, before) = match op {
        Op::Read => (&local, before_local),
        _ => (&remote, before_remote),
    };
    for (slot, t) in touched.iter().enumerate() {
        if t.is_none()
            && after[slot * stride..(slot + 1) * stride]
                != before[slot * stride..(slot + 1) * stride]
        {
            return Err(format!("slot {slot}, which no WR targeted, changed"));
        }
    }
    Ok(())
}

/// A WRITE to a wrong rkey: an error completion (remote access), decoded;
/// then recovery and a WRITE that lands.
fn bad_rkey(rig: &mut dyn Rig) -> Result<(), String> {
    let (l, r) = (rig.local(), rig.remote());
    let wr = WrDesc {
        wr_id: 0xbad,
        laddr: l.addr,
        lkey: l.key,
        len: 64,
        raddr: r.addr,
        rkey: r.key ^ 0x00ab_cd00,
        signaled: true,
        ..WrDesc::default()
    };
    post_with_room(rig, Op::Write, &[wr])?;
    let t0 = Instant::now();
    let mut buf = [Completion::default(); 4];
    let c = loop {
        rig.progress();
        let n = rig
            .poll(&mut buf)
            .map_err(|e| format!("poll failed: {e:?}"))?;
        if n > 0 {
            break buf[0];
        }
        if t0.elapsed() > WAIT {
            return Err("no completion for the WRITE to a bad rkey".into());
        }
    };
    if c.wr_id != 0xbad || c.status != WcStatus::REM_ACCESS_ERR {
        return Err(format!(
            "the WRITE to a bad rkey completed with wr_id {:#x}: {}; expected REM_ACCESS_ERR",
            c.wr_id,
            rig.describe_error(&c)
        ));
    }
    let decoded = rig.describe_error(&c);
    rig.recover()
        .map_err(|e| format!("bad rkey gave {decoded}; recovery failed: {e}"))?;
    burst(rig, Op::Write, 4, 64, false, 4)
        .map_err(|e| format!("bad rkey gave {decoded}; after recovery: {e}"))
}
