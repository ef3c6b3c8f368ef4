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
    use core::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_set_epi64x, _mm_setr_epi8};
    use core::arch::x86_64::{_mm_shuffle_epi8, _mm_store_si128};

    use super::{LOCAL, REMOTE};
    use crate::post::WrDesc;

    /// # Safety
    /// As [`super::ctrl`].
    #[inline(always)]
    pub unsafe fn ctrl(dst: *mut u8, w0: u64, w1: u64) {
        // SAFETY: SSE2 is enabled for the whole build; dst: caller contract.
        unsafe { _mm_store_si128(dst.cast::<__m128i>(), _mm_set_epi64x(w1 as i64, w0 as i64)) }
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

    #[test]
    fn this_builds_segments_match_the_encoders() {
        check((ctrl, raddr, data));
    }

    #[test]
    fn scalar_segments_match_the_encoders() {
        check((scalar::ctrl, scalar::raddr, scalar::data));
    }
}
