//! The ctrl, raddr and data segments of a WQE stored as 16-byte units, the
//! raddr and data ones built straight from a [`WrDesc`]'s bytes.
//!
//! Whole 16-byte stores also let the BlueFlame copy read the WQE back with
//! 16-byte loads that the store buffer forwards (an 8-byte store followed
//! by a 16-byte load of the same bytes stalls until the store retires).
//!
//! `WrDesc` is `repr(C)` with `laddr, lkey, len` and `raddr, rkey` each
//! contiguous (asserted below), so on x86-64 with SSSE3 (the crate is built
//! for x86-64-v2, see `.cargo/config.toml`) each segment is one 16-byte
//! load, one byte shuffle (the big-endian conversion and the field order in
//! one instruction) and one 16-byte store: 3 instructions instead of 8. A
//! build without SSSE3 (another target, or `RUSTFLAGS` that replace the
//! config's) uses the scalar byte swaps; `tests` checks both give the bytes
//! of [`RaddrSeg::new`](super::seg::RaddrSeg::new) and
//! [`DataSeg::new`](super::seg::DataSeg::new).

use core::mem::offset_of;

use crate::post::WrDesc;

// The shuffles read 16 bytes from these offsets.
const LOCAL: usize = offset_of!(WrDesc, laddr);
const REMOTE: usize = offset_of!(WrDesc, raddr);
const _: () = {
    assert!(offset_of!(WrDesc, lkey) == LOCAL + 8);
    assert!(offset_of!(WrDesc, len) == LOCAL + 12);
    assert!(offset_of!(WrDesc, rkey) == REMOTE + 8);
    // The 4 bytes after rkey are read (and dropped): still inside WrDesc.
    assert!(REMOTE + 16 <= size_of::<WrDesc>());
};

/// Which implementation this build uses ("ssse3" or "scalar"), for reports.
pub const IMPL: &str = if cfg!(all(target_arch = "x86_64", target_feature = "ssse3")) {
    "ssse3"
} else {
    "scalar"
};

/// Writes a ctrl segment whose bytes 0..8 and 8..16, as store values, are
/// `w0` and `w1`, as one 16-byte store.
///
/// # Safety
/// `dst` must be valid for 16 bytes of writes and 16-byte aligned.
#[inline(always)]
pub unsafe fn ctrl(dst: *mut u8, w0: u64, w1: u64) {
    // SAFETY: caller contract.
    unsafe { imp::ctrl(dst, w0, w1) }
}

/// Writes the raddr segment (`BE64(raddr)`, `BE32(rkey)`, 4 zero bytes) of
/// `wr` at `dst`.
///
/// # Safety
/// `dst` must be valid for 16 bytes of writes and 16-byte aligned.
#[inline(always)]
pub unsafe fn raddr(dst: *mut u8, wr: &WrDesc) {
    // SAFETY: caller contract.
    unsafe { imp::raddr(dst, wr) }
}

/// Writes the data segment (`BE32(len)`, `BE32(lkey)`, `BE64(laddr)`) of
/// `wr` at `dst`.
///
/// # Safety
/// `dst` must be valid for 16 bytes of writes and 16-byte aligned.
#[inline(always)]
pub unsafe fn data(dst: *mut u8, wr: &WrDesc) {
    // SAFETY: caller contract.
    unsafe { imp::data(dst, wr) }
}

/// Writes an inline data segment at `dst`: the 4-byte header word `hdr`
/// (already big-endian as stored) and `len` payload bytes from `src`, as
/// whole 16-byte units when `len >= 16` (a shorter payload cannot be read
/// 16 bytes at a time: header and bytes are copied as they are). The bytes
/// after the payload up to the end of its last unit are left unspecified
/// (the NIC reads `len` bytes).
///
/// # Safety
/// `src` readable for `len` bytes and not overlapping `dst`; `dst` 16-byte
/// aligned and writable for `(4 + len).div_ceil(16) * 16` bytes.
#[inline(always)]
pub unsafe fn inline(dst: *mut u8, hdr: u32, src: *const u8, len: usize) {
    // SAFETY: caller contract.
    unsafe { imp::inline(dst, hdr, src, len) }
}

/// Copies 16 bytes from `src` (any alignment) to `dst` as one 16-byte
/// unit: a fixed-length copy (the raw SEND's inline L2 header tail).
///
/// # Safety
/// `src` readable for 16 bytes, not overlapping `dst`; `dst` valid for 16
/// bytes of writes and 16-byte aligned.
#[inline(always)]
pub unsafe fn copy16(dst: *mut u8, src: *const u8) {
    // SAFETY: caller contract.
    unsafe { imp::copy16(dst, src) }
}

/// A UD address vector held in registers across a post list (three
/// 16-byte units on x86-64), stored into each WQE with [`av`].
pub use imp::AvRegs;

/// Loads the 48-byte address vector once per list.
#[inline(always)]
pub fn load_av(av: &[u8; 48]) -> AvRegs {
    imp::load_av(av)
}

/// Writes the address vector at `dst` (the 48 bytes after a ctrl segment).
///
/// # Safety
/// `dst` must be valid for 48 bytes of writes and 16-byte aligned.
#[inline(always)]
pub unsafe fn av(dst: *mut u8, v: &AvRegs) {
    // SAFETY: caller contract.
    unsafe { imp::av(dst, v) }
}

#[cfg(all(target_arch = "x86_64", target_feature = "ssse3"))]
use ssse3 as imp;

#[cfg(not(all(target_arch = "x86_64", target_feature = "ssse3")))]
use scalar as imp;

/// Two byte-swapped 8-byte stores per segment (any target).
#[cfg_attr(
    all(target_arch = "x86_64", target_feature = "ssse3"),
    allow(dead_code)
)]
mod scalar {
    use crate::post::WrDesc;

    pub type AvRegs = [u8; 48];

    #[inline(always)]
    pub fn load_av(av: &[u8; 48]) -> AvRegs {
        *av
    }

    /// # Safety
    /// As [`super::av`].
    #[inline(always)]
    pub unsafe fn av(dst: *mut u8, v: &AvRegs) {
        // SAFETY: caller contract (48 writable bytes); v is not ring memory.
        unsafe { core::ptr::copy_nonoverlapping(v.as_ptr(), dst, 48) }
    }

    /// # Safety
    /// As [`super::ctrl`].
    #[inline(always)]
    pub unsafe fn ctrl(dst: *mut u8, w0: u64, w1: u64) {
        // SAFETY: caller contract (16 writable, aligned bytes).
        unsafe {
            dst.cast::<u64>().write(w0);
            dst.add(8).cast::<u64>().write(w1);
        }
    }

    /// # Safety
    /// As [`super::copy16`].
    #[inline(always)]
    pub unsafe fn copy16(dst: *mut u8, src: *const u8) {
        // SAFETY: caller contract (16 readable bytes at src, 16 writable,
        // aligned ones at dst).
        unsafe {
            let s = src.cast::<u64>();
            dst.cast::<u64>().write(s.read_unaligned());
            dst.add(8).cast::<u64>().write(s.add(1).read_unaligned());
        }
    }

    /// # Safety
    /// As [`super::inline`].
    #[inline(always)]
    pub unsafe fn inline(dst: *mut u8, hdr: u32, src: *const u8, len: usize) {
        // SAFETY: caller contract: 4 + len writable bytes at dst, len
        // readable ones at src, no overlap.
        unsafe {
            dst.cast::<u32>().write(hdr);
            core::ptr::copy_nonoverlapping(src, dst.add(4), len);
        }
    }

    /// # Safety
    /// As [`super::raddr`].
    #[inline(always)]
    pub unsafe fn raddr(dst: *mut u8, wr: &WrDesc) {
        // SAFETY: caller contract (16 writable, aligned bytes).
        unsafe {
            dst.cast::<u64>().write(wr.raddr.swap_bytes());
            dst.add(8).cast::<u64>().write(wr.rkey.swap_bytes() as u64);
        }
    }

    /// # Safety
    /// As [`super::data`].
    #[inline(always)]
    pub unsafe fn data(dst: *mut u8, wr: &WrDesc) {
        let w0 = (((wr.len as u64) << 32) | wr.lkey as u64).swap_bytes();
        // SAFETY: caller contract (16 writable, aligned bytes).
        unsafe {
            dst.cast::<u64>().write(w0);
            dst.add(8).cast::<u64>().write(wr.laddr.swap_bytes());
        }
    }
}

/// One `pshufb` per segment.
#[cfg(all(target_arch = "x86_64", target_feature = "ssse3"))]
mod ssse3 {
    use core::arch::x86_64::{__m128i, _mm_cvtsi32_si128, _mm_loadu_si128, _mm_or_si128};
    use core::arch::x86_64::{_mm_set_epi64x, _mm_setr_epi8, _mm_shuffle_epi8};
    use core::arch::x86_64::{_mm_slli_si128, _mm_store_si128};

    use crate::mlx5::segwr::{LOCAL, REMOTE};
    use crate::post::WrDesc;

    pub type AvRegs = [__m128i; 3];

    #[inline(always)]
    pub fn load_av(av: &[u8; 48]) -> AvRegs {
        let p = av.as_ptr().cast::<__m128i>();
        // SAFETY: SSE2 is enabled for the whole build; the three unaligned
        // loads read the 48 bytes of *av.
        unsafe {
            [
                _mm_loadu_si128(p),
                _mm_loadu_si128(p.add(1)),
                _mm_loadu_si128(p.add(2)),
            ]
        }
    }

    /// # Safety
    /// As [`super::av`].
    #[inline(always)]
    pub unsafe fn av(dst: *mut u8, v: &AvRegs) {
        let d = dst.cast::<__m128i>();
        // SAFETY: SSE2 is enabled for the whole build; dst: caller contract
        // (48 writable bytes, 16-byte aligned).
        unsafe {
            _mm_store_si128(d, v[0]);
            _mm_store_si128(d.add(1), v[1]);
            _mm_store_si128(d.add(2), v[2]);
        }
    }

    /// # Safety
    /// As [`super::ctrl`].
    #[inline(always)]
    pub unsafe fn ctrl(dst: *mut u8, w0: u64, w1: u64) {
        // SAFETY: SSE2 is enabled for the whole build; dst: caller contract.
        unsafe { _mm_store_si128(dst.cast::<__m128i>(), _mm_set_epi64x(w1 as i64, w0 as i64)) }
    }

    /// # Safety
    /// As [`super::copy16`].
    #[inline(always)]
    pub unsafe fn copy16(dst: *mut u8, src: *const u8) {
        // SAFETY: SSE2 is enabled for the whole build; src/dst: caller contract.
        unsafe { _mm_store_si128(dst.cast(), _mm_loadu_si128(src.cast())) }
    }

    /// `TAIL[r]` moves the last `r` bytes of a 16-byte unit to its front
    /// (pshufb indices; 0x80 zeroes the rest).
    static TAIL: [[u8; 16]; 16] = {
        let mut t = [[0x80u8; 16]; 16];
        let mut r = 0;
        while r < 16 {
            let mut i = 0;
            while i < r {
                t[r][i] = (i + 16 - r) as u8;
                i += 1;
            }
            r += 1;
        }
        t
    };

    /// # Safety
    /// As [`super::inline`].
    #[inline(always)]
    pub unsafe fn inline(dst: *mut u8, hdr: u32, src: *const u8, len: usize) {
        if len < 16 {
            // SAFETY: caller contract.
            return unsafe { crate::mlx5::segwr::scalar::inline(dst, hdr, src, len) };
        }
        let u = |p: *const u8| p.cast::<__m128i>();
        // Loads: the first at src, the middle ones end by len, the tail one at src + len - 16.
        // SAFETY: SSE2/SSSE3 are enabled for the whole build; every load reads 16 bytes in
        // src..src + len (len >= 16); every store is one aligned unit below dst +
        // (4 + len).div_ceil(16) * 16 (caller contract).
        unsafe {
            // Unit 0: the header, then payload bytes 0..12.
            let first = _mm_slli_si128::<4>(_mm_loadu_si128(u(src)));
            let h = _mm_cvtsi32_si128(hdr as i32);
            _mm_store_si128(dst.cast(), _mm_or_si128(first, h));
            // Then payload bytes off..off + 16 at dst + 4 + off (aligned).
            let mut off = 12;
            while off + 16 <= len {
                _mm_store_si128(dst.add(4 + off).cast(), _mm_loadu_si128(u(src.add(off))));
                off += 16;
            }
            let r = len - off;
            if r != 0 {
                // The last r bytes, from a load that ends at the payload end.
                let v = _mm_loadu_si128(u(src.add(len - 16)));
                let m = _mm_loadu_si128(u(TAIL[r].as_ptr()));
                _mm_store_si128(dst.add(4 + off).cast(), _mm_shuffle_epi8(v, m));
            }
        }
    }

    /// # Safety
    /// As [`super::raddr`].
    #[inline(always)]
    pub unsafe fn raddr(dst: *mut u8, wr: &WrDesc) {
        // From raddr(8) rkey(4) imm(4): raddr and rkey reversed, then 4
        // zero bytes (index -1 zeroes).
        let src = (wr as *const WrDesc).cast::<u8>();
        // SAFETY: SSE2/SSSE3 are enabled for the whole build (this module's
        // cfg); REMOTE + 16 <= size_of::<WrDesc>() (asserted above), so the
        // unaligned load stays inside *wr; dst: caller contract.
        unsafe {
            let m = _mm_setr_epi8(7, 6, 5, 4, 3, 2, 1, 0, 11, 10, 9, 8, -1, -1, -1, -1);
            let v = _mm_loadu_si128(src.add(REMOTE).cast::<__m128i>());
            _mm_store_si128(dst.cast::<__m128i>(), _mm_shuffle_epi8(v, m));
        }
    }

    /// # Safety
    /// As [`super::data`].
    #[inline(always)]
    pub unsafe fn data(dst: *mut u8, wr: &WrDesc) {
        // From laddr(8) lkey(4) len(4): the whole unit reversed is
        // BE32(len) BE32(lkey) BE64(laddr).
        let src = (wr as *const WrDesc).cast::<u8>();
        // SAFETY: SSE2/SSSE3 are enabled for the whole build (this module's
        // cfg); LOCAL + 16 = offset of lkey + 8 <= size_of::<WrDesc>(), so
        // the load stays inside *wr; dst: caller contract.
        unsafe {
            let m = _mm_setr_epi8(15, 14, 13, 12, 11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0);
            let v = _mm_loadu_si128(src.add(LOCAL).cast::<__m128i>());
            _mm_store_si128(dst.cast::<__m128i>(), _mm_shuffle_epi8(v, m));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mlx5::seg::{DataSeg, RaddrSeg};

    #[repr(align(16))]
    struct Unit([u8; 16]);

    fn wrs() -> impl Iterator<Item = WrDesc> {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        (0..200).map(move |_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            WrDesc {
                wr_id: x,
                laddr: x.rotate_left(7),
                lkey: x as u32,
                len: (x >> 32) as u32,
                raddr: x.rotate_left(29),
                rkey: (x >> 11) as u32,
                imm: (x >> 3) as u32 | 1,
                ..WrDesc::default()
            }
        })
    }

    type Segs = (
        unsafe fn(*mut u8, u64, u64),
        unsafe fn(*mut u8, &WrDesc),
        unsafe fn(*mut u8, &WrDesc),
    );

    fn check(f: Segs) {
        for wr in wrs() {
            let (mut c, mut r, mut d) = (Unit([0xee; 16]), Unit([0xee; 16]), Unit([0xee; 16]));
            // SAFETY: 16 aligned bytes each.
            unsafe {
                f.0(c.0.as_mut_ptr(), wr.wr_id, wr.laddr);
                f.1(r.0.as_mut_ptr(), &wr);
                f.2(d.0.as_mut_ptr(), &wr);
            }
            let ctrl = [wr.wr_id.to_ne_bytes(), wr.laddr.to_ne_bytes()].concat();
            assert_eq!(c.0[..], ctrl[..], "{wr:?}");
            assert_eq!(r.0, RaddrSeg::new(wr.raddr, wr.rkey).to_bytes(), "{wr:?}");
            assert_eq!(
                d.0,
                DataSeg::new(wr.len, wr.lkey, wr.laddr).to_bytes(),
                "{wr:?}"
            );
        }
    }

    #[repr(align(16))]
    struct Seg([u8; 272]);

    type Inline = unsafe fn(*mut u8, u32, *const u8, usize);

    fn check_inline(f: Inline) {
        let src: Vec<u8> = (0..300u32).map(|i| (i * 7 + 3) as u8).collect();
        for len in 1..=256 {
            for at in [0, 1, 7, 300 - len] {
                let mut d = Seg([0xee; 272]);
                let hdr = 0x8000_0000u32 | len as u32;
                // SAFETY: src[at..at + len] is in bounds; d has
                // (4 + 256).div_ceil(16) * 16 = 272 aligned bytes.
                unsafe { f(d.0.as_mut_ptr(), hdr.to_be(), src[at..].as_ptr(), len) };
                assert_eq!(d.0[..4], hdr.to_be_bytes(), "len {len}");
                assert_eq!(d.0[4..4 + len], src[at..at + len], "len {len} at {at}");
                let end = (4 + len).div_ceil(16) * 16;
                assert!(
                    d.0[end..].iter().all(|&b| b == 0xee),
                    "len {len}: wrote past its units"
                );
            }
        }
    }

    #[test]
    fn inline_units_carry_header_and_payload() {
        check_inline(inline);
        check_inline(scalar::inline);
    }

    #[test]
    fn copy16_copies_one_unit_from_any_alignment() {
        let src: [u8; 40] = core::array::from_fn(|i| (i * 11 + 2) as u8);
        for at in 0..24 {
            let (mut a, mut b) = (Av([0xee; 64]), Av([0xee; 64]));
            // SAFETY: src[at..at + 16] is in bounds; 64 aligned bytes each.
            unsafe {
                copy16(a.0.as_mut_ptr().add(16), src[at..].as_ptr());
                scalar::copy16(b.0.as_mut_ptr().add(16), src[at..].as_ptr());
            }
            for d in [a.0, b.0] {
                assert_eq!(d[16..32], src[at..at + 16], "at {at}");
                assert!(d[..16].iter().chain(&d[32..]).all(|&x| x == 0xee));
            }
        }
    }

    #[repr(align(16))]
    struct Av([u8; 64]);

    #[test]
    fn address_vector_round_trips_through_registers() {
        let src: [u8; 48] = core::array::from_fn(|i| (i * 5 + 1) as u8);
        let (mut a, mut b) = (Av([0xee; 64]), Av([0xee; 64]));
        // SAFETY: 64 aligned bytes each, 48 written.
        unsafe {
            av(a.0.as_mut_ptr(), &load_av(&src));
            scalar::av(b.0.as_mut_ptr(), &scalar::load_av(&src));
        }
        for d in [a.0, b.0] {
            assert_eq!(d[..48], src);
            assert!(d[48..].iter().all(|&x| x == 0xee));
        }
    }

    #[test]
    fn this_builds_segments_match_the_encoders() {
        check((ctrl, raddr, data));
    }

    #[test]
    fn scalar_segments_match_the_encoders() {
        check((scalar::ctrl, scalar::raddr, scalar::data));
    }
}
