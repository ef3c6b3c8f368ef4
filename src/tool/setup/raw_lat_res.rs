//! raw-eth-lat's and raw-eth-burst-lat's resources on a device (perftest's `ctx_init` and
//! `send_set_up_connection` with duplex set, as raw_ethernet_send_lat.c
//! runs them on both sides): the PD, a send CQ and a receive CQ, one raw
//! packet QP (INIT → RTR → RTS with the state and port only) with `-r`
//! receives, the registered send buffer holding this side's frame per flow
//! (`raw::slots`, perftest's payload and headers), the receive buffer (one
//! cache-line-rounded slot per receive), and the steering rules of
//! `raw::steer` attached to the QP, which bring the peer's frames to the
//! RQ. The rules go before the QP on every way out (field order).

use std::sync::Arc;

use super::raw_method::RawMethod;
use super::raw_recv_res::slot_stride;
use super::raw_res::{pace_qp, RawPort};
use crate::post::wr_api::send_ops_flags;
use crate::post::Op;
use crate::raw::params::RawParams;
use crate::raw::slots::{self, Slots};
use crate::raw::steer;
use crate::run::raw_lat::RxRing;
use crate::tool::common::fail::Fail;
use crate::verbs::flow::Flow;
use crate::verbs::{Access, AlignedBuf, Cq, Mr, Pd, Qp, QpInit, QpType};

/// Receives posted before the run: `-r`, at most `-n` (none left over).
pub fn rx_depth(p: &RawParams) -> u64 {
    let r = p.raw.rx_depth.max(1);
    if p.raw.duration.is_some() {
        r
    } else {
        r.min(p.raw.iters.max(1))
    }
}

/// One side's QP, buffers and rules. The PD lives as long as the QP and
/// the MRs that hold it.
pub struct RawLatRes {
    /// The steering rules, then the QP they bring frames to (a rule is
    /// destroyed before its QP: tuple order).
    pub ruled: (Vec<Flow>, Arc<Qp>),
    /// The send buffer and its layout (this side's frame per flow).
    pub tx: (Mr, Slots),
    /// The receive buffer and its ring (one slot per receive).
    pub rx: (Mr, RxRing),
    /// The send CQ and the receive CQ.
    pub cqs: (Arc<Cq>, Arc<Cq>),
}

impl RawLatRes {
    /// The QP to RTS with both buffers registered, then the rules.
    pub fn create(port: &RawPort, p: &RawParams, method: RawMethod) -> Result<RawLatRes, Fail> {
        let ctx = &port.ctx;
        let pd = Pd::new(ctx).map_err(Fail::verbs)?;
        let depth = (p.raw.tx_depth as u32).max(1);
        let rx_slots = rx_depth(p) as u32;
        let scq = Cq::new(ctx, depth, false).map_err(Fail::verbs)?;
        let rcq = Cq::new(ctx, rx_slots, false).map_err(Fail::verbs)?;
        let init = QpInit {
            max_send_wr: depth,
            max_recv_wr: rx_slots,
            max_inline_data: if method.is_direct() { 0 } else { p.inline_size },
            send_ops_flags: (method == RawMethod::WrApi).then(|| send_ops_flags(&[Op::Send])),
            ..QpInit::new(QpType::RAW_PACKET)
        };
        let qp = Qp::create(&pd, &scq, &rcq, &init).map_err(Fail::verbs)?;
        let tx = tx_frames(&pd, p)?;
        let rx = rx_ring(&pd, p, rx_slots)?;
        qp.raw_to_rts(p.ib_port).map_err(Fail::verbs)?;
        // perftest master paces a latency tool's QP too (PP only).
        pace_qp(&qp, p)?;
        let flows = steer::rules(p)
            .iter()
            .map(|rule| Flow::create(&qp, rule).map_err(|e| rule_failed(p, e)))
            .collect::<Result<Vec<_>, _>>()?;
        Ok(RawLatRes {
            ruled: (flows, qp),
            tx,
            rx,
            cqs: (scq, rcq),
        })
    }

    pub fn qp(&self) -> &Arc<Qp> {
        &self.ruled.1
    }
}

/// The registered send buffer with this side's frame per flow
/// (`raw::slots`: perftest's payload and headers).
fn tx_frames(pd: &Arc<Pd>, p: &RawParams) -> Result<(Mr, Slots), Fail> {
    let page = crate::verbs::mr::page_size() as u64;
    let slots = Slots::new(p.size, p.raw.flows, 1, 1, page);
    let mut buf = AlignedBuf::zeroed(slots.buffer_len()).map_err(Fail::verbs)?;
    slots::fill_body(buf.as_mut_slice(), &p.frame_spec(), &slots, p.body(0x5eed));
    let mr = Mr::new(pd, buf, Access::LOCAL_WRITE).map_err(Fail::verbs)?;
    Ok((mr, slots))
}

/// The registered receive buffer: `n` cache-line-rounded slots, each
/// posted for a whole slot.
fn rx_ring(pd: &Arc<Pd>, p: &RawParams, n: u32) -> Result<(Mr, RxRing), Fail> {
    let stride = slot_stride(p.size);
    let buf = AlignedBuf::zeroed(n as usize * stride as usize).map_err(Fail::verbs)?;
    let mr = Mr::new(pd, buf, Access::LOCAL_WRITE).map_err(Fail::verbs)?;
    let ring = RxRing {
        base: mr.addr(),
        stride,
        room: stride,
        slots: n,
        lkey: mr.lkey(),
    };
    Ok((mr, ring))
}

fn rule_failed(p: &RawParams, e: crate::verbs::VerbsError) -> Fail {
    Fail::new(format!(
        "rdmaperf {}: attaching a steering rule failed: {e} (a ConnectX port in Ethernet mode, \
         root or CAP_NET_RAW, and --sniffer/--promiscuous only where the device allows them)",
        p.raw.tool.name()
    ))
}
