//! The direct send queue: WQEs written straight into the mlx5 SQ ring,
//! doorbell rung as libmlx5 does. Implements [`SendQueue`].
//!
//! Capacity is `sq.wqe_cnt` WQEBBs (not `max_send_wr`); a post list is
//! all-or-nothing: if its WQEBBs do not fit in the free space the post fails
//! with `QueueFull` before anything is written. Space comes back only through
//! completions polled by a [`DirectCq`](super::cq::DirectCq) this SQ is
//! attached to, so a caller must signal at least one WQE every so often.

use core::any::Any;
use core::ptr::NonNull;
use std::sync::Arc;

use super::doorbell::Doorbell;
use super::error::DirectError;
use super::mmio::{HwMmio, Mmio};
use super::prm::{fm_ce_se, Opcode, MAX_SQ_WQEBBS, WQEBB};
use super::progress::SqProgress;
use super::seg::{AtomicSeg, CtrlSeg, DataSeg, DatagramSeg, RaddrSeg};
use super::wqe::{shape, SqRing, WqeCursor, WqeShape};
use crate::post::{Op, PostError, SendQueue, WrDesc};
use crate::sys::mlx5dv_qp;

/// Something that keeps the queue memory alive as long as a queue uses it
/// (the model's memory, or nothing for a real device whose lifetime the
/// caller manages).
pub type KeepAlive = Option<Arc<dyn Any + Send + Sync>>;

/// The QP transport, which decides the segments of a SEND.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// RC or UC: ctrl [+ raddr [+ atomic]] + data.
    Rc,
    /// UD: ctrl + this address vector (destination QPN and qkey already set,
    /// see [`DatagramSeg::with_ud_dest`]) + data. SENDs only.
    Ud(DatagramSeg),
}

/// At most this many address ranges may serve as inline sources.
pub const MAX_INLINE_SOURCES: usize = 4;

/// A direct SQ. `M` is the MMIO seam: [`HwMmio`] on a device, the model's
/// recorder in tests.
pub struct DirectSq<M: Mmio = HwMmio> {
    ring: SqRing,
    /// Producer index in WQEBBs (free-running, 16 bits like the ctrl field).
    pi: u16,
    /// Last consumer index read from `progress`.
    ci_cached: u16,
    wqe_cnt: u32,
    qpn: u32,
    av: Option<[u8; 48]>,
    progress: Arc<SqProgress>,
    db: Doorbell<M>,
    inline_src: [(u64, u64); MAX_INLINE_SOURCES],
    n_inline_src: usize,
    _keepalive: KeepAlive,
}

impl<M: Mmio> DirectSq<M> {
    /// Builds the SQ from what `mlx5dv_init_obj` returned for the QP.
    ///
    /// Checks the layout (stride 64, power-of-two `wqe_cnt` up to 32768,
    /// aligned buffers, `bf.size` 0 or a multiple of 64) and returns
    /// [`DirectError::Layout`] otherwise.
    ///
    /// # Safety
    /// - `qp`'s pointers must stay valid while the SQ lives (`keepalive` may
    ///   own them);
    /// - the QP must be in a fresh state (pi = 0, as after creation or RESET)
    ///   and nothing else may post to it (no libmlx5 posting on this QP);
    /// - `bf.reg` must not be written by any other SQ (dedicated UAR: QP on a
    ///   thread-domain parent PD);
    /// - `qpn` must be the QP's number.
    pub unsafe fn from_dv(
        qp: &mlx5dv_qp,
        qpn: u32,
        transport: Transport,
        mmio: M,
        keepalive: KeepAlive,
    ) -> Result<Self, DirectError> {
        const FIX: &str = "use --post wr-api on this device (and report the values)";
        let layout = |what, value: u64, expected| DirectError::Layout {
            what,
            value,
            expected,
            fix: FIX,
        };
        if qp.sq.stride as usize != WQEBB {
            return Err(layout("sq.stride", qp.sq.stride as u64, "64"));
        }
        let n = qp.sq.wqe_cnt;
        if !n.is_power_of_two() || n > MAX_SQ_WQEBBS {
            return Err(layout("sq.wqe_cnt", n as u64, "a power of two <= 32768"));
        }
        let Some(buf) = NonNull::new(qp.sq.buf.cast::<u8>()) else {
            return Err(layout("sq.buf", 0, "a non-null buffer"));
        };
        if buf.as_ptr() as usize % WQEBB != 0 {
            return Err(layout("sq.buf", buf.as_ptr() as u64, "64-byte alignment"));
        }
        if qp.dbrec.is_null() || qp.dbrec as usize % 4 != 0 {
            return Err(layout("dbrec", qp.dbrec as u64, "a 4-byte aligned record"));
        }
        let bf = qp.bf.size;
        if bf % WQEBB as u32 != 0 || bf > 2048 {
            return Err(layout(
                "bf.size",
                bf as u64,
                "0 or a multiple of 64 up to 2048",
            ));
        }
        let reg = qp.bf.reg.cast::<u8>();
        let reg_align = if bf == 0 { 8 } else { WQEBB };
        if reg.is_null() || reg as usize % reg_align != 0 {
            return Err(layout("bf.reg", reg as u64, "an aligned UAR register"));
        }
        // SAFETY: checked above: non-null, 64-aligned, power-of-two count;
        // validity for the SQ's life is the caller's contract.
        let ring = unsafe { SqRing::new(buf, n) };
        // SAFETY: dbrec[1] is the SQ record (MLX5_SND_DBR); register validity
        // and exclusivity are the caller's contract.
        let db = unsafe { Doorbell::new(qp.dbrec.add(1), reg, bf, mmio) };
        Ok(Self {
            ring,
            pi: 0,
            ci_cached: 0,
            wqe_cnt: n,
            qpn,
            av: match transport {
                Transport::Rc => None,
                Transport::Ud(av) => Some(av.to_bytes()),
            },
            progress: SqProgress::new(qpn, n),
            db,
            inline_src: [(0, 0); MAX_INLINE_SOURCES],
            n_inline_src: 0,
            _keepalive: keepalive,
        })
    }

    /// Allows inline WRs to copy from `addr..addr+len` (the CPU reads inline
    /// payload itself, so only declared ranges are accepted; others fail with
    /// `PostError::Unsupported`).
    ///
    /// # Safety
    /// The range must stay readable while the SQ lives.
    pub unsafe fn allow_inline_source(
        &mut self,
        addr: *const u8,
        len: usize,
    ) -> Result<(), DirectError> {
        let start = addr as u64;
        let Some(end) = start.checked_add(len as u64) else {
            return Err(DirectError::Config {
                problem: "inline source range wraps the address space",
                fix: "pass the registered buffer's address and length",
            });
        };
        let Some(slot) = self.inline_src.get_mut(self.n_inline_src) else {
            return Err(DirectError::Config {
                problem: "too many inline source ranges (at most 4)",
                fix: "declare one range covering the registered buffer",
            });
        };
        *slot = (start, end);
        self.n_inline_src += 1;
        Ok(())
    }

    /// The QP number written into every ctrl segment.
    pub fn qpn(&self) -> u32 {
        self.qpn
    }
    /// Capacity in WQEBBs (`sq.wqe_cnt`).
    pub fn capacity(&self) -> u32 {
        self.wqe_cnt
    }
    /// Producer index (WQEBBs, 16 bits).
    pub fn pi(&self) -> u16 {
        self.pi
    }
    /// WQEBBs posted and not yet retired by a polled completion.
    pub fn outstanding(&self) -> u32 {
        self.pi.wrapping_sub(self.progress.ci()) as u32
    }
    /// WQEBBs free for posting now.
    pub fn free_wqebbs(&self) -> u32 {
        self.wqe_cnt.saturating_sub(self.outstanding())
    }
    /// The BlueFlame half the next doorbell uses (0 or `bf.size`).
    pub fn bf_offset(&self) -> u32 {
        self.db.bf_offset()
    }
    /// The MMIO implementation (the model's recorder in tests).
    pub fn mmio(&self) -> &M {
        self.db.mmio()
    }
    /// The progress record a [`DirectCq`](super::cq::DirectCq) needs.
    pub(crate) fn progress(&self) -> &Arc<SqProgress> {
        &self.progress
    }
    /// The WQE shape `op` takes for `wr` on this SQ.
    pub fn shape(&self, op: Op, wr: &WrDesc) -> Result<WqeShape, PostError> {
        shape(op, wr, self.av.is_some())
    }

    #[inline(always)]
    fn room(&self, ci: u16) -> u32 {
        self.wqe_cnt.saturating_sub(self.pi.wrapping_sub(ci) as u32)
    }

    /// True when `need` WQEBBs fit; refreshes the consumer index only when
    /// the cached one says no (one shared load per "full" event).
    #[inline(always)]
    fn has_room(&mut self, need: u32) -> bool {
        if self.room(self.ci_cached) >= need {
            return true;
        }
        self.ci_cached = self.progress.ci();
        self.room(self.ci_cached) >= need
    }

    #[inline(always)]
    fn inline_ok(&self, wr: &WrDesc) -> bool {
        let start = wr.laddr;
        let Some(end) = start.checked_add(wr.len as u64) else {
            return false;
        };
        let mut i = 0;
        while i < self.n_inline_src && i < MAX_INLINE_SOURCES {
            let (s, e) = self.inline_src[i];
            if start >= s && end <= e {
                return true;
            }
            i += 1;
        }
        false
    }

    #[inline(always)]
    fn checked_shape(&self, op: Op, wr: &WrDesc) -> Result<WqeShape, PostError> {
        let s = shape(op, wr, self.av.is_some())?;
        if wr.inline && wr.len != 0 && !self.inline_ok(wr) {
            return Err(PostError::Unsupported);
        }
        if s.nbb as u32 > self.wqe_cnt {
            return Err(PostError::Unsupported);
        }
        Ok(s)
    }

    /// Writes one WQE at `self.pi` and advances it.
    ///
    /// # Safety
    /// `s` must be `checked_shape(op, wr)` and its WQEBBs must be free.
    #[inline(always)]
    unsafe fn write_wqe(&mut self, op: Op, wr: &WrDesc, s: WqeShape) {
        let bb = self.pi;
        self.progress.record(bb, wr.wr_id, s.nbb);
        let fm = if wr.signaled { fm_ce_se::CQ_UPDATE } else { 0 };
        let (opcode, imm) = match op {
            Op::Write => (Opcode::RDMA_WRITE, [0; 4]),
            Op::WriteImm => (Opcode::RDMA_WRITE_IMM, wr.imm.to_be_bytes()),
            Op::Send => (Opcode::SEND, [0; 4]),
            Op::SendImm => (Opcode::SEND_IMM, wr.imm.to_be_bytes()),
            Op::Read => (Opcode::RDMA_READ, [0; 4]),
            Op::FetchAdd => (Opcode::ATOMIC_FA, [0; 4]),
            Op::CmpSwap => (Opcode::ATOMIC_CS, [0; 4]),
        };
        let ctrl = CtrlSeg::new(bb, opcode, 0, self.qpn, fm, s.ds, 0, imm);
        // SAFETY: the caller owns the s.nbb WQEBBs from bb; the
        // units written below are exactly the s.ds units `shape` counted, and
        // inline sources were checked against the declared readable ranges.
        unsafe {
            let mut c = WqeCursor::new(&self.ring, bb);
            c.put16(ctrl.to_bytes());
            match op {
                Op::Send | Op::SendImm => {
                    if let Some(av) = &self.av {
                        c.put48(av);
                    }
                }
                _ => c.put16(RaddrSeg::new(wr.raddr, wr.rkey).to_bytes()),
            }
            match op {
                Op::FetchAdd | Op::CmpSwap => {
                    let a = if op == Op::FetchAdd {
                        AtomicSeg::fetch_add(wr.swap_add)
                    } else {
                        AtomicSeg::cmp_swap(wr.swap_add, wr.compare)
                    };
                    c.put16(a.to_bytes());
                    c.put16(DataSeg::new(8, wr.lkey, wr.laddr).to_bytes());
                }
                _ if wr.len == 0 => {}
                _ if wr.inline => c.put_inline(wr.laddr as *const u8, wr.len as usize),
                _ => c.put16(DataSeg::new(wr.len, wr.lkey, wr.laddr).to_bytes()),
            }
        }
        self.pi = bb.wrapping_add(s.nbb);
    }

    /// Posts one caller-built WQE (a multiple of 16 bytes, at most 1008),
    /// like `mlx5dv_wr_raw_wqe`: the bytes are copied as given except the
    /// WQE index in the ctrl segment, which is set to the slot's. Opcode, QPN,
    /// `ds` and `fm_ce_se` are the caller's (tests use this to feed the NIC
    /// malformed WQEs). One doorbell, BlueFlame rules as for `post`.
    pub fn post_raw(&mut self, wqe: &[u8], wr_id: u64) -> Result<(), PostError> {
        if wqe.len() < 16 || wqe.len() % 16 != 0 || wqe.len() > super::prm::MAX_WQE_BYTES {
            return Err(PostError::Unsupported);
        }
        let nbb = wqe.len().div_ceil(WQEBB) as u16;
        if nbb as u32 > self.wqe_cnt {
            return Err(PostError::Unsupported);
        }
        if !self.has_room(nbb as u32) {
            return Err(PostError::QueueFull);
        }
        let bb = self.pi;
        self.progress.record(bb, wr_id, nbb);
        let ds = wqe.get(7).copied().unwrap_or(0) & 0x3f;
        // SAFETY: the nbb WQEBBs from bb are free (has_room) and owned by us;
        // exactly wqe.len() / 16 units are written.
        unsafe {
            let mut c = WqeCursor::new(&self.ring, bb);
            for (i, chunk) in wqe.chunks_exact(16).enumerate() {
                let mut u = [0u8; 16];
                u.copy_from_slice(chunk);
                if i == 0 {
                    u[1..3].copy_from_slice(&bb.to_be_bytes());
                }
                c.put16(u);
            }
        }
        self.pi = bb.wrapping_add(nbb);
        // SAFETY: the WQE is completely written; the ring is ours.
        unsafe { self.db.ring(&self.ring, self.pi, bb, ds, 1) };
        Ok(())
    }
}

impl<M: Mmio> SendQueue for DirectSq<M> {
    /// One post list, one doorbell: BlueFlame for a single WQE that fits
    /// `bf.size`, else an 8-byte doorbell with the last WQE's ctrl bytes.
    #[inline]
    fn post(&mut self, op: Op, wrs: &[WrDesc]) -> Result<(), PostError> {
        if wrs.is_empty() {
            return Ok(());
        }
        let mut need = 0u32;
        for wr in wrs {
            need = need.saturating_add(self.checked_shape(op, wr)?.nbb as u32);
        }
        if !self.has_room(need) {
            return Err(PostError::QueueFull);
        }
        let mut last_bb = self.pi;
        let mut last_ds = 0u8;
        for wr in wrs {
            // Cannot fail: the same checks passed in the first loop.
            let s = self.checked_shape(op, wr)?;
            last_bb = self.pi;
            last_ds = s.ds;
            // SAFETY: s is checked_shape(op, wr); the whole list fits in the
            // free WQEBBs (has_room above), so this WQE's are free.
            unsafe { self.write_wqe(op, wr, s) };
        }
        // SAFETY: every WQE up to self.pi has been written just above.
        unsafe {
            self.db
                .ring(&self.ring, self.pi, last_bb, last_ds, wrs.len())
        };
        Ok(())
    }
}

// The run loops move queues onto worker threads.
const _: () = {
    const fn send<T: Send>() {}
    send::<DirectSq<HwMmio>>();
    send::<super::cq::DirectCq>();
};
