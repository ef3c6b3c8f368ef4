//! The direct send queue: WQEs written straight into the mlx5 SQ ring,
//! doorbell rung as libmlx5 does. Implements [`SendQueue`].
//!
//! Capacity is `sq.wqe_cnt` WQEBBs (not `max_send_wr`); a post list is
//! all-or-nothing: if its WQEBBs do not fit in the free space the post fails
//! with `QueueFull` before anything is written. Space comes back only through
//! completions polled by a [`DirectCq`](super::cq::DirectCq) this SQ is
//! attached to, so a caller must signal at least one WQE every so often.

use core::ptr::NonNull;
use std::sync::Arc;

use super::doorbell::Doorbell;
use super::env::BfPolicy;
use super::error::DirectError;
use super::keepalive::KeepAlive;
use super::mmio::{HwMmio, Mmio};
use super::prm::{fm_ce_se, Opcode, MAX_SQ_WQEBBS, MAX_WQE_BYTES, WQEBB, WQEBB_SHIFT};
use super::progress::{Recorder, SqProgress};
use super::seg::{AtomicSeg, CtrlSeg, DataSeg, DatagramSeg, InlineHdr, RaddrSeg};
use super::segwr;
use super::wqe::{inline_ds, shape, store16, FlatCursor, SegWriter, SqRing, WqeCursor, WqeShape};
use crate::post::{Op, PostError, SendQueue, WrDesc};
use crate::sys::mlx5dv_qp;

/// The QP transport, which decides the segments of a SEND.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    /// RC or UC: ctrl [+ raddr [+ atomic]] + data.
    Rc,
    /// UD: ctrl + this address vector (destination QPN and qkey already set,
    /// see [`DatagramSeg::with_ud_dest`]) + data. SENDs only.
    Ud(DatagramSeg),
}

/// The layout checks of [`DirectSq::from_dv`] alone (stride 64, power-of-two
/// `wqe_cnt` up to 32768, aligned buffers, `bf.size` 0 or a multiple of 64
/// up to 2048), so set-up can refuse a QP before anything is connected.
pub fn check_qp_layout(qp: &mlx5dv_qp) -> Result<(), DirectError> {
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
    Ok(())
}

/// At most this many address ranges may serve as inline sources.
pub const MAX_INLINE_SOURCES: usize = 4;

/// A 16-bit ring index (free-running) kept in a 32-bit field: with two
/// adjacent u16 fields the compiler may read both with one 32-bit load,
/// which the store buffer cannot forward from the two 16-bit stores of the
/// previous post (a stall of tens of cycles per post).
#[derive(Clone, Copy)]
struct Idx16(u32);

impl Idx16 {
    #[inline(always)]
    fn get(self) -> u16 {
        self.0 as u16
    }
    #[inline(always)]
    fn set(&mut self, v: u16) {
        self.0 = v as u32;
    }
}

/// A direct SQ. `M` is the MMIO seam: [`HwMmio`] on a device, the model's
/// recorder in tests.
pub struct DirectSq<M: Mmio = HwMmio> {
    ring: SqRing,
    /// Producer index in WQEBBs (free-running, 16 bits like the ctrl
    /// field).
    pi: Idx16,
    /// Last consumer index read from `progress`.
    ci: Idx16,
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
    /// Rings as libmlx5 does under `p` (its `MLX5_SHUT_UP_BF` /
    /// `MLX5_POST_SEND_PREFER_BF`, see [`super::env`]). Control path: set it
    /// before posting.
    pub fn set_bf_policy(&mut self, p: BfPolicy) {
        self.db.set_policy(p);
    }

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
        check_qp_layout(qp)?;
        let n = qp.sq.wqe_cnt;
        let bf = qp.bf.size;
        let reg = qp.bf.reg.cast::<u8>();
        let Some(buf) = NonNull::new(qp.sq.buf.cast::<u8>()) else {
            return Err(DirectError::Config {
                problem: "sq.buf is null (internal: checked by check_qp_layout)",
                fix: "report this",
            });
        };
        // SAFETY: checked above: non-null, 64-aligned, power-of-two count;
        // validity for the SQ's life is the caller's contract.
        let ring = unsafe { SqRing::new(buf, n) };
        // SAFETY: dbrec[1] is the SQ record (MLX5_SND_DBR); register validity
        // and exclusivity are the caller's contract.
        let db = unsafe { Doorbell::new(qp.dbrec.add(1), reg, bf, mmio) };
        Ok(Self {
            ring,
            pi: Idx16(0),
            ci: Idx16(0),
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
        self.pi.get()
    }
    /// WQEBBs posted and not yet retired by a polled completion.
    pub fn outstanding(&self) -> u32 {
        self.pi.get().wrapping_sub(self.progress.ci()) as u32
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
    pub fn progress(&self) -> &Arc<SqProgress> {
        &self.progress
    }
    /// The WQE shape `op` takes for `wr` on this SQ.
    pub fn shape(&self, op: Op, wr: &WrDesc) -> Result<WqeShape, PostError> {
        shape(op, wr, self.av.is_some())
    }

    /// True when a WQE of `nbb` WQEBBs fits at `self.pi.get()`; reloads the
    /// shared consumer index only when the cached one says no (one shared
    /// load per "looks full" event, io_uring style).
    #[inline(always)]
    fn has_room_for(&mut self, nbb: u16) -> bool {
        let end = self.pi.get().wrapping_add(nbb);
        if end.wrapping_sub(self.ci.get()) as u32 <= self.wqe_cnt {
            return true;
        }
        self.ci.set(self.progress.ci());
        end.wrapping_sub(self.ci.get()) as u32 <= self.wqe_cnt
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
        if !self.has_room_for(nbb) {
            return Err(PostError::QueueFull);
        }
        let bb = self.pi.get();
        self.progress.recorder().record(bb, wr_id, nbb);
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
        self.pi.set(bb.wrapping_add(nbb));
        // SAFETY: the WQE is completely written; the ring is ours.
        // Not inline for the BlueFlame rule, as libmlx5's raw WQEs
        // (`mlx5_wr_raw_wqe` leaves `inl_wqe` 0).
        unsafe { self.db.ring(&self.ring, self.pi.get(), bb, ds, 1, false) };
        Ok(())
    }
}

/// `Op` as a const-generic parameter, so each post loop is compiled for one
/// operation with no per-WR dispatch.
mod k {
    pub const WRITE: u8 = 0;
    pub const WRITE_IMM: u8 = 1;
    pub const SEND: u8 = 2;
    pub const SEND_IMM: u8 = 3;
    pub const READ: u8 = 4;
    pub const FETCH_ADD: u8 = 5;
    pub const CMP_SWAP: u8 = 6;
}

#[inline(always)]
const fn op_of(k: u8) -> Op {
    match k {
        k::WRITE => Op::Write,
        k::WRITE_IMM => Op::WriteImm,
        k::SEND => Op::Send,
        k::SEND_IMM => Op::SendImm,
        k::READ => Op::Read,
        k::FETCH_ADD => Op::FetchAdd,
        _ => Op::CmpSwap,
    }
}

/// The ctrl opcode of `op` and the immediate bytes it carries.
#[inline(always)]
fn opcode_imm(op: Op, wr: &WrDesc) -> (Opcode, [u8; 4]) {
    match op {
        Op::Write => (Opcode::RDMA_WRITE, [0; 4]),
        Op::WriteImm => (Opcode::RDMA_WRITE_IMM, wr.imm.to_be_bytes()),
        Op::Send => (Opcode::SEND, [0; 4]),
        Op::SendImm => (Opcode::SEND_IMM, wr.imm.to_be_bytes()),
        Op::Read => (Opcode::RDMA_READ, [0; 4]),
        Op::FetchAdd => (Opcode::ATOMIC_FA, [0; 4]),
        Op::CmpSwap => (Opcode::ATOMIC_CS, [0; 4]),
    }
}

/// True when `start..start+len` lies inside one of the declared ranges.
#[inline(always)]
fn inline_ok(ranges: &[(u64, u64)], start: u64, len: u32) -> bool {
    let Some(end) = start.checked_add(len as u64) else {
        return false;
    };
    ranges.iter().any(|&(s, e)| start >= s && end <= e)
}

/// Writes one WQE at WQEBB `bb` through cursor `c` (positioned at `bb`).
///
/// # Safety
/// `s` must be `shape(op, wr, av.is_some())`, its WQEBBs from `bb` must be
/// free, `c` must be valid for them (a [`FlatCursor`] only when they do not
/// reach the ring end), and an inline payload must be readable.
#[inline(always)]
unsafe fn write_wqe<C: SegWriter>(
    mut c: C,
    bb: u16,
    qpn: u32,
    av: Option<&[u8; 48]>,
    op: Op,
    wr: &WrDesc,
    s: WqeShape,
) {
    let fm = if wr.signaled { fm_ce_se::CQ_UPDATE } else { 0 };
    let (opcode, imm) = opcode_imm(op, wr);
    let ctrl = CtrlSeg::new(bb, opcode, 0, qpn, fm, s.ds, 0, imm);
    // SAFETY: the caller owns the s.nbb WQEBBs from bb; the units written
    // below are exactly the s.ds units `shape` counted, and an inline source
    // is readable (caller contract).
    unsafe {
        c.put16(ctrl.to_bytes());
        match op {
            Op::Send | Op::SendImm => {
                if let Some(av) = av {
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
}

/// Writes a WQE with inline data (`wr.inline`, `wr.len != 0`, a WRITE or
/// SEND) that ends before the ring end: the segments of [`write_wqe`] at
/// fixed offsets, the payload in one copy.
///
/// # Safety
/// As [`write_wqe`] with a [`FlatCursor`]: `s` is the WR's shape, its WQEBBs
/// from `bb` are free and end before the ring end, the payload is readable.
#[inline(always)]
unsafe fn write_inline_flat(
    ring: &SqRing,
    bb: u16,
    qpn: u32,
    av: Option<&[u8; 48]>,
    op: Op,
    wr: &WrDesc,
    s: WqeShape,
) {
    let (opcode, imm) = opcode_imm(op, wr);
    let w0 = ctrl_w0(ctrl_hi(opcode, qpn), bb, s.ds);
    let hdr = u32::from_ne_bytes(InlineHdr::new(wr.len).to_bytes());
    let p = ring.bb_ptr(bb);
    // SAFETY: the caller owns the s.ds units from p, contiguous up to the ring end; ctrl,
    // the AV or raddr segment and the inline units are exactly those units; the payload
    // source is readable and not ring memory.
    unsafe {
        // Whole 16-byte stores: a single WQE goes out by BlueFlame, whose
        // copy reads these units back (see `segwr`).
        segwr::ctrl(p, w0, ctrl_w1(wr.signaled, imm));
        let seg = match (op, av) {
            (Op::Send | Op::SendImm, Some(av)) => {
                segwr::av(p.add(16), &segwr::load_av(av));
                p.add(64)
            }
            (Op::Send | Op::SendImm, None) => p.add(16),
            _ => {
                segwr::raddr(p.add(16), wr);
                p.add(32)
            }
        };
        segwr::inline(seg, hdr, wr.laddr as *const u8, wr.len as usize);
    }
}

/// Ctrl bytes 0..8 without the WQE index and `ds`, as a big-endian word
/// (opmod 0): computed once per post list.
#[inline(always)]
const fn ctrl_hi(opcode: Opcode, qpn: u32) -> u64 {
    ((opcode.0 as u64) << 32) | (((qpn & 0x00ff_ffff) as u64) << 8)
}

/// Ctrl bytes 0..8 (`opmod_idx_opcode`, `qpn_ds`) of WQE `bb` as one
/// native-endian store value: the same bytes as [`CtrlSeg::new`].
#[inline(always)]
const fn ctrl_w0(hi: u64, bb: u16, ds: u8) -> u64 {
    // Byte-swapped: `hi` lands in bytes 3..7, the index (swapped on its
    // own, 16 bits) in bytes 1..3, ds in byte 7.
    hi.swap_bytes() | ((bb.swap_bytes() as u64) << 8) | ((ds as u64) << 56)
}

/// Ctrl bytes 8..16 (signature 0, stream id 0, `fm_ce_se`, immediate) as
/// one native-endian store value.
#[inline(always)]
const fn ctrl_w1(signaled: bool, imm: [u8; 4]) -> u64 {
    let fm = if signaled { fm_ce_se::CQ_UPDATE } else { 0 };
    u64::from_ne_bytes([0, 0, 0, fm, imm[0], imm[1], imm[2], imm[3]])
}

/// Stores a ctrl segment's two words: one 16-byte store when `BF` (see
/// [`put_rc`]), else two 8-byte stores.
///
/// # Safety
/// `p` must be 16 writable, 16-byte aligned bytes.
#[inline(always)]
unsafe fn ctrl<const BF: bool>(p: *mut u8, w0: u64, w1: u64) {
    // SAFETY: caller contract.
    unsafe {
        if BF {
            segwr::ctrl(p, w0, w1);
        } else {
            p.cast::<u64>().write(w0);
            p.add(8).cast::<u64>().write(w1);
        }
    }
}

/// An RC/UC WQE without inline data (one WQEBB: ds <= 4, so it cannot
/// wrap), at fixed offsets. Returns its ds.
///
/// `BF`: the WQE goes out by BlueFlame, whose copy reads it back in 16-byte
/// units, so the ctrl segment is one 16-byte store too (forwarded to that
/// load; two 8-byte stores would stall it). Posts of several WQEs keep the
/// two 8-byte stores, which cost less than moving the words into a vector
/// register.
///
/// # Safety
/// `p` must be WQEBB `bb` of the ring, free; `hi` = `ctrl_hi(op's opcode,
/// qpn)`; no inline data; `data` = `wr.len != 0` (a parameter so that a
/// caller that tested it already passes a constant).
#[inline(always)]
unsafe fn put_rc<const BF: bool>(
    p: *mut u8,
    bb: u16,
    hi: u64,
    op: Op,
    wr: &WrDesc,
    data: bool,
) -> u8 {
    let (_, imm) = opcode_imm(op, wr);
    let w1 = ctrl_w1(wr.signaled, imm);
    // SAFETY: p is 64 aligned bytes owned by the caller; at most those 64
    // are written (ds <= 4).
    unsafe {
        match op {
            Op::Send | Op::SendImm => {
                let ds = 1 + data as u8;
                ctrl::<BF>(p, ctrl_w0(hi, bb, ds), w1);
                if data {
                    segwr::data(p.add(16), wr);
                }
                ds
            }
            Op::FetchAdd | Op::CmpSwap => {
                ctrl::<BF>(p, ctrl_w0(hi, bb, 4), w1);
                segwr::raddr(p.add(16), wr);
                let a = if op == Op::FetchAdd {
                    AtomicSeg::fetch_add(wr.swap_add)
                } else {
                    AtomicSeg::cmp_swap(wr.swap_add, wr.compare)
                };
                store16(p.add(32), a.to_bytes());
                store16(p.add(48), DataSeg::new(8, wr.lkey, wr.laddr).to_bytes());
                4
            }
            _ => {
                let ds = 2 + data as u8;
                ctrl::<BF>(p, ctrl_w0(hi, bb, ds), w1);
                segwr::raddr(p.add(16), wr);
                if data {
                    segwr::data(p.add(32), wr);
                }
                ds
            }
        }
    }
}

/// A UD SEND without inline data: ctrl + address vector fill WQEBB `bb`
/// (never wrapping), the data segment, if any, starts WQEBB `bb + 1`
/// (wherever the ring puts it). Returns its ds.
///
/// # Safety
/// `p` must be WQEBB `bb` of the ring, free, and `next` the WQEBB after
/// it (at the ring start when `p` is the last), free too when
/// `wr.len != 0`; `hi` = `ctrl_hi(op's opcode, qpn)`; `op` is a SEND;
/// `data` = `wr.len != 0`.
#[inline(always)]
unsafe fn put_ud<const BF: bool>(
    (p, next): (*mut u8, *mut u8),
    bb: u16,
    hi: u64,
    av: &segwr::AvRegs,
    op: Op,
    wr: &WrDesc,
    data: bool,
) -> u8 {
    let (_, imm) = opcode_imm(op, wr);
    let ds = 4 + data as u8;
    // SAFETY: WQEBB bb (ctrl 16 + AV 48 bytes) and, with data, the next
    // WQEBB are the caller's; `av` is not ring memory.
    unsafe {
        ctrl::<BF>(p, ctrl_w0(hi, bb, ds), ctrl_w1(wr.signaled, imm));
        segwr::av(p.add(16), av);
        if data {
            segwr::data(next, wr);
        }
    }
    ds
}

/// The address vector of an RC queue's context (never written: RC WQEs
/// have no datagram segment).
static NO_AV: [u8; 48] = [0; 48];

/// What a post list needs of the SQ, copied into locals once: ring stores
/// through raw pointers would otherwise force the compiler to reload `self`
/// after each one. `UD` (the SQ has an address vector) is a const parameter
/// so the transport is decided once per list, not per WR.
struct ListCtx<'a, const UD: bool> {
    ring: SqRing,
    qpn: u32,
    /// The SQ's AV when `UD`, else [`NO_AV`].
    av: &'a [u8; 48],
    ranges: &'a [(u64, u64)],
    progress: &'a SqProgress,
    recorder: Recorder<'a>,
}

/// The room state of a post list: the consumer index last read and the
/// WQEBBs free from the current producer index by it.
struct Room {
    ci: u16,
    free: u32,
}

impl<const UD: bool> ListCtx<'_, UD> {
    /// WQEBBs one WR of [`emit_run`](Self::emit_run) takes at most: one on
    /// RC/UC (ds <= 4), two for a UD SEND (ctrl + AV fill the first).
    const RUN_NBB: u32 = if UD { 2 } else { 1 };

    /// True when operation `K` can take [`emit_run`](Self::emit_run) on
    /// this transport (UD carries SENDs only).
    #[inline(always)]
    const fn run_ok<const K: u8>() -> bool {
        !UD || matches!(op_of(K), Op::Send | Op::SendImm)
    }

    /// The bulk of a post list: WRs without inline data, written back to
    /// back with no per-WR room check, because the caller made sure that
    /// `RUN_NBB` WQEBBs per WR of the whole list are free from `pi`. Stops at
    /// the first WR with inline data (left to [`emit_fast`](Self::emit_fast)
    /// and [`emit_general`](Self::emit_general)). Returns the WRs written,
    /// the producer index after them and the WQEBB of the last one.
    ///
    /// The caller must have checked `run_ok::<K>()` and
    /// `wrs.len() * RUN_NBB <= free WQEBBs at pi`.
    #[inline(always)]
    fn emit_run<const K: u8>(&self, wrs: &[WrDesc], start: u16) -> (usize, u16, u16) {
        if !UD {
            return self.emit_run_rc::<K>(wrs, start);
        }
        // A list whose worst case (two WQEBBs per WR) ends before the ring
        // end needs no index mask at all.
        let cnt = self.ring.wqe_cnt() as usize;
        if (start as usize & (cnt - 1)) + 2 * wrs.len() <= cnt {
            self.emit_run_ud::<K, true>(wrs, start)
        } else {
            self.emit_run_ud::<K, false>(wrs, start)
        }
    }

    /// [`emit_run`](Self::emit_run) on UD (SENDs, one or two WQEBBs each).
    /// `STRAIGHT`: the list's WQEBBs end before the ring end, so the slot
    /// index and address just advance; otherwise each is masked.
    #[inline(always)]
    fn emit_run_ud<const K: u8, const STRAIGHT: bool>(
        &self,
        wrs: &[WrDesc],
        start: u16,
    ) -> (usize, u16, u16) {
        let op = op_of(K);
        let (opcode, _) = opcode_imm(op, &WrDesc::default());
        // Everything of the ctrl segment but the index, ds and flags, once.
        let hi = ctrl_hi(opcode, self.qpn);
        let mask = self.ring.wqe_cnt() as usize - 1;
        let av = segwr::load_av(self.av);
        let base = self.ring.start();
        // The producer index as a full-width register (no 16-bit moves per
        // WR); only its low 16 bits are ever used.
        let mut pi = start as usize;
        let mut last = pi;
        let mut done = 0;
        for wr in wrs {
            // Inline data and zero-length WRs are left to the rest paths,
            // so every WQE here is ctrl + AV + data: two WQEBBs, ds 5.
            if wr.inline || wr.len == 0 {
                break;
            }
            let nbb = 2;
            // Straight: pi - start < 2 · len, and start's slot + 2 · len
            // <= wqe_cnt (the caller's check), so no mask is needed.
            let idx = if STRAIGHT {
                (start as usize & mask) + (pi - start as usize)
            } else {
                pi & mask
            };
            // SAFETY: idx <= mask = wqe_cnt - 1 (masked, or straight as
            // above), and the progress tables have wqe_cnt entries (both
            // built from the same `sq.wqe_cnt` in `from_dv`).
            unsafe { self.recorder.record_at(idx, wr.wr_id, nbb as u16) };
            // The next WQEBB is p + 64 when straight (idx + 1 < wqe_cnt there), else masked.
            // SAFETY: idx < wqe_cnt, so p is WQEBB pi of the ring; the caller reserved two
            // WQEBBs per WR of the list from its start, so both are free; no inline data; op
            // is a SEND (run_ok).
            unsafe {
                let p = base.add(idx << WQEBB_SHIFT);
                let next = if STRAIGHT {
                    p.add(WQEBB)
                } else {
                    base.add(((pi + 1) & mask) << WQEBB_SHIFT)
                };
                put_ud::<false>((p, next), pi as u16, hi, &av, op, wr, true);
            }
            last = pi;
            done += 1;
            pi = pi.wrapping_add(nbb);
        }
        (done, pi as u16, last as u16)
    }

    /// [`emit_run`](Self::emit_run) on RC/UC (one WQEBB per WR). A list
    /// that does not reach the ring end (the common case: one compare) is
    /// one straight run; one that wraps is two, cut at the ring end. Within
    /// a run the ring slot and the progress slot simply advance (no mask
    /// per WR).
    #[inline(always)]
    fn emit_run_rc<const K: u8>(&self, wrs: &[WrDesc], start: u16) -> (usize, u16, u16) {
        let cnt = self.ring.wqe_cnt() as usize;
        let idx = start as usize & (cnt - 1);
        let done = match wrs.split_at_checked(cnt - idx) {
            // Wraps: up to the ring end, then from slot 0.
            Some((head, tail)) if !tail.is_empty() => {
                let d = self.put_run_rc::<K>(head, idx, start);
                if d < head.len() {
                    d
                } else {
                    d + self.put_run_rc::<K>(tail, 0, start.wrapping_add(d as u16))
                }
            }
            _ => self.put_run_rc::<K>(wrs, idx, start),
        };
        let pi = start.wrapping_add(done as u16);
        (done, pi, pi.wrapping_sub(1))
    }

    /// One straight run of [`emit_run_rc`](Self::emit_run_rc): WR k goes
    /// to ring and progress slot `idx + k`, WQEBB `bb + k`. Stops before
    /// the first WR flagged inline or of length 0 (the rest paths handle
    /// them). Returns the WRs written.
    ///
    /// The caller must have `idx + wrs.len() <= wqe_cnt` and those slots
    /// reserved.
    #[inline(always)]
    fn put_run_rc<const K: u8>(&self, wrs: &[WrDesc], idx: usize, bb: u16) -> usize {
        let op = op_of(K);
        let (opcode, _) = opcode_imm(op, &WrDesc::default());
        let hi = ctrl_hi(opcode, self.qpn);
        debug_assert!(idx + wrs.len() <= self.ring.wqe_cnt() as usize);
        // SAFETY: idx + wrs.len() <= wqe_cnt (caller), so every slot below
        // is inside the ring.
        let base = unsafe { self.ring.start().add(idx << WQEBB_SHIFT) };
        for (k, wr) in wrs.iter().enumerate() {
            // Inline data and zero-length WRs are left to the rest paths,
            // so every WQE here has a data segment (ds fixed per list).
            if wr.inline || wr.len == 0 {
                return k;
            }
            // SAFETY: idx + k < wqe_cnt: inside the progress tables
            // (wqe_cnt entries, built from the same `sq.wqe_cnt` in
            // `from_dv`).
            unsafe { self.recorder.record_at(idx + k, wr.wr_id, 1) };
            // SAFETY: idx + k < wqe_cnt, so the address is WQEBB bb + k of
            // the ring; the caller reserved one WQEBB per WR from there; no
            // inline data.
            unsafe {
                put_rc::<false>(
                    base.add(k << WQEBB_SHIFT),
                    bb.wrapping_add(k as u16),
                    hi,
                    op,
                    wr,
                    true,
                )
            };
        }
        wrs.len()
    }

    /// Room for `nbb` WQEBBs at `pi` (the general path's check); reloads
    /// the shared consumer index into `ci` only when the cached one says no
    /// (one shared load per "looks full" event, io_uring style).
    #[inline(always)]
    fn reserve(&self, pi: u16, nbb: u16, ci: &mut u16) -> bool {
        let end = pi.wrapping_add(nbb);
        let cnt = self.ring.wqe_cnt();
        if end.wrapping_sub(*ci) as u32 > cnt {
            *ci = self.progress.ci();
            return end.wrapping_sub(*ci) as u32 <= cnt;
        }
        true
    }

    /// Free WQEBBs at `pi` by consumer index `ci`, for the fast paths: 0
    /// when `pi - ci` exceeds the capacity (a consumer index that is not
    /// behind `pi`), which sends every WR to the general path and its exact
    /// check. Otherwise `nbb <= free` is the same test as `reserve`'s
    /// (`pi - ci + nbb` cannot wrap 16 bits: capacity <= 32768, nbb <= 16).
    #[inline(always)]
    fn free_at(&self, pi: u16, ci: u16) -> u32 {
        let cnt = self.ring.wqe_cnt();
        cnt.saturating_sub(pi.wrapping_sub(ci) as u32)
    }

    /// The fast paths' room check: a compare and a subtraction per WR while
    /// the cached count says yes; otherwise reloads the consumer index once.
    #[inline(always)]
    fn take(&self, pi: u16, nbb: u16, room: &mut Room) -> bool {
        let n = nbb as u32;
        if n > room.free {
            room.ci = self.progress.ci();
            room.free = self.free_at(pi, room.ci);
            if n > room.free {
                return false;
            }
        }
        room.free -= n;
        true
    }

    /// The common WRs: checks `wr`, reserves its WQEBBs at `pi`, records it
    /// and writes it; returns its (ds, nbb). `None` (nothing written): any
    /// other WR, or no room, for [`emit_general`](Self::emit_general) to
    /// handle or reject.
    #[inline(always)]
    fn emit_fast<const K: u8>(&self, wr: &WrDesc, pi: u16, room: &mut Room) -> Option<(u8, u16)> {
        if !wr.inline || wr.len == 0 {
            if !Self::plain_ok::<K>() {
                return None;
            }
            // (nbb <= free <= capacity: no separate size check.)
            if !self.take(pi, Self::plain_nbb(wr), room) {
                return None;
            }
            // SAFETY: the WR's WQEBBs from pi are free (reserved above);
            // plain_ok.
            return Some(unsafe { self.put_plain::<K>(wr, pi) });
        }
        let s = self.flat_inline_shape::<K>(wr, pi)?;
        // (take() implies s.nbb <= capacity.)
        if !self.take(pi, s.nbb, room) {
            return None;
        }
        // SAFETY: s is the WR's flat shape, its WQEBBs are free (reserved
        // above).
        unsafe { self.put_inline::<K>(wr, pi, s) };
        Some((s.ds, s.nbb))
    }

    /// True when operation `K` has a WQE without inline data of fixed
    /// layout on this transport ([`put_plain`](Self::put_plain)): any on
    /// RC/UC, SENDs on UD.
    #[inline(always)]
    const fn plain_ok<const K: u8>() -> bool {
        Self::run_ok::<K>()
    }

    /// WQEBBs of a WR without inline data: one on RC/UC (ds <= 4); on UD
    /// ctrl + AV fill one, a data segment takes a second.
    #[inline(always)]
    fn plain_nbb(wr: &WrDesc) -> u16 {
        if UD {
            1 + (wr.len != 0) as u16
        } else {
            1
        }
    }

    /// Records and writes one WR without inline data at WQEBB `pi`, ctrl
    /// as one 16-byte store (it may go out by BlueFlame). Returns its
    /// (ds, nbb).
    ///
    /// # Safety
    /// `plain_ok::<K>()`; the `plain_nbb(wr)` WQEBBs from `pi` are free;
    /// `wr` has no inline data (or a zero length).
    #[inline(always)]
    unsafe fn put_plain<const K: u8>(&self, wr: &WrDesc, pi: u16) -> (u8, u16) {
        let op = op_of(K);
        let nbb = Self::plain_nbb(wr);
        self.recorder.record(pi, wr.wr_id, nbb);
        let hi = ctrl_hi(opcode_imm(op, wr).0, self.qpn);
        let p = self.ring.bb_ptr(pi);
        // SAFETY: caller contract: WQEBB pi (and, for a UD SEND with data,
        // the next one, which bb_ptr wraps) is free; RC or a UD SEND.
        let ds = unsafe {
            if UD {
                let next = self.ring.bb_ptr(pi.wrapping_add(1));
                let av = segwr::load_av(self.av);
                put_ud::<true>((p, next), pi, hi, &av, op, wr, wr.len != 0)
            } else {
                put_rc::<true>(p, pi, hi, op, wr, wr.len != 0)
            }
        };
        (ds, nbb)
    }

    /// The shape of an inline WR (`wr.inline`, `wr.len != 0`) when its WQE
    /// can be written flat at `pi`: the checks of `shape` plus "ends before
    /// the ring end" and "source in a declared range". `None` for anything
    /// else, which the general path writes or rejects.
    #[inline(always)]
    fn flat_inline_shape<const K: u8>(&self, wr: &WrDesc, pi: u16) -> Option<WqeShape> {
        let op = op_of(K);
        let is_send = matches!(op, Op::Send | Op::SendImm);
        if matches!(op, Op::Read | Op::FetchAdd | Op::CmpSwap) || (UD && !is_send) {
            return None;
        }
        if wr.len as usize > MAX_WQE_BYTES {
            return None;
        }
        let base = if UD {
            4
        } else if is_send {
            1
        } else {
            2
        };
        let s = WqeShape::from_ds(base + inline_ds(wr.len))?;
        if !self.ring.fits_flat(pi, s.nbb) || !inline_ok(self.ranges, wr.laddr, wr.len) {
            return None;
        }
        Some(s)
    }

    /// Records and writes an inline WR of flat shape `s` at WQEBB `pi`.
    ///
    /// # Safety
    /// `s` = `flat_inline_shape::<K>(wr, pi)`; its WQEBBs from `pi` are free.
    #[inline(always)]
    unsafe fn put_inline<const K: u8>(&self, wr: &WrDesc, pi: u16, s: WqeShape) {
        self.recorder.record(pi, wr.wr_id, s.nbb);
        let av = if UD { Some(self.av) } else { None };
        // SAFETY: s is shape(op, wr, UD) (flat_inline_shape computes it the same way), its
        // WQEBBs from pi are free (caller) and end before the ring end (fits_flat), and the
        // inline source lies in a declared range (inline_ok).
        unsafe { write_inline_flat(&self.ring, pi, self.qpn, av, op_of(K), wr, s) };
    }

    /// Every WR the fast paths leave: computes the shape, checks it, then
    /// writes with a flat or a wrapping cursor. Out of line (and so taking
    /// and returning `ci` by value) to keep the fast paths small.
    #[inline(never)]
    fn emit_general(
        &self,
        op: Op,
        wr: &WrDesc,
        pi: u16,
        mut ci: u16,
    ) -> (Result<(u8, u16), PostError>, u16) {
        let r = self.emit_shaped(op, wr, pi, &mut ci);
        (r, ci)
    }

    #[inline(always)]
    fn emit_shaped(
        &self,
        op: Op,
        wr: &WrDesc,
        pi: u16,
        ci: &mut u16,
    ) -> Result<(u8, u16), PostError> {
        let s = shape(op, wr, UD)?;
        let has_inline = wr.inline && wr.len != 0;
        if s.nbb as u32 > self.ring.wqe_cnt()
            || (has_inline && !inline_ok(self.ranges, wr.laddr, wr.len))
        {
            return Err(PostError::Unsupported);
        }
        if !self.reserve(pi, s.nbb, ci) {
            return Err(PostError::QueueFull);
        }
        self.recorder.record(pi, wr.wr_id, s.nbb);
        let av = if UD { Some(self.av) } else { None };
        // SAFETY: s is the shape of this WR on this SQ (checked above), its WQEBBs from pi
        // are free (reserved above), a FlatCursor is used only when they end before the
        // ring end, and an inline source lies in a declared readable range.
        unsafe {
            if self.ring.fits_flat(pi, s.nbb) {
                let c = FlatCursor::new(&self.ring, pi);
                write_wqe(c, pi, self.qpn, av, op, wr, s);
            } else {
                let c = WqeCursor::new(&self.ring, pi);
                write_wqe(c, pi, self.qpn, av, op, wr, s);
            }
        }
        Ok((s.ds, s.nbb))
    }
}

impl<M: Mmio> DirectSq<M> {
    /// The list context for transport `UD` (which must match `self.av`).
    #[inline(always)]
    fn ctx<const UD: bool>(&self) -> ListCtx<'_, UD> {
        let progress = &*self.progress;
        ListCtx {
            ring: self.ring,
            qpn: self.qpn,
            av: self.av.as_ref().unwrap_or(&NO_AV),
            ranges: &self.inline_src[..self.n_inline_src.min(MAX_INLINE_SOURCES)],
            progress,
            recorder: progress.recorder(),
        }
    }

    /// One WR through the context's fast paths, else through the general
    /// path, which rebuilds its own context from `self` (so `x` never has to
    /// live in memory).
    #[inline(always)]
    fn emit<const K: u8, const UD: bool>(
        &self,
        x: &ListCtx<'_, UD>,
        wr: &WrDesc,
        pi: u16,
        room: &mut Room,
    ) -> Result<(u8, u16), PostError> {
        if let Some(v) = x.emit_fast::<K>(wr, pi, room) {
            return Ok(v);
        }
        let (r, ci) = self.ctx::<UD>().emit_general(op_of(K), wr, pi, room.ci);
        room.ci = ci;
        if let Ok((_, nbb)) = r {
            room.free = x.free_at(pi.wrapping_add(nbb), ci);
        }
        r
    }

    /// Dispatches on the list length and the transport. On any failure the
    /// producer index stays where the list began (nothing was rung and the
    /// slots were free, so the list is simply not posted: all-or-nothing,
    /// like `ibv_wr_abort`).
    #[inline(always)]
    fn post_list<const K: u8>(&mut self, wrs: &[WrDesc]) -> Result<(), PostError> {
        match (wrs, self.av.is_some()) {
            ([wr], false) => self.post_one::<K, false>(wr),
            ([wr], true) => self.post_one::<K, true>(wr),
            (_, false) => self.post_many::<K, false>(wrs),
            (_, true) => self.post_many::<K, true>(wrs),
        }
    }

    /// A single WR (the BlueFlame case): the steps of `post_many` without
    /// the loop. A WR without inline data (what a bw loop posts) takes
    /// [`post_one_plain`](Self::post_one_plain), one with inline data whose
    /// WQE fits before the ring end [`post_one_inline`](Self::post_one_inline).
    #[inline(always)]
    fn post_one<const K: u8, const UD: bool>(&mut self, wr: &WrDesc) -> Result<(), PostError> {
        if !wr.inline || wr.len == 0 {
            if ListCtx::<UD>::plain_ok::<K>() {
                return self.post_one_plain::<K, UD>(wr);
            }
        } else if let Some(r) = self.post_one_inline::<K, UD>(wr) {
            return r;
        }
        let x = self.ctx::<UD>();
        let start = self.pi.get();
        let ci = self.ci.get();
        let mut room = Room {
            ci,
            free: x.free_at(start, ci),
        };
        let r = self.emit::<K, UD>(&x, wr, start, &mut room);
        let ring = x.ring;
        self.ci.set(room.ci);
        let (ds, nbb) = r?;
        let pi = start.wrapping_add(nbb);
        self.pi.set(pi);
        // SAFETY: the one WQE up to pi has been written just above.
        unsafe {
            self.db
                .ring(&ring, pi, start, ds, 1, wr.inline && wr.len > 0)
        };
        Ok(())
    }

    /// One WR without inline data: one room check, then the WQE; an RC/UC
    /// one (one WQEBB) takes the one-WQEBB doorbell.
    #[inline(always)]
    fn post_one_plain<const K: u8, const UD: bool>(
        &mut self,
        wr: &WrDesc,
    ) -> Result<(), PostError> {
        let nbb = ListCtx::<UD>::plain_nbb(wr);
        if !self.has_room_for(nbb) {
            return Err(PostError::QueueFull);
        }
        let pi = self.pi.get();
        // SAFETY: the WR's nbb WQEBBs from pi are free (checked above);
        // plain_ok (the caller's test), no inline data.
        let (ds, _) = unsafe { self.ctx::<UD>().put_plain::<K>(wr, pi) };
        let end = pi.wrapping_add(nbb);
        self.pi.set(end);
        // SAFETY: the one WQE up to end has been written just above, at
        // WQEBB pi; on RC/UC it has one WQEBB, ds <= 4.
        unsafe {
            if UD {
                self.db.ring(&self.ring, end, pi, ds, 1, false);
            } else {
                self.db.ring_one_bb(&self.ring, end, pi, ds);
            }
        }
        Ok(())
    }

    /// One WR with inline data whose WQE ends before the ring end: one room
    /// check, then the flat WQE as whole 16-byte units (so the BlueFlame
    /// copy's loads are forwarded). `None` (nothing written): any other
    /// case, for the general path to write or reject.
    #[inline(always)]
    fn post_one_inline<const K: u8, const UD: bool>(
        &mut self,
        wr: &WrDesc,
    ) -> Option<Result<(), PostError>> {
        let pi = self.pi.get();
        let s = self.ctx::<UD>().flat_inline_shape::<K>(wr, pi)?;
        if !self.has_room_for(s.nbb) {
            return Some(Err(PostError::QueueFull));
        }
        // SAFETY: s is the WR's flat shape at pi; its WQEBBs are free
        // (checked above).
        unsafe { self.ctx::<UD>().put_inline::<K>(wr, pi, s) };
        let end = pi.wrapping_add(s.nbb);
        self.pi.set(end);
        // SAFETY: the one WQE up to end has been written just above.
        unsafe { self.db.ring(&self.ring, end, pi, s.ds, 1, true) };
        Some(Ok(()))
    }

    /// The WRs the bulk path leaves (inline data, or a ring too full for
    /// its list-wide check): each checked, given room and written; the
    /// first failure ends the list. Out of line so that the common lists
    /// carry only the bulk path. Returns the result, the producer index
    /// after the written WQEs and the WQEBB of the last one.
    #[inline(never)]
    fn post_rest<const K: u8, const UD: bool>(
        &self,
        wrs: &[WrDesc],
        mut pi: u16,
        mut last_bb: u16,
        room: &mut Room,
    ) -> (Result<(), PostError>, u16, u16) {
        let x = self.ctx::<UD>();
        for wr in wrs {
            // The fast path's nbb stays a plain scalar; only the general
            // path produces a Result.
            let nbb = match x.emit_fast::<K>(wr, pi, room) {
                Some((_, nbb)) => nbb,
                None => {
                    let (r, ci) = x.emit_general(op_of(K), wr, pi, room.ci);
                    room.ci = ci;
                    match r {
                        Ok((_, nbb)) => {
                            room.free = x.free_at(pi.wrapping_add(nbb), ci);
                            nbb
                        }
                        Err(e) => return (Err(e), pi, last_bb),
                    }
                }
            };
            last_bb = pi;
            pi = pi.wrapping_add(nbb);
        }
        (Ok(()), pi, last_bb)
    }

    /// A list of two or more WRs. The common list (every WR for the bulk
    /// path, room for its worst case) is written and rung here; anything
    /// else continues in [`finish_list`](Self::finish_list), out of line.
    /// On any failure the list is not posted.
    #[inline(always)]
    fn post_many<const K: u8, const UD: bool>(&mut self, wrs: &[WrDesc]) -> Result<(), PostError> {
        let start = self.pi.get();
        if ListCtx::<UD>::run_ok::<K>() && !wrs.is_empty() {
            // One room check for the whole list (the bulk path's worst
            // case), reloading the shared consumer index once if the cached
            // one says no; then the bulk path checks nothing per WR. (A
            // consumer index ahead of pi makes `used` huge: the exact
            // per-WR checks of the rest path decide.)
            let need = wrs.len() * ListCtx::<UD>::RUN_NBB as usize;
            let cnt = self.wqe_cnt as usize;
            let mut used = start.wrapping_sub(self.ci.get()) as usize;
            if used + need > cnt {
                self.ci.set(self.progress.ci());
                used = start.wrapping_sub(self.ci.get()) as usize;
            }
            if used + need <= cnt {
                let (done, pi, last_bb) = self.ctx::<UD>().emit_run::<K>(wrs, start);
                if done < wrs.len() {
                    return self.finish_list::<K, UD>(wrs, done, pi, last_bb);
                }
                self.pi.set(pi);
                // SAFETY: every WQE up to pi has been written just above.
                // (The last ds only matters for BlueFlame, which a list of
                // >= 2 never takes: single WRs go through `post_one`.)
                unsafe { self.db.ring(&self.ring, pi, last_bb, 0, wrs.len(), false) };
                return Ok(());
            }
        }
        self.finish_list::<K, UD>(wrs, 0, start, start)
    }

    /// The rest of a list after `done` WRs written by the bulk path (which
    /// end before `pi`, the last at `last_bb`): each WR checked, given room
    /// and written ([`post_rest`](Self::post_rest)), then the doorbell.
    #[inline(never)]
    fn finish_list<const K: u8, const UD: bool>(
        &mut self,
        wrs: &[WrDesc],
        done: usize,
        pi: u16,
        last_bb: u16,
    ) -> Result<(), PostError> {
        let ci = self.ci.get();
        let mut room = Room {
            ci,
            free: self.ctx::<UD>().free_at(pi, ci),
        };
        let rest = wrs.get(done..).unwrap_or_default();
        let (result, pi, last_bb) = self.post_rest::<K, UD>(rest, pi, last_bb, &mut room);
        self.ci.set(room.ci);
        if result.is_err() || wrs.is_empty() {
            return result;
        }
        self.pi.set(pi);
        // SAFETY: every WQE up to pi has been written (bulk path, then
        // post_rest). (A list of >= 2 never takes BlueFlame: last ds 0.)
        unsafe { self.db.ring(&self.ring, pi, last_bb, 0, wrs.len(), false) };
        Ok(())
    }
}

impl<M: Mmio> SendQueue for DirectSq<M> {
    /// One post list, one doorbell: BlueFlame for a single WQE that fits
    /// `bf.size`, else an 8-byte doorbell with the last WQE's ctrl bytes.
    /// All-or-nothing: `QueueFull` / `Unsupported` leave nothing posted.
    #[inline(always)]
    fn post(&mut self, op: Op, wrs: &[WrDesc]) -> Result<(), PostError> {
        match op {
            Op::Write => self.post_list::<{ k::WRITE }>(wrs),
            Op::WriteImm => self.post_list::<{ k::WRITE_IMM }>(wrs),
            Op::Send => self.post_list::<{ k::SEND }>(wrs),
            Op::SendImm => self.post_list::<{ k::SEND_IMM }>(wrs),
            Op::Read => self.post_list::<{ k::READ }>(wrs),
            Op::FetchAdd => self.post_list::<{ k::FETCH_ADD }>(wrs),
            Op::CmpSwap => self.post_list::<{ k::CMP_SWAP }>(wrs),
        }
    }
}

// The run loops move queues onto worker threads.
const _: () = {
    const fn send<T: Send>() {}
    send::<DirectSq<HwMmio>>();
    send::<super::cq::DirectCq>();
};

#[cfg(test)]
mod tests {
    use super::*;

    /// The bulk path's precomputed words are the encoders' bytes.
    #[test]
    fn ctrl_words_match_the_segment_encoder() {
        for (bb, qpn, ds, sig, imm) in [
            (0u16, 0x12_3456u32, 3u8, true, [0u8; 4]),
            (0xfffe, 0xff_ffff, 2, false, [1, 2, 3, 4]),
            (0x1234, 0x0100_0007, 63, true, [0xca, 0xfe, 0xf0, 0x0d]),
        ] {
            for opcode in [Opcode::RDMA_WRITE, Opcode::SEND_IMM, Opcode::ATOMIC_CS] {
                let fm = if sig { fm_ce_se::CQ_UPDATE } else { 0 };
                let want = CtrlSeg::new(bb, opcode, 0, qpn, fm, ds, 0, imm).to_bytes();
                let w0 = ctrl_w0(ctrl_hi(opcode, qpn), bb, ds).to_ne_bytes();
                let w1 = ctrl_w1(sig, imm).to_ne_bytes();
                assert_eq!(
                    (&want[..8], &want[8..]),
                    (&w0[..], &w1[..]),
                    "{bb:#x} {qpn:#x}"
                );
            }
        }
    }
}
