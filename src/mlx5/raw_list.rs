//! What a raw packet post list is made of, shared by the per-packet SEND
//! path (`raw_sq.rs`) and the multi-packet one (`mpw.rs`): the packets, the
//! last WQE the doorbell names, and the sparse-completion stamp.

use super::prm::fm_ce_se;

/// One frame to send: `len` bytes (CRC excluded) at `addr`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RawPkt {
    pub addr: u64,
    pub len: u32,
}

/// Whether every packet of a list lies in the frame source and is long
/// enough, gathered while the list is written (branch-free: two maxima and a
/// minimum a packet) and judged once after it.
#[derive(Clone, Copy)]
pub(crate) struct SrcCheck {
    start: u64,
    span: u64,
    /// The largest offset of a packet from `start` (wrapping: one before
    /// `start` is huge).
    max_off: u64,
    /// The largest end offset; with `max_off <= span` no sum wrapped
    /// (`span` is below 2^63, a packet below 2^32 bytes).
    max_end: u64,
    min_len: u32,
}

impl SrcCheck {
    /// The frame source `start..end` (`end >= start`, from an allocation).
    #[inline(always)]
    pub(crate) fn new((start, end): (u64, u64)) -> Self {
        debug_assert!(end >= start && end - start < 1 << 63);
        Self {
            start,
            span: end.wrapping_sub(start) & ((1 << 63) - 1),
            max_off: 0,
            max_end: 0,
            min_len: u32::MAX,
        }
    }

    #[inline(always)]
    pub(crate) fn see(&mut self, p: &RawPkt) {
        let off = p.addr.wrapping_sub(self.start);
        self.max_off = self.max_off.max(off);
        self.max_end = self.max_end.max(off.wrapping_add(p.len as u64));
        self.min_len = self.min_len.min(p.len);
    }

    /// Every packet seen lies inside and is at least `min` bytes long.
    #[inline(always)]
    pub(crate) fn ok(&self, min: u32) -> bool {
        self.max_off <= self.span && self.max_end <= self.span && self.min_len >= min
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
                let mut c = SrcCheck::new((s, e));
                c.see(&RawPkt { addr: s, len: 64 });
                c.see(&p);
                assert_eq!(c.ok(14), inside(&p), "{p:?}");
            }
        }
        assert!(SrcCheck::new((s, e)).ok(14), "an empty list passes");
        let mut none = SrcCheck::new((0, 0));
        none.see(&RawPkt { addr: 0, len: 14 });
        assert!(!none.ok(14), "no frame source: nothing passes");
    }
}
