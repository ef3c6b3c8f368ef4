//! Port attributes (`ibv_query_port`) and the port-level newtypes.

use super::context::Context;
use super::error::{Result, VerbsError};
pub use super::values::{LinkLayer, PortState};
use crate::sys;

/// `enum ibv_mtu` (1..=5 ↔ 256..=4096 bytes) as a newtype: perftest exchanges
/// the enum value, the reports print bytes.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Debug)]
#[repr(transparent)]
pub struct Mtu(pub u32);

impl Mtu {
    pub const MTU_256: Self = Self(sys::IBV_MTU_256);
    pub const MTU_512: Self = Self(sys::IBV_MTU_512);
    pub const MTU_1024: Self = Self(sys::IBV_MTU_1024);
    pub const MTU_2048: Self = Self(sys::IBV_MTU_2048);
    pub const MTU_4096: Self = Self(sys::IBV_MTU_4096);

    /// Bytes, or None for a value outside 1..=5.
    pub const fn bytes(self) -> Option<u32> {
        if self.0 >= 1 && self.0 <= 5 {
            Some(128 << self.0)
        } else {
            None
        }
    }

    /// The enum for a byte count (256, 512, 1024, 2048, 4096).
    pub const fn from_bytes(bytes: u32) -> Option<Self> {
        match bytes {
            256 => Some(Self::MTU_256),
            512 => Some(Self::MTU_512),
            1024 => Some(Self::MTU_1024),
            2048 => Some(Self::MTU_2048),
            4096 => Some(Self::MTU_4096),
            _ => None,
        }
    }

    /// The `enum ibv_mtu` value.
    pub const fn value(self) -> u32 {
        self.0
    }

    pub const fn is_valid(self) -> bool {
        self.bytes().is_some()
    }
}

/// `ibv_query_port` result.
#[derive(Clone, Copy, Debug)]
pub struct PortAttr {
    pub port: u8,
    pub state: PortState,
    pub max_mtu: Mtu,
    pub active_mtu: Mtu,
    pub gid_tbl_len: i32,
    pub port_cap_flags: u32,
    pub max_msg_sz: u32,
    pub pkey_tbl_len: u16,
    pub lid: u16,
    pub sm_lid: u16,
    pub lmc: u8,
    pub active_width: u8,
    pub active_speed: u8,
    pub phys_state: u8,
    pub link_layer: LinkLayer,
}

impl PortAttr {
    pub(crate) fn from_raw(port: u8, a: &sys::ibv_port_attr) -> Self {
        Self {
            port,
            state: PortState(a.state),
            max_mtu: Mtu(a.max_mtu),
            active_mtu: Mtu(a.active_mtu),
            gid_tbl_len: a.gid_tbl_len,
            port_cap_flags: a.port_cap_flags,
            max_msg_sz: a.max_msg_sz,
            pkey_tbl_len: a.pkey_tbl_len,
            lid: a.lid,
            sm_lid: a.sm_lid,
            lmc: a.lmc,
            active_width: a.active_width,
            active_speed: a.active_speed,
            phys_state: a.phys_state,
            link_layer: LinkLayer(a.link_layer),
        }
    }
}

/// The error for a port number the device does not have.
pub(crate) fn no_such_port(dev: &str, port: u8, valid: &str) -> VerbsError {
    VerbsError::new(
        "ibv_query_port",
        0,
        format!("port {port} does not exist on {dev}: valid ports are {valid} (-i/--ib-port)"),
    )
}

impl Context {
    /// `ibv_query_port`. A port outside 1..=phys_port_cnt is an error naming
    /// the valid ones.
    pub fn query_port(&self, port: u8) -> Result<PortAttr> {
        if port == 0 || port > self.attr().phys_port_cnt {
            return Err(no_such_port(self.name(), port, &self.port_range()));
        }
        let mut a = sys::ibv_port_attr::default();
        // SAFETY: the context is open and `a` is a valid out-struct of the
        // size the inline wrapper passes to the provider.
        let ret = unsafe { sys::___ibv_query_port(self.raw(), port, &mut a) };
        VerbsError::check(ret, "ibv_query_port", || {
            format!(
                "port {port} of {}; valid ports are {}; check `ibv_devinfo -d {}`",
                self.name(),
                self.port_range(),
                self.name()
            )
        })?;
        Ok(PortAttr::from_raw(port, &a))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mtu_bytes_round_trip() {
        for (v, b) in [(1, 256), (2, 512), (3, 1024), (4, 2048), (5, 4096)] {
            assert_eq!(Mtu(v).bytes(), Some(b));
            assert_eq!(Mtu::from_bytes(b), Some(Mtu(v)));
        }
        assert_eq!(Mtu(0).bytes(), None);
        assert_eq!(Mtu(6).bytes(), None);
        assert_eq!(Mtu::from_bytes(1500), None);
        assert!(Mtu::MTU_1024 < Mtu::MTU_4096);
    }

    #[test]
    fn unknown_port_error_lists_valid_ports() {
        let e = no_such_port("mlx5_0", 3, "1..=2");
        assert_eq!(
            e.to_string(),
            "ibv_query_port: port 3 does not exist on mlx5_0: valid ports are 1..=2 (-i/--ib-port)"
        );
    }
}
