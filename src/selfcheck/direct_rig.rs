//! The rig for the direct path on an mlx5 device: the requester QP is made
//! by the direct set-up steps (`mlx5::setup::set_up` over `HwSteps`: thread
//! domain, parent domain, `mlx5dv_create_qp`, `mlx5dv_init_obj`, layout) and
//! posts through a `DirectSq`, its CQ polled by a `DirectCq`; the peer is a
//! verbs QP that receives. Recovery: both QPs through RESET back to RTS (a
//! reset QP's ring starts at 0 again, so the SQ is built anew and
//! re-attached to the poller). Needs a ConnectX: it compiles everywhere but
//! was not run by the project (no such NIC here).

use std::sync::Arc;

use super::cases::Tr;
use super::exec::{BufRef, Rig};
use super::rig_parts::{device_rig_parts, e2s, Bufs, PeerRecv, ALL, BUF, DEPTH, UD_GRH};
use super::verbs_rig::{qp_type, Dev};
use crate::mlx5::device::{
    cq_from_ibv_cq, sq_from_dv, sq_from_ibv_qp, ud_av_from_ibv_ah, DirectQp, HwSteps,
};
use crate::mlx5::env::Mlx5Env;
use crate::mlx5::prm::Syndrome;
use crate::mlx5::setup::{set_up, DirectQpAttr, QpKind};
use crate::mlx5::{DirectCq, DirectSq, HwMmio, Transport};
use crate::post::{Completion, CompletionQueue, Op, PostError, SendQueue, WrDesc};
use crate::sys;
use crate::verbs::error::errno_of;
use crate::verbs::qp::{build_init, build_rtr, build_rts};
use crate::verbs::{random_psn, Ah, Cq, InitAttr, Qp, QpInit, RtsAttr, UdDest, UD_QKEY};

pub struct DirectRig<'d> {
    dev: &'d Dev,
    tr: Tr,
    // Drop order: pollers and SQ, then the QPs, then CQs and MRs.
    sq: Option<DirectSq<HwMmio>>,
    cq: DirectCq,
    qp: DirectQp,
    a_psn: u32,
    peer: Arc<Qp>,
    b_psn: u32,
    peer_rx: PeerRecv,
    transport: Transport,
    env: Mlx5Env,
    bufs: Bufs,
    _ud: Option<UdDest>,
    _a_cq: Arc<Cq>,
    max_inline: u32,
}

impl<'d> DirectRig<'d> {
    /// UC is set up like RC; the set-up failing is the reason direct is
    /// unavailable.
    pub fn new(dev: &'d Dev, tr: Tr, env: &Mlx5Env) -> Result<Self, String> {
        let max_inline = 128u32.min(dev.mtu.bytes().unwrap_or(256));
        let a_cq = Cq::new(&dev.ctx, 4 * DEPTH, false).map_err(e2s)?;
        let attr = DirectQpAttr {
            kind: match tr {
                Tr::Rc => QpKind::Rc,
                Tr::Uc => QpKind::Uc,
                Tr::Ud => QpKind::Ud,
            },
            max_send_wr: DEPTH,
            max_recv_wr: 1,
            max_recv_sge: 1,
            max_inline_data: max_inline,
            atomics: tr == Tr::Rc && dev.ctx.attr().atomic_cap.0 != 0,
        };
        // SAFETY: context, PD and CQ are live; the rig keeps the CQ (and the
        // device borrow keeps the PD) until after the QP is destroyed.
        let mut steps =
            unsafe { HwSteps::new(dev.ctx.raw(), dev.pd.raw(), a_cq.raw(), a_cq.raw()) };
        let mut done = set_up(&mut steps, 1, &attr, env).map_err(e2s)?;
        let (qp, dv) = done.qps.pop().ok_or("set-up made no QP")?;
        let b_cq = Cq::new(&dev.ctx, 4 * DEPTH, false).map_err(e2s)?;
        let peer = Qp::create(
            &dev.pd,
            &b_cq,
            &b_cq,
            &QpInit {
                max_send_wr: 1,
                max_recv_wr: DEPTH,
                ..QpInit::new(qp_type(tr))
            },
        )
        .map_err(e2s)?;
        let bufs = Bufs::new(&dev.pd)?;
        let (a_psn, b_psn) = (random_psn(), random_psn());
        let peer_rx = PeerRecv::new(&peer, &b_cq)?;
        // SAFETY: the CQ is fresh and polled only by this poller.
        let cq = unsafe { cq_from_ibv_cq(a_cq.raw()) }.map_err(e2s)?;
        let mut rig = DirectRig {
            dev,
            tr,
            sq: None,
            cq,
            qp,
            a_psn,
            peer,
            b_psn,
            peer_rx,
            transport: Transport::Rc,
            env: env.clone(),
            bufs,
            _ud: None,
            _a_cq: a_cq,
            max_inline,
        };
        rig.connect()?;
        if tr == Tr::Ud {
            let r = dev.rtr_to(rig.peer.qpn(), rig.b_psn);
            let ah = Ah::new(&dev.pd, &r.ah_attr()).map_err(e2s)?;
            // SAFETY: the AH is live (kept in the rig) and of this context.
            let av =
                unsafe { ud_av_from_ibv_ah(ah.raw(), rig.peer.qpn(), UD_QKEY) }.map_err(e2s)?;
            rig.transport = Transport::Ud(av);
            rig._ud = Some(UdDest {
                ah,
                remote_qpn: rig.peer.qpn(),
                remote_qkey: UD_QKEY,
            });
        }
        // SAFETY: the QP is fresh (nothing posted), never posted through
        // libmlx5, on its own thread-domain UAR; dv describes it.
        let sq = unsafe { sq_from_dv(rig.qp.qp(), &dv, rig.transport) }.map_err(e2s)?;
        rig.install(sq)?;
        Ok(rig)
    }

    fn install(&mut self, mut sq: DirectSq<HwMmio>) -> Result<(), String> {
        sq.set_bf_policy(self.env.bf_policy());
        let local = self
            .bufs
            .local
            .host_ptr()
            .ok_or("the rig's MR is host memory")?;
        // SAFETY: the local MR's buffer outlives the SQ (field order).
        unsafe { sq.allow_inline_source(local, BUF) }.map_err(e2s)?;
        self.cq.reattach(sq.progress());
        self.sq = Some(sq);
        Ok(())
    }

    fn modify(&self, (mut attr, mask): (sys::ibv_qp_attr, u32)) -> Result<(), String> {
        // SAFETY: the QP is live; the attribute builders set what mask names.
        let ret = unsafe { sys::ibv_modify_qp(self.qp.qp(), &mut attr, mask as i32) };
        if ret != 0 {
            return Err(format!(
                "ibv_modify_qp on the direct QP: errno {}",
                errno_of(ret)
            ));
        }
        Ok(())
    }

    /// Both QPs RESET/INIT -> RTR -> RTS, each to the other.
    fn connect(&mut self) -> Result<(), String> {
        let t = qp_type(self.tr);
        let init = InitAttr::new(self.dev.port, ALL);
        self.modify(build_init(t, &init))?;
        // SAFETY: the QP is live; qp_num is fixed.
        let a_qpn = unsafe { (*self.qp.qp()).qp_num };
        self.modify(build_rtr(t, &self.dev.rtr_to(self.peer.qpn(), self.b_psn)))?;
        self.modify(build_rts(t, &RtsAttr::new(self.a_psn, 16)))?;
        self.peer.to_init(&init).map_err(e2s)?;
        self.peer
            .to_rtr(&self.dev.rtr_to(a_qpn, self.a_psn))
            .map_err(e2s)?;
        self.peer.to_rts(&RtsAttr::new(self.b_psn, 16)).map_err(e2s)
    }
}

impl Rig for DirectRig<'_> {
    device_rig_parts!();
    fn sq_depth(&self) -> u32 {
        self.sq.as_ref().map_or(1, |s| s.capacity())
    }
    fn post(&mut self, op: Op, wrs: &[WrDesc]) -> Result<(), PostError> {
        match self.sq.as_mut() {
            Some(sq) => sq.post(op, wrs),
            None => Err(PostError::Unsupported),
        }
    }
    fn recover(&mut self) -> Result<(), String> {
        self.sq = None;
        let reset = sys::ibv_qp_attr {
            qp_state: sys::IBV_QPS_RESET,
            ..Default::default()
        };
        self.modify((reset, sys::IBV_QP_STATE))?;
        self.peer
            .apply("ibv_modify_qp(->RESET)", reset, sys::IBV_QP_STATE)
            .map_err(e2s)?;
        let mut buf = [Completion::default(); 16];
        while self.cq.poll(&mut buf).unwrap_or(0) > 0 {}
        while self.peer_rx.cq.poll(&mut buf).unwrap_or(0) > 0 {}
        self.a_psn = random_psn();
        self.b_psn = random_psn();
        self.connect()?;
        // SAFETY: after RESET libmlx5 zeroed the QP's indices and doorbell
        // record, so the ring is fresh; nothing posts through libmlx5.
        let sq = unsafe { sq_from_ibv_qp(self.qp.qp(), self.transport) }.map_err(e2s)?;
        self.install(sq)
    }
    fn describe_error(&self, c: &Completion) -> String {
        format!(
            "status {} ({}), mlx5 syndrome {:#04x} {}, vendor syndrome {:#04x}",
            c.status.name(),
            c.status.0,
            c.syndrome,
            Syndrome(c.syndrome).name(),
            c.vendor_err
        )
    }
}
