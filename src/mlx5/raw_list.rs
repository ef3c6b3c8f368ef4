//! What a raw packet post list is made of, shared by the per-packet SEND
//! path (`raw_sq.rs`) and the multi-packet one (`mpw.rs`): the packets, the
//! last WQE the doorbell names, and the sparse-completion stamp.

use super::prm::fm_ce_se;

/// One frame to send: `len` bytes (CRC excluded) at `addr`. `repr(C)`:
/// the pointer writer loads these two fields by offset (`ptr_segs.rs`).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RawPkt {
    pub addr: u64,
    pub len: u32,
}

/// Whether every packet of a list lies in the frame source and is long
/// enough, gathered while the list is written and judged once after it.
///
/// Branch-free and without a chain longer than one OR a packet: each test
/// is arranged so that failing it sets bit 63 of a word, and the words are
/// ORed into `bad`. With `off = addr - start` (wrapping) and `len`:
/// - `off`, ORed into `offs` of its own: bit 62 or 63 set there when some
///   `off >= 2^62` (before `start`, or absurdly far past it), so below
///   `off < 2^62`;
/// - `len - min` (wrapping): set when `len < min`;
/// - `(span - len) - off`: with `off < 2^62`, `span < 2^62` and `len < 2^32`
///   the difference cannot overflow, so it is negative exactly when
///   `off + len > span`, the frame ending past the source (this covers
///   `len > span` too).
#[derive(Clone, Copy)]
pub(crate) struct SrcCheck {
    start: u64,
    span: u64,
    min: u64,
    offs: u64,
    bad: u64,
}

/// A frame source at or beyond 2^62 bytes (no user address space has
/// one) refuses every packet rather than weaken the test.
const LIMIT: u64 = 1 << 62;

impl SrcCheck {
    /// The frame source `start..end` and the shortest frame allowed.
    #[inline(always)]
    pub(crate) fn new((start, end): (u64, u64), min: u32) -> Self {
        let span = end.wrapping_sub(start);
        let sane = end >= start && start < LIMIT && span < LIMIT;
        Self {
            start,
            span,
            min: min as u64,
            offs: 0,
            bad: if sane { 0 } else { 1 << 63 },
        }
    }

    #[inline(always)]
    pub(crate) fn see(&mut self, p: &RawPkt) {
        let off = p.addr.wrapping_sub(self.start);
        let len = p.len as u64;
        let past_end = self.span.wrapping_sub(len).wrapping_sub(off);
        self.offs |= off;
        self.bad |= len.wrapping_sub(self.min) | past_end;
    }

    /// The source's start, span and the shortest frame: what
    /// [`see`](Self::see) tests against, for a writer that computes its
    /// words itself (`ptr_segs.rs`) and hands them to [`fold`](Self::fold).
    #[inline(always)]
    #[cfg_attr(
        not(all(target_arch = "x86_64", target_feature = "sse4.1")),
        allow(dead_code)
    )]
    pub(crate) fn bounds(&self) -> (u64, u64, u64) {
        (self.start, self.span, self.min)
    }

    /// ORs in what [`see`](Self::see) would have: the offsets' and the
    /// `bad` words of packets tested elsewhere.
    #[inline(always)]
    #[cfg_attr(
        not(all(target_arch = "x86_64", target_feature = "sse4.1")),
        allow(dead_code)
    )]
    pub(crate) fn fold(&mut self, offs: u64, bad: u64) {
        self.offs |= offs;
        self.bad |= bad;
    }

    /// Every packet seen lies inside and is long enough.
    #[inline(always)]
    pub(crate) fn ok(&self) -> bool {
        (self.bad >> 63) | (self.offs >> 62) == 0
    }
}

/// A WQE's place and size, for the doorbell after a list.
#[derive(Clone, Copy)]
pub(crate) struct Last {
    pub(crate) bb: u16,
    pub(crate) ds: u8,
}

/// The `fm_ce_se` of the next WQE: CQ_UPDATE on every `every`-th.
#[inline(always)]
pub(crate) fn next_fm(quiet: &mut u32, every: u32) -> u8 {
    *quiet += 1;
    if *quiet >= every {
        *quiet = 0;
        fm_ce_se::CQ_UPDATE
    } else {
        0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The check against the plain definition: `start <= addr`,
    /// `addr + len <= end`, `len >= 14`, on the edges and past them.
    #[test]
    fn src_check_is_inside_and_long_enough() {
        let (s, e) = (0x10_0000u64, 0x10_1000u64);
        let inside = |p: &RawPkt| {
            p.addr >= s && (p.addr as u128 + p.len as u128) <= e as u128 && p.len >= 14
        };
        let addrs = [
            0,
            s - 1,
            s,
            s + 1,
            e - 64,
            e - 14,
            e - 1,
            e,
            e + 1,
            u64::MAX - 4,
            u64::MAX,
        ];
        for addr in addrs {
            for len in [0, 13, 14, 15, 64, 0x1000, u32::MAX] {
                let p = RawPkt { addr, len };
                let mut c = SrcCheck::new((s, e), 14);
                c.see(&RawPkt { addr: s, len: 64 });
                c.see(&p);
                assert_eq!(c.ok(), inside(&p), "{p:?}");
            }
        }
        assert!(SrcCheck::new((s, e), 14).ok(), "an empty list passes");
        let mut none = SrcCheck::new((0, 0), 14);
        none.see(&RawPkt { addr: 0, len: 14 });
        assert!(!none.ok(), "no frame source: nothing passes");
        // Random packets around a source, against the definition.
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..200_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let addr = match x % 4 {
                0 => x >> 1,
                1 => s.wrapping_add((x >> 40) % 0x2000).wrapping_sub(0x800),
                2 => x,
                _ => e.wrapping_sub((x >> 44) % 0x40),
            };
            let p = RawPkt {
                addr,
                len: ((x >> 20) % 0x1100) as u32,
            };
            let mut c = SrcCheck::new((s, e), 14);
            c.see(&p);
            assert_eq!(c.ok(), inside(&p), "{p:?}");
        }
    }
}
