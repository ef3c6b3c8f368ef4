//! PRM segment layouts (mirrors of the `mlx5dv.h` structs) and their encoders.
//!
//! Every struct is `#[repr(C)]` over byte arrays: alignment 1, no padding, the
//! exact packed C layout (checked against the C headers by
//! `tests/mlx5_seg.rs`), and every multi-byte field big-endian by type.
//! Encoders are pure functions returning the struct by value; the SQ writes
//! the bytes straight into the ring (see `wqe.rs`). Nothing here touches memory.

use super::be::{Be16, Be32, Be64};
use super::prm::{Opcode, EXTENDED_UD_AV, INLINE_SEG};

/// Reinterprets a byte-array-only struct as its bytes.
macro_rules! to_bytes {
    ($t:ty, $n:literal) => {
        const _: () = assert!(core::mem::size_of::<$t>() == $n);
        const _: () = assert!(core::mem::align_of::<$t>() == 1);
        impl $t {
            /// The segment exactly as it lies in WQE / CQE memory.
            #[inline(always)]
            pub const fn to_bytes(self) -> [u8; $n] {
                // SAFETY: the struct is repr(C), built only from u8 arrays
                // (alignment 1, no padding: the asserts above check size and
                // alignment), so every bit pattern is a valid [u8; N] of equal size.
                unsafe { core::mem::transmute::<$t, [u8; $n]>(self) }
            }
            /// Reads a segment back from its bytes (any bytes are valid).
            #[inline(always)]
            pub const fn from_bytes(b: [u8; $n]) -> Self {
                // SAFETY: as in `to_bytes`: the struct consists of u8 arrays
                // only, so every [u8; N] is a valid value of it.
                unsafe { core::mem::transmute::<[u8; $n], $t>(b) }
            }
        }
    };
}

/// `struct mlx5_wqe_ctrl_seg` (16 B): the first segment of every WQE.
#[repr(C)]
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub struct CtrlSeg {
    /// `opmod << 24 | wqe_index << 8 | opcode`.
    pub opmod_idx_opcode: Be32,
    /// `qpn << 8 | ds`.
    pub qpn_ds: Be32,
    pub signature: u8,
    pub dci_stream_channel_id: Be16,
    pub fm_ce_se: u8,
    /// Immediate data in network order, stored as given.
    pub imm: [u8; 4],
}
to_bytes!(CtrlSeg, 16);

impl CtrlSeg {
    /// Same fields and encoding as rdma-core's `mlx5dv_set_ctrl_seg`, except
    /// that `imm` is given as its wire bytes and the DCI stream id is zeroed
    /// (libmlx5 zeroes bytes 8..11 before setting `fm_ce_se`). `qpn` keeps
    /// its low 24 bits; `ds` is stored whole (valid WQEs have `ds <= 63`).
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    pub const fn new(
        wqe_index: u16,
        opcode: Opcode,
        opmod: u8,
        qpn: u32,
        fm_ce_se: u8,
        ds: u8,
        signature: u8,
        imm: [u8; 4],
    ) -> Self {
        // Built as two big-endian 64-bit words so the compiler emits two
        // stores instead of one per field.
        let w0 = ((((opmod as u32) << 24) | ((wqe_index as u32) << 8) | opcode.0 as u32) as u64)
            << 32
            | ((qpn << 8) | ds as u32) as u64;
        let w1 =
            ((signature as u64) << 56) | ((fm_ce_se as u64) << 32) | u32::from_be_bytes(imm) as u64;
        let a = w0.to_be_bytes();
        let b = w1.to_be_bytes();
        Self::from_bytes([
            a[0], a[1], a[2], a[3], a[4], a[5], a[6], a[7], b[0], b[1], b[2], b[3], b[4], b[5],
            b[6], b[7],
        ])
    }
}

/// `struct mlx5_wqe_raddr_seg` (16 B): remote address and key.
#[repr(C)]
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub struct RaddrSeg {
    pub raddr: Be64,
    pub rkey: Be32,
    pub reserved: [u8; 4],
}
to_bytes!(RaddrSeg, 16);

impl RaddrSeg {
    #[inline(always)]
    pub const fn new(raddr: u64, rkey: u32) -> Self {
        Self {
            raddr: Be64::new(raddr),
            rkey: Be32::new(rkey),
            reserved: [0; 4],
        }
    }
}

/// `struct mlx5_wqe_data_seg` (16 B): one gather/scatter entry.
#[repr(C)]
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub struct DataSeg {
    pub byte_count: Be32,
    pub lkey: Be32,
    pub addr: Be64,
}
to_bytes!(DataSeg, 16);

impl DataSeg {
    /// As `mlx5dv_set_data_seg`. A `len` of 0 means 2 GiB to the NIC: callers
    /// must omit zero-length entries (as libmlx5 does).
    #[inline(always)]
    pub const fn new(len: u32, lkey: u32, addr: u64) -> Self {
        Self {
            byte_count: Be32::new(len),
            lkey: Be32::new(lkey),
            addr: Be64::new(addr),
        }
    }
}

/// `struct mlx5_wqe_atomic_seg` (16 B): atomic operands.
#[repr(C)]
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub struct AtomicSeg {
    pub swap_add: Be64,
    pub compare: Be64,
}
to_bytes!(AtomicSeg, 16);

impl AtomicSeg {
    /// Fetch-and-add: `swap_add = add`; libmlx5 leaves `compare` unwritten,
    /// we write 0 (the NIC ignores it).
    #[inline(always)]
    pub const fn fetch_add(add: u64) -> Self {
        Self {
            swap_add: Be64::new(add),
            compare: Be64::new(0),
        }
    }
    /// Compare-and-swap: write `swap` where the target equals `compare`.
    #[inline(always)]
    pub const fn cmp_swap(swap: u64, compare: u64) -> Self {
        Self {
            swap_add: Be64::new(swap),
            compare: Be64::new(compare),
        }
    }
}

/// `struct mlx5_wqe_inl_data_seg` (4 B): inline-data header; the payload
/// follows at byte 4 and the segment is padded to 16 bytes.
#[repr(C)]
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub struct InlineHdr {
    pub byte_count: Be32,
}
to_bytes!(InlineHdr, 4);

impl InlineHdr {
    #[inline(always)]
    pub const fn new(len: u32) -> Self {
        Self {
            byte_count: Be32::new(len | INLINE_SEG),
        }
    }
}

/// `struct mlx5_wqe_datagram_seg` = `struct mlx5_wqe_av` (48 B): the UD/DC
/// address vector.
#[repr(C)]
#[derive(Clone, Copy, Default, PartialEq, Eq, Debug)]
pub struct DatagramSeg {
    /// `qkey.qkey` (bytes 0..4) + reserved, or the 64-bit DC access key.
    pub key: [u8; 8],
    pub dqp_dct: Be32,
    pub stat_rate_sl: u8,
    pub fl_mlid: u8,
    pub rlid: Be16,
    pub reserved0: [u8; 4],
    pub rmac: [u8; 6],
    pub tclass: u8,
    pub hop_limit: u8,
    pub grh_gid_fl: Be32,
    pub rgid: [u8; 16],
}
to_bytes!(DatagramSeg, 48);

impl DatagramSeg {
    /// As `mlx5dv_set_dgram_seg`: the whole 64-bit `key` is written
    /// big-endian (for UD the qkey is its high half), `ext` lands in bit 31
    /// of `dqp_dct`; `reserved0` is zeroed.
    #[allow(clippy::too_many_arguments)]
    pub const fn new(
        key: u64,
        dqp_dct: u32,
        ext: u8,
        stat_rate_sl: u8,
        fl_mlid: u8,
        rlid: u16,
        rmac: [u8; 6],
        tclass: u8,
        hop_limit: u8,
        grh_gid_fl: u32,
        rgid: [u8; 16],
    ) -> Self {
        Self {
            key: key.to_be_bytes(),
            dqp_dct: Be32::new(((ext as u32) << 31) | dqp_dct),
            stat_rate_sl,
            fl_mlid,
            rlid: Be16::new(rlid),
            reserved0: [0; 4],
            rmac,
            tclass,
            hop_limit,
            grh_gid_fl: Be32::new(grh_gid_fl),
            rgid,
        }
    }

    /// What libmlx5 does per UD WR on top of the AH's address vector: set the
    /// destination QPN with the extended-AV flag and the qkey (bytes 0..4;
    /// bytes 4..8 stay as the AV has them).
    pub const fn with_ud_dest(mut self, remote_qpn: u32, qkey: u32) -> Self {
        self.dqp_dct = Be32::new(remote_qpn | EXTENDED_UD_AV);
        let q = qkey.to_be_bytes();
        self.key[0] = q[0];
        self.key[1] = q[1];
        self.key[2] = q[2];
        self.key[3] = q[3];
        self
    }
}

/// `struct mlx5_cqe64` (64 B), the fields the poller reads.
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Cqe64 {
    /// UD/tag-matching fields or inline-scattered payload.
    pub rsvd0: [u8; 32],
    pub srqn_uidx: Be32,
    /// Immediate data as delivered (network order), or invalidated rkey.
    pub imm_inval_pkey: [u8; 4],
    pub app: u8,
    pub app_op: u8,
    pub app_info: Be16,
    pub byte_cnt: Be32,
    pub timestamp: Be64,
    /// Bits 31:24 the send opcode of the completed WQE, 23:0 the QPN.
    pub sop_drop_qpn: Be32,
    /// Requester: first WQEBB index of the completed WQE.
    pub wqe_counter: Be16,
    pub signature: u8,
    /// Bits 7:4 CQE opcode, 3:2 format, 1 SE, 0 owner.
    pub op_own: u8,
}
to_bytes!(Cqe64, 64);

/// `struct mlx5_err_cqe` (64 B): the same slot when the opcode is
/// `REQ_ERR`/`RESP_ERR`.
#[repr(C)]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct ErrCqe {
    pub rsvd0: [u8; 32],
    pub srqn: Be32,
    pub rsvd1: [u8; 18],
    pub vendor_err_synd: u8,
    pub syndrome: u8,
    pub s_wqe_opcode_qpn: Be32,
    pub wqe_counter: Be16,
    pub signature: u8,
    pub op_own: u8,
}
to_bytes!(ErrCqe, 64);

/// Byte offsets inside a 64-byte CQE, as the poller reads them one by one.
pub mod cqe_off {
    use crate::mlx5::seg::{Cqe64, ErrCqe};
    use core::mem::offset_of;
    /// `flags_rqpn` (inside `rsvd0` here): bits 23:0 the UD source QP,
    /// 29:28 where a GRH was delivered (0: none).
    pub const FLAGS_RQPN: usize = 24;
    /// `hds_ip_ext` then `l4_hdr_type_etc` (inside `rsvd0` here): a raw
    /// receive's checksum bits and header types (`post::rx_offload`).
    pub const HDS_IP_EXT: usize = 28;
    pub const IMM: usize = offset_of!(Cqe64, imm_inval_pkey);
    pub const BYTE_CNT: usize = offset_of!(Cqe64, byte_cnt);
    pub const SOP_DROP_QPN: usize = offset_of!(Cqe64, sop_drop_qpn);
    pub const WQE_COUNTER: usize = offset_of!(Cqe64, wqe_counter);
    pub const OP_OWN: usize = offset_of!(Cqe64, op_own);
    pub const VENDOR_ERR_SYND: usize = offset_of!(ErrCqe, vendor_err_synd);
    pub const SYNDROME: usize = offset_of!(ErrCqe, syndrome);
    const _: () = assert!(OP_OWN == 63 && WQE_COUNTER == 60 && SYNDROME == 55);
    const _: () = assert!(offset_of!(ErrCqe, s_wqe_opcode_qpn) == SOP_DROP_QPN);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ctrl_golden_vector() {
        // mlx5-direct.md §2.5: RDMA_WRITE pi=0x1234 qpn=0xabcd ds=3 CQ_UPDATE.
        let c = CtrlSeg::new(0x1234, Opcode::RDMA_WRITE, 0, 0xabcd, 0x08, 3, 0, [0; 4]);
        assert_eq!(
            c.to_bytes(),
            [0x00, 0x12, 0x34, 0x08, 0x00, 0xab, 0xcd, 0x03, 0, 0, 0, 0x08, 0, 0, 0, 0]
        );
        assert_eq!(CtrlSeg::from_bytes(c.to_bytes()), c);
    }

    #[test]
    fn hds_ip_ext_is_where_mlx5dv_puts_it() {
        use crate::sys::mlx5_cqe64__bindgen_ty_1__bindgen_ty_1 as Resp;
        assert_eq!(core::mem::offset_of!(Resp, hds_ip_ext), cqe_off::HDS_IP_EXT);
        assert_eq!(
            core::mem::offset_of!(Resp, l4_hdr_type_etc),
            cqe_off::HDS_IP_EXT + 1
        );
        assert_eq!(core::mem::offset_of!(Resp, flags_rqpn), cqe_off::FLAGS_RQPN);
    }
}
