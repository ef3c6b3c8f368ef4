//! What an mlx5 receive CQE says about a raw Ethernet frame: bytes 28 and
//! 29 of `struct mlx5_cqe64` (mlx5dv.h), `hds_ip_ext` (L2/L3/L4 checksum
//! OK bits) and `l4_hdr_type_etc` (the L3 header type in bits 3:2, the L4
//! type in bits 6:4, as libmlx5's `get_cqe_l3_hdr_type` and the kernel's
//! `get_cqe_l4_hdr_type` read them). The direct poller fills it for every
//! receive; libibverbs' `ibv_wc` carries none of it (only
//! `IBV_WC_IP_CSUM_OK` in `wc_flags`), so a verbs completion holds 0.
//! Values read back from the device: newtypes, never Rust enums.

use crate::newtype::value_newtype;

value_newtype! {
    /// `hds_ip_ext` (high byte) and `l4_hdr_type_etc` (low byte).
    #[derive(Clone, Copy, PartialEq, Eq, Hash, Default, Debug)]
    pub struct RxOffload(u16);
    consts {
        /// Nothing known (a verbs completion, a send completion).
        NONE = 0,
    }
}

value_newtype! {
    /// The CQE's L3 header type (`MLX5_CQE_L3_HDR_TYPE_*`).
    #[derive(Clone, Copy, PartialEq, Eq, Hash, Default, Debug)]
    pub struct L3Type(u8);
    /// Short name for a report.
    name or "other" {
        NONE = 0 => "none",
        IPV6 = 1 => "IPv6",
        IPV4 = 2 => "IPv4",
    }
}

value_newtype! {
    /// The CQE's L4 header type (kernel `CQE_L4_HDR_TYPE_*`).
    #[derive(Clone, Copy, PartialEq, Eq, Hash, Default, Debug)]
    pub struct L4Type(u8);
    /// Short name for a report.
    name or "other" {
        NONE = 0 => "none",
        TCP_NO_ACK = 1 => "TCP",
        UDP = 2 => "UDP",
        TCP_ACK_NO_DATA = 3 => "TCP",
        TCP_ACK_AND_DATA = 4 => "TCP",
    }
}

/// `hds_ip_ext` bits (mlx5dv.h `MLX5_CQE_L2_OK`, `_L3_OK`, `_L4_OK`).
pub const CQE_L2_OK: u8 = 1 << 0;
pub const CQE_L3_OK: u8 = 1 << 1;
pub const CQE_L4_OK: u8 = 1 << 2;

/// `IBV_WC_IP_CSUM_OK` (`1 << IBV_WC_IP_CSUM_OK_SHIFT`): libibverbs'
/// one receive checksum bit.
pub const WC_IP_CSUM_OK: u32 = 1 << 2;

impl RxOffload {
    /// From the CQE's two bytes.
    #[inline(always)]
    pub const fn from_bytes(hds_ip_ext: u8, l4_hdr_type_etc: u8) -> Self {
        Self(((hds_ip_ext as u16) << 8) | l4_hdr_type_etc as u16)
    }
    #[inline(always)]
    pub const fn hds_ip_ext(self) -> u8 {
        (self.0 >> 8) as u8
    }
    #[inline(always)]
    pub const fn l3_ok(self) -> bool {
        self.hds_ip_ext() & CQE_L3_OK != 0
    }
    #[inline(always)]
    pub const fn l4_ok(self) -> bool {
        self.hds_ip_ext() & CQE_L4_OK != 0
    }
    #[inline(always)]
    pub const fn l3_type(self) -> L3Type {
        L3Type(((self.0 >> 2) & 3) as u8)
    }
    #[inline(always)]
    pub const fn l4_type(self) -> L4Type {
        L4Type(((self.0 >> 4) & 7) as u8)
    }
    /// A TCP header of any of the three kinds.
    #[inline(always)]
    pub const fn is_tcp(self) -> bool {
        matches!(self.l4_type().0, 1 | 3 | 4)
    }
    /// libmlx5's `IBV_WC_IP_CSUM_OK` (cq.c `handle_responder`, raw packet
    /// QPs on a device with the checksum cap): IPv4 with both the L3 and
    /// the L4 bit.
    #[inline(always)]
    pub const fn ip_csum_ok(self) -> bool {
        self.l3_ok() && self.l4_ok() && self.l3_type().0 == L3Type::IPV4.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sys;

    #[test]
    fn bits_and_types_are_mlx5dv_and_libibverbs_values() {
        assert_eq!(CQE_L2_OK as u32, sys::MLX5_CQE_L2_OK);
        assert_eq!(CQE_L3_OK as u32, sys::MLX5_CQE_L3_OK);
        assert_eq!(CQE_L4_OK as u32, sys::MLX5_CQE_L4_OK);
        assert_eq!(L3Type::IPV4.0 as u32, sys::MLX5_CQE_L3_HDR_TYPE_IPV4);
        assert_eq!(L3Type::IPV6.0 as u32, sys::MLX5_CQE_L3_HDR_TYPE_IPV6);
        assert_eq!(WC_IP_CSUM_OK, sys::IBV_WC_IP_CSUM_OK);
    }

    #[test]
    fn fields_are_read_from_their_bits() {
        // IPv4 (2 << 2), UDP (2 << 4), L2/L3/L4 OK.
        let r = RxOffload::from_bytes(7, 0x28);
        assert_eq!((r.l3_type(), r.l4_type()), (L3Type::IPV4, L4Type::UDP));
        assert!(r.l3_ok() && r.l4_ok() && r.ip_csum_ok() && !r.is_tcp());
        // IPv6 TCP with ACK and data, L4 bad.
        let r = RxOffload::from_bytes(3, 0x44);
        assert_eq!((r.l3_type().name(), r.l4_type().name()), ("IPv6", "TCP"));
        assert!(r.is_tcp() && !r.l4_ok() && !r.ip_csum_ok());
        // IPv6 good: still no IP_CSUM_OK (libmlx5 sets it for IPv4 only).
        assert!(!RxOffload::from_bytes(7, 0x24).ip_csum_ok());
        assert!(!RxOffload::from_bytes(5, 0x28).ip_csum_ok());
    }
}
