//! The values libibverbs and librdmacm hand back (node and transport type,
//! atomic capability, link layer, port state, GID type, QP type, CM event), as
//! newtypes with the names the tools print. One file, so a reader finds every
//! `enum ibv_*` the tools read in one place, each declared once through
//! `value_newtype!` (see `crate::newtype` for why never a Rust enum).

use crate::newtype::value_newtype;
use crate::sys;

value_newtype! {
    /// `enum ibv_node_type` as a newtype (read from the device).
    #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
    pub struct NodeType(i32);
    /// The name `ibv_devinfo` prints.
    name or "unknown" {
        UNKNOWN = sys::IBV_NODE_UNKNOWN => "unknown",
        CA = sys::IBV_NODE_CA => "InfiniBand channel adapter",
        SWITCH = sys::IBV_NODE_SWITCH => "InfiniBand switch",
        ROUTER = sys::IBV_NODE_ROUTER => "InfiniBand router",
        RNIC = sys::IBV_NODE_RNIC => "iWARP NIC",
        USNIC = sys::IBV_NODE_USNIC => "usNIC",
        USNIC_UDP = sys::IBV_NODE_USNIC_UDP => "usNIC UDP",
        UNSPECIFIED = sys::IBV_NODE_UNSPECIFIED => "unspecified",
    }
}

value_newtype! {
    /// `enum ibv_transport_type` as a newtype (read from the device).
    #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
    pub struct TransportType(i32);
    /// perftest's "Transport type" wording.
    name or "Unknown" {
        UNKNOWN = sys::IBV_TRANSPORT_UNKNOWN => "Unknown",
        IB = sys::IBV_TRANSPORT_IB => "IB",
        IWARP = sys::IBV_TRANSPORT_IWARP => "IW",
        USNIC = sys::IBV_TRANSPORT_USNIC => "usNIC",
        USNIC_UDP = sys::IBV_TRANSPORT_USNIC_UDP => "usNIC UDP",
        UNSPECIFIED = sys::IBV_TRANSPORT_UNSPECIFIED => "unspecified",
    }
}

value_newtype! {
    /// `enum ibv_atomic_cap` as a newtype (read from the device).
    #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
    pub struct AtomicCap(u32);
    name "ATOMIC_" or "UNKNOWN" {
        NONE = sys::IBV_ATOMIC_NONE,
        HCA = sys::IBV_ATOMIC_HCA,
        GLOB = sys::IBV_ATOMIC_GLOB,
    }
}

impl AtomicCap {
    pub const fn supported(self) -> bool {
        self.0 == sys::IBV_ATOMIC_HCA || self.0 == sys::IBV_ATOMIC_GLOB
    }
}

value_newtype! {
    /// Link layer of a port (`IBV_LINK_LAYER_*`) as a newtype.
    #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
    pub struct LinkLayer(u8);
    /// perftest's "Link type" wording (unspecified counts as IB, as there).
    name or "Unknown" {
        UNSPECIFIED = sys::IBV_LINK_LAYER_UNSPECIFIED as u8 => "IB",
        INFINIBAND = sys::IBV_LINK_LAYER_INFINIBAND as u8 => "IB",
        ETHERNET = sys::IBV_LINK_LAYER_ETHERNET as u8 => "Ethernet",
    }
}

impl LinkLayer {
    /// RoCE: a GID (GRH) is mandatory on this link.
    pub const fn is_ethernet(self) -> bool {
        self.0 as u32 == sys::IBV_LINK_LAYER_ETHERNET
    }
}

value_newtype! {
    /// `enum ibv_port_state` as a newtype.
    #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
    pub struct PortState(u32);
    /// The name `ibv_devinfo` prints.
    name "PORT_" or "PORT_UNKNOWN" {
        NOP = sys::IBV_PORT_NOP,
        DOWN = sys::IBV_PORT_DOWN,
        INIT = sys::IBV_PORT_INIT,
        ARMED = sys::IBV_PORT_ARMED,
        ACTIVE = sys::IBV_PORT_ACTIVE,
        ACTIVE_DEFER = sys::IBV_PORT_ACTIVE_DEFER,
    }
}

impl PortState {
    pub const fn is_active(self) -> bool {
        self.0 == sys::IBV_PORT_ACTIVE || self.0 == sys::IBV_PORT_ACTIVE_DEFER
    }
}

// `enum ibv_gid_type` arrived in the headers with ibv_query_gid_ex (rdma-core 32); older
// headers have no such enum, and there the type comes from sysfs (gid_attrs/types), read
// into the same values: IB 0, RoCE v1 1, RoCE v2 2, the kernel's `enum ib_gid_type`.
#[cfg(rdmaperf_gid_ex)]
use sys::{IBV_GID_TYPE_IB, IBV_GID_TYPE_ROCE_V1, IBV_GID_TYPE_ROCE_V2};
#[cfg(not(rdmaperf_gid_ex))]
const IBV_GID_TYPE_IB: u32 = 0;
#[cfg(not(rdmaperf_gid_ex))]
const IBV_GID_TYPE_ROCE_V1: u32 = 1;
#[cfg(not(rdmaperf_gid_ex))]
const IBV_GID_TYPE_ROCE_V2: u32 = 2;

value_newtype! {
    /// `enum ibv_gid_type` as a newtype (read from the device).
    #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
    pub struct GidType(u32);
    name or "unknown" {
        IB = IBV_GID_TYPE_IB => "IB",
        ROCE_V1 = IBV_GID_TYPE_ROCE_V1 => "RoCE v1",
        ROCE_V2 = IBV_GID_TYPE_ROCE_V2 => "RoCE v2",
    }
}

impl GidType {
    /// perftest's RoCE version rank: v2 2, v1 1, anything else none.
    pub const fn roce_rank(self) -> Option<u32> {
        match self.0 {
            IBV_GID_TYPE_ROCE_V1 => Some(1),
            IBV_GID_TYPE_ROCE_V2 => Some(2),
            _ => None,
        }
    }
}

value_newtype! {
    /// `enum ibv_qp_type` as a newtype.
    #[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
    pub struct QpType(u32);
    name or "unknown" {
        RC = sys::IBV_QPT_RC => "RC",
        UC = sys::IBV_QPT_UC => "UC",
        UD = sys::IBV_QPT_UD => "UD",
        RAW_PACKET = sys::IBV_QPT_RAW_PACKET => "RawEth",
        XRC_SEND = sys::IBV_QPT_XRC_SEND => "XRC",
        XRC_RECV = sys::IBV_QPT_XRC_RECV => "XRC",
    }
}

value_newtype! {
    /// `enum rdma_cm_event_type` as read from librdmacm (a newtype: an unknown
    /// value is shown, never undefined).
    #[derive(Clone, Copy, PartialEq, Eq, Debug)]
    pub struct CmEventType(u32);
    consts {
        ADDR_RESOLVED = sys::RDMA_CM_EVENT_ADDR_RESOLVED,
        ADDR_ERROR = sys::RDMA_CM_EVENT_ADDR_ERROR,
        ROUTE_RESOLVED = sys::RDMA_CM_EVENT_ROUTE_RESOLVED,
        ROUTE_ERROR = sys::RDMA_CM_EVENT_ROUTE_ERROR,
        CONNECT_REQUEST = sys::RDMA_CM_EVENT_CONNECT_REQUEST,
        CONNECT_RESPONSE = sys::RDMA_CM_EVENT_CONNECT_RESPONSE,
        CONNECT_ERROR = sys::RDMA_CM_EVENT_CONNECT_ERROR,
        UNREACHABLE = sys::RDMA_CM_EVENT_UNREACHABLE,
        REJECTED = sys::RDMA_CM_EVENT_REJECTED,
        ESTABLISHED = sys::RDMA_CM_EVENT_ESTABLISHED,
        DISCONNECTED = sys::RDMA_CM_EVENT_DISCONNECTED,
        DEVICE_REMOVAL = sys::RDMA_CM_EVENT_DEVICE_REMOVAL,
        TIMEWAIT_EXIT = sys::RDMA_CM_EVENT_TIMEWAIT_EXIT,
    }
}

impl CmEventType {
    /// librdmacm's name for the event (`RDMA_CM_EVENT_REJECTED`).
    pub fn name(self) -> String {
        // SAFETY: rdma_event_str accepts any value and returns a static
        // NUL-terminated string ("UNKNOWN EVENT" for values it does not know).
        let s = unsafe { std::ffi::CStr::from_ptr(sys::rdma_event_str(self.0)) };
        s.to_string_lossy().into_owned()
    }

    /// The peer went away or refused: retrying later may succeed (a server
    /// that is not listening yet answers a connect with REJECTED).
    pub const fn is_refusal(self) -> bool {
        self.0 == Self::REJECTED.0 || self.0 == Self::UNREACHABLE.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_cap_names() {
        assert_eq!(AtomicCap::HCA.name(), "ATOMIC_HCA");
        assert!(AtomicCap::GLOB.supported());
        assert!(!AtomicCap::NONE.supported());
        assert_eq!(AtomicCap(9).name(), "UNKNOWN");
    }

    #[test]
    fn link_layer_names_follow_perftest() {
        assert_eq!(LinkLayer::UNSPECIFIED.name(), "IB");
        assert_eq!(LinkLayer::INFINIBAND.name(), "IB");
        assert_eq!(LinkLayer::ETHERNET.name(), "Ethernet");
        assert_eq!(LinkLayer(7).name(), "Unknown");
        assert!(LinkLayer::ETHERNET.is_ethernet());
        assert!(!LinkLayer::INFINIBAND.is_ethernet());
    }

    #[test]
    fn port_state_names() {
        assert_eq!(PortState::ACTIVE.name(), "PORT_ACTIVE");
        assert!(PortState::ACTIVE.is_active());
        assert!(!PortState::DOWN.is_active());
        assert_eq!(PortState(99).name(), "PORT_UNKNOWN");
    }

    #[test]
    fn qp_type_names() {
        assert_eq!(QpType::RC.name(), "RC");
        assert_eq!(QpType::UD.name(), "UD");
        assert_eq!(QpType(77).name(), "unknown");
        assert_eq!(QpType::RAW_PACKET.name(), "RawEth");
        assert_eq!(QpType::XRC_SEND.name(), "XRC");
        assert_eq!(QpType::XRC_RECV.name(), "XRC");
        assert_eq!(GidType::ROCE_V2.name(), "RoCE v2");
        assert_eq!(GidType(9).name(), "unknown");
    }

    #[test]
    fn event_names_come_from_librdmacm() {
        assert_eq!(CmEventType::REJECTED.name(), "RDMA_CM_EVENT_REJECTED");
        assert_eq!(CmEventType::ESTABLISHED.name(), "RDMA_CM_EVENT_ESTABLISHED");
        assert!(CmEventType::UNREACHABLE.is_refusal());
        assert!(!CmEventType::ADDR_ERROR.is_refusal());
        // An unknown value is a value, not UB.
        assert!(!CmEventType(999).name().is_empty());
    }

    #[test]
    fn node_and_transport_names() {
        assert_eq!(NodeType::CA.name(), "InfiniBand channel adapter");
        assert_eq!(NodeType(42).name(), "unknown");
        assert_eq!(TransportType::IB.name(), "IB");
        assert_eq!(TransportType::IWARP.name(), "IW");
    }
}
