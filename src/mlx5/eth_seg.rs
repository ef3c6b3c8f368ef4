//! The Ethernet segment (`struct mlx5_wqe_eth_seg` in mlx5dv.h) and a raw
//! packet SEND WQE as libmlx5's `_mlx5_post_send` writes it for an
//! `IBV_QPT_RAW_PACKET` QP: a control segment (opcode SEND), the Ethernet
//! segment zeroed, its checksum flags, and the frame's first `inline` bytes
//! (the device's minimum inline: 0 or `MLX5_ETH_L2_INLINE_HEADER_SIZE`),
//! then one data segment for the rest of the frame. [`RawSendWords`] writes
//! it for `RawSq::post_send` as whole 16-byte units; [`write_eth_seg`] is
//! the general per-field encoder (any MSS, any inline length up to 18),
//! checked against rdma-core (docs/raw-ethernet.md).

use super::prm::Opcode;
#[cfg(doc)]
use super::seg::{CtrlSeg, DataSeg};
use super::segwr;

/// `MLX5_ETH_L2_INLINE_HEADER_SIZE`: the L2 header a ConnectX-4 Lx wants inline.
pub const ETH_L2_INLINE_HEADER_SIZE: usize = 18;
/// `sizeof(struct mlx5_wqe_eth_seg)`.
pub const ETH_SEG_SIZE: usize = 32;
/// `offsetof(struct mlx5_wqe_eth_seg, inline_hdr_start)`.
pub const INLINE_HDR_START: usize = 14;
/// `offsetof(struct mlx5_wqe_eth_seg, inline_hdr)`: the part always there.
pub const INLINE_HDR: usize = 16;
/// `MLX5_ETH_WQE_L3_CSUM`, `MLX5_ETH_WQE_L4_CSUM` (`IBV_SEND_IP_CSUM` sets both).
pub const CS_L3: u8 = 1 << 6;
pub const CS_L4: u8 = 1 << 7;

/// Bytes the Ethernet segment takes with `inline` header bytes, as libmlx5
/// advances past it: `(offsetof(inline_hdr) + inline) & ~0xf`.
pub const fn eth_seg_len(inline: usize) -> usize {
    (INLINE_HDR + inline) & !0xf
}

/// Writes the Ethernet segment at the start of `seg`: the fixed 16 bytes
/// zeroed, `cs_flags`, `mss` and `inline_hdr_sz` big-endian, and `inline`
/// from `inline_hdr_start` on (up to 18 bytes, the segment's room). Returns
/// the bytes it takes ([`eth_seg_len`]).
#[inline(always)]
pub fn write_eth_seg(seg: &mut [u8], cs_flags: u8, mss: u16, inline: &[u8]) -> usize {
    debug_assert!(inline.len() <= ETH_SEG_SIZE - INLINE_HDR_START);
    seg[..INLINE_HDR].fill(0);
    seg[4] = cs_flags;
    seg[6..8].copy_from_slice(&mss.to_be_bytes());
    seg[12..14].copy_from_slice(&(inline.len() as u16).to_be_bytes());
    seg[INLINE_HDR_START..INLINE_HDR_START + inline.len()].copy_from_slice(inline);
    eth_seg_len(inline.len())
}

/// One raw packet SEND: where the frame is and how the WQE is stamped.
#[derive(Clone, Copy, Debug)]
pub struct RawSend {
    pub wqe_index: u16,
    pub qpn: u32,
    pub fm_ce_se: u8,
    pub cs_flags: u8,
    /// The device's minimum inline header: 0 or [`ETH_L2_INLINE_HEADER_SIZE`].
    pub inline: usize,
    pub lkey: u32,
    /// The frame's address (registered under `lkey`).
    pub addr: u64,
}

/// What every raw SEND of a post list shares, as native-endian store
/// words of its 16-byte units (built once per list): the WQE is then a few
/// ORs per frame and whole-unit stores (`segwr`: one 16-byte store per
/// unit with SSSE3, two 8-byte ones otherwise), the inline header a
/// fixed-length copy. The bytes are those of the per-field encoders
/// ([`CtrlSeg::new`], [`write_eth_seg`], [`DataSeg::new`]); the tests
/// compare the two over random WQEs.
#[derive(Clone, Copy, Debug)]
pub struct RawSendWords {
    /// Ctrl bytes 0..8 without the WQE index: opmod 0, SEND, qpn, ds.
    ctrl0: u64,
    /// Ethernet segment bytes 0..8 (`cs_flags`; mss 0) and 8..16 without
    /// the first two header bytes (`inline_hdr_sz`).
    eth0: u64,
    eth1: u64,
    /// Data segment bytes 4..8 (`BE32(lkey)`) in place.
    lkey: u64,
    /// 0 or [`ETH_L2_INLINE_HEADER_SIZE`].
    inline: u32,
    ds: u8,
}

// The store words below are little-endian layouts (as `sq.rs`'s).
const _: () = assert!(cfg!(target_endian = "little"));

impl RawSendWords {
    /// `inline` must be 0 or [`ETH_L2_INLINE_HEADER_SIZE`] (the SQ checks
    /// its configuration); anything else counts as 0 here.
    #[inline(always)]
    pub const fn new(qpn: u32, cs_flags: u8, inline: usize, lkey: u32) -> Self {
        let inline = if inline == ETH_L2_INLINE_HEADER_SIZE {
            ETH_L2_INLINE_HEADER_SIZE
        } else {
            0
        };
        // ctrl + eth (1 or 2 units) + data.
        let ds = ((16 + eth_seg_len(inline) + 16) / 16) as u8;
        let be0 = ((Opcode::SEND.0 as u64) << 32) | (((qpn & 0x00ff_ffff) as u64) << 8) | ds as u64;
        let sz = (inline as u16).to_be_bytes();
        Self {
            ctrl0: be0.swap_bytes(),
            eth0: u64::from_ne_bytes([0, 0, 0, 0, cs_flags, 0, 0, 0]),
            eth1: u64::from_ne_bytes([0, 0, 0, 0, sz[0], sz[1], 0, 0]),
            lkey: (lkey.swap_bytes() as u64) << 32,
            inline: inline as u32,
            ds,
        }
    }

    /// The WQE's size in 16-byte units: 4 with the inline header, 3 without.
    #[inline(always)]
    pub const fn ds(&self) -> u8 {
        self.ds
    }

    /// Writes the SEND WQE for the `len`-byte frame whose bytes the CPU
    /// reads at `src` and the NIC at `addr` (the same frame: one pointer
    /// in a post) into the WQEBB at `dst`, as WQE `wqe_index` with
    /// `fm_ce_se`; returns its `ds`.
    ///
    /// # Safety
    /// `dst` is 64 writable bytes, 64-byte aligned (one WQEBB); `len` is at
    /// least the inline header; with it, `src` is readable for its 18
    /// bytes, outside `dst`'s WQEBB.
    #[inline(always)]
    pub unsafe fn put(
        &self,
        dst: *mut u8,
        (wqe_index, fm_ce_se): (u16, u8),
        src: *const u8,
        addr: u64,
        len: u32,
    ) -> u8 {
        let c0 = self.ctrl0 | ((wqe_index.swap_bytes() as u64) << 8);
        let c1 = (fm_ce_se as u64) << 24;
        let d0 = self.lkey | len.wrapping_sub(self.inline).swap_bytes() as u64;
        let d1 = addr.wrapping_add(self.inline as u64).swap_bytes();
        // dst is one aligned WQEBB (caller): units at 0, 16, 32 and 48 are
        // inside it and 16-byte aligned. With the inline header the frame
        // holds at least its 18 bytes (caller), read as bytes 0..2 and 2..18.
        // SAFETY: both bounds above hold for every store and load below.
        unsafe {
            segwr::ctrl(dst, c0, c1);
            if self.inline != 0 {
                let h = (src.cast::<u16>().read_unaligned() as u64) << 48;
                segwr::ctrl(dst.add(16), self.eth0, self.eth1 | h);
                segwr::copy16(dst.add(32), src.add(2));
                segwr::ctrl(dst.add(48), d0, d1);
            } else {
                segwr::ctrl(dst.add(16), self.eth0, self.eth1);
                segwr::ctrl(dst.add(32), d0, d1);
            }
        }
        self.ds
    }
}

/// Writes ctrl + Ethernet + data segments for `frame` (the bytes at
/// `s.addr`, CRC excluded) into one 64-byte WQEBB with
/// [`RawSendWords::put`]; returns the WQE's size in 16-byte units (`ds`):
/// 4 with an 18-byte inline header, 3 without. Units past `ds` are left as
/// they were.
///
/// # Panics
/// When `s.inline` is neither 0 nor 18, or `frame` is shorter than it.
pub fn write_raw_send(wqe: &mut [u8; 64], s: &RawSend, frame: &[u8]) -> u8 {
    #[repr(C, align(64))]
    struct Bb([u8; 64]);
    assert!(s.inline == 0 || s.inline == ETH_L2_INLINE_HEADER_SIZE);
    assert!(frame.len() >= s.inline && frame.len() <= u32::MAX as usize);
    let w = RawSendWords::new(s.qpn, s.cs_flags, s.inline, s.lkey);
    let mut bb = Bb(*wqe);
    let stamp = (s.wqe_index, s.fm_ce_se);
    // SAFETY: bb is one aligned WQEBB, not `frame`'s memory; `frame` holds
    // at least the inline header (checked).
    let ds = unsafe {
        w.put(
            bb.0.as_mut_ptr(),
            stamp,
            frame.as_ptr(),
            s.addr,
            frame.len() as u32,
        )
    };
    *wqe = bb.0;
    ds
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mlx5::seg::{CtrlSeg, DataSeg};
    use proptest::prelude::*;

    /// The per-field writer `write_raw_send` was before [`RawSendWords`]
    /// (byte and 16-bit stores, a zero fill, a run-time-length copy): the
    /// reference the whole-unit writer must match byte for byte.
    fn write_raw_send_fields(wqe: &mut [u8; 64], s: &RawSend, frame: &[u8]) -> u8 {
        let eth = write_eth_seg(&mut wqe[16..], s.cs_flags, 0, &frame[..s.inline]);
        let at = 16 + eth;
        let rest = (frame.len() - s.inline) as u32;
        wqe[at..at + 16]
            .copy_from_slice(&DataSeg::new(rest, s.lkey, s.addr + s.inline as u64).to_bytes());
        let ds = ((at + 16) / 16) as u8;
        let ctrl = CtrlSeg::new(
            s.wqe_index,
            Opcode::SEND,
            0,
            s.qpn,
            s.fm_ce_se,
            ds,
            0,
            [0; 4],
        );
        wqe[..16].copy_from_slice(&ctrl.to_bytes());
        ds
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(3000))]

        #[test]
        fn whole_unit_writer_matches_the_per_field_one(
            frame in proptest::collection::vec(any::<u8>(), 18..=1514),
            cut in any::<prop::sample::Index>(),
            inline in prop_oneof![Just(0usize), Just(ETH_L2_INLINE_HEADER_SIZE)],
            (wqe_index, qpn, fm_ce_se, cs_flags) in (any::<u16>(), any::<u32>(), any::<u8>(), any::<u8>()),
            (lkey, addr) in (any::<u32>(), 0..u64::MAX - 2048),
            fill in any::<[u8; 64]>(),
        ) {
            // Any frame length from the inline header up (0 without it).
            let frame = &frame[..inline + cut.index(frame.len() - inline + 1)];
            let s = RawSend { wqe_index, qpn, fm_ce_se, cs_flags, inline, lkey, addr };
            let (mut new, mut old) = (fill, fill);
            let ds = write_raw_send(&mut new, &s, frame);
            prop_assert_eq!(ds, write_raw_send_fields(&mut old, &s, frame));
            prop_assert_eq!(ds, RawSendWords::new(qpn, cs_flags, inline, lkey).ds());
            prop_assert_eq!(new, old);
        }
    }

    #[test]
    fn segment_lengths_follow_libmlx5() {
        assert_eq!(eth_seg_len(0), 16);
        assert_eq!(eth_seg_len(ETH_L2_INLINE_HEADER_SIZE), ETH_SEG_SIZE);
    }

    #[test]
    fn a_64_byte_frame_fits_one_wqebb() {
        let frame: Vec<u8> = (0..60).collect();
        let s = RawSend {
            wqe_index: 0x1234,
            qpn: 0xabcdef,
            fm_ce_se: 0x08,
            cs_flags: CS_L3 | CS_L4,
            inline: ETH_L2_INLINE_HEADER_SIZE,
            lkey: 0x1111_2222,
            addr: 0x1000,
        };
        let mut w = [0xaau8; 64];
        assert_eq!(write_raw_send(&mut w, &s, &frame), 4);
        // ctrl: opmod 0, index, SEND; qpn, ds 4; fm_ce_se.
        assert_eq!(&w[0..8], &[0x00, 0x12, 0x34, 0x0a, 0xab, 0xcd, 0xef, 0x04]);
        assert_eq!(w[11], 0x08);
        // eth: cs_flags, mss 0, inline_hdr_sz 18, then the frame's first 18 bytes.
        assert_eq!(&w[16..30], &[0, 0, 0, 0, 0xc0, 0, 0, 0, 0, 0, 0, 0, 0, 18]);
        assert_eq!(&w[30..48], &frame[..18]);
        // data: the other 42 bytes, from addr + 18.
        assert_eq!(&w[48..56], &[0, 0, 0, 42, 0x11, 0x11, 0x22, 0x22]);
        assert_eq!(u64::from_be_bytes(w[56..64].try_into().unwrap()), 0x1012);
    }

    #[test]
    fn without_inline_the_data_segment_takes_the_whole_frame() {
        let frame = [7u8; 1514];
        let s = RawSend {
            wqe_index: 1,
            qpn: 5,
            fm_ce_se: 0,
            cs_flags: 0,
            inline: 0,
            lkey: 9,
            addr: 0x2000,
        };
        let mut w = [0xaau8; 64];
        assert_eq!(write_raw_send(&mut w, &s, &frame), 3);
        assert_eq!(&w[16..32], &[0; 16]);
        assert_eq!(&w[32..36], &1514u32.to_be_bytes());
        assert_eq!(u64::from_be_bytes(w[40..48].try_into().unwrap()), 0x2000);
        assert_eq!(&w[48..], &[0xaa; 16], "nothing past ds 3");
    }
}
