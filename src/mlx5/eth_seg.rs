//! The Ethernet segment (`struct mlx5_wqe_eth_seg` in mlx5dv.h) and a raw
//! packet SEND WQE as libmlx5's `_mlx5_post_send` writes it for an
//! `IBV_QPT_RAW_PACKET` QP: a control segment (opcode SEND), the Ethernet
//! segment zeroed, its checksum flags, and the frame's first `inline` bytes
//! (the device's minimum inline: 0 or `MLX5_ETH_L2_INLINE_HEADER_SIZE`),
//! then one data segment for the rest of the frame. Not wired into a post
//! path yet (docs/raw-ethernet.md).

use super::prm::Opcode;
use super::seg::{CtrlSeg, DataSeg};

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

/// Writes ctrl + Ethernet + data segments for `frame` (the bytes at
/// `s.addr`, CRC excluded) into one 64-byte WQEBB; returns the WQE's size in
/// 16-byte units (`ds`): 4 with an 18-byte inline header, 3 without.
#[inline(always)]
pub fn write_raw_send(wqe: &mut [u8; 64], s: &RawSend, frame: &[u8]) -> u8 {
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

#[cfg(test)]
mod tests {
    use super::*;

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
