//! The raw Ethernet server's resources on a device (perftest's `ctx_init`
//! and `send_set_up_connection` for the server): the PD, the CQ, one raw
//! packet QP with an RQ of `-r` receives (INIT → RTR → RTS with the state
//! and port only), the registered receive buffer (one slot per receive,
//! each room for a `-s` frame), and the steering rules of `raw::steer`
//! attached to the QP. The rules are destroyed before the QP on every way
//! out (field order: `flows` drops first).

use std::sync::Arc;

pub use super::raw_res::slot_stride;
use super::raw_res::{attach_rules, RawPort};
use crate::raw::params::RawParams;
use crate::tool::common::fail::Fail;
use crate::verbs::flow::Flow;
use crate::verbs::{Access, AlignedBuf, Cq, Mr, Pd, Qp, QpInit, QpType};

/// The server's QP, its receive buffer and rules.
pub struct RawRecvRes {
    /// Dropped first: a rule goes before its QP.
    pub flows: Vec<Flow>,
    pub qp: Arc<Qp>,
    pub mr: Mr,
    pub cq: Arc<Cq>,
    pub pd: Arc<Pd>,
    /// Receive slots (`-r`) and their stride.
    pub slots: u32,
    pub stride: u32,
    /// The device checks receive checksums (`IBV_RAW_PACKET_CAP_IP_CSUM`).
    pub csum_reported: bool,
}

impl RawRecvRes {
    /// The QP to RTS with its receive buffer registered, then the rules.
    pub fn create(port: &RawPort, p: &RawParams) -> Result<RawRecvRes, Fail> {
        let ctx = &port.ctx;
        let pd = Pd::new(ctx).map_err(Fail::verbs)?;
        let slots = p.raw.rx_depth.max(1) as u32;
        let cq = Cq::new(ctx, slots, false).map_err(Fail::verbs)?;
        let init = QpInit {
            max_send_wr: 1,
            max_recv_wr: slots,
            ..QpInit::new(QpType::RAW_PACKET)
        };
        let qp = Qp::create(&pd, &cq, &cq, &init).map_err(Fail::verbs)?;
        let stride = slot_stride(p.size);
        let buf = AlignedBuf::zeroed(slots as usize * stride as usize).map_err(Fail::verbs)?;
        let mr = Mr::new(&pd, buf, Access::LOCAL_WRITE).map_err(Fail::verbs)?;
        qp.raw_to_rts(p.ib_port).map_err(Fail::verbs)?;
        let flows = attach_rules(&qp, p)?;
        Ok(RawRecvRes {
            flows,
            qp,
            mr,
            cq,
            pd,
            slots,
            stride,
            csum_reported: ctx.raw_rx_csum(),
        })
    }
}
