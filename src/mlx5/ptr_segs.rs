//! The per-packet part of a pointer eMPW session: one data segment a packet
//! (`BE32(len)`, `BE32(lkey)`, `BE64(addr)`), each packet shown to the
//! list's [`SrcCheck`] on the way.
//!
//! On x86-64 with SSE4.1 (the crate's x86-64-v2 build) two packets go at a
//! time: their addresses and lengths are loaded into one register each
//! (the fields only, never `RawPkt`'s padding), the check's words are
//! computed for both lanes at once, and the two segments are built with
//! two byte shuffles and two unpacks; about half the instructions of the
//! scalar loop, which is what other targets (aarch64) use and what the
//! tests compare it with.

use core::mem::{offset_of, size_of};

use super::raw_list::{RawPkt, SrcCheck};

const ADDR: usize = offset_of!(RawPkt, addr);
const LEN: usize = offset_of!(RawPkt, len);
const _: () = assert!(size_of::<RawPkt>() == 16 && ADDR == 0 && LEN == 8);

/// Writes the segments of `pkts` from `d`, folding each packet into `chk`;
/// `lkey` is `BE32(lkey)` in place (bytes 4..8 of the segment's first word).
///
/// # Safety
/// `d` is 16-byte aligned and the caller owns `16 * pkts.len()` bytes from it.
#[inline(always)]
pub(crate) unsafe fn put(d: *mut u8, pkts: &[RawPkt], lkey: u64, chk: &mut SrcCheck) {
    // SAFETY: caller contract.
    unsafe { imp::put(d, pkts, lkey, chk) }
}

#[cfg(all(target_arch = "x86_64", target_feature = "sse4.1"))]
use sse as imp;

#[cfg(not(all(target_arch = "x86_64", target_feature = "sse4.1")))]
use scalar as imp;

/// One packet at a time (any target).
#[cfg_attr(
    all(target_arch = "x86_64", target_feature = "sse4.1"),
    allow(dead_code)
)]
mod scalar {
    use super::{RawPkt, SrcCheck};

    /// # Safety
    /// As [`super::put`].
    #[inline(always)]
    pub unsafe fn put(d: *mut u8, pkts: &[RawPkt], lkey: u64, chk: &mut SrcCheck) {
        // A copy in registers: the ring stores could alias `*chk` as far as
        // the compiler knows.
        let mut c = *chk;
        for (i, p) in pkts.iter().enumerate() {
            c.see(p);
            // SAFETY: unit i lies in the caller's bytes.
            unsafe {
                let u = d.add(16 * i).cast::<u64>();
                u.write(lkey | p.len.swap_bytes() as u64);
                u.add(1).write(p.addr.swap_bytes());
            }
        }
        *chk = c;
    }
}

/// Two packets a register.
#[cfg(all(target_arch = "x86_64", target_feature = "sse4.1"))]
mod sse {
    use core::arch::x86_64::_mm_unpacklo_epi64;
    use core::arch::x86_64::{__m128i, _mm_add_epi64, _mm_and_si128, _mm_castpd_si128};
    use core::arch::x86_64::{_mm_castsi128_pd, _mm_cvtsi32_si128, _mm_extract_epi32};
    use core::arch::x86_64::{_mm_extract_epi64, _mm_insert_epi32, _mm_loadh_pd};
    use core::arch::x86_64::{_mm_loadl_epi64, _mm_min_epu32, _mm_or_si128, _mm_set1_epi64x};
    use core::arch::x86_64::{_mm_set1_epi8, _mm_setr_epi8, _mm_setzero_si128, _mm_shuffle_epi8};
    use core::arch::x86_64::{_mm_store_si128, _mm_sub_epi64, _mm_unpackhi_epi64};

    use super::{RawPkt, SrcCheck, ADDR, LEN};

    /// What a list's pairs share: the bounds and stamps as vectors, and the
    /// check's running words.
    ///
    /// The check is [`SrcCheck::see`]'s in a form that needs few register
    /// copies (SSE's two-operand instructions overwrite their first): the
    /// offsets are ORed (`offs`), the lengths' minimum kept (`lmin`, 32-bit
    /// lanes 0 and 2; lanes 1 and 3 hold zeros and are not read), and
    /// `off + len - (span + 1)` is ANDed (`fits`: bit 63 stays set while
    /// every frame ends by the source's end; no overflow while
    /// `off < 2^62`, which `offs` checks).
    struct Pairs {
        start: __m128i,
        span1: __m128i,
        min: u64,
        lkey: __m128i,
        rev: __m128i,
        len_be: __m128i,
        offs: __m128i,
        lmin: __m128i,
        fits: __m128i,
    }

    impl Pairs {
        #[inline(always)]
        fn new(chk: &SrcCheck, lkey: u64) -> Self {
            let (start, span, min) = chk.bounds();
            // SAFETY: SSE2/SSSE3 are enabled for the whole build (this module's cfg).
            unsafe {
                Self {
                    start: _mm_set1_epi64x(start as i64),
                    span1: _mm_set1_epi64x(span.wrapping_add(1) as i64),
                    min,
                    lkey: _mm_set1_epi64x(lkey as i64),
                    // Each 64-bit lane reversed (the address, big-endian);
                    // each lane's low 32 bits reversed into its bytes 0..4
                    // (the length).
                    rev: _mm_setr_epi8(7, 6, 5, 4, 3, 2, 1, 0, 15, 14, 13, 12, 11, 10, 9, 8),
                    len_be: _mm_setr_epi8(3, 2, 1, 0, -1, -1, -1, -1, 11, 10, 9, 8, -1, -1, -1, -1),
                    offs: _mm_setzero_si128(),
                    lmin: _mm_set1_epi8(-1),
                    fits: _mm_set1_epi8(-1),
                }
            }
        }

        /// The pair at `p` into the two units at `u`.
        ///
        /// # Safety
        /// `p` points at two packets; `u` is 16-byte aligned with 32 bytes
        /// the caller owns.
        #[inline(always)]
        unsafe fn pair(&mut self, p: *const u8, u: *mut __m128i) {
            // The loads read the two packets' addr and len fields (offsets
            // asserted above), never their padding; the stores are the
            // caller's two aligned units.
            // SAFETY: as above; SSE2/SSSE3/SSE4.1 are enabled for the whole build.
            unsafe {
                let a0 = _mm_loadl_epi64(p.add(ADDR).cast::<__m128i>());
                let a =
                    _mm_castpd_si128(_mm_loadh_pd(_mm_castsi128_pd(a0), p.add(16 + ADDR).cast()));
                let l0 = _mm_cvtsi32_si128(p.add(LEN).cast::<i32>().read());
                let l = _mm_insert_epi32::<2>(l0, p.add(16 + LEN).cast::<i32>().read());
                let off = _mm_sub_epi64(a, self.start);
                self.offs = _mm_or_si128(self.offs, off);
                let end = _mm_sub_epi64(_mm_add_epi64(off, l), self.span1);
                self.fits = _mm_and_si128(self.fits, end);
                self.lmin = _mm_min_epu32(self.lmin, l);
                let lk = _mm_or_si128(_mm_shuffle_epi8(l, self.len_be), self.lkey);
                let abe = _mm_shuffle_epi8(a, self.rev);
                _mm_store_si128(u, _mm_unpacklo_epi64(lk, abe));
                _mm_store_si128(u.add(1), _mm_unpackhi_epi64(lk, abe));
            }
        }

        /// Hands the words to `chk` in [`SrcCheck::see`]'s terms.
        #[inline(always)]
        fn fold(&self, chk: &mut SrcCheck) {
            // SAFETY: SSE4.1 is enabled for the whole build.
            let (o, l, f) = unsafe {
                let or =
                    |v: __m128i| (_mm_extract_epi64::<0>(v) | _mm_extract_epi64::<1>(v)) as u64;
                let and =
                    |v: __m128i| (_mm_extract_epi64::<0>(v) & _mm_extract_epi64::<1>(v)) as u64;
                let l0 = _mm_extract_epi32::<0>(self.lmin) as u32;
                let l2 = _mm_extract_epi32::<2>(self.lmin) as u32;
                (or(self.offs), l0.min(l2) as u64, and(self.fits))
            };
            // `see`'s words: bit 63 set for a short frame, for one past the end.
            chk.fold(o, l.wrapping_sub(self.min) | !f);
        }
    }

    /// # Safety
    /// As [`super::put`].
    #[inline(always)]
    pub unsafe fn put(d: *mut u8, pkts: &[RawPkt], lkey: u64, chk: &mut SrcCheck) {
        let mut v = Pairs::new(chk, lkey);
        let quads = pkts.chunks_exact(4);
        let rest = quads.remainder();
        let u = d.cast::<__m128i>();
        // SAFETY: quad i's packets are pkts[4i..4i+4] and its units the
        // caller's units 4i..4i+4 (16-byte aligned from d); a last pair and
        // a last odd packet follow the same way.
        unsafe {
            for (i, q) in quads.enumerate() {
                let p = q.as_ptr().cast::<u8>();
                v.pair(p, u.add(4 * i));
                v.pair(p.add(32), u.add(4 * i + 2));
            }
            let at = pkts.len() - rest.len();
            if rest.len() >= 2 {
                v.pair(rest.as_ptr().cast(), u.add(at));
            }
            v.fold(chk);
            if rest.len() % 2 == 1 {
                let last = pkts.len() - 1;
                super::scalar::put(d.add(16 * last), &pkts[last..], lkey, chk);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[repr(C, align(16))]
    struct Units([u8; 16 * 40]);

    /// The pair writer against the scalar one: the same bytes and the same
    /// verdict, for good lists, lists with one bad packet anywhere, and
    /// odd and even lengths.
    #[test]
    fn both_writers_agree() {
        let (s, e) = (0x40_0000u64, 0x40_8000u64);
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for round in 0..4000 {
            let n = 1 + (rnd() % 40) as usize;
            let mut pkts: Vec<RawPkt> = (0..n)
                .map(|_| RawPkt {
                    addr: s + rnd() % 0x7000,
                    len: 14 + (rnd() % 0x800) as u32,
                })
                .collect();
            if round % 2 == 1 {
                let k = (rnd() % n as u64) as usize;
                pkts[k] = match rnd() % 4 {
                    0 => RawPkt {
                        addr: s - 1,
                        len: 64,
                    },
                    1 => RawPkt {
                        addr: e - 63,
                        len: 64,
                    },
                    2 => RawPkt { addr: s, len: 13 },
                    _ => RawPkt {
                        addr: rnd(),
                        len: rnd() as u32,
                    },
                };
            }
            let (mut a, mut b) = (Units([0xee; 640]), Units([0xee; 640]));
            let (mut ca, mut cb) = (SrcCheck::new((s, e), 14), SrcCheck::new((s, e), 14));
            // SAFETY: 640 aligned bytes hold 40 units.
            unsafe {
                put(a.0.as_mut_ptr(), &pkts, 0x1234_5678 << 32, &mut ca);
                scalar::put(b.0.as_mut_ptr(), &pkts, 0x1234_5678 << 32, &mut cb);
            }
            assert!(a.0 == b.0, "round {round}: segments differ");
            assert_eq!(ca.ok(), cb.ok(), "round {round}: {pkts:?}");
            assert_eq!(
                cb.ok(),
                round % 2 == 0
                    || pkts.iter().all(|p| {
                        p.addr >= s && p.addr as u128 + p.len as u128 <= e as u128 && p.len >= 14
                    }),
                "round {round}"
            );
        }
    }
}
