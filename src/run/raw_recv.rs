//! The raw Ethernet receive loop (the server side of raw-eth-bw): receives
//! kept posted on a raw packet QP's RQ, one buffer slot per receive (the
//! slot is the `wr_id`), each completion counted and its slot posted again.
//! Generic over the receive method: the queue ([`RecvQueue`]: a direct
//! `mlx5::rq::DirectRq`, or `ibv_post_recv` through `VerbsRecv`), the CQ
//! ([`CompletionQueue`]), and how a completion says what arrived
//! ([`RxClassify`]): [`DirectRx`] reads the CQE's header types and checksum
//! bits ([`Completion::rx`]); [`VerbsRx`] reads the headers from the frame
//! and the checksum from `wc_flags & IBV_WC_IP_CSUM_OK`, all `ibv_wc` has.
//!
//! The checksum verdict is the one libibverbs can give, the same for both
//! methods: an IPv4 frame with TCP or UDP is good when the NIC's L3 and L4
//! checks both passed (libmlx5 `handle_responder`), bad otherwise; other
//! frames, and every frame on a device that does not check receive
//! checksums ([`RawRecvCfg::csum_reported`] false), are not checked.
//!
//! The loop allocates, locks, formats and makes system calls not at all
//! (the method's own post and poll aside: `ibv_post_recv`/`ibv_poll_cq`
//! are library calls). [`RawRecvCounts::lines`] and
//! [`RawRecvCounts::findings`] render the report after it.

use crate::post::rx_offload::{L3Type, L4Type, RxOffload, WC_IP_CSUM_OK};
use crate::post::{Completion, CompletionQueue, PostError, RecvQueue, WcOpcode, WcStatus};

/// Completions taken per poll.
const BATCH: usize = 16;

/// The receive buffers: `slots` slots of `stride` bytes from `base`, each
/// posted for `room` bytes under `lkey`.
#[derive(Clone, Copy, Debug)]
pub struct RawRecvCfg {
    base: *const u8,
    stride: u32,
    room: u32,
    slots: u32,
    lkey: u32,
    /// The NIC checks receive checksums (mlx5: the raw packet QP's
    /// `IBV_RAW_PACKET_CAP_IP_CSUM`); without it nothing is judged.
    pub csum_reported: bool,
}

impl RawRecvCfg {
    /// # Safety
    /// `base` must point to `slots × stride` bytes registered under `lkey`,
    /// readable (and written only by the NIC) while a loop runs over it.
    pub unsafe fn new(base: *const u8, stride: u32, room: u32, slots: u32, lkey: u32) -> Self {
        Self {
            base,
            stride,
            room: room.min(stride),
            slots,
            lkey,
            csum_reported: true,
        }
    }
    /// Slot `slot`'s address.
    #[inline(always)]
    pub fn addr(&self, slot: u64) -> u64 {
        self.ptr(slot) as u64
    }
    /// The slot count and the buffers' key.
    pub fn slots(&self) -> u32 {
        self.slots
    }
    pub fn lkey(&self) -> u32 {
        self.lkey
    }
    /// Bytes from one slot's start to the next's.
    pub fn stride(&self) -> u32 {
        self.stride
    }
    fn ptr(&self, slot: u64) -> *const u8 {
        self.base.wrapping_add((slot * self.stride as u64) as usize)
    }
    /// Bytes each receive is posted for.
    pub fn room(&self) -> u32 {
        self.room
    }
}

/// A received frame's first bytes, read where the NIC wrote them.
#[derive(Clone, Copy)]
pub struct FrameRef {
    ptr: *const u8,
    len: usize,
}

impl FrameRef {
    /// Byte `at`, or 0 past the frame's end.
    #[inline(always)]
    pub fn byte(&self, at: usize) -> u8 {
        if at >= self.len {
            return 0;
        }
        // SAFETY: inside the slot the completion names (`RawRecvCfg::new`'s
        // contract); the NIC finished writing it before the CQE.
        unsafe { self.ptr.add(at).read_volatile() }
    }
    fn be16(&self, at: usize) -> u16 {
        u16::from_be_bytes([self.byte(at), self.byte(at + 1)])
    }
}

/// What one frame was, for the counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PktClass {
    pub l3: L3Type,
    pub l4: L4Type,
    /// `Some(good)` when the NIC's verdict applies, `None`: not checked.
    pub csum: Option<bool>,
}

/// How a completion says what arrived.
pub trait RxClassify {
    fn classify(c: &Completion, frame: FrameRef) -> PktClass;
}

/// The direct path: the CQE's own bytes ([`RxOffload`]).
pub struct DirectRx;
/// libibverbs: headers from the frame, the checksum from `wc_flags`.
pub struct VerbsRx;

/// The verdict both methods give: IPv4 with TCP/UDP only.
#[inline(always)]
fn verdict(l3: L3Type, l4: L4Type, good: bool) -> Option<bool> {
    (l3 == L3Type::IPV4 && l4 != L4Type::NONE).then_some(good)
}

impl RxClassify for DirectRx {
    #[inline(always)]
    fn classify(c: &Completion, _: FrameRef) -> PktClass {
        let rx: RxOffload = c.rx;
        let (l3, l4) = (rx.l3_type(), rx.l4_type());
        PktClass {
            l3,
            l4,
            csum: verdict(l3, l4, rx.ip_csum_ok()),
        }
    }
}

impl RxClassify for VerbsRx {
    #[inline(always)]
    fn classify(c: &Completion, f: FrameRef) -> PktClass {
        let (l3, l4) = headers_of(f);
        PktClass {
            l3,
            l4,
            csum: verdict(l3, l4, c.wc_flags & WC_IP_CSUM_OK != 0),
        }
    }
}

/// The L3 and L4 types from the frame: Ethernet (one 802.1Q tag skipped),
/// IPv4 or IPv6, TCP or UDP.
#[inline(always)]
pub fn headers_of(f: FrameRef) -> (L3Type, L4Type) {
    let (mut at, mut ty) = (14, f.be16(12));
    if ty == 0x8100 {
        (at, ty) = (18, f.be16(16));
    }
    let (l3, proto) = match ty {
        0x0800 => (L3Type::IPV4, f.byte(at + 9)),
        0x86dd => (L3Type::IPV6, f.byte(at + 6)),
        _ => return (L3Type::NONE, L4Type::NONE),
    };
    let l4 = match proto {
        6 => L4Type::TCP_NO_ACK,
        17 => L4Type::UDP,
        _ => L4Type::NONE,
    };
    (l3, l4)
}

/// What the loop counted, and what the caller adds from the NIC.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RawRecvCounts {
    pub packets: u64,
    pub bytes: u64,
    pub csum_ok: u64,
    pub csum_bad: u64,
    pub csum_unchecked: u64,
    pub ipv4: u64,
    pub ipv6: u64,
    pub l3_other: u64,
    pub udp: u64,
    pub tcp: u64,
    pub l4_other: u64,
    /// Receives completed with a local length error: a frame longer than
    /// the buffer.
    pub too_long: u64,
    /// Receives completed with another error, and the last such status.
    pub errors: u64,
    pub last_error: WcStatus,
    /// Completions that were not receives (a send on a shared CQ).
    pub other_cqes: u64,
    /// Frames the NIC dropped because no receive was posted, where the
    /// caller can read it (the model's out-of-buffer count, a device's
    /// `rx_discards`-style counter); `None`: not known.
    pub rq_dry: Option<u64>,
}

impl RawRecvCounts {
    /// Adds another QP's counts to these (`last_error`: the other's, when
    /// it has one); `rq_dry` is the caller's to fill.
    pub fn add(&mut self, o: &RawRecvCounts) {
        self.packets += o.packets;
        self.bytes += o.bytes;
        self.csum_ok += o.csum_ok;
        self.csum_bad += o.csum_bad;
        self.csum_unchecked += o.csum_unchecked;
        self.ipv4 += o.ipv4;
        self.ipv6 += o.ipv6;
        self.l3_other += o.l3_other;
        self.udp += o.udp;
        self.tcp += o.tcp;
        self.l4_other += o.l4_other;
        self.too_long += o.too_long;
        if o.errors > 0 {
            self.last_error = o.last_error;
        }
        self.errors += o.errors;
        self.other_cqes += o.other_cqes;
    }

    #[inline(always)]
    fn count(&mut self, len: u32, p: PktClass) {
        self.packets += 1;
        self.bytes += len as u64;
        match p.csum {
            Some(true) => self.csum_ok += 1,
            Some(false) => self.csum_bad += 1,
            None => self.csum_unchecked += 1,
        }
        match p.l3 {
            L3Type::IPV4 => self.ipv4 += 1,
            L3Type::IPV6 => self.ipv6 += 1,
            _ => self.l3_other += 1,
        }
        match p.l4.0 {
            2 => self.udp += 1,
            1 | 3 | 4 => self.tcp += 1,
            _ => self.l4_other += 1,
        }
    }
}

/// Why the loop stopped early.
#[derive(Debug, PartialEq, Eq)]
pub enum RawRecvError {
    Post(PostError),
    Poll(PostError),
    /// A flushed receive: the QP went to the error state.
    Flushed,
}

/// Posts a receive on every slot (`wr_id` = slot).
pub fn post_all<R: RecvQueue>(rq: &mut R, cfg: &RawRecvCfg) -> Result<(), PostError> {
    for s in 0..cfg.slots as u64 {
        rq.post_recv(s, cfg.addr(s), cfg.lkey, cfg.room)?;
    }
    Ok(())
}

/// Receives into `counts` until it holds `until` packets, or `idle()`
/// (called when a poll finds nothing) returns true. Every slot must have
/// been posted ([`post_all`]).
pub fn run_raw_recv<R: RecvQueue, C: CompletionQueue, K: RxClassify>(
    rq: &mut R,
    cq: &mut C,
    cfg: &RawRecvCfg,
    counts: &mut RawRecvCounts,
    until: u64,
    idle: &mut impl FnMut() -> bool,
) -> Result<(), RawRecvError> {
    let mut wc = [Completion::default(); BATCH];
    while counts.packets < until {
        if recv_batch::<_, _, K>(rq, cq, cfg, counts, &mut wc)? == 0 && idle() {
            return Ok(());
        }
    }
    Ok(())
}

/// One poll of `cq` into `wc`: each completion counted and its slot posted
/// again. Returns the completions taken (0: the CQ was empty).
#[inline(always)]
pub fn recv_batch<R: RecvQueue, C: CompletionQueue, K: RxClassify>(
    rq: &mut R,
    cq: &mut C,
    cfg: &RawRecvCfg,
    counts: &mut RawRecvCounts,
    wc: &mut [Completion],
) -> Result<usize, RawRecvError> {
    let n = cq.poll(wc).map_err(RawRecvError::Poll)?;
    for c in &wc[..n] {
        take::<K>(c, cfg, counts)?;
        if is_recv(c) {
            let slot = c.wr_id % cfg.slots as u64;
            rq.post_recv(slot, cfg.addr(slot), cfg.lkey, cfg.room)
                .map_err(RawRecvError::Post)?;
        }
    }
    Ok(n)
}

/// A completion of one of this RQ's receives: every failed one (libibverbs
/// leaves `opcode` undefined on an error, so a failure on the CQ is taken
/// as a receive's: the CQ must hold no other queue's failures), and the
/// successful receives.
fn is_recv(c: &Completion) -> bool {
    c.status != WcStatus::SUCCESS || c.opcode == WcOpcode::RECV
}

/// Counts one completion.
#[inline(always)]
pub(super) fn take<K: RxClassify>(
    c: &Completion,
    cfg: &RawRecvCfg,
    counts: &mut RawRecvCounts,
) -> Result<(), RawRecvError> {
    if c.status == WcStatus::WR_FLUSH_ERR {
        return Err(RawRecvError::Flushed);
    }
    if !is_recv(c) {
        counts.other_cqes += 1;
        return Ok(());
    }
    if c.status != WcStatus::SUCCESS {
        if c.status == WcStatus::LOC_LEN_ERR {
            counts.too_long += 1;
        } else {
            counts.errors += 1;
            counts.last_error = c.status;
        }
        return Ok(());
    }
    let slot = c.wr_id % cfg.slots as u64;
    let frame = FrameRef {
        ptr: cfg.ptr(slot),
        len: c.byte_len.min(cfg.room) as usize,
    };
    counts.count(c.byte_len, K::classify(c, frame));
    Ok(())
}
