//! The raw Ethernet server's resources on a device (perftest's `ctx_init`
//! and `send_set_up_connection` for the server): the PD, the CQ, one raw
//! packet QP with an RQ of `-r` receives (INIT → RTR → RTS with the state
//! and port only), the registered receive buffer (one slot per receive,
//! each room for a `-s` frame), and the steering rules of `raw::steer`
//! attached to the QP. The rules are destroyed before the QP on every way
//! out (field order: `flows` drops first).

use std::sync::Arc;

pub use super::raw_res::slot_stride;
use super::raw_res::{RawPort, RawRx};
use crate::raw::params::RawParams;
use crate::tool::common::fail::Fail;
use crate::verbs::{Cq, Pd, Qp, QpInit, QpType};

/// The server's QP with its receive side (buffer, CQ, rules).
pub struct RawRecvRes {
    /// Dropped first: a rule goes before its QP.
    pub rx: RawRx,
    pub qp: Arc<Qp>,
    pub pd: Arc<Pd>,
}

impl RawRecvRes {
    /// The QP to RTS, then its receive buffer registered and the rules.
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
        qp.raw_to_rts(p.ib_port).map_err(Fail::verbs)?;
        let rx = RawRx::create(port, p, (&pd, &qp), cq, slots)?;
        Ok(RawRecvRes { rx, qp, pd })
    }
}
