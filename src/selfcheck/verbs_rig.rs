//! The rig on a real device: a requester QP and a peer QP of the same
//! transport on one device (loopback), connected to each other; the
//! requester posts through `ibv_post_send` or the WR API (`post::*`), the
//! peer only receives (`VerbsRecv`). Recovery moves both QPs through RESET
//! back to RTS with new PSNs.

use std::sync::Arc;

use super::cases::Tr;
use super::exec::{BufRef, Rig};
use super::rig_parts::{device_rig_parts, e2s, Bufs, PeerRecv, ALL, DEPTH, UD_GRH};
use crate::post::post_send::PostSendQueue;
use crate::post::verbs_cq::VerbsCq;
use crate::post::wr_api::{send_ops_flags, WrApiQueue};
use crate::post::{Completion, CompletionQueue, Op, PostError, SendQueue, WrDesc};
use crate::sys;
use crate::tool::setup::method::Method;
use crate::verbs::{
    random_psn, Ah, Context, Cq, Grh, InitAttr, Mtu, Pd, Qp, QpInit, QpType, RtrAttr, RtsAttr,
    UdDest, UD_QKEY,
};

/// The device and port the rigs use.
pub struct Dev {
    pub ctx: Arc<Context>,
    pub pd: Arc<Pd>,
    pub port: u8,
    pub mtu: Mtu,
    pub lid: u16,
    pub grh: Option<Grh>,
}

impl Dev {
    pub fn open(name: Option<&str>) -> Result<Dev, String> {
        Self::on(Context::open(name).map_err(|e| e.to_string())?)
    }

    /// Port 1 of an open device (it must be ACTIVE), its GID on Ethernet,
    /// and a PD.
    pub fn on(ctx: Arc<Context>) -> Result<Dev, String> {
        let pa = ctx.query_port(1).map_err(|e| e.to_string())?;
        if !pa.state.is_active() {
            return Err(format!(
                "{} port 1 is {}: it must be ACTIVE (check the link)",
                ctx.name(),
                pa.state.name()
            ));
        }
        let grh = if pa.link_layer.is_ethernet() {
            let t = ctx.gid_table(1).map_err(|e| e.to_string())?;
            let i = t
                .auto_select(false)
                .ok_or_else(|| format!("{} port 1 has no usable GID", ctx.name()))?;
            let e = t.get(i).map_err(|e| e.to_string())?;
            Some(Grh::new(e.gid.0, i as u8))
        } else {
            None
        };
        let pd = Pd::new(&ctx).map_err(|e| e.to_string())?;
        Ok(Dev {
            ctx,
            pd,
            port: 1,
            mtu: pa.active_mtu,
            lid: pa.lid,
            grh,
        })
    }
}

impl Dev {
    /// RTR attributes towards QP `qpn` (PSN `psn`) on this device's port.
    pub fn rtr_to(&self, qpn: u32, psn: u32) -> RtrAttr {
        let mut r = RtrAttr::new(self.port, self.mtu, qpn, psn);
        r.dlid = self.lid;
        r.grh = self.grh;
        r.max_dest_rd_atomic = 16;
        r
    }
}

pub fn qp_type(tr: Tr) -> QpType {
    match tr {
        Tr::Rc => QpType::RC,
        Tr::Uc => QpType::UC,
        Tr::Ud => QpType::UD,
    }
}

/// One verbs QP end with its CQ.
struct End {
    qp: Arc<Qp>,
    cq: Arc<Cq>,
    psn: u32,
}

/// The requester's post method.
enum Poster {
    PostSend(PostSendQueue),
    WrApi(WrApiQueue),
}

pub struct VerbsRig<'d> {
    dev: &'d Dev,
    tr: Tr,
    method: Method,
    a: End,
    b: End,
    sq: Poster,
    cq: VerbsCq,
    peer_rx: PeerRecv,
    bufs: Bufs,
    ud: Option<UdDest>,
    max_inline: u32,
}

impl<'d> VerbsRig<'d> {
    /// The two QPs of `tr` connected, posting through `method` (post-send
    /// or wr-api).
    pub fn new(dev: &'d Dev, tr: Tr, method: Method) -> Result<Self, String> {
        let t = qp_type(tr);
        let ops = (method == Method::WrApi).then(|| send_ops_flags(tr.ops()));
        let probe_cq = Cq::new(&dev.ctx, 4, false).map_err(e2s)?;
        let mut max_inline = Qp::probe_max_inline(&dev.pd, &probe_cq, t, 1024);
        if tr == Tr::Ud {
            // A UD message (inline or not) must fit one MTU.
            max_inline = max_inline.min(dev.mtu.bytes().unwrap_or(256));
        }
        let end = |inline: u32| -> Result<End, String> {
            let cq = Cq::new(&dev.ctx, 4 * DEPTH, false).map_err(e2s)?;
            let init = QpInit {
                max_send_wr: DEPTH,
                max_recv_wr: DEPTH,
                max_inline_data: inline,
                send_ops_flags: ops,
                ..QpInit::new(t)
            };
            let qp = Qp::create(&dev.pd, &cq, &cq, &init).map_err(e2s)?;
            Ok(End {
                qp,
                cq,
                psn: random_psn(),
            })
        };
        let (a, b) = (end(max_inline)?, end(0)?);
        let bufs = Bufs::new(&dev.pd)?;
        connect(dev, &a, &b)?;
        let ud = if tr == Tr::Ud {
            let ah = Ah::new(&dev.pd, &dev.rtr_to(b.qp.qpn(), b.psn).ah_attr()).map_err(e2s)?;
            Some(UdDest {
                ah,
                remote_qpn: b.qp.qpn(),
                remote_qkey: UD_QKEY,
            })
        } else {
            None
        };
        let sq = poster(&a.qp, method, &ud)?;
        Ok(VerbsRig {
            dev,
            tr,
            method,
            cq: VerbsCq::new(&a.cq, 16).map_err(e2s)?,
            peer_rx: PeerRecv::new(&b.qp, &b.cq)?,
            a,
            b,
            sq,
            bufs,
            ud,
            max_inline: max_inline.min(1024),
        })
    }
}

fn poster(qp: &Arc<Qp>, method: Method, ud: &Option<UdDest>) -> Result<Poster, String> {
    Ok(match method {
        Method::WrApi => Poster::WrApi(WrApiQueue::new(qp, ud.clone()).map_err(e2s)?),
        _ => Poster::PostSend(PostSendQueue::new(qp, 64, ud.clone()).map_err(e2s)?),
    })
}

/// Both ends RESET -> INIT -> RTR -> RTS, each to the other.
fn connect(dev: &Dev, a: &End, b: &End) -> Result<(), String> {
    for (x, y) in [(a, b), (b, a)] {
        x.qp.to_init(&InitAttr::new(dev.port, ALL)).map_err(e2s)?;
        x.qp.to_rtr(&dev.rtr_to(y.qp.qpn(), y.psn)).map_err(e2s)?;
        x.qp.to_rts(&RtsAttr::new(x.psn, 16)).map_err(e2s)?;
    }
    Ok(())
}

fn to_reset(qp: &Qp) -> Result<(), String> {
    let attr = sys::ibv_qp_attr {
        qp_state: sys::IBV_QPS_RESET,
        ..Default::default()
    };
    qp.apply("ibv_modify_qp(->RESET)", attr, sys::IBV_QP_STATE)
        .map_err(e2s)
}

impl Rig for VerbsRig<'_> {
    device_rig_parts!();
    fn sq_depth(&self) -> u32 {
        self.a.qp.caps().max_send_wr.max(1)
    }
    fn post(&mut self, op: Op, wrs: &[WrDesc]) -> Result<(), PostError> {
        match &mut self.sq {
            Poster::PostSend(q) => q.post(op, wrs),
            Poster::WrApi(q) => q.post(op, wrs),
        }
    }
    fn recover(&mut self) -> Result<(), String> {
        to_reset(&self.a.qp)?;
        to_reset(&self.b.qp)?;
        // Drain what the error flushed.
        let mut buf = [Completion::default(); 16];
        while self.cq.poll(&mut buf).map_err(|e| format!("{e:?}"))? > 0 {}
        while self
            .peer_rx
            .cq
            .poll(&mut buf)
            .map_err(|e| format!("{e:?}"))?
            > 0
        {}
        self.a.psn = random_psn();
        self.b.psn = random_psn();
        connect(self.dev, &self.a, &self.b)?;
        self.sq = poster(&self.a.qp, self.method, &self.ud)?;
        Ok(())
    }
    fn describe_error(&self, c: &Completion) -> String {
        format!(
            "status {} ({}), vendor error {:#x}",
            c.status.name(),
            c.status.0,
            c.vendor_err
        )
    }
}
