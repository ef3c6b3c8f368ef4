//! The raw Ethernet server's resources on a device (perftest's `ctx_init`
//! and `send_set_up_connection` for the server): the PD, then `-q` raw
//! packet QPs, each with an RQ of `-r` receives (INIT → RTR → RTS with the
//! state and port only), a CQ of its own, a registered receive buffer (one
//! slot per receive, each room for a `-s` frame), and the steering rules
//! of `raw::steer` attached to it: every QP gets the same rules, as
//! perftest attaches `flow_rules` to each `ctx.qp[i]`. Every rule is
//! destroyed before its QP on every way out (field order: a QP's `rx`,
//! whose `flows` drop first, then the QP; the QPs before the PD).

use std::sync::Arc;

pub use super::raw_res::slot_stride;
use super::raw_res::{RawPort, RawRx};
use crate::raw::params::RawParams;
use crate::tool::common::fail::Fail;
use crate::verbs::{Cq, Pd, Qp, QpInit, QpType};

/// One of the server's QPs with its receive side (buffer, CQ, rules).
pub struct RawRecvQp {
    /// Dropped first: a rule goes before its QP.
    pub rx: RawRx,
    pub qp: Arc<Qp>,
}

/// The server's QPs (`-q`) and their PD.
pub struct RawRecvRes {
    /// Dropped before the PD, in order, each QP's rules before it.
    pub qps: Vec<RawRecvQp>,
    pub pd: Arc<Pd>,
}

impl RawRecvRes {
    /// Each QP to RTS, then its receive buffer registered and the rules.
    /// A failure part way drops what was made, rules first.
    pub fn create(port: &RawPort, p: &RawParams) -> Result<RawRecvRes, Fail> {
        let pd = Pd::new(&port.ctx).map_err(Fail::verbs)?;
        let slots = p.raw.rx_depth.max(1) as u32;
        let mut qps = Vec::with_capacity(p.raw.qps as usize);
        for _ in 0..p.raw.qps.max(1) {
            qps.push(recv_qp(port, p, &pd, slots)?);
        }
        Ok(RawRecvRes { qps, pd })
    }
}

/// One QP with `slots` receives on a CQ of its own, and its rules.
fn recv_qp(port: &RawPort, p: &RawParams, pd: &Arc<Pd>, slots: u32) -> Result<RawRecvQp, Fail> {
    let cq = Cq::new(&port.ctx, slots, false).map_err(Fail::verbs)?;
    let init = QpInit {
        max_send_wr: 1,
        max_recv_wr: slots,
        ..QpInit::new(QpType::RAW_PACKET)
    };
    let qp = Qp::create(pd, &cq, &cq, &init).map_err(Fail::verbs)?;
    qp.raw_to_rts(p.ib_port).map_err(Fail::verbs)?;
    let rx = RawRx::create(port, p, (pd, &qp), cq, slots)?;
    Ok(RawRecvQp { rx, qp })
}
