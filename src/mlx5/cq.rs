//! The direct CQ poller: 64-byte CQEs read straight from the CQ buffer (in
//! 128-byte entries, `MLX5_CQE_SIZE=128`, the second half of each).
//! Implements [`CompletionQueue`].
//!
//! Ownership: CQE `i` belongs to software when its opcode is not INVALID and
//! its owner bit equals bit log2(cqe_cnt) of the consumer index (hardware
//! writes owner 0 on the first lap, 1 on the second, ...). After a valid
//! owner byte: read barrier, re-read. After a batch: consumer index into
//! `dbrec[0]` (24 bits, big-endian), or the NIC reports a CQ overrun.
//!
//! SQ progress: requester CQEs are matched to an attached SQ by QPN; the
//! poller reads the WQE's `wr_id` from the SQ's progress record and publishes
//! the SQ consumer index past it (see `progress.rs`), so SQ space comes back
//! without locks. Responder CQEs are matched by QPN to the receive ring
//! attached for that QP (its direct RQ or SRQ, `recv.rs`): the CQE's
//! `wqe_counter` names the WR, a SEND payload scattered into the CQE
//! (format 1: ≤ 32 B in the CQE; format 2: ≤ 64 B in the first half of a
//! 128-byte entry) is copied into the WR's buffers as libmlx5 does, and UD's
//! source QP and GRH flag are reported. Without an attached ring the
//! counter itself is the `wr_id`. CQEs of QPNs not attached on the send
//! side (e.g. of a destroyed QP: libmlx5 does not clean a DV-owned CQ) are
//! dropped and counted. An ODP page fault on an SRQ receive (RESP_ERR,
//! REMOTE_ABORTED, vendor syndrome 0x93) is not a failure: the WQE is freed,
//! its WR kept ([`DirectCq::reposts`]) for [`RecvCq`](super::recv_cq::RecvCq)
//! to post again, and the CQE hidden, as libmlx5 does. No CQE compression,
//! no requester scatter-to-CQE:
//! such a CQE stops the poll with `PostError::Unsupported` (the QP set-up
//! disables both). [`DirectCq::arm`] arms the CQ for `-e`.

use core::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU32, AtomicU8, Ordering};
use std::sync::Arc;

use super::barrier;
use super::error::DirectError;
use super::keepalive::KeepAlive;
use super::mmio::Mmio;
use super::prm::{cqe_format, op_own, CqeOpcode, Opcode, Syndrome, CQ_CI_MASK};
use super::progress::SqProgress;
use super::recv::{Inline, RecvKind, RecvRing, Repost};
use super::seg::cqe_off;
use crate::post::rx_offload::RxOffload;
use crate::post::wc::{WC_GRH, WC_WITH_IMM, WC_WITH_INV};
use crate::post::{Completion, CompletionQueue, PostError, WcOpcode, WcStatus};
use crate::sys::mlx5dv_cq;

const CQE_SIZE: usize = 64;
/// `MLX5_CQE_SIZE=128`: the 64-byte CQE is the second half of each entry.
const CQE_SIZE_128: usize = 128;

/// A CQ polled directly.
pub struct DirectCq {
    buf: NonNull<u8>,
    /// `&dbrec[MLX5_CQ_SET_CI]`.
    dbrec: NonNull<u32>,
    cqe_cnt: u32,
    /// log2 of the entry size (6: 64 B, 7: 128 B).
    cqe_shift: u32,
    /// Where the 64-byte CQE starts in an entry (0, or 64 in a 128-byte one).
    cqe_off: usize,
    /// Consumer index (free-running).
    ci: u32,
    sqs: Vec<Arc<SqProgress>>,
    /// Index into `sqs` of the last match (one QP per CQ is the common case).
    last: usize,
    /// Receive rings by QPN (a QP's RQ, or the SRQ it receives from).
    recvs: Vec<(u32, Arc<RecvRing>)>,
    last_recv: usize,
    /// SRQ receives dropped on an ODP page fault, their CQEs hidden, until
    /// [`RecvCq`](super::recv_cq::RecvCq) posts them again. Reserved for
    /// every attached SRQ's slots (a WQE faults at most once before it is
    /// posted again), so a push never allocates.
    reposts: Vec<Repost>,
    /// Arming: the CQ's UAR page, its number and the arm sequence number.
    uar: *mut u8,
    cqn: u32,
    arm_sn: u32,
    stale: u64,
    _keepalive: KeepAlive,
}

// SAFETY: the CQ owns its buffer's consumer side and its CI record; moving the
// poller to another thread moves that ownership. SqProgress is Sync.
unsafe impl Send for DirectCq {}

impl DirectCq {
    /// Builds the poller from what `mlx5dv_init_obj` returned for the CQ.
    /// Requires 64-byte CQEs and a power-of-two `cqe_cnt`.
    ///
    /// # Safety
    /// `cq`'s pointers must stay valid while the poller lives (`keepalive`
    /// may own them), the CQ must be fresh (consumer index 0) and polled by
    /// nothing else (no `ibv_poll_cq` on it).
    pub unsafe fn from_dv(cq: &mlx5dv_cq, keepalive: KeepAlive) -> Result<Self, DirectError> {
        check_cq_layout(cq)?;
        let (Some(buf), Some(dbrec)) = (NonNull::new(cq.buf.cast::<u8>()), NonNull::new(cq.dbrec))
        else {
            return Err(DirectError::Config {
                problem: "cq.buf/dbrec is null (internal: checked by check_cq_layout)",
                fix: "report this",
            });
        };
        Ok(Self {
            buf,
            dbrec,
            cqe_cnt: cq.cqe_cnt,
            cqe_shift: cq.cqe_size.trailing_zeros(),
            cqe_off: cq.cqe_size as usize - CQE_SIZE,
            ci: 0,
            sqs: Vec::new(),
            last: 0,
            recvs: Vec::new(),
            last_recv: 0,
            reposts: Vec::new(),
            uar: cq.cq_uar.cast::<u8>(),
            cqn: cq.cqn,
            arm_sn: 0,
            stale: 0,
            _keepalive: keepalive,
        })
    }

    /// Routes an SQ's CQEs to it (by QPN): pass `sq.progress()`. Control
    /// path (allocates).
    pub fn attach(&mut self, sq: &Arc<SqProgress>) {
        self.sqs.push(Arc::clone(sq));
    }

    /// Bytes per CQ entry (64 or 128).
    pub fn cqe_size(&self) -> u32 {
        1 << self.cqe_shift
    }
    /// Routes an SQ's CQEs to it instead of the SQ attached before with
    /// the same QPN (a QP moved through RESET gets a fresh SQ). Control path.
    pub fn reattach(&mut self, sq: &Arc<SqProgress>) {
        let qpn = sq.qpn();
        self.sqs.retain(|s| s.qpn() != qpn);
        self.last = 0;
        self.attach(sq);
    }

    /// Completes `qpn`'s receives from `ring` (its RQ, or the SRQ it
    /// receives from): responder CQEs then carry the posted `wr_id`, and
    /// payloads scattered into the CQE are copied into the WR's buffers.
    /// Control path (allocates).
    pub fn attach_recv(&mut self, qpn: u32, ring: &Arc<RecvRing>) {
        self.recvs.retain(|(q, _)| *q != qpn);
        self.recvs.push((qpn, Arc::clone(ring)));
        self.last_recv = 0;
        if ring.kind() == RecvKind::Srq {
            let more = self.reposts.capacity() - self.reposts.len() + ring.slots() as usize;
            self.reposts.reserve(more);
        }
    }

    /// SRQ receives dropped on an ODP page fault and not yet posted again
    /// (their CQEs were hidden, as libmlx5 hides them).
    pub fn reposts(&self) -> &[Repost] {
        &self.reposts
    }
    /// The first `n` of [`reposts`](Self::reposts) were posted again.
    pub fn reposted(&mut self, n: usize) {
        self.reposts.drain(..n.min(self.reposts.len()));
    }

    /// Number of CQEs.
    pub fn cqe_cnt(&self) -> u32 {
        self.cqe_cnt
    }
    /// Consumer index (free-running).
    pub fn ci(&self) -> u32 {
        self.ci
    }
    /// CQEs dropped because their QPN is not attached.
    pub fn stale_cqes(&self) -> u64 {
        self.stale
    }

    #[inline(always)]
    fn find_recv(&mut self, qpn: u32) -> Option<&RecvRing> {
        if self.recvs.get(self.last_recv).is_some_and(|r| r.0 == qpn) {
            return self.recvs.get(self.last_recv).map(|r| &*r.1);
        }
        let i = self.recvs.iter().position(|r| r.0 == qpn)?;
        self.last_recv = i;
        self.recvs.get(i).map(|r| &*r.1)
    }

    #[inline(always)]
    fn find(&mut self, qpn: u32) -> Option<&SqProgress> {
        if self.sqs.get(self.last).is_some_and(|s| s.qpn() == qpn) {
            return self.sqs.get(self.last).map(|s| &**s);
        }
        let i = self.sqs.iter().position(|s| s.qpn() == qpn)?;
        self.last = i;
        self.sqs.get(i).map(|s| &**s)
    }
}

/// The layout checks of [`DirectCq::from_dv`] alone, so set-up can refuse a
/// CQ before anything is connected.
pub fn check_cq_layout(cq: &mlx5dv_cq) -> Result<(), DirectError> {
    let layout = |what, value: u64, expected, fix| DirectError::Layout {
        what,
        value,
        expected,
        fix,
    };
    if !matches!(cq.cqe_size as usize, CQE_SIZE | CQE_SIZE_128) {
        return Err(layout(
            "cqe_size",
            cq.cqe_size as u64,
            "64 or 128",
            "set MLX5_CQE_SIZE to 64 or 128, or use --post wr-api",
        ));
    }
    if !cq.cqe_cnt.is_power_of_two() || cq.cqe_cnt > CQ_CI_MASK {
        return Err(layout(
            "cqe_cnt",
            cq.cqe_cnt as u64,
            "a power of two",
            "use --post wr-api on this device (and report the values)",
        ));
    }
    let (Some(buf), Some(dbrec)) = (NonNull::new(cq.buf.cast::<u8>()), NonNull::new(cq.dbrec))
    else {
        return Err(layout(
            "cq.buf/dbrec",
            0,
            "non-null pointers",
            "use --post wr-api on this device (and report the values)",
        ));
    };
    if buf.as_ptr() as usize % CQE_SIZE != 0 || dbrec.as_ptr() as usize % 4 != 0 {
        return Err(layout(
            "cq.buf",
            buf.as_ptr() as u64,
            "64-byte aligned CQEs and a 4-byte aligned dbrec",
            "use --post wr-api on this device (and report the values)",
        ));
    }
    Ok(())
}

/// Big-endian loads from a CQE after the owner check.
///
/// # Safety
/// `cqe + off .. + N` must lie inside a software-owned CQE.
#[inline(always)]
unsafe fn be32(cqe: *const u8, off: usize) -> u32 {
    // One 4-byte load (a volatile `[u8; 4]` would be four byte loads):
    // every 32-bit CQE field sits at a multiple of 4 in a 64-byte aligned
    // CQE.
    debug_assert!(off % 4 == 0 && cqe as usize % 4 == 0);
    // SAFETY: caller contract; aligned as asserted.
    u32::from_be(unsafe { cqe.add(off).cast::<u32>().read_volatile() })
}
#[inline(always)]
unsafe fn be16(cqe: *const u8, off: usize) -> u16 {
    debug_assert!(off % 2 == 0 && cqe as usize % 2 == 0);
    // SAFETY: caller contract; 16-bit fields sit at even offsets.
    u16::from_be(unsafe { cqe.add(off).cast::<u16>().read_volatile() })
}
#[inline(always)]
unsafe fn byte(cqe: *const u8, off: usize) -> u8 {
    // SAFETY: caller contract.
    unsafe { cqe.add(off).read_volatile() }
}

/// The `ibv_wc_opcode` of a requester completion, from the WQE opcode the
/// CQE carries; unknown opcodes stay representable.
#[inline(always)]
pub fn wc_opcode_of(wqe_opcode: u8) -> WcOpcode {
    match Opcode(wqe_opcode) {
        Opcode::RDMA_WRITE | Opcode::RDMA_WRITE_IMM => WcOpcode::RDMA_WRITE,
        Opcode::SEND | Opcode::SEND_IMM | Opcode::SEND_INVAL => WcOpcode::SEND,
        Opcode::RDMA_READ => WcOpcode::RDMA_READ,
        Opcode::ATOMIC_CS => WcOpcode::COMP_SWAP,
        Opcode::ATOMIC_FA => WcOpcode::FETCH_ADD,
        _ => WcOpcode(0x100 | wqe_opcode as u32),
    }
}

impl DirectCq {
    /// Asks for an event on the next completion (`-e`), as libmlx5's
    /// `mlx5_arm_cq`: the arm record `dbrec[MLX5_CQ_ARM_DB]` = sequence
    /// number, command and consumer index; then, after `mmio_wc_start`, one
    /// 64-bit store of that word and the CQ number to the UAR's CQ
    /// doorbell (offset 0x20), and `mmio_flush_writes`. `solicited`: only
    /// for a solicited completion (`MLX5_CQ_DB_REQ_NOT_SOL`).
    ///
    /// Control path of the event loop: after the CQ was polled empty.
    pub fn arm<M: Mmio>(&mut self, mmio: &M, solicited: bool) -> Result<(), DirectError> {
        if self.uar.is_null() || self.uar as usize % 8 != 0 {
            return Err(DirectError::Layout {
                what: "cq_uar",
                value: self.uar as u64,
                expected: "the CQ's mapped UAR page",
                fix: "use -e with --post wr-api on this device (and report the values)",
            });
        }
        let cmd = if solicited { 1 << 24 } else { 0 };
        let word = (self.arm_sn & 3) << 28 | cmd | (self.ci & CQ_CI_MASK);
        let raw = u32::from_ne_bytes(word.to_be_bytes());
        // SAFETY: dbrec[1] is this CQ's arm record (mlx5dv_cq.dbrec points
        // at two aligned words, constructor contract).
        unsafe { mmio.write_dbrec(self.dbrec.as_ptr().add(1), raw) };
        // The record must be visible before the doorbell the NIC acts on.
        mmio.store_fence_wc();
        let db = (word as u64) << 32 | self.cqn as u64;
        // SAFETY: offset 0x20 of the CQ's UAR page (checked non-null and
        // aligned above; mapped while the CQ lives) is its CQ doorbell.
        unsafe {
            mmio.write_db64(
                self.uar.wrapping_add(CQ_DOORBELL).cast(),
                u64::from_ne_bytes(db.to_be_bytes()),
            )
        };
        // Flush the write-combining buffer: the doorbell leaves now.
        mmio.store_fence_wc();
        Ok(())
    }

    /// The completion channel delivered this CQ's event: the next arm uses
    /// the next sequence number (libmlx5 counts it in `mlx5_cq_event`).
    pub fn event_consumed(&mut self) {
        self.arm_sn = self.arm_sn.wrapping_add(1);
    }

    /// The arm sequence number the next [`arm`](Self::arm) uses (2 bits).
    pub fn arm_sn(&self) -> u32 {
        self.arm_sn & 3
    }
}

/// Where a CQE's payload was scattered: `Some(None)` for an ordinary
/// CQE, `Some(Some(p))` for a SEND payload in this CQE (format 1: its
/// bytes 0..31) or in the first half of its 128-byte entry (format 2),
/// `None` for what the poller cannot take (compressed CQEs, a requester
/// CQE with data: the QP set-up disables both).
#[inline(always)]
fn inline_payload(
    cqe: *const u8,
    own: u8,
    opcode: CqeOpcode,
    len: u32,
    cqe128: bool,
) -> Option<Option<Inline>> {
    let send = matches!(
        opcode,
        CqeOpcode::RESP_SEND | CqeOpcode::RESP_SEND_IMM | CqeOpcode::RESP_SEND_INV
    );
    if own & op_own::FORMAT == 0 {
        return Some(None); // the common case: no payload in the CQE
    }
    match (own & op_own::FORMAT) >> op_own::FORMAT_SHIFT {
        cqe_format::INLINE_SCATTER_32 if send && len <= 32 => Some(Some(Inline { src: cqe, len })),
        cqe_format::INLINE_SCATTER_64 if send && len <= 64 && cqe128 => Some(Some(Inline {
            src: cqe.wrapping_sub(CQE_SIZE),
            len,
        })),
        _ => None,
    }
}

/// The fields every CQE kind needs, read once after the owner check.
#[derive(Clone, Copy)]
struct Head {
    cqe: *const u8,
    own: u8,
    qpn: u32,
    wqe_op: u8,
    counter: u16,
    byte_cnt: u32,
}

/// The CQ ring's shape, copied out of the poller for one poll.
#[derive(Clone, Copy)]
struct Geometry {
    buf: *mut u8,
    mask: u32,
    shift: u32,
    off: usize,
    log_cnt: u32,
    cqe128: bool,
}

impl Geometry {
    #[inline(always)]
    fn of(cq: &DirectCq) -> Self {
        Self {
            buf: cq.buf.as_ptr(),
            mask: cq.cqe_cnt - 1,
            shift: cq.cqe_shift,
            off: cq.cqe_off,
            log_cnt: cq.cqe_cnt.trailing_zeros(),
            cqe128: cq.cqe_off == CQE_SIZE,
        }
    }

    /// The 64-byte CQE of consumer index `ci`.
    #[inline(always)]
    fn cqe(self, ci: u32) -> *mut u8 {
        self.buf
            .wrapping_add((((ci & self.mask) as usize) << self.shift) + self.off)
    }

    /// How many CQEs from `ci` on are software-owned, up to `max`: opcode
    /// not INVALID and owner bit equal to the lap parity of the index.
    #[inline(always)]
    fn owned_from(self, ci: u32, max: usize) -> usize {
        let mut k = 0;
        while k < max {
            let at = ci.wrapping_add(k as u32);
            // SAFETY: inside the CQ buffer (index masked); the byte may be
            // written concurrently by the NIC (or the model's thread), so it
            // is read atomically.
            let own = unsafe { AtomicU8::from_ptr(self.cqe(at).add(cqe_off::OP_OWN)) }
                .load(Ordering::Relaxed);
            let sw_owner = ((at >> self.log_cnt) & 1) as u8;
            if own >> op_own::OPCODE_SHIFT == CqeOpcode::INVALID.0
                || own & op_own::OWNER != sw_owner
            {
                break;
            }
            k += 1;
        }
        k
    }
}

/// What one CQE gives the caller.
enum Step {
    /// The completion is in the caller's slot.
    Emit,
    /// A CQE of a QP no SQ is attached for: dropped and counted.
    Skip,
    /// A CQE the poller cannot take: the poll stops before it.
    Stop,
}

impl DirectCq {
    /// One software-owned CQE into `slot`. Branches, not a jump table: REQ
    /// and the SEND receives first, errors out of line.
    #[inline(always)]
    fn decode(&mut self, h: Head, cqe128: bool, slot: &mut Completion) -> Step {
        let opcode = h.own >> op_own::OPCODE_SHIFT;
        if opcode == CqeOpcode::REQ.0 {
            self.requester(&h, slot)
        } else if opcode.wrapping_sub(CqeOpcode::RESP_WR_IMM.0) <= 3 {
            self.responder(&h, cqe128, slot)
        } else {
            self.error_or_other(h, slot)
        }
    }

    /// A requester CQE (success): retires the SQ up to the WQE it names.
    #[inline(always)]
    fn requester(&mut self, h: &Head, c: &mut Completion) -> Step {
        if h.own & op_own::FORMAT != 0 {
            return Step::Stop; // requester scatter-to-CQE: disabled at set-up
        }
        let Some(sq) = self.find(h.qpn) else {
            self.stale += 1;
            return Step::Skip;
        };
        // A counter naming no posted WQE: report it, retire nothing.
        let (wr_id, status) = match sq.retire(h.counter) {
            Some(wr_id) => (wr_id, WcStatus::SUCCESS),
            None => (h.counter as u64, WcStatus::GENERAL_ERR),
        };
        c.wr_id = wr_id;
        c.status = status;
        c.opcode = wc_opcode_of(h.wqe_op);
        c.vendor_err = 0;
        c.syndrome = 0;
        c.byte_len = h.byte_cnt;
        c.qp_num = h.qpn;
        c.imm = 0;
        c.src_qp = 0;
        c.wc_flags = 0;
        c.rx = RxOffload::NONE;
        Step::Emit
    }

    /// A receive: SEND, SEND_IMM, SEND_INV or WRITE_IMM at the responder.
    #[inline(always)]
    fn responder(&mut self, h: &Head, cqe128: bool, c: &mut Completion) -> Step {
        let opcode = CqeOpcode(h.own >> op_own::OPCODE_SHIFT);
        let Some(inline) = inline_payload(h.cqe, h.own, opcode, h.byte_cnt, cqe128) else {
            return Step::Stop;
        };
        // SAFETY: inside the software-owned CQE (as the caller's reads).
        let (imm, flags_rqpn, rx) = unsafe {
            (
                h.cqe.add(cqe_off::IMM).cast::<u32>().read_volatile(),
                be32(h.cqe, cqe_off::FLAGS_RQPN),
                RxOffload::from_bytes(
                    byte(h.cqe, cqe_off::HDS_IP_EXT),
                    byte(h.cqe, cqe_off::HDS_IP_EXT + 1),
                ),
            )
        };
        let (wr_id, status) = match self.find_recv(h.qpn) {
            Some(r) => r.complete(h.counter, inline),
            // Not ours to complete: the index, as libmlx5 would not know
            // the WR either; a payload in the CQE would be lost, so stop.
            None if inline.is_some() => return Step::Stop,
            None => (h.counter as u64, WcStatus::SUCCESS),
        };
        // As libmlx5's handle_responder: the immediate only with an
        // immediate (the field holds the invalidated rkey for SEND_INV and
        // the P_Key index otherwise), and SEND_INV says so in the flags.
        let with_imm = matches!(opcode, CqeOpcode::RESP_WR_IMM | CqeOpcode::RESP_SEND_IMM);
        let with_inv = opcode == CqeOpcode::RESP_SEND_INV;
        let grh = (flags_rqpn >> 28) & 3 != 0;
        c.wr_id = wr_id;
        c.status = status;
        c.opcode = if opcode == CqeOpcode::RESP_WR_IMM {
            WcOpcode::RECV_RDMA_WITH_IMM
        } else {
            WcOpcode::RECV
        };
        c.vendor_err = 0;
        c.syndrome = 0;
        c.byte_len = h.byte_cnt;
        c.qp_num = h.qpn;
        c.imm = if with_imm { imm } else { 0 };
        c.src_qp = flags_rqpn & 0x00ff_ffff;
        c.wc_flags = if with_imm { WC_WITH_IMM } else { 0 }
            | if with_inv { WC_WITH_INV } else { 0 }
            | if grh { WC_GRH } else { 0 };
        c.rx = rx;
        Step::Emit
    }

    /// Error CQEs (with status, syndrome and vendor syndrome) and the kinds
    /// this path's QPs do not produce.
    #[cold]
    fn error_or_other(&mut self, h: Head, slot: &mut Completion) -> Step {
        let opcode = CqeOpcode(h.own >> op_own::OPCODE_SHIFT);
        let mut c = Completion {
            qp_num: h.qpn,
            wr_id: h.counter as u64,
            ..Completion::default()
        };
        if !matches!(opcode, CqeOpcode::REQ_ERR | CqeOpcode::RESP_ERR) {
            // RESIZE_CQ, NO_PACKET, SIG_ERR, ...: report rather than hide.
            c.status = WcStatus::GENERAL_ERR;
            c.vendor_err = h.own as u32;
            *slot = c;
            return Step::Emit;
        }
        // SAFETY: inside the software-owned CQE.
        let (synd, vendor) = unsafe {
            (
                byte(h.cqe, cqe_off::SYNDROME),
                byte(h.cqe, cqe_off::VENDOR_ERR_SYND),
            )
        };
        c.status = Syndrome(synd).wc_status();
        c.syndrome = synd;
        c.vendor_err = vendor as u32;
        if opcode == CqeOpcode::RESP_ERR {
            if Syndrome(synd) == Syndrome::REMOTE_ABORTED_ERR
                && vendor == VENDOR_ODP_PAGE_FAULT
                && self.reposts.len() < self.reposts.capacity()
            {
                // An ODP page fault on an SRQ receive: not a failure. The
                // WQE is freed and its WR kept to post again; the CQE is
                // hidden (libmlx5 cq.c `is_odp_pfault_err`).
                if let Some(rp) = self.find_recv(h.qpn).and_then(|r| r.fault(h.counter)) {
                    self.reposts.push(rp);
                    return Step::Skip;
                }
            }
            c.opcode = WcOpcode::RECV;
            // The failed (or flushed) WQE is consumed too (libmlx5 frees an
            // SRQ WQE on the error path as well).
            if let Some(r) = self.find_recv(h.qpn) {
                c.wr_id = r.complete(h.counter, None).0;
            }
        } else {
            c.opcode = wc_opcode_of(h.wqe_op);
            match self.find(h.qpn).map(|sq| sq.retire(h.counter)) {
                Some(Some(wr_id)) => c.wr_id = wr_id,
                Some(None) => {}
                None => {
                    self.stale += 1;
                    return Step::Skip;
                }
            }
        }
        *slot = c;
        Step::Emit
    }
}

/// Vendor syndrome of an ODP page fault on a responder (with syndrome
/// REMOTE_ABORTED; rdma-core `MLX5_CQE_VENDOR_SYNDROME_ODP_PFAULT`).
pub const VENDOR_ODP_PAGE_FAULT: u8 = 0x93;

/// `MLX5_CQ_DOORBELL`: the CQ doorbell's offset in the UAR page.
const CQ_DOORBELL: usize = 0x20;

impl CompletionQueue for DirectCq {
    fn unknown_qpn_cqes(&self) -> u64 {
        self.stale
    }

    #[inline]
    fn poll(&mut self, out: &mut [Completion]) -> Result<usize, PostError> {
        // The ring's shape and the consumer index in registers: the load
        // barrier is also a compiler barrier, after which every field of
        // `self` would be loaded again.
        let g = Geometry::of(self);
        let start_ci = self.ci;
        let ready = g.owned_from(start_ci, out.len());
        if ready == 0 {
            return Ok(0);
        }
        // Fence: no field of these CQEs may be read before the owner bytes
        // that say the NIC finished writing them. One barrier covers every
        // owner byte read above (libmlx5 fences once per CQE).
        barrier::load_fence_dma();
        fence(Ordering::Acquire);
        let (mut ci, mut n, mut result) = (start_ci, 0, Ok(()));
        for _ in 0..ready {
            let cqe = g.cqe(ci);
            // SAFETY: the CQE is software-owned (owner bit checked, barrier
            // passed); all offsets are inside its 64 bytes.
            let (own, sop_qpn, counter, byte_cnt) = unsafe {
                (
                    byte(cqe, cqe_off::OP_OWN),
                    be32(cqe, cqe_off::SOP_DROP_QPN),
                    be16(cqe, cqe_off::WQE_COUNTER),
                    be32(cqe, cqe_off::BYTE_CNT),
                )
            };
            let head = Head {
                cqe,
                own,
                qpn: sop_qpn & 0x00ff_ffff,
                wqe_op: (sop_qpn >> 24) as u8,
                counter,
                byte_cnt,
            };
            // Each kind writes its fields straight into the caller's slot
            // (a completion built aside and copied costs a store-forwarding
            // stall per CQE). `ready <= out.len()` and `n` counts only
            // emitted slots, so there is always one.
            let Some(slot) = out.get_mut(n) else { break };
            match self.decode(head, g.cqe128, slot) {
                Step::Emit => n += 1,
                Step::Skip => {}
                Step::Stop => {
                    result = Err(PostError::Unsupported);
                    break;
                }
            }
            ci = ci.wrapping_add(1);
        }
        self.ci = ci;
        if ci != start_ci {
            // Tell the NIC these CQEs are free (it checks for overrun
            // against this). Release: the CQE reads above happen before.
            let raw = u32::from_ne_bytes((ci & CQ_CI_MASK).to_be_bytes());
            // SAFETY: dbrec[0] is this CQ's consumer-index record, valid and
            // aligned (constructor contract); written atomically because the
            // model's NIC thread reads it concurrently.
            unsafe { AtomicU32::from_ptr(self.dbrec.as_ptr()) }.store(raw, Ordering::Release);
        }
        match result {
            Err(e) if n == 0 => Err(e),
            _ => Ok(n),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A CQ buffer of four 64-byte CQEs, all INVALID, and its records.
    #[repr(C, align(64))]
    struct Ring {
        cqes: [[u8; 64]; 4],
        dbrec: [u32; 2],
    }

    fn ring() -> Box<Ring> {
        let mut r = Box::new(Ring {
            cqes: [[0; 64]; 4],
            dbrec: [0; 2],
        });
        for c in &mut r.cqes {
            c[63] = CqeOpcode::INVALID.0 << 4;
        }
        r
    }

    fn poller(r: &mut Ring) -> DirectCq {
        let dv = mlx5dv_cq {
            buf: r.cqes.as_mut_ptr().cast(),
            dbrec: r.dbrec.as_mut_ptr(),
            cqe_cnt: 4,
            cqe_size: 64,
            ..Default::default()
        };
        // SAFETY: the ring outlives the poller (the test holds both); fresh.
        unsafe { DirectCq::from_dv(&dv, None) }.unwrap()
    }

    /// A responder CQE (first lap: owner 0) with `field` in imm_inval_pkey.
    fn resp(c: &mut [u8; 64], opcode: CqeOpcode, field: u32) {
        c[cqe_off::IMM..cqe_off::IMM + 4].copy_from_slice(&field.to_be_bytes());
        c[cqe_off::BYTE_CNT..cqe_off::BYTE_CNT + 4].copy_from_slice(&8u32.to_be_bytes());
        c[cqe_off::SOP_DROP_QPN..cqe_off::SOP_DROP_QPN + 4].copy_from_slice(&7u32.to_be_bytes());
        c[cqe_off::OP_OWN] = opcode.0 << 4;
    }

    /// As libmlx5's handle_responder (and the verbs poller, which copies
    /// imm_data only with IBV_WC_WITH_IMM): the field is the immediate only
    /// for WITH_IMM opcodes, is 0 otherwise (a SEND's P_Key index, a
    /// SEND_INV's rkey), and SEND_INV sets IBV_WC_WITH_INV.
    #[test]
    fn imm_only_with_an_immediate_and_send_inv_is_flagged() {
        let mut r = ring();
        resp(&mut r.cqes[0], CqeOpcode::RESP_SEND, 0x0000_0003);
        resp(&mut r.cqes[1], CqeOpcode::RESP_SEND_INV, 0x1234_5678);
        resp(&mut r.cqes[2], CqeOpcode::RESP_SEND_IMM, 0xa1b2_c3d4);
        resp(&mut r.cqes[3], CqeOpcode::RESP_WR_IMM, 0x0102_0304);
        let mut cq = poller(&mut r);
        let mut wc = [Completion::default(); 4];
        assert_eq!(cq.poll(&mut wc).unwrap(), 4);
        let imm_of = |k: usize| u32::from_be(wc[k].imm);
        assert_eq!((imm_of(0), wc[0].wc_flags), (0, 0));
        assert_eq!((imm_of(1), wc[1].wc_flags), (0, WC_WITH_INV));
        assert_eq!((imm_of(2), wc[2].wc_flags), (0xa1b2_c3d4, WC_WITH_IMM));
        assert_eq!((imm_of(3), wc[3].wc_flags), (0x0102_0304, WC_WITH_IMM));
        assert_eq!(wc[3].opcode, WcOpcode::RECV_RDMA_WITH_IMM);
        assert!(wc.iter().all(|c| c.status == WcStatus::SUCCESS));
    }

    /// A raw receive's CQE bytes 28..29 reach the completion as they are;
    /// a requester CQE's never do.
    #[test]
    fn a_receive_carries_its_rx_offload_bytes() {
        use crate::post::rx_offload::{L3Type, L4Type};
        let mut r = ring();
        resp(&mut r.cqes[0], CqeOpcode::RESP_SEND, 0);
        r.cqes[0][cqe_off::HDS_IP_EXT] = 0x07;
        r.cqes[0][cqe_off::HDS_IP_EXT + 1] = 0x28;
        resp(&mut r.cqes[1], CqeOpcode::RESP_SEND, 0);
        r.cqes[1][cqe_off::HDS_IP_EXT] = 0x01;
        r.cqes[1][cqe_off::HDS_IP_EXT + 1] = 0x14;
        let mut cq = poller(&mut r);
        let mut wc = [Completion::default(); 4];
        assert_eq!(cq.poll(&mut wc).unwrap(), 2);
        assert_eq!(wc[0].rx, RxOffload(0x0728));
        assert_eq!(
            (wc[0].rx.l3_type(), wc[0].rx.l4_type()),
            (L3Type::IPV4, L4Type::UDP)
        );
        assert!(wc[0].rx.ip_csum_ok());
        assert_eq!(
            (wc[1].rx.l3_type(), wc[1].rx.l4_type()),
            (L3Type::IPV6, L4Type::TCP_NO_ACK)
        );
        assert!(!wc[1].rx.l3_ok() && !wc[1].rx.ip_csum_ok());
        assert_eq!(
            wc[0].wc_flags, 0,
            "the direct poller leaves wc_flags to RDMA's bits"
        );
    }
}
