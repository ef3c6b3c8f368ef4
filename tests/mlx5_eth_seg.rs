//! The raw packet QP's Ethernet segment against rdma-core: `write_eth_seg`
//! vs `mlx5dv_set_eth_seg` (mlx5dv.h's static inline, wrapped by bindgen)
//! over random checksum flags, MSS and inline headers of 0 and 18 bytes, on
//! a segment libmlx5 zeroed first (`_mlx5_post_send` memsets it); the
//! struct's size through bindgen; a whole raw SEND WQE against rdma-core's
//! ctrl, Ethernet and data segment helpers over random frames and stamps;
//! and one around a frame from `raw::frame`.

use proptest::prelude::*;
use rdmaperf::mlx5::eth_seg::{self, RawSend, ETH_L2_INLINE_HEADER_SIZE, ETH_SEG_SIZE};
use rdmaperf::raw::frame::{self, FrameSpec};
use rdmaperf::sys;

proptest! {
    #[test]
    fn eth_seg_matches_mlx5dv_set_eth_seg(
        cs in any::<u8>(),
        mss in any::<u16>(),
        hdr in proptest::collection::vec(any::<u8>(), ETH_L2_INLINE_HEADER_SIZE),
        inline in prop_oneof![Just(0usize), Just(ETH_L2_INLINE_HEADER_SIZE)],
    ) {
        let mut c = [0u8; ETH_SEG_SIZE];
        let mut h = hdr.clone();
        // SAFETY: `c` is a zeroed buffer of the struct's size (checked below
        // against bindgen), `h` holds at least `inline` bytes.
        unsafe {
            sys::mlx5dv_set_eth_seg(c.as_mut_ptr().cast(), cs, mss, inline as u16, h.as_mut_ptr())
        };
        let mut ours = [0x5au8; ETH_SEG_SIZE];
        let n = eth_seg::write_eth_seg(&mut ours, cs, mss, &hdr[..inline]);
        prop_assert_eq!(&ours[..n], &c[..n]);
        prop_assert_eq!(n, eth_seg::eth_seg_len(inline));
    }
}

/// The raw SEND WQE as libmlx5 writes it, from rdma-core's helpers on a
/// zeroed WQEBB: ctrl (SEND), the Ethernet segment, the data segment.
fn c_raw_send(s: &RawSend, frame: &[u8]) -> [u8; 64] {
    #[repr(C, align(64))]
    struct Bb([u8; 64]);
    let mut w = Bb([0; 64]);
    let mut hdr = frame[..s.inline].to_vec();
    let at = 16 + eth_seg::eth_seg_len(s.inline);
    let ds = (at / 16 + 1) as u8;
    let p = w.0.as_mut_ptr();
    // SAFETY: each helper writes its struct (16, 32 or 16 bytes, sizes
    // checked against bindgen here and in tests/mlx5_seg.rs) inside the 64
    // bytes of `w`; `hdr` holds the `inline` bytes the Ethernet one copies.
    unsafe {
        sys::mlx5dv_set_ctrl_seg(p.cast(), s.wqe_index, 0x0a, 0, s.qpn, s.fm_ce_se, ds, 0, 0);
        sys::mlx5dv_set_eth_seg(
            p.add(16).cast(),
            s.cs_flags,
            0,
            s.inline as u16,
            hdr.as_mut_ptr(),
        );
        let rest = (frame.len() - s.inline) as u32;
        let addr = s.addr + s.inline as u64;
        sys::mlx5dv_set_data_seg(p.add(at).cast(), rest, s.lkey, addr as usize);
    }
    w.0
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn raw_send_wqe_matches_rdma_cores_helpers(
        frame in proptest::collection::vec(any::<u8>(), 18..=1514),
        inline in prop_oneof![Just(0usize), Just(ETH_L2_INLINE_HEADER_SIZE)],
        (wqe_index, qpn, fm_ce_se, cs_flags) in (any::<u16>(), 0..1u32 << 24, any::<u8>(), any::<u8>()),
        (lkey, addr) in (any::<u32>(), 0..u64::MAX - 2048),
        fill in any::<[u8; 64]>(),
    ) {
        let s = RawSend { wqe_index, qpn, fm_ce_se, cs_flags, inline, lkey, addr };
        let mut ours = fill;
        let ds = eth_seg::write_raw_send(&mut ours, &s, &frame) as usize;
        prop_assert_eq!(ds, if inline == 0 { 3 } else { 4 });
        let c = c_raw_send(&s, &frame);
        prop_assert_eq!(&ours[..16 * ds], &c[..16 * ds]);
        prop_assert_eq!(&ours[16 * ds..], &fill[16 * ds..], "nothing past ds");
    }
}

#[test]
fn eth_seg_size_matches_the_header() {
    assert_eq!(std::mem::size_of::<sys::mlx5_wqe_eth_seg>(), ETH_SEG_SIZE);
}

#[test]
fn raw_send_wqe_carries_perftests_frame() {
    let spec = FrameSpec::sample_udp4(64);
    let f = frame::frame(&spec, 0, 0, 1);
    let s = RawSend {
        wqe_index: 7,
        qpn: 0x42,
        fm_ce_se: 0x08,
        cs_flags: 0,
        inline: ETH_L2_INLINE_HEADER_SIZE,
        lkey: 3,
        addr: 0x10_0000,
    };
    let mut w = [0u8; 64];
    assert_eq!(eth_seg::write_raw_send(&mut w, &s, &f), 4);
    // The inline header is the frame's L2 header: dst MAC, src MAC, 0x0800, IPv4's first 4 bytes.
    assert_eq!(&w[30..42], &[2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1]);
    assert_eq!(&w[42..44], &[0x08, 0x00]);
    assert_eq!(&w[44..48], &f[14..18]);
    // The data segment points past it: 60 - 18 = 42 bytes at addr + 18.
    assert_eq!(u32::from_be_bytes(w[48..52].try_into().unwrap()), 42);
    assert_eq!(u64::from_be_bytes(w[56..64].try_into().unwrap()), 0x10_0012);
}
