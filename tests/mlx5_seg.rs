//! Byte-exact checks of the mlx5 segment encoders against rdma-core:
//! - ctrl, data and datagram segments vs `mlx5dv_set_*_seg` (through the
//!   bindgen-wrapped static inlines in `rdmaperf::sys`) and the SSE variants
//!   (vendor/mlx5_oracle.c), property-tested over random field values;
//! - raddr, atomic and inline segments vs the golden vectors in
//!   mlx5-direct.md §2.3/§2.5 (rdma-core has no helper for them);
//! - sizes and offsets of every mirrored struct vs the C headers;
//! - whole WQEs as the direct SQ writes them into a ring in plain memory.

use std::ffi::{c_char, c_int, CStr};
use std::mem::{offset_of, size_of};

use proptest::prelude::*;
use rdmaperf::mlx5::prm::{fm_ce_se, Opcode};
use rdmaperf::mlx5::seg::{
    AtomicSeg, Cqe64, CtrlSeg, DataSeg, DatagramSeg, ErrCqe, InlineHdr, RaddrSeg,
};
use rdmaperf::mlx5::wqe::{SqRing, WqeCursor};
use rdmaperf::mlx5::{DirectSq, HwMmio, Transport};
use rdmaperf::post::{Op, PostError, SendQueue, WrDesc};
use rdmaperf::sys;

extern "C" {
    fn rdmaperf_oracle_have_x86() -> c_int;
    #[allow(clippy::too_many_arguments)]
    fn rdmaperf_oracle_x86_set_ctrl_seg(
        seg: *mut u8,
        pi: u16,
        opcode: u8,
        opmod: u8,
        qp_num: u32,
        fm_ce_se: u8,
        ds: u8,
        signature: u8,
        imm: u32,
    );
    fn rdmaperf_oracle_x86_set_data_seg(seg: *mut u8, length: u32, lkey: u32, address: u64);
    fn rdmaperf_oracle_layout(i: usize, name: *mut *const c_char, value: *mut usize) -> c_int;
}

fn have_x86() -> bool {
    // SAFETY: a plain query function of our C glue.
    unsafe { rdmaperf_oracle_have_x86() != 0 }
}

#[allow(clippy::too_many_arguments)]
fn c_ctrl(
    fill: u8,
    pi: u16,
    op: u8,
    opmod: u8,
    qpn: u32,
    fm: u8,
    ds: u8,
    sig: u8,
    imm: u32,
) -> [u8; 16] {
    let mut b = [fill; 16];
    // SAFETY: b is 16 writable bytes; the opaque bindgen type is the C struct
    // (packed, 16 bytes) and the helper writes only inside it.
    unsafe {
        sys::mlx5dv_set_ctrl_seg(
            b.as_mut_ptr().cast::<sys::mlx5_wqe_ctrl_seg>(),
            pi,
            op,
            opmod,
            qpn,
            fm,
            ds,
            sig,
            imm,
        )
    };
    b
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn ctrl_seg_matches_mlx5dv_set_ctrl_seg(
        pi in any::<u16>(), op in any::<u8>(), opmod in any::<u8>(), qpn in any::<u32>(),
        fm in any::<u8>(), ds in any::<u8>(), sig in any::<u8>(), imm in any::<[u8; 4]>(),
        fill in any::<u8>(),
    ) {
        let ours = CtrlSeg::new(pi, Opcode(op), opmod, qpn, fm, ds, sig, imm).to_bytes();
        let imm_c = u32::from_ne_bytes(imm);
        // From zeroed memory the bytes are identical (the C helper leaves the
        // DCI stream id, bytes 9..11, alone; libmlx5 zeroes it first, so do we).
        prop_assert_eq!(ours, c_ctrl(0, pi, op, opmod, qpn, fm, ds, sig, imm_c));
        // Over garbage, every byte the helper writes must still agree.
        let c = c_ctrl(fill, pi, op, opmod, qpn, fm, ds, sig, imm_c);
        prop_assert_eq!(&ours[..9], &c[..9]);
        prop_assert_eq!(&ours[11..], &c[11..]);
        prop_assert_eq!(&c[9..11], &[fill, fill][..]);
        if have_x86() {
            let mut a = Aligned([fill; 16]);
            // SAFETY: a.0 is 16 writable bytes, 16-byte aligned as the SSE
            // helper's aligned store requires; SSSE3 support was checked.
            unsafe {
                rdmaperf_oracle_x86_set_ctrl_seg(a.0.as_mut_ptr(), pi, op, opmod, qpn, fm, ds, sig, imm_c)
            };
            prop_assert_eq!(ours, a.0);
        }
    }

    #[test]
    fn data_seg_matches_mlx5dv_set_data_seg(len in any::<u32>(), lkey in any::<u32>(), addr in any::<u64>()) {
        let ours = DataSeg::new(len, lkey, addr).to_bytes();
        let mut c = Aligned([0xa5; 16]);
        // SAFETY: 16 writable bytes laid out as the C struct.
        unsafe { sys::mlx5dv_set_data_seg(c.0.as_mut_ptr().cast(), len, lkey, addr as usize) };
        prop_assert_eq!(ours, c.0);
        if have_x86() {
            let mut x = Aligned([0x5a; 16]);
            // SAFETY: 16 writable, 16-byte aligned bytes; SSSE3 checked.
            unsafe { rdmaperf_oracle_x86_set_data_seg(x.0.as_mut_ptr(), len, lkey, addr) };
            prop_assert_eq!(ours, x.0);
        }
    }

    #[test]
    fn dgram_seg_matches_mlx5dv_set_dgram_seg(
        key in any::<u64>(), dqp in any::<u32>(), ext in any::<u8>(), srsl in any::<u8>(),
        flm in any::<u8>(), rlid in any::<u16>(), rmac in any::<[u8; 6]>(), tclass in any::<u8>(),
        hop in any::<u8>(), gfl in any::<u32>(), rgid in any::<[u8; 16]>(),
    ) {
        let ours = DatagramSeg::new(key, dqp, ext, srsl, flm, rlid, rmac, tclass, hop, gfl, rgid).to_bytes();
        let mut c = [0u8; 48];
        let (mut m, mut g) = (rmac, rgid);
        // SAFETY: 48 writable bytes laid out as the C struct; rmac/rgid point
        // to 6 and 16 readable bytes.
        unsafe {
            sys::mlx5dv_set_dgram_seg(c.as_mut_ptr().cast(), key, dqp, ext, srsl, flm, rlid,
                m.as_mut_ptr(), tclass, hop, gfl, g.as_mut_ptr())
        };
        prop_assert_eq!(&ours[..], &c[..]);
    }
}

#[repr(C, align(16))]
struct Aligned([u8; 16]);

#[test]
fn sse_oracle_is_available() {
    if !have_x86() {
        println!("SKIPPED: the SSE variants of the mlx5dv helpers need x86-64 with SSSE3");
        return;
    }
    let mut a = Aligned([0; 16]);
    // SAFETY: 16 writable, aligned bytes; SSSE3 checked.
    unsafe {
        rdmaperf_oracle_x86_set_ctrl_seg(a.0.as_mut_ptr(), 0x1234, 0x08, 0, 0xabcd, 0x08, 3, 0, 0)
    };
    assert_eq!(
        a.0,
        [0, 0x12, 0x34, 0x08, 0, 0xab, 0xcd, 3, 0, 0, 0, 0x08, 0, 0, 0, 0]
    );
}

#[test]
fn raddr_atomic_inline_golden_vectors() {
    // mlx5-direct.md §2.5 (RDMA_WRITE example).
    assert_eq!(
        RaddrSeg::new(0x7f00_1122_3344, 0x5566_7788).to_bytes(),
        [0, 0, 0x7f, 0, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0, 0, 0, 0]
    );
    assert_eq!(
        DataSeg::new(4096, 0x99aa_bbcc, 0x7f00_dead_beef).to_bytes(),
        [0, 0, 0x10, 0, 0x99, 0xaa, 0xbb, 0xcc, 0, 0, 0x7f, 0, 0xde, 0xad, 0xbe, 0xef]
    );
    // §2.3: atomic operands big-endian, swap_add then compare.
    assert_eq!(
        AtomicSeg::cmp_swap(0x0102_0304_0506_0708, 0x1112_1314_1516_1718).to_bytes(),
        [1, 2, 3, 4, 5, 6, 7, 8, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18]
    );
    assert_eq!(
        AtomicSeg::fetch_add(0xff).to_bytes(),
        [0, 0, 0, 0, 0, 0, 0, 0xff, 0, 0, 0, 0, 0, 0, 0, 0]
    );
    assert_eq!(InlineHdr::new(5).to_bytes(), [0x80, 0, 0, 5]);
}

#[test]
fn send_imm_inline_golden_vector_across_the_ring_end() {
    // §2.5: SEND_IMM inline "hello" pi=0xffff qpn=0x123 ds=2
    // CQ_UPDATE|SOLICITED|FENCE imm=htobe32(0xcafef00d).
    let ctrl = CtrlSeg::new(
        0xffff,
        Opcode::SEND_IMM,
        0,
        0x123,
        fm_ce_se::CQ_UPDATE | fm_ce_se::SOLICITED | fm_ce_se::FENCE,
        2,
        0,
        0xcafe_f00du32.to_be_bytes(),
    );
    assert_eq!(
        ctrl.to_bytes(),
        [0, 0xff, 0xff, 0x0b, 0, 0x01, 0x23, 0x02, 0, 0, 0, 0x8a, 0xca, 0xfe, 0xf0, 0x0d]
    );
    // Same WQE written through the cursor: pi 0xffff is the last WQEBB of a
    // 4-WQEBB ring; 48 bytes of inline payload run past the end and wrap.
    let mut ring = Ring::<4>::new();
    // SAFETY: the ring is 4 · 64 bytes, 4096-aligned, owned by this test.
    let sq_ring = unsafe { SqRing::new(ring.ptr(), 4) };
    let payload: Vec<u8> = (0u8..48).collect();
    // SAFETY: the test owns the whole ring; payload is readable.
    unsafe {
        let mut c = WqeCursor::new(&sq_ring, 0xffff);
        c.put16(ctrl.to_bytes());
        c.put_inline(payload.as_ptr(), payload.len());
        c.put16([0xee; 16]); // the next unit lands after the padded segment
    }
    let b = ring.bytes();
    assert_eq!(&b[192..208], &ctrl.to_bytes());
    assert_eq!(&b[208..212], &[0x80, 0, 0, 48]);
    assert_eq!(&b[212..256], &payload[..44]);
    assert_eq!(&b[0..4], &payload[44..]);
    // 4 + 48 = 52 bytes -> 4 units: 208..256 and 0..16; next unit at 16.
    assert_eq!(&b[16..32], &[0xee; 16]);
}

#[repr(C, align(4096))]
struct Ring<const N: usize>([[u8; 64]; N]);
impl<const N: usize> Ring<N> {
    fn new() -> Box<Self> {
        Box::new(Self([[0; 64]; N]))
    }
    fn ptr(&mut self) -> std::ptr::NonNull<u8> {
        std::ptr::NonNull::new(self.0.as_mut_ptr().cast()).unwrap()
    }
    fn bytes(&self) -> Vec<u8> {
        self.0.iter().flatten().copied().collect()
    }
}

#[test]
fn mirrored_layouts_match_the_c_headers() {
    let rust: Vec<(&str, usize)> = vec![
        ("mlx5_wqe_ctrl_seg", size_of::<CtrlSeg>()),
        (
            "mlx5_wqe_ctrl_seg.opmod_idx_opcode",
            offset_of!(CtrlSeg, opmod_idx_opcode),
        ),
        ("mlx5_wqe_ctrl_seg.qpn_ds", offset_of!(CtrlSeg, qpn_ds)),
        (
            "mlx5_wqe_ctrl_seg.signature",
            offset_of!(CtrlSeg, signature),
        ),
        (
            "mlx5_wqe_ctrl_seg.dci_stream_channel_id",
            offset_of!(CtrlSeg, dci_stream_channel_id),
        ),
        ("mlx5_wqe_ctrl_seg.fm_ce_se", offset_of!(CtrlSeg, fm_ce_se)),
        ("mlx5_wqe_ctrl_seg.imm", offset_of!(CtrlSeg, imm)),
        ("mlx5_wqe_raddr_seg", size_of::<RaddrSeg>()),
        ("mlx5_wqe_raddr_seg.raddr", offset_of!(RaddrSeg, raddr)),
        ("mlx5_wqe_raddr_seg.rkey", offset_of!(RaddrSeg, rkey)),
        (
            "mlx5_wqe_raddr_seg.reserved",
            offset_of!(RaddrSeg, reserved),
        ),
        ("mlx5_wqe_data_seg", size_of::<DataSeg>()),
        (
            "mlx5_wqe_data_seg.byte_count",
            offset_of!(DataSeg, byte_count),
        ),
        ("mlx5_wqe_data_seg.lkey", offset_of!(DataSeg, lkey)),
        ("mlx5_wqe_data_seg.addr", offset_of!(DataSeg, addr)),
        ("mlx5_wqe_atomic_seg", size_of::<AtomicSeg>()),
        (
            "mlx5_wqe_atomic_seg.swap_add",
            offset_of!(AtomicSeg, swap_add),
        ),
        (
            "mlx5_wqe_atomic_seg.compare",
            offset_of!(AtomicSeg, compare),
        ),
        ("mlx5_wqe_inl_data_seg", size_of::<InlineHdr>()),
        (
            "mlx5_wqe_inl_data_seg.byte_count",
            offset_of!(InlineHdr, byte_count),
        ),
        ("mlx5_wqe_datagram_seg", size_of::<DatagramSeg>()),
        ("mlx5_wqe_av", size_of::<DatagramSeg>()),
        ("mlx5_wqe_av.key", offset_of!(DatagramSeg, key)),
        ("mlx5_wqe_av.key.qkey.qkey", offset_of!(DatagramSeg, key)),
        ("mlx5_wqe_av.dqp_dct", offset_of!(DatagramSeg, dqp_dct)),
        (
            "mlx5_wqe_av.stat_rate_sl",
            offset_of!(DatagramSeg, stat_rate_sl),
        ),
        ("mlx5_wqe_av.fl_mlid", offset_of!(DatagramSeg, fl_mlid)),
        ("mlx5_wqe_av.rlid", offset_of!(DatagramSeg, rlid)),
        ("mlx5_wqe_av.reserved0", offset_of!(DatagramSeg, reserved0)),
        ("mlx5_wqe_av.rmac", offset_of!(DatagramSeg, rmac)),
        ("mlx5_wqe_av.tclass", offset_of!(DatagramSeg, tclass)),
        ("mlx5_wqe_av.hop_limit", offset_of!(DatagramSeg, hop_limit)),
        (
            "mlx5_wqe_av.grh_gid_fl",
            offset_of!(DatagramSeg, grh_gid_fl),
        ),
        ("mlx5_wqe_av.rgid", offset_of!(DatagramSeg, rgid)),
        ("mlx5_cqe64", size_of::<Cqe64>()),
        ("mlx5_cqe64.srqn_uidx", offset_of!(Cqe64, srqn_uidx)),
        (
            "mlx5_cqe64.imm_inval_pkey",
            offset_of!(Cqe64, imm_inval_pkey),
        ),
        ("mlx5_cqe64.app", offset_of!(Cqe64, app)),
        ("mlx5_cqe64.app_op", offset_of!(Cqe64, app_op)),
        ("mlx5_cqe64.app_info", offset_of!(Cqe64, app_info)),
        ("mlx5_cqe64.byte_cnt", offset_of!(Cqe64, byte_cnt)),
        ("mlx5_cqe64.timestamp", offset_of!(Cqe64, timestamp)),
        ("mlx5_cqe64.sop_drop_qpn", offset_of!(Cqe64, sop_drop_qpn)),
        ("mlx5_cqe64.wqe_counter", offset_of!(Cqe64, wqe_counter)),
        ("mlx5_cqe64.signature", offset_of!(Cqe64, signature)),
        ("mlx5_cqe64.op_own", offset_of!(Cqe64, op_own)),
        ("mlx5_err_cqe", size_of::<ErrCqe>()),
        ("mlx5_err_cqe.srqn", offset_of!(ErrCqe, srqn)),
        (
            "mlx5_err_cqe.vendor_err_synd",
            offset_of!(ErrCqe, vendor_err_synd),
        ),
        ("mlx5_err_cqe.syndrome", offset_of!(ErrCqe, syndrome)),
        (
            "mlx5_err_cqe.s_wqe_opcode_qpn",
            offset_of!(ErrCqe, s_wqe_opcode_qpn),
        ),
        ("mlx5_err_cqe.wqe_counter", offset_of!(ErrCqe, wqe_counter)),
        ("mlx5_err_cqe.signature", offset_of!(ErrCqe, signature)),
        ("mlx5_err_cqe.op_own", offset_of!(ErrCqe, op_own)),
    ];
    let mut c_entries = 0;
    for i in 0.. {
        let mut name: *const c_char = std::ptr::null();
        let mut value = 0usize;
        // SAFETY: out-pointers to live locals; the C side returns static strings.
        if unsafe { rdmaperf_oracle_layout(i, &mut name, &mut value) } != 0 {
            break;
        }
        // SAFETY: a static NUL-terminated string from the C table.
        let name = unsafe { CStr::from_ptr(name) }.to_str().unwrap();
        let ours = rust.iter().find(|(n, _)| *n == name);
        assert_eq!(
            ours.map(|e| e.1),
            Some(value),
            "{name}: Rust mirror vs C header"
        );
        c_entries += 1;
    }
    assert_eq!(
        c_entries,
        rust.len(),
        "every mirrored field is checked against C"
    );
    // bindgen's own view of the segment sizes agrees too.
    assert_eq!(size_of::<sys::mlx5_wqe_ctrl_seg>(), size_of::<CtrlSeg>());
    assert_eq!(size_of::<sys::mlx5_wqe_data_seg>(), size_of::<DataSeg>());
    assert_eq!(
        size_of::<sys::mlx5_wqe_datagram_seg>(),
        size_of::<DatagramSeg>()
    );
    assert_eq!(size_of::<sys::mlx5_cqe64>(), size_of::<Cqe64>());
    assert_eq!(size_of::<sys::mlx5_err_cqe>(), size_of::<ErrCqe>());
}

/// A direct SQ over plain memory (no NIC, no model): its WQEs must be the
/// helper-built segments, byte for byte.
struct PlainQp {
    ring: Box<Ring<8>>,
    dbrec: Box<[u32; 2]>,
    uar: Box<Ring<64>>,
}

impl PlainQp {
    fn new() -> Self {
        Self {
            ring: Ring::new(),
            dbrec: Box::new([0; 2]),
            uar: Ring::new(),
        }
    }
    // The bindgen struct has private padding fields: fill it field by field.
    #[allow(clippy::field_reassign_with_default)]
    fn sq(&mut self, qpn: u32, transport: Transport) -> DirectSq<HwMmio> {
        let mut dv = sys::mlx5dv_qp {
            dbrec: self.dbrec.as_mut_ptr(),
            ..Default::default()
        };
        dv.sq.buf = self.ring.ptr().as_ptr().cast();
        dv.sq.wqe_cnt = 8;
        dv.sq.stride = 64;
        dv.bf.reg = self.uar.ptr().as_ptr().wrapping_add(0x800).cast();
        dv.bf.size = 256;
        // SAFETY: all memory is owned by self, which outlives the SQ in each
        // test; the register is used by this SQ only.
        unsafe { DirectSq::from_dv(&dv, qpn, transport, HwMmio, None) }.unwrap()
    }
}

#[test]
fn direct_sq_writes_the_helper_segments() {
    let mut q = PlainQp::new();
    let mut sq = q.sq(0xabcd, Transport::Rc);
    let wr = WrDesc {
        wr_id: 1,
        laddr: 0x7f00_dead_beef,
        lkey: 0x99aa_bbcc,
        len: 4096,
        raddr: 0x7f00_1122_3344,
        rkey: 0x5566_7788,
        signaled: true,
        ..WrDesc::default()
    };
    sq.post(Op::Write, &[wr]).unwrap();
    let imm_wr = WrDesc {
        imm: 0xcafe_f00d,
        signaled: false,
        ..wr
    };
    sq.post(Op::WriteImm, &[imm_wr]).unwrap();
    let faa = WrDesc {
        swap_add: 5,
        len: 8,
        ..wr
    };
    sq.post(Op::FetchAdd, &[faa]).unwrap();
    let b = q.ring.bytes();
    let w0: Vec<u8> = [
        c_ctrl(0, 0, 0x08, 0, 0xabcd, 0x08, 3, 0, 0).to_vec(),
        RaddrSeg::new(wr.raddr, wr.rkey).to_bytes().to_vec(),
        DataSeg::new(4096, wr.lkey, wr.laddr).to_bytes().to_vec(),
    ]
    .concat();
    assert_eq!(&b[0..48], &w0[..]);
    let imm_c = u32::from_ne_bytes(0xcafe_f00du32.to_be_bytes());
    assert_eq!(&b[64..80], &c_ctrl(0, 1, 0x09, 0, 0xabcd, 0, 3, 0, imm_c));
    assert_eq!(&b[128..144], &c_ctrl(0, 2, 0x12, 0, 0xabcd, 0x08, 4, 0, 0));
    assert_eq!(&b[160..176], &AtomicSeg::fetch_add(5).to_bytes());
    assert_eq!(&b[176..192], &DataSeg::new(8, wr.lkey, wr.laddr).to_bytes());
    // Doorbell record: BE producer index after the third WQE.
    assert_eq!(q.dbrec[1], u32::from_ne_bytes(3u32.to_be_bytes()));
    // Three single-WQE posts → BlueFlame into halves 0, 256, 0: the last
    // copy (the FETCH_ADD WQE, 64 bytes) sits at 0x800.
    let uar = q.uar.bytes();
    assert_eq!(&uar[0x800..0x840], &b[128..192]);
    assert_eq!(&uar[0x900..0x940], &b[64..128]);
    assert_eq!(sq.bf_offset(), 256);
}

#[test]
fn ud_send_carries_the_address_vector() {
    let mut q = PlainQp::new();
    let av = DatagramSeg::new(
        0,
        0,
        0,
        0x12,
        0,
        0x0034,
        [1, 2, 3, 4, 5, 6],
        7,
        64,
        0x4000_0000,
        [9; 16],
    )
    .with_ud_dest(0x00ab_cdef, 0x1111_2222);
    let mut sq = q.sq(0x42, Transport::Ud(av));
    let wr = WrDesc {
        wr_id: 9,
        laddr: 0x1000,
        lkey: 7,
        len: 64,
        signaled: true,
        ..WrDesc::default()
    };
    sq.post(Op::Send, &[wr]).unwrap();
    assert_eq!(sq.pi(), 2, "ctrl + AV + data = 5 units = 2 WQEBBs");
    let b = q.ring.bytes();
    assert_eq!(&b[0..16], &c_ctrl(0, 0, 0x0a, 0, 0x42, 0x08, 5, 0, 0));
    assert_eq!(&b[16..20], &[0x11, 0x11, 0x22, 0x22], "qkey");
    assert_eq!(&b[24..28], &[0x80, 0xab, 0xcd, 0xef], "dqp | extended AV");
    assert_eq!(&b[16..64], &av.to_bytes());
    assert_eq!(&b[64..80], &DataSeg::new(64, 7, 0x1000).to_bytes());
    // RDMA on UD is refused before anything is written.
    assert_eq!(sq.post(Op::Write, &[wr]), Err(PostError::Unsupported));
    assert_eq!(sq.pi(), 2);
}
