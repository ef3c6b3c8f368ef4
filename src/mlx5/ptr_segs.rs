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
    use core::arch::x86_64::{__m128i, _mm_castpd_si128, _mm_castsi128_pd, _mm_cvtsi32_si128};
    use core::arch::x86_64::{_mm_extract_epi64, _mm_insert_epi32, _mm_loadh_pd, _mm_loadl_epi64};
    use core::arch::x86_64::{_mm_or_si128, _mm_set1_epi64x, _mm_setr_epi8, _mm_setzero_si128};
    use core::arch::x86_64::{_mm_shuffle_epi8, _mm_store_si128, _mm_sub_epi64};
    use core::arch::x86_64::{_mm_unpackhi_epi64, _mm_unpacklo_epi64};

    use super::{RawPkt, SrcCheck, ADDR, LEN};

    /// # Safety
    /// As [`super::put`].
    #[inline(always)]
    pub unsafe fn put(d: *mut u8, pkts: &[RawPkt], lkey: u64, chk: &mut SrcCheck) {
        let (start, span, min) = chk.bounds();
        let pairs = pkts.chunks_exact(2);
        let odd = pairs.remainder();
        // SAFETY: SSE2/SSSE3/SSE4.1 are enabled for the whole build (this
        // module's cfg). Loads read the addr and len fields of the two
        // packets of a pair (offsets asserted above), never the padding;
        // stores are the pair's two aligned units, inside the caller's
        // bytes (caller contract: 16 bytes a packet from d).
        unsafe {
            let (vs, vspan) = (_mm_set1_epi64x(start as i64), _mm_set1_epi64x(span as i64));
            let (vmin, vlkey) = (_mm_set1_epi64x(min as i64), _mm_set1_epi64x(lkey as i64));
            // Each 64-bit lane reversed (the address, big-endian); each
            // lane's low 32 bits reversed into its bytes 0..4 (the length).
            let rev = _mm_setr_epi8(7, 6, 5, 4, 3, 2, 1, 0, 15, 14, 13, 12, 11, 10, 9, 8);
            let len_be = _mm_setr_epi8(3, 2, 1, 0, -1, -1, -1, -1, 11, 10, 9, 8, -1, -1, -1, -1);
            let (mut offs, mut bad) = (_mm_setzero_si128(), _mm_setzero_si128());
            for (i, pr) in pairs.enumerate() {
                let p = pr.as_ptr().cast::<u8>();
                let a0 = _mm_loadl_epi64(p.add(ADDR).cast::<__m128i>());
                let a =
                    _mm_castpd_si128(_mm_loadh_pd(_mm_castsi128_pd(a0), p.add(16 + ADDR).cast()));
                let l0 = _mm_cvtsi32_si128(p.add(LEN).cast::<i32>().read());
                let l = _mm_insert_epi32::<2>(l0, p.add(16 + LEN).cast::<i32>().read());
                // SrcCheck::see for both lanes.
                let off = _mm_sub_epi64(a, vs);
                offs = _mm_or_si128(offs, off);
                let past = _mm_sub_epi64(_mm_sub_epi64(vspan, l), off);
                bad = _mm_or_si128(bad, _mm_or_si128(past, _mm_sub_epi64(l, vmin)));
                let lk = _mm_or_si128(_mm_shuffle_epi8(l, len_be), vlkey);
                let abe = _mm_shuffle_epi8(a, rev);
                let u = d.add(32 * i).cast::<__m128i>();
                _mm_store_si128(u, _mm_unpacklo_epi64(lk, abe));
                _mm_store_si128(u.add(1), _mm_unpackhi_epi64(lk, abe));
            }
            let lanes = |v: __m128i| (_mm_extract_epi64::<0>(v) | _mm_extract_epi64::<1>(v)) as u64;
            chk.fold(lanes(offs), lanes(bad));
            if let Some(p) = odd.first() {
                let at = d.add(16 * (pkts.len() - 1));
                super::scalar::put(at, core::slice::from_ref(p), lkey, chk);
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
