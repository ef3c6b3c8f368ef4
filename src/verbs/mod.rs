//! Safe control path over libibverbs: device discovery, PD, MR, CQ, QP, AH,
//! GID tables. One module per concept. Every object holds an `Arc` of its
//! parent (QP → PD + CQs, MR → PD, PD/CQ → Context), so the drop order the
//! verbs require (children before parents) holds by construction.
//!
//! The hot path never comes through here: the post methods in `crate::post`
//! and the direct mlx5 path take raw pointers from these objects once.

pub mod ah;
pub mod cm;
pub mod context;
pub mod cq;
pub mod device;
pub mod devmem;
pub mod dmabuf_probe;
pub mod error;
pub mod flow;
pub mod gid;
pub mod membuf;
pub mod mr;
pub mod pd;
pub mod port;
pub mod psn;
pub mod qp;
pub mod rdma_core;
pub mod srq;
pub mod values;

pub use ah::{Ah, AhAttr, Grh, UdDest};
pub use context::{AtomicCap, Context, DeviceAttr};
pub use cq::Cq;
pub use device::{devices, DeviceInfo, NodeType, TransportType};
pub use devmem::{DevReg, DeviceMemory, DmaBuf};
pub use error::{Result, VerbsError};
pub use flow::{Flow, FlowKind, FlowRule};
pub use gid::{Gid, GidEntry, GidTable, GidType};
pub use mr::{Access, AlignedBuf, Backing, Mr};
pub use pd::Pd;
pub use port::{LinkLayer, Mtu, PortAttr, PortState};
pub use psn::{random_psn, PsnRng};
pub use qp::{CmQp, InitAttr, Qp, QpCaps, QpInit, QpType, RtrAttr, RtsAttr, UD_QKEY};
pub use srq::Srq;
