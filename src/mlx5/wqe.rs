//! WQE sizes and the SQ ring: the only place that turns WQEBB indices into
//! ring addresses and writes segment bytes into the ring.
//!
//! A WQE starts on a WQEBB boundary and may run past the ring end, continuing
//! at WQEBB 0. The ring end is 64-byte aligned, so 16-byte segment units never
//! straddle it; only inline payload is split (as libmlx5's `memcpy_to_wqe`).

use core::ptr::{self, NonNull};

use super::prm::{DS_BYTES, MAX_DS, WQEBB, WQEBB_SHIFT};
use super::seg::InlineHdr;
use crate::post::{Op, PostError, WrDesc};

/// Size of one WQE: `ds` in 16-byte units (the ctrl field) and the WQEBBs it
/// occupies in the ring.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct WqeShape {
    pub ds: u8,
    pub nbb: u16,
}

impl WqeShape {
    /// A shape from a `ds` count; `None` above the 6-bit limit.
    #[inline(always)]
    pub const fn from_ds(ds: u32) -> Option<Self> {
        if ds > MAX_DS as u32 {
            return None;
        }
        let nbb = if ds == 0 { 1 } else { ds.div_ceil(4) };
        Some(Self {
            ds: ds as u8,
            nbb: nbb as u16,
        })
    }
    /// Bytes of the WQE proper (`ds · 16`).
    #[inline(always)]
    pub const fn bytes(self) -> usize {
        self.ds as usize * DS_BYTES
    }
}

/// 16-byte units taken by an inline segment carrying `len` bytes.
#[inline(always)]
pub const fn inline_ds(len: u32) -> u32 {
    (4 + len).div_ceil(DS_BYTES as u32)
}

/// The segments of one RC/UC or UD WQE for `op`, as libmlx5 lays them out:
/// ctrl, [datagram (UD)], [raddr], [atomic], then one data segment, one
/// inline segment, or nothing for a zero-length payload.
///
/// Errors (`Unsupported`): inline READ or atomic, RDMA or atomics on UD, a
/// WQE over 63 units.
#[inline(always)]
pub fn shape(op: Op, wr: &WrDesc, ud: bool) -> Result<WqeShape, PostError> {
    let payload = if wr.len == 0 {
        0
    } else if wr.inline {
        if matches!(op, Op::Read | Op::FetchAdd | Op::CmpSwap) {
            return Err(PostError::Unsupported);
        }
        // Bound before the arithmetic: anything this long cannot fit anyway.
        if wr.len as usize > MAX_DS as usize * DS_BYTES {
            return Err(PostError::Unsupported);
        }
        inline_ds(wr.len)
    } else {
        1
    };
    let ds = match op {
        Op::Send | Op::SendImm => 1 + if ud { 3 } else { 0 } + payload,
        _ if ud => return Err(PostError::Unsupported),
        Op::Write | Op::WriteImm | Op::Read => 2 + payload,
        // ctrl + raddr + atomic + the 8-byte local result buffer.
        Op::FetchAdd | Op::CmpSwap => 4,
    };
    WqeShape::from_ds(ds).ok_or(PostError::Unsupported)
}

/// The SQ buffer as `mlx5dv_qp.sq` describes it: `wqe_cnt` (a power of two)
/// WQEBBs of 64 bytes.
#[derive(Clone, Copy, Debug)]
pub struct SqRing {
    buf: NonNull<u8>,
    wqe_cnt: u32,
}

// SAFETY: SqRing is an address and a size; access rules are the SQ's.
unsafe impl Send for SqRing {}

impl SqRing {
    /// # Safety
    /// `buf` must point to `wqe_cnt · 64` bytes, 64-byte aligned, valid for
    /// reads and writes for as long as the ring is used; `wqe_cnt` must be a
    /// power of two.
    pub unsafe fn new(buf: NonNull<u8>, wqe_cnt: u32) -> Self {
        debug_assert!(wqe_cnt.is_power_of_two());
        Self { buf, wqe_cnt }
    }
    /// Number of WQEBBs.
    #[inline(always)]
    pub const fn wqe_cnt(&self) -> u32 {
        self.wqe_cnt
    }
    /// Ring size in bytes.
    #[inline(always)]
    pub const fn bytes(&self) -> usize {
        (self.wqe_cnt as usize) << WQEBB_SHIFT
    }
    /// Address of WQEBB `bb` (any free-running index; wraps).
    #[inline(always)]
    pub fn bb_ptr(&self, bb: u16) -> *mut u8 {
        let off = ((bb as usize) & (self.wqe_cnt as usize - 1)) << WQEBB_SHIFT;
        self.buf.as_ptr().wrapping_add(off)
    }
    /// True when WQEBBs `bb..bb+nbb` lie before the ring end, so the WQE can
    /// be written with a [`FlatCursor`] (no wrap checks).
    #[inline(always)]
    pub fn fits_flat(&self, bb: u16, nbb: u16) -> bool {
        (bb as u32 & (self.wqe_cnt - 1)) + nbb as u32 <= self.wqe_cnt
    }
    /// The ring's first byte.
    #[inline(always)]
    pub fn start(&self) -> *mut u8 {
        self.buf.as_ptr()
    }
}

/// Where a WQE's segments go, in order: [`WqeCursor`] (wraps at the ring
/// end) or [`FlatCursor`] (a WQE known not to reach it).
pub trait SegWriter {
    /// Writes one 16-byte unit.
    ///
    /// # Safety
    /// The unit must lie inside the WQE's owned WQEBBs (the caller's shape).
    unsafe fn put16(&mut self, unit: [u8; 16]);
    /// Writes a 48-byte segment (the address vector).
    ///
    /// # Safety
    /// As `put16`, for all three units.
    unsafe fn put48(&mut self, seg: &[u8; 48]);
    /// Writes an inline segment (4-byte header, `len` payload bytes from
    /// `src`) and moves to the next 16-byte boundary.
    ///
    /// # Safety
    /// `src..src+len` must be readable and not overlap the ring; the
    /// `inline_ds(len)` units must lie inside the WQE's owned WQEBBs.
    unsafe fn put_inline(&mut self, src: *const u8, len: usize);
}

/// Stores one 16-byte unit as two 8-byte stores (a `[u8; 16]` store gets
/// split into one store per field by the compiler).
///
/// # Safety
/// `p` must be valid for 16 bytes of writes and 8-byte aligned.
#[inline(always)]
pub unsafe fn store16(p: *mut u8, unit: [u8; 16]) {
    let (lo, hi) = unit.split_at(8);
    let lo = u64::from_ne_bytes([lo[0], lo[1], lo[2], lo[3], lo[4], lo[5], lo[6], lo[7]]);
    let hi = u64::from_ne_bytes([hi[0], hi[1], hi[2], hi[3], hi[4], hi[5], hi[6], hi[7]]);
    // SAFETY: caller contract.
    unsafe {
        p.cast::<u64>().write(lo);
        p.add(8).cast::<u64>().write(hi);
    }
}

/// Writes one WQE's segments in order, 16 bytes at a time, wrapping at the
/// ring end.
pub struct WqeCursor {
    pos: *mut u8,
    start: *mut u8,
    end: *mut u8,
}

impl WqeCursor {
    /// A cursor at the start of WQEBB `bb`.
    ///
    /// # Safety
    /// The WQEBBs this WQE will occupy must be owned by the caller (free: not
    /// in flight to the NIC) and no other reference to them may be live.
    #[inline(always)]
    pub unsafe fn new(ring: &SqRing, bb: u16) -> Self {
        let start = ring.start();
        Self {
            pos: ring.bb_ptr(bb),
            start,
            end: start.wrapping_add(ring.bytes()),
        }
    }

    #[inline(always)]
    fn wrap(&mut self) {
        if self.pos == self.end {
            self.pos = self.start;
        }
    }

    /// Writes one 16-byte unit.
    ///
    /// # Safety
    /// The unit must lie inside the WQE's owned WQEBBs (the caller's shape).
    #[inline(always)]
    pub unsafe fn put16(&mut self, unit: [u8; 16]) {
        self.wrap();
        // SAFETY: after `wrap`, pos is 16-byte aligned inside the ring with
        // >= 16 bytes before `end` (the end is 64-byte aligned); the caller
        // owns these bytes.
        unsafe {
            store16(self.pos, unit);
            self.pos = self.pos.add(16);
        }
    }

    /// Writes a 48-byte segment (the address vector) as three units.
    ///
    /// # Safety
    /// As [`put16`](Self::put16), for all three units.
    #[inline(always)]
    pub unsafe fn put48(&mut self, seg: &[u8; 48]) {
        let mut i = 0;
        while i < 3 {
            let mut u = [0u8; 16];
            u.copy_from_slice(&seg[i * 16..i * 16 + 16]);
            // SAFETY: forwarded caller contract.
            unsafe { self.put16(u) };
            i += 1;
        }
    }

    /// Writes an inline segment: 4-byte header, then `len` payload bytes
    /// read from `src`, split at the ring end; leaves the cursor at the next
    /// 16-byte boundary (pad bytes are not written: the NIC ignores them).
    ///
    /// # Safety
    /// `src..src+len` must be readable and not overlap the ring; the
    /// `inline_ds(len)` units must lie inside the WQE's owned WQEBBs.
    #[inline(always)]
    pub unsafe fn put_inline(&mut self, src: *const u8, len: usize) {
        self.wrap();
        // SAFETY: pos is 16-aligned in the ring (see put16); `room` is the distance to the
        // ring end (>= 12 after the header); the payload is copied in at most two pieces that
        // stay inside the ring and the caller's owned units; `src` is readable for `len`.
        unsafe {
            self.pos
                .cast::<[u8; 4]>()
                .write(InlineHdr::new(len as u32).to_bytes());
            let dst = self.pos.add(4);
            let room = self.end.offset_from(dst) as usize;
            if len <= room {
                ptr::copy_nonoverlapping(src, dst, len);
            } else {
                ptr::copy_nonoverlapping(src, dst, room);
                ptr::copy_nonoverlapping(src.add(room), self.start, len - room);
            }
            let adv = inline_ds(len as u32) as usize * DS_BYTES;
            let ring = self.end.offset_from(self.start) as usize;
            let off = (self.pos.offset_from(self.start) as usize + adv) & (ring - 1);
            self.pos = self.start.add(off);
        }
    }
}

impl SegWriter for WqeCursor {
    #[inline(always)]
    unsafe fn put16(&mut self, unit: [u8; 16]) {
        // SAFETY: forwarded caller contract.
        unsafe { WqeCursor::put16(self, unit) }
    }
    #[inline(always)]
    unsafe fn put48(&mut self, seg: &[u8; 48]) {
        // SAFETY: forwarded caller contract.
        unsafe { WqeCursor::put48(self, seg) }
    }
    #[inline(always)]
    unsafe fn put_inline(&mut self, src: *const u8, len: usize) {
        // SAFETY: forwarded caller contract.
        unsafe { WqeCursor::put_inline(self, src, len) }
    }
}

/// Writes one WQE's segments in order into WQEBBs that do not reach the ring
/// end ([`SqRing::fits_flat`]): no wrap checks, the inline payload is one copy.
pub struct FlatCursor {
    pos: *mut u8,
}

impl FlatCursor {
    /// A cursor at the start of WQEBB `bb`.
    ///
    /// # Safety
    /// As [`WqeCursor::new`], and `ring.fits_flat(bb, nbb)` must hold for the
    /// WQE's `nbb`.
    #[inline(always)]
    pub unsafe fn new(ring: &SqRing, bb: u16) -> Self {
        Self {
            pos: ring.bb_ptr(bb),
        }
    }
}

impl SegWriter for FlatCursor {
    #[inline(always)]
    unsafe fn put16(&mut self, unit: [u8; 16]) {
        // SAFETY: pos is 16-byte aligned inside the WQE's owned WQEBBs, which
        // end before the ring end (constructor contract).
        unsafe {
            store16(self.pos, unit);
            self.pos = self.pos.add(16);
        }
    }
    #[inline(always)]
    unsafe fn put48(&mut self, seg: &[u8; 48]) {
        // SAFETY: as put16, for 48 contiguous owned bytes; `seg` is a
        // separate array, not ring memory.
        unsafe {
            ptr::copy_nonoverlapping(seg.as_ptr(), self.pos, 48);
            self.pos = self.pos.add(48);
        }
    }
    #[inline(always)]
    unsafe fn put_inline(&mut self, src: *const u8, len: usize) {
        // SAFETY: the header and payload lie in the inline_ds(len) owned units
        // from pos, all before the ring end (no split needed); `src` is
        // readable for `len` and does not overlap the ring (caller contract).
        unsafe {
            self.pos
                .cast::<[u8; 4]>()
                .write(InlineHdr::new(len as u32).to_bytes());
            ptr::copy_nonoverlapping(src, self.pos.add(4), len);
            self.pos = self.pos.add(inline_ds(len as u32) as usize * DS_BYTES);
        }
    }
}

const _: () = assert!(WQEBB == 1 << WQEBB_SHIFT);

#[cfg(test)]
mod tests {
    use super::*;

    fn wr(len: u32, inline: bool) -> WrDesc {
        WrDesc {
            len,
            inline,
            ..WrDesc::default()
        }
    }

    #[test]
    fn shapes_follow_the_recipes() {
        // mlx5-direct.md §2.4.
        let s = |op, w: WrDesc, ud| shape(op, &w, ud).unwrap();
        assert_eq!(
            s(Op::Write, wr(4096, false), false),
            WqeShape { ds: 3, nbb: 1 }
        );
        assert_eq!(
            s(Op::Write, wr(28, true), false),
            WqeShape { ds: 4, nbb: 1 }
        );
        assert_eq!(
            s(Op::Write, wr(29, true), false),
            WqeShape { ds: 5, nbb: 2 }
        );
        assert_eq!(
            s(Op::Write, wr(220, true), false),
            WqeShape { ds: 16, nbb: 4 }
        );
        assert_eq!(s(Op::Send, wr(44, true), false), WqeShape { ds: 4, nbb: 1 });
        assert_eq!(s(Op::Send, wr(8, false), true), WqeShape { ds: 5, nbb: 2 });
        assert_eq!(
            s(Op::FetchAdd, wr(8, false), false),
            WqeShape { ds: 4, nbb: 1 }
        );
        assert_eq!(s(Op::Send, wr(0, false), false), WqeShape { ds: 1, nbb: 1 });
        assert_eq!(s(Op::Write, wr(0, true), false), WqeShape { ds: 2, nbb: 1 });
        // 2 + ceil((4 + 972) / 16) = 63 units is the largest inline WRITE.
        assert_eq!(
            s(Op::Write, wr(972, true), false),
            WqeShape { ds: 63, nbb: 16 }
        );
        assert_eq!(
            shape(Op::Write, &wr(973, true), false),
            Err(PostError::Unsupported)
        );
        assert_eq!(
            shape(Op::Read, &wr(8, true), false),
            Err(PostError::Unsupported)
        );
        assert_eq!(
            shape(Op::Write, &wr(8, false), true),
            Err(PostError::Unsupported)
        );
        assert_eq!(
            shape(Op::Write, &wr(u32::MAX, true), false),
            Err(PostError::Unsupported)
        );
    }
}
