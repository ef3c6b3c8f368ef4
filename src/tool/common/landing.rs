//! Where the client's data must land in the server's buffer (perftest's
//! geometry), and the check an rdmaperf server can run after a write test.

use crate::run::geometry::Geometry;
use std::ops::Range;

/// The byte an rdmaperf client puts at offset `i` of its send buffer: a
/// position-dependent pattern, so a write that lands at the wrong offset is caught.
#[inline]
pub fn pattern_byte(i: u64) -> u8 {
    (i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as u8 ^ (i as u8)
}

/// Fill `buf` with the pattern (offsets relative to the buffer start).
pub fn fill_pattern(buf: &mut [u8]) {
    for (i, b) in buf.iter_mut().enumerate() {
        *b = pattern_byte(i as u64);
    }
}

/// Fill each `slot`-byte QP region of `half` with the pattern, from the
/// region's own start (the frame the receiving side checks in).
pub fn fill_regions(half: &mut [u8], slot: usize) {
    for region in half.chunks_mut(slot.max(1)) {
        fill_pattern(region);
    }
}

/// Result of checking one QP's receive region.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Landing {
    /// Slots (positions) that must have been written.
    pub slots: u64,
    /// Slots that hold non-zero data.
    pub written: u64,
    /// Slots whose bytes equal the rdmaperf pattern at the same offset.
    pub pattern: u64,
    /// Bytes between slots that were touched (must stay zero).
    pub stray_bytes: u64,
}

impl Landing {
    pub fn ok(&self) -> bool {
        self.written == self.slots && self.stray_bytes == 0
    }
}

/// The message positions of a region of `len` bytes after `messages`
/// messages of geometry `g`: each position's payload bytes and the gap after
/// it, which must stay zero (to the next position; after the last one, to the
/// cycle buffer's end). Stops at a position whose payload would not fit.
pub fn spans(
    len: usize,
    g: &Geometry,
    messages: u64,
) -> impl Iterator<Item = (Range<usize>, Range<usize>)> {
    let slots = g.positions().min(messages.max(1)) as usize;
    let (step, size, cb) = (g.step() as usize, g.size as usize, g.cycle_buffer as usize);
    (0..slots)
        .map(move |k| {
            let at = k * step;
            let gap_end = if k + 1 == slots {
                len.min(cb)
            } else {
                at + step
            };
            (
                at..at + size,
                at + size..gap_end.clamp(at + size, len.max(at + size)),
            )
        })
        .take_while(move |(data, _)| data.end <= len)
}

/// Check a (zero-initialised) receive region after `messages` writes of `g.size`
/// bytes by one QP.
pub fn check(region: &[u8], g: &Geometry, messages: u64) -> Landing {
    let mut l = Landing {
        slots: g.positions().min(messages.max(1)),
        written: 0,
        pattern: 0,
        stray_bytes: 0,
    };
    for (data, gap) in spans(region.len(), g, messages) {
        let at = data.start;
        let data = &region[data];
        if data.iter().any(|&b| b != 0) {
            l.written += 1;
        }
        if data
            .iter()
            .enumerate()
            .all(|(i, &b)| b == pattern_byte((at + i) as u64))
        {
            l.pattern += 1;
        }
        l.stray_bytes += region[gap].iter().filter(|&&b| b != 0).count() as u64;
    }
    l
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write_like_perftest(region: &mut [u8], src: &[u8], g: &Geometry, n: u64) {
        for k in 0..n {
            let off = g.post_offset(k) as usize;
            region[off..off + g.size as usize].copy_from_slice(&src[off..off + g.size as usize]);
        }
    }

    /// A 4 KiB sender buffer with the pattern, and an empty receiver region.
    fn patterned() -> (Vec<u8>, Vec<u8>) {
        let mut src = vec![0u8; 4096];
        fill_pattern(&mut src);
        (src, vec![0u8; 4096])
    }

    #[test]
    fn correct_geometry_passes_and_matches_pattern() {
        let g = Geometry::new(64, 4096, 64, 1);
        let (src, mut region) = patterned();
        write_like_perftest(&mut region, &src, &g, 1000);
        let l = check(&region, &g, 1000);
        assert!(l.ok(), "{l:?}");
        assert_eq!((l.slots, l.written, l.pattern), (64, 64, 64));
    }

    #[test]
    fn wrong_stride_is_caught() {
        let g = Geometry::new(64, 4096, 64, 1);
        let (src, mut region) = patterned();
        // A peer that steps by 128 B instead of INC(64, 64) = 64 B.
        for k in 0..32usize {
            region[k * 128..k * 128 + 64].copy_from_slice(&src[k * 128..k * 128 + 64]);
        }
        let l = check(&region, &g, 1000);
        assert!(!l.ok(), "{l:?}");
    }

    #[test]
    fn random_data_is_written_but_not_pattern() {
        let g = Geometry::new(100, 4096, 64, 1);
        let mut region = vec![0u8; 4096];
        let src: Vec<u8> = (0..4096u32)
            .map(|i| (i.wrapping_mul(2654435761) >> 13) as u8 | 1)
            .collect();
        write_like_perftest(&mut region, &src, &g, 500);
        let l = check(&region, &g, 500);
        assert!(l.ok(), "{l:?}");
        assert_eq!(l.pattern, 0);
        assert_eq!(l.slots, 4096 / 128);
    }
}
