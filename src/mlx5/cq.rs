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
//! without locks. Responder CQEs (no direct RQ exists) are reported with the
//! RQ WQE index as `wr_id`. CQEs of QPNs not attached (e.g. of a destroyed
//! QP: libmlx5 does not clean a DV-owned CQ) are dropped and counted.
//! No CQE compression, no scatter-to-CQE: such a CQE stops the poll with
//! `PostError::Unsupported` (the QP set-up disables both).

use core::ptr::NonNull;
use std::sync::atomic::{fence, AtomicU32, AtomicU8, Ordering};
use std::sync::Arc;

use super::barrier;
use super::error::DirectError;
use super::prm::{cqe_format, op_own, CqeOpcode, Opcode, Syndrome, CQ_CI_MASK};
use super::progress::SqProgress;
use super::seg::cqe_off;
use super::sq::{DirectSq, KeepAlive};
use super::Mmio;
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
            stale: 0,
            _keepalive: keepalive,
        })
    }

    /// Routes this SQ's CQEs to it (by QPN). Control path (allocates).
    pub fn attach<M: Mmio>(&mut self, sq: &DirectSq<M>) {
        self.sqs.push(Arc::clone(sq.progress()));
    }

    /// Bytes per CQ entry (64 or 128).
    pub fn cqe_size(&self) -> u32 {
        1 << self.cqe_shift
    }
    /// Routes this SQ's CQEs to it instead of the SQ attached before with
    /// the same QPN (a QP moved through RESET gets a fresh SQ). Control path.
    pub fn reattach<M: Mmio>(&mut self, sq: &DirectSq<M>) {
        let qpn = sq.qpn();
        self.sqs.retain(|s| s.qpn() != qpn);
        self.last = 0;
        self.attach(sq);
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
    fn cqe_ptr(&self, ci: u32) -> *mut u8 {
        let idx = (ci & (self.cqe_cnt - 1)) as usize;
        self.buf
            .as_ptr()
            .wrapping_add((idx << self.cqe_shift) + self.cqe_off)
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
    // SAFETY: caller contract; unaligned-safe read of 4 bytes.
    u32::from_be_bytes(unsafe { cqe.add(off).cast::<[u8; 4]>().read_volatile() })
}
#[inline(always)]
unsafe fn be16(cqe: *const u8, off: usize) -> u16 {
    // SAFETY: caller contract.
    u16::from_be_bytes(unsafe { cqe.add(off).cast::<[u8; 2]>().read_volatile() })
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

impl CompletionQueue for DirectCq {
    fn unknown_qpn_cqes(&self) -> u64 {
        self.stale
    }

    #[inline]
    fn poll(&mut self, out: &mut [Completion]) -> Result<usize, PostError> {
        let log_cnt = self.cqe_cnt.trailing_zeros();
        let start_ci = self.ci;
        let mut n = 0;
        let mut result = Ok(());
        while n < out.len() {
            let cqe = self.cqe_ptr(self.ci);
            // SAFETY: cqe is inside the CQ buffer (index masked); the byte may
            // be written concurrently by the NIC (or the model's thread), so
            // it is read atomically.
            let own =
                unsafe { AtomicU8::from_ptr(cqe.add(cqe_off::OP_OWN)) }.load(Ordering::Relaxed);
            let sw_owner = ((self.ci >> log_cnt) & 1) as u8;
            if own >> op_own::OPCODE_SHIFT == CqeOpcode::INVALID.0
                || own & op_own::OWNER != sw_owner
            {
                break;
            }
            // Fence: no field of the CQE may be read before the owner byte
            // that says the NIC finished writing it; then read it again.
            barrier::load_fence_dma();
            fence(Ordering::Acquire);
            // SAFETY: the CQE is software-owned now (owner bit
            // checked, barrier passed); all offsets are inside its 64 bytes.
            let (own, sop_qpn, counter, byte_cnt) = unsafe {
                (
                    byte(cqe, cqe_off::OP_OWN),
                    be32(cqe, cqe_off::SOP_DROP_QPN),
                    be16(cqe, cqe_off::WQE_COUNTER),
                    be32(cqe, cqe_off::BYTE_CNT),
                )
            };
            let opcode = CqeOpcode(own >> op_own::OPCODE_SHIFT);
            if (own & op_own::FORMAT) >> op_own::FORMAT_SHIFT != cqe_format::NORMAL {
                result = Err(PostError::Unsupported);
                break;
            }
            let qpn = sop_qpn & 0x00ff_ffff;
            let wqe_op = (sop_qpn >> 24) as u8;
            let mut c = Completion {
                qp_num: qpn,
                byte_len: byte_cnt,
                ..Completion::default()
            };
            match opcode {
                CqeOpcode::REQ | CqeOpcode::REQ_ERR => {
                    if opcode == CqeOpcode::REQ_ERR {
                        // SAFETY: as above.
                        let (synd, vendor) = unsafe {
                            (
                                byte(cqe, cqe_off::SYNDROME),
                                byte(cqe, cqe_off::VENDOR_ERR_SYND),
                            )
                        };
                        c.status = Syndrome(synd).wc_status();
                        c.syndrome = synd;
                        c.vendor_err = vendor as u32;
                        c.byte_len = 0;
                    }
                    c.opcode = wc_opcode_of(wqe_op);
                    match self.find(qpn).map(|sq| sq.retire(counter)) {
                        Some(Some(wr_id)) => c.wr_id = wr_id,
                        // A counter naming no posted WQE: report, retire nothing.
                        Some(None) => {
                            c.wr_id = counter as u64;
                            if c.status == WcStatus::SUCCESS {
                                c.status = WcStatus::GENERAL_ERR;
                            }
                        }
                        None => {
                            self.stale += 1;
                            self.ci = self.ci.wrapping_add(1);
                            continue;
                        }
                    }
                }
                CqeOpcode::RESP_ERR => {
                    // SAFETY: as above.
                    let (synd, vendor) = unsafe {
                        (
                            byte(cqe, cqe_off::SYNDROME),
                            byte(cqe, cqe_off::VENDOR_ERR_SYND),
                        )
                    };
                    c.status = Syndrome(synd).wc_status();
                    c.syndrome = synd;
                    c.vendor_err = vendor as u32;
                    c.opcode = WcOpcode::RECV;
                    c.wr_id = counter as u64;
                }
                CqeOpcode::RESP_WR_IMM | CqeOpcode::RESP_SEND | CqeOpcode::RESP_SEND_IMM => {
                    c.opcode = if opcode == CqeOpcode::RESP_WR_IMM {
                        WcOpcode::RECV_RDMA_WITH_IMM
                    } else {
                        WcOpcode::RECV
                    };
                    // SAFETY: as above.
                    c.imm = u32::from_ne_bytes(unsafe {
                        cqe.add(cqe_off::IMM).cast::<[u8; 4]>().read_volatile()
                    });
                    c.wr_id = counter as u64;
                }
                _ => {
                    // RESIZE_CQ, NO_PACKET, SIG_ERR, ...: not produced for
                    // the QPs this path creates; report rather than hide.
                    c.status = WcStatus::GENERAL_ERR;
                    c.vendor_err = own as u32;
                    c.wr_id = counter as u64;
                }
            }
            if let Some(slot) = out.get_mut(n) {
                *slot = c;
            }
            n += 1;
            self.ci = self.ci.wrapping_add(1);
        }
        if self.ci != start_ci {
            // Tell the NIC these CQEs are free (it checks for overrun
            // against this). Release: the CQE reads above happen before.
            let raw = u32::from_ne_bytes((self.ci & CQ_CI_MASK).to_be_bytes());
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
