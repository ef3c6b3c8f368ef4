//! Where the sender's frames lie in its buffer, as perftest lays them out
//! (perftest_resources.c `alloc_ctx`, raw_ethernet_resources.c
//! `create_raw_eth_pkt`, `increase_loc_addr`): one region per flow of
//! `INC(max(size, cycle buffer), cache line)` bytes, the frame written at
//! each cache-line-aligned slot of the region, and the sender moving from
//! slot to slot (`post_list` 1) and from flow to flow every
//! `--flows_burst` packets. Pure: no I/O, the buffer is handed in.

use super::frame::{self, FrameSpec};

/// perftest's cache line (`ctx->cache_line_size` where sysfs is silent).
pub const CACHE_LINE: u64 = 64;

/// `INC(x, a)`: `x` rounded up to a multiple of `a`.
pub const fn inc(x: u64, a: u64) -> u64 {
    x.div_ceil(a) * a
}

/// The geometry of one QP's send buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slots {
    /// Bytes handed to the NIC per frame (`-s` less the CRC).
    pub frame_len: u32,
    /// From one slot to the next (`INC(size, cache line)`).
    pub stride: u64,
    /// Slots the sender cycles through in a flow's region.
    pub positions: u64,
    /// One flow's region (`flow_buff_size`).
    pub flow_bytes: u64,
    pub flows: u64,
    pub flows_burst: u64,
    pub post_list: u64,
}

impl Slots {
    /// perftest's layout for `-s size` (CRC counted), `--flows`,
    /// `--flows_burst`, `-l` and the cycle buffer (the page size).
    pub fn new(size: u64, flows: u16, flows_burst: u16, post_list: u32, cycle: u64) -> Self {
        let stride = inc(size, CACHE_LINE);
        let flow_bytes = inc(size.max(cycle), CACHE_LINE);
        // increase_loc_addr cycles only when a message fits twice in the
        // cycle buffer; otherwise every post reuses the region's start.
        let positions = if size <= cycle / 2 {
            (cycle / stride).max(1)
        } else {
            1
        };
        Self {
            frame_len: (size as usize - frame::CRC) as u32,
            stride,
            positions,
            flow_bytes,
            flows: flows.max(1) as u64,
            flows_burst: flows_burst.max(1) as u64,
            post_list: post_list.max(1) as u64,
        }
    }

    /// The buffer's size: every flow's region.
    pub fn buffer_len(&self) -> usize {
        (self.flow_bytes * self.flows) as usize
    }

    /// The flow packet `k` (0-based, this QP) belongs to.
    #[inline(always)]
    pub fn flow_of(&self, k: u64) -> u64 {
        (k / self.flows_burst) % self.flows
    }

    /// Offset of packet `k` from the buffer's start: its flow's region, and
    /// its slot there (the `j`-th of a list of `post_list` > 1 keeps slot `j`).
    #[inline(always)]
    pub fn offset(&self, k: u64) -> u64 {
        let slot = if self.post_list == 1 {
            k % self.positions
        } else {
            (k % self.post_list) % self.positions
        };
        self.flow_of(k) * self.flow_bytes + slot * self.stride
    }

    /// Slots whole inside one flow's region (`create_raw_eth_pkt` fills these).
    pub fn slots_per_flow(&self) -> u64 {
        self.flow_bytes / self.stride
    }
}

/// What fills the buffer under the headers: the frames' payload.
#[derive(Clone, Copy, Debug)]
pub enum Body<'a> {
    /// `perftest_rand` words from this seed (perftest's default).
    Rand(u32),
    /// `--payload_file_path`'s pattern, repeated from the buffer's start
    /// (perftest's `buf[i] = payload[i % len]`), so a frame's payload byte
    /// at buffer offset `o` is `pattern[o % len]`.
    Pattern(&'a [u8]),
}

/// perftest's buffer: `perftest_rand` words from `seed` over all of it,
/// then flow `f`'s headers at each slot of its region.
pub fn fill(buf: &mut [u8], spec: &FrameSpec, s: &Slots, seed: u32) {
    fill_body(buf, spec, s, Body::Rand(seed));
}

/// [`fill`] with the payload `body` (perftest fills the whole buffer, then
/// writes each slot's headers over it: `create_mr`, `create_raw_eth_pkt`).
pub fn fill_body(buf: &mut [u8], spec: &FrameSpec, s: &Slots, body: Body) {
    match body {
        Body::Rand(seed) => frame::fill_rand(buf, seed),
        Body::Pattern(pat) => {
            for (b, v) in buf.iter_mut().zip(pat.iter().cycle()) {
                *b = *v;
            }
        }
    }
    let mut built = 0u64;
    for f in 0..s.flows {
        for i in 0..s.slots_per_flow() {
            let at = (f * s.flow_bytes + i * s.stride) as usize;
            let end = at + s.frame_len as usize;
            if end > buf.len() {
                return;
            }
            frame::write_headers(spec, f as u16, built, &mut buf[at..end]);
            built += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perftests_geometry() {
        let s = Slots::new(64, 1, 1, 1, 4096);
        assert_eq!((s.stride, s.positions, s.flow_bytes), (64, 64, 4096));
        let s = Slots::new(1518, 1, 1, 1, 4096);
        assert_eq!((s.stride, s.positions, s.flow_bytes), (1536, 2, 4096));
        assert_eq!(s.slots_per_flow(), 2);
        let s = Slots::new(9000, 2, 1, 1, 4096);
        assert_eq!(
            (s.positions, s.flow_bytes, s.buffer_len()),
            (1, 9024, 18048)
        );
    }

    #[test]
    fn packets_walk_slots_and_flows() {
        let s = Slots::new(1518, 3, 2, 1, 4096);
        let offs: Vec<u64> = (0..8).map(|k| s.offset(k)).collect();
        assert_eq!(
            offs,
            [0, 1536, 4096, 4096 + 1536, 8192, 8192 + 1536, 0, 1536]
        );
        let l = Slots::new(64, 1, 1, 4, 4096);
        assert_eq!(
            (0..6).map(|k| l.offset(k)).collect::<Vec<_>>(),
            [0, 64, 128, 192, 0, 64]
        );
    }

    #[test]
    fn every_slot_holds_its_flows_frame() {
        let sp = FrameSpec::sample_udp4(128);
        let s = Slots::new(128, 2, 1, 1, 4096);
        let mut buf = vec![0u8; s.buffer_len()];
        fill(&mut buf, &sp, &s, 7);
        let hl = sp.header_len();
        for k in 0..200 {
            let at = s.offset(k) as usize;
            let want = frame::frame(&sp, s.flow_of(k) as u16, 0, 1);
            assert_eq!(&buf[at..at + hl], &want[..hl], "packet {k}");
        }
        let mut rand = vec![0u8; s.buffer_len()];
        frame::fill_rand(&mut rand, 7);
        assert_eq!(
            &buf[hl..128 - 4],
            &rand[hl..128 - 4],
            "payload is perftest_rand's"
        );
    }

    #[test]
    fn a_pattern_repeats_from_the_buffer_start_under_the_headers() {
        let sp = FrameSpec::sample_udp4(128);
        let s = Slots::new(128, 2, 1, 1, 4096);
        let pat = [1u8, 2, 3, 4, 5];
        let mut buf = vec![0u8; s.buffer_len()];
        fill_body(&mut buf, &sp, &s, Body::Pattern(&pat));
        let hl = sp.header_len();
        for k in 0..100 {
            let at = s.offset(k) as usize;
            let want = frame::frame(&sp, s.flow_of(k) as u16, 0, 1);
            assert_eq!(&buf[at..at + hl], &want[..hl], "packet {k}");
            for o in at + hl..at + s.frame_len as usize {
                assert_eq!(buf[o], pat[o % pat.len()], "packet {k} byte {}", o - at);
            }
        }
    }
}
