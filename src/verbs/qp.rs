//! Queue pairs: creation (legacy `ibv_create_qp`, or `ibv_create_qp_ex` with
//! `send_ops_flags` for the WR API) and the RESET→INIT→RTR→RTS transitions
//! with perftest's attributes (`ctx_modify_qp_to_init/rtr/rts`).

use std::ptr::NonNull;
use std::sync::Arc;

use super::ah::{AhAttr, Grh};
use super::context::Context;
use super::cq::Cq;
use super::error::{last_errno, warn_if_failed, Result, VerbsError};
use super::mr::Access;
use super::pd::Pd;
use super::port::Mtu;
pub use super::values::QpType;
use crate::sys;

/// perftest's UD Q_Key (`DEFF_QKEY`).
pub const UD_QKEY: u32 = 0x1111_1111;

/// What to create.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct QpInit {
    pub qp_type: QpType,
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
    /// Signal every send WR (perftest: off; it signals every cq_mod-th).
    pub sq_sig_all: bool,
    /// `Some(IBV_QP_EX_WITH_*)` creates the QP with `ibv_create_qp_ex` for
    /// the WR API (`crate::post::wr_api`); None uses `ibv_create_qp`.
    pub send_ops_flags: Option<u64>,
}

impl QpInit {
    /// perftest BW defaults: tx depth 128, rx depth 512, one SGE, no inline.
    pub fn new(qp_type: QpType) -> Self {
        Self {
            qp_type,
            max_send_wr: 128,
            max_recv_wr: 512,
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
            sq_sig_all: false,
            send_ops_flags: None,
        }
    }
}

/// The capacities the provider actually granted (≥ requested).
#[derive(Clone, Copy, PartialEq, Eq, Debug, Default)]
pub struct QpCaps {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

/// RESET→INIT. Access flags are used for RC/UC, the Q_Key for UD.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct InitAttr {
    pub port: u8,
    pub pkey_index: u16,
    pub access: Access,
    pub qkey: u32,
}

impl InitAttr {
    /// pkey index 0, Q_Key [`UD_QKEY`].
    pub fn new(port: u8, access: Access) -> Self {
        Self {
            port,
            pkey_index: 0,
            access,
            qkey: UD_QKEY,
        }
    }
}

/// INIT→RTR, from the peer's key message. UD uses only the state (its
/// addressing goes in an AH built from [`RtrAttr::ah_attr`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct RtrAttr {
    /// Local port (the address vector's port_num).
    pub port: u8,
    pub path_mtu: Mtu,
    pub dest_qpn: u32,
    pub rq_psn: u32,
    pub dlid: u16,
    pub sl: u8,
    /// Some on RoCE or with `-x`: is_global, hop_limit 0xFF.
    pub grh: Option<Grh>,
    /// RC: own out_reads (1 for write/send, device max_qp_rd_atom for read/atomic).
    pub max_dest_rd_atomic: u8,
    /// RC: 12 in perftest (`MIN_RNR_TIMER`).
    pub min_rnr_timer: u8,
    /// The address vector's static rate (`ibv_rate`; 0: the port's rate),
    /// perftest's HW rate limit.
    pub static_rate: u8,
}

impl RtrAttr {
    /// perftest defaults for the rest: dlid 0, sl 0, no GRH,
    /// max_dest_rd_atomic 1, min_rnr_timer 12.
    pub fn new(port: u8, path_mtu: Mtu, dest_qpn: u32, rq_psn: u32) -> Self {
        Self {
            port,
            path_mtu,
            dest_qpn,
            rq_psn,
            dlid: 0,
            sl: 0,
            grh: None,
            max_dest_rd_atomic: 1,
            min_rnr_timer: 12,
            static_rate: 0,
        }
    }

    /// The address vector, as perftest builds a UD AH from its RTR attr.
    pub fn ah_attr(&self) -> AhAttr {
        AhAttr {
            port: self.port,
            dlid: self.dlid,
            sl: self.sl,
            grh: self.grh,
        }
    }
}

/// RTR→RTS.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct RtsAttr {
    pub sq_psn: u32,
    /// RC: local ACK timeout 4.096 µs·2^t (perftest `-u`, default 14).
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    /// RC: the peer's out_reads.
    pub max_rd_atomic: u8,
}

impl RtsAttr {
    /// timeout 14, retry_cnt 7, rnr_retry 7 (perftest).
    pub fn new(sq_psn: u32, max_rd_atomic: u8) -> Self {
        Self {
            sq_psn,
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
            max_rd_atomic,
        }
    }
}

pub(crate) fn build_init(t: QpType, a: &InitAttr) -> (sys::ibv_qp_attr, u32) {
    let mut attr = sys::ibv_qp_attr {
        qp_state: sys::IBV_QPS_INIT,
        pkey_index: a.pkey_index,
        port_num: a.port,
        ..Default::default()
    };
    if t == QpType::RAW_PACKET {
        // perftest's ctx_modify_qp_to_init for RawEth: state and port only.
        return (attr, sys::IBV_QP_STATE | sys::IBV_QP_PORT);
    }
    let mut mask = sys::IBV_QP_STATE | sys::IBV_QP_PKEY_INDEX | sys::IBV_QP_PORT;
    if t == QpType::UD {
        attr.qkey = a.qkey;
        mask |= sys::IBV_QP_QKEY;
    } else {
        attr.qp_access_flags = a.access.0;
        mask |= sys::IBV_QP_ACCESS_FLAGS;
    }
    (attr, mask)
}

pub(crate) fn build_rtr(t: QpType, a: &RtrAttr) -> (sys::ibv_qp_attr, u32) {
    let mut attr = sys::ibv_qp_attr {
        qp_state: sys::IBV_QPS_RTR,
        ah_attr: a.ah_attr().to_raw(),
        ..Default::default()
    };
    attr.ah_attr.static_rate = a.static_rate;
    let mut mask = sys::IBV_QP_STATE;
    if t == QpType::RAW_PACKET {
        // A raw packet QP has no peer: the state alone (perftest's RawEth).
        return (
            sys::ibv_qp_attr {
                qp_state: sys::IBV_QPS_RTR,
                ..Default::default()
            },
            mask,
        );
    }
    if t != QpType::UD {
        attr.path_mtu = a.path_mtu.0;
        attr.dest_qp_num = a.dest_qpn;
        attr.rq_psn = a.rq_psn;
        mask |= sys::IBV_QP_AV | sys::IBV_QP_PATH_MTU | sys::IBV_QP_DEST_QPN | sys::IBV_QP_RQ_PSN;
        if t == QpType::RC {
            attr.max_dest_rd_atomic = a.max_dest_rd_atomic;
            attr.min_rnr_timer = a.min_rnr_timer;
            mask |= sys::IBV_QP_MIN_RNR_TIMER | sys::IBV_QP_MAX_DEST_RD_ATOMIC;
        }
    }
    (attr, mask)
}

pub(crate) fn build_rts(t: QpType, a: &RtsAttr) -> (sys::ibv_qp_attr, u32) {
    let mut attr = sys::ibv_qp_attr {
        qp_state: sys::IBV_QPS_RTS,
        sq_psn: a.sq_psn,
        ..Default::default()
    };
    if t == QpType::RAW_PACKET {
        // No PSN on a raw packet QP: the state alone (perftest's RawEth).
        attr.sq_psn = 0;
        return (attr, sys::IBV_QP_STATE);
    }
    let mut mask = sys::IBV_QP_STATE | sys::IBV_QP_SQ_PSN;
    if t == QpType::RC {
        attr.timeout = a.timeout;
        attr.retry_cnt = a.retry_cnt;
        attr.rnr_retry = a.rnr_retry;
        attr.max_rd_atomic = a.max_rd_atomic;
        mask |= sys::IBV_QP_TIMEOUT
            | sys::IBV_QP_RETRY_CNT
            | sys::IBV_QP_RNR_RETRY
            | sys::IBV_QP_MAX_QP_RD_ATOMIC;
    }
    (attr, mask)
}

pub(crate) fn create_hint(ctx: &Context, init: &QpInit) -> String {
    let d = ctx.attr();
    let mut h = format!(
        "{} QP on {} with max_send_wr {} / max_recv_wr {} (device max_qp_wr {}), max_send_sge \
         {} / max_recv_sge {} (device max_sge {}), max_inline_data {}; lower -t/--tx-depth, \
         -r/--rx-depth or -I/--inline_size",
        init.qp_type.name(),
        ctx.name(),
        init.max_send_wr,
        init.max_recv_wr,
        d.max_qp_wr,
        init.max_send_sge,
        init.max_recv_sge,
        d.max_sge,
        init.max_inline_data
    );
    if let Some(f) = init.send_ops_flags {
        h.push_str(&format!(
            "; created with send_ops_flags {f:#x} for the WR API (ibv_wr_*): if the provider \
             lacks it, use the ibv_post_send method"
        ));
    }
    h
}

/// A queue pair. Holds its PD and CQs, so they outlive it.
/// A QP's membership of a multicast group ([`Qp::join_mcast`]).
pub struct McastMember {
    qp: Arc<Qp>,
    pub mgid: [u8; 16],
    mlid: u16,
}

impl Drop for McastMember {
    fn drop(&mut self) {
        self.qp.detach_mcast(self.mgid, self.mlid);
    }
}

pub struct Qp {
    qp: NonNull<sys::ibv_qp>,
    qp_type: QpType,
    caps: QpCaps,
    send_ops_flags: Option<u64>,
    pd: Arc<Pd>,
    send_cq: Arc<Cq>,
    recv_cq: Arc<Cq>,
    /// `--use-srq`: the shared receive queue, kept until the QP is destroyed.
    _srq: Option<Arc<super::srq::Srq>>,
}

// SAFETY: QP control verbs are thread-safe; posting needs `&mut` on the post
// objects (`crate::post`), which hold their own Arc<Qp>.
unsafe impl Send for Qp {}
// SAFETY: as above; `&Qp` offers only thread-safe verbs (modify, query).
unsafe impl Sync for Qp {}

impl std::fmt::Debug for Qp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Qp")
            .field("qpn", &self.qpn())
            .field("type", &self.qp_type.name())
            .field("caps", &self.caps)
            .finish()
    }
}

impl Qp {
    pub fn create(
        pd: &Arc<Pd>,
        send_cq: &Arc<Cq>,
        recv_cq: &Arc<Cq>,
        init: &QpInit,
    ) -> Result<Arc<Qp>> {
        Self::create_with_srq(pd, send_cq, recv_cq, init, None)
    }

    /// [`Qp::create`], receiving from `srq` when given (then the QP has no
    /// receive queue of its own, as perftest creates it).
    pub fn create_with_srq(
        pd: &Arc<Pd>,
        send_cq: &Arc<Cq>,
        recv_cq: &Arc<Cq>,
        init: &QpInit,
        srq: Option<&Arc<super::srq::Srq>>,
    ) -> Result<Arc<Qp>> {
        let ctx = pd.context();
        let (qp, got) = Self::create_raw(pd, (send_cq, recv_cq), init, srq);
        let Some(qp) = NonNull::new(qp) else {
            return Err(VerbsError::new(
                if init.send_ops_flags.is_some() {
                    "ibv_create_qp_ex"
                } else {
                    "ibv_create_qp"
                },
                last_errno(),
                create_hint(ctx, init),
            ));
        };
        Ok(Arc::new(Qp {
            qp,
            qp_type: init.qp_type,
            caps: QpCaps {
                max_send_wr: got.max_send_wr,
                max_recv_wr: got.max_recv_wr,
                max_send_sge: got.max_send_sge,
                max_recv_sge: got.max_recv_sge,
                max_inline_data: got.max_inline_data,
            },
            send_ops_flags: init.send_ops_flags,
            pd: Arc::clone(pd),
            send_cq: Arc::clone(send_cq),
            recv_cq: Arc::clone(recv_cq),
            _srq: srq.cloned(),
        }))
    }

    /// `ibv_create_qp`, or `ibv_create_qp_ex` when `init` asks for the WR
    /// API's send ops: the QP (NULL on failure) and the capabilities the
    /// provider granted.
    fn create_raw(
        pd: &Arc<Pd>,
        (send_cq, recv_cq): (&Arc<Cq>, &Arc<Cq>),
        init: &QpInit,
        srq: Option<&Arc<super::srq::Srq>>,
    ) -> (*mut sys::ibv_qp, sys::ibv_qp_cap) {
        let own_rq = srq.is_none();
        let cap = sys::ibv_qp_cap {
            max_send_wr: init.max_send_wr,
            max_recv_wr: if own_rq { init.max_recv_wr } else { 0 },
            max_send_sge: init.max_send_sge,
            max_recv_sge: if own_rq { init.max_recv_sge } else { 0 },
            max_inline_data: init.max_inline_data,
        };
        let mut a = sys::ibv_qp_init_attr {
            send_cq: send_cq.raw(),
            recv_cq: recv_cq.raw(),
            srq: srq.map_or(std::ptr::null_mut(), |s| s.raw()),
            cap,
            qp_type: init.qp_type.0,
            sq_sig_all: i32::from(init.sq_sig_all),
            ..Default::default()
        };
        let Some(flags) = init.send_ops_flags else {
            // SAFETY: PD and CQs are live (Arcs held by the caller and, on
            // success, by the Qp); `a` is initialised.
            let qp = unsafe { sys::ibv_create_qp(pd.raw(), &mut a) };
            return (qp, a.cap);
        };
        let mut ex = sys::ibv_qp_init_attr_ex {
            send_cq: a.send_cq,
            recv_cq: a.recv_cq,
            srq: a.srq,
            cap: a.cap,
            qp_type: a.qp_type,
            sq_sig_all: a.sq_sig_all,
            comp_mask: sys::IBV_QP_INIT_ATTR_PD | sys::IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
            pd: pd.raw(),
            send_ops_flags: flags,
            ..Default::default()
        };
        // SAFETY: as above, and the context is the PD's, open while it lives.
        let qp = unsafe { sys::ibv_create_qp_ex(pd.context().raw(), &mut ex) };
        (qp, ex.cap)
    }

    fn modify(
        &self,
        verb: &'static str,
        attr: &mut sys::ibv_qp_attr,
        mask: u32,
        hint: impl FnOnce() -> String,
    ) -> Result<()> {
        // SAFETY: the QP is live; `attr` is initialised and `mask` names only
        // fields set in it.
        let ret = unsafe { sys::ibv_modify_qp(self.raw(), attr, mask as i32) };
        VerbsError::check(ret, verb, hint)?;
        Ok(())
    }

    /// The attributes named in `mask`, read back with `ibv_query_qp`.
    pub fn query(&self, mask: u32) -> Result<sys::ibv_qp_attr> {
        // SAFETY: the QP is live while self is.
        unsafe { query_raw(self.raw(), mask) }
    }

    /// The GRH the QP holds after RTR and its P_Key index:
    /// (traffic class, flow label, P_Key index).
    pub fn query_grh(&self) -> Result<(u8, u32, u16)> {
        let attr = self.query(sys::IBV_QP_AV | sys::IBV_QP_PKEY_INDEX)?;
        let g = attr.ah_attr.grh;
        Ok((g.traffic_class, g.flow_label, attr.pkey_index))
    }

    /// The static rate (`ibv_rate`) the QP's address vector holds.
    pub fn query_static_rate(&self) -> Result<u8> {
        Ok(self.query(sys::IBV_QP_AV)?.ah_attr.static_rate)
    }

    /// Applies attributes computed elsewhere (the RDMA CM's
    /// `rdma_init_qp_attr`, see [`super::cm`]); `what` names the transition.
    pub fn apply(&self, verb: &'static str, mut attr: sys::ibv_qp_attr, mask: u32) -> Result<()> {
        self.modify(verb, &mut attr, mask, || {
            format!(
                "{} QP {:#08x}: the attributes came from the RDMA CM (mask {mask:#x}); check \
                 the route to the peer",
                self.qp_type.name(),
                self.qpn()
            )
        })
    }

    pub fn to_init(&self, a: &InitAttr) -> Result<()> {
        let (mut attr, mask) = build_init(self.qp_type, a);
        self.modify("ibv_modify_qp(RESET->INIT)", &mut attr, mask, || {
            format!(
                "{} QP {:#08x}: port {} must exist on {} (valid {}), pkey index {} must be \
                 valid, access {}",
                self.qp_type.name(),
                self.qpn(),
                a.port,
                self.context().name(),
                self.context().port_range(),
                a.pkey_index,
                a.access.describe()
            )
        })
    }

    pub fn to_rtr(&self, a: &RtrAttr) -> Result<()> {
        let (mut attr, mask) = build_rtr(self.qp_type, a);
        self.modify("ibv_modify_qp(INIT->RTR)", &mut attr, mask, || {
            format!(
                "{} QP {:#08x} to remote QPN {:#08x} PSN {:#08x} LID {:#x} {}, path MTU {}: the \
                 MTU must not exceed the port's active MTU (-m), the remote values come from \
                 the peer's key message, and on RoCE a valid source GID index (-x) is required",
                self.qp_type.name(),
                self.qpn(),
                a.dest_qpn,
                a.rq_psn,
                a.dlid,
                match a.grh {
                    Some(g) => format!(
                        "dgid {} sgid_index {}",
                        std::net::Ipv6Addr::from(g.dgid),
                        g.sgid_index
                    ),
                    None => "without GRH".to_string(),
                },
                a.path_mtu.bytes().unwrap_or(0)
            )
        })
    }

    pub fn to_rts(&self, a: &RtsAttr) -> Result<()> {
        let (mut attr, mask) = build_rts(self.qp_type, a);
        self.modify("ibv_modify_qp(RTR->RTS)", &mut attr, mask, || {
            format!(
                "{} QP {:#08x} with sq_psn {:#08x}, timeout {}, retry_cnt {}, rnr_retry {}, \
                 max_rd_atomic {} (device max_qp_init_rd_atom {}); lower -o/--outs or -u",
                self.qp_type.name(),
                self.qpn(),
                a.sq_psn,
                a.timeout,
                a.retry_cnt,
                a.rnr_retry,
                a.max_rd_atomic,
                self.context().attr().max_qp_init_rd_atom
            )
        })
    }

    /// RESET→INIT→RTR→RTS for a raw packet QP on `port`: the state and the
    /// port at INIT, the state alone after (perftest's RawEth transitions).
    pub fn raw_to_rts(&self, port: u8) -> Result<()> {
        self.to_init(&InitAttr::new(port, Access::NONE))?;
        self.to_rtr(&RtrAttr::new(port, Mtu(0), 0, 0))?;
        self.to_rts(&RtsAttr::new(0, 0))
    }

    /// `ibv_modify_qp_rate_limit`: the NIC paces this QP's sends at `kbps`
    /// (packet pacing); `max_burst` bytes back to back and the typical frame
    /// size help it shape (0: the device's defaults).
    pub fn set_rate_limit(&self, kbps: u32, max_burst: u32, typical_pkt: u16) -> Result<()> {
        let mut attr = sys::ibv_qp_rate_limit_attr {
            rate_limit: kbps,
            max_burst_sz: max_burst,
            typical_pkt_sz: typical_pkt,
            ..Default::default()
        };
        // SAFETY: the QP is live; `attr` is a valid attribute struct the
        // call only reads.
        let ret = unsafe { sys::ibv_modify_qp_rate_limit(self.raw(), &mut attr) };
        VerbsError::check(ret, "ibv_modify_qp_rate_limit", || {
            format!(
                "the device refused to pace {} QP {:#08x} at {kbps} kbit/s",
                self.qp_type.name(),
                self.qpn()
            )
        })?;
        Ok(())
    }

    /// Moves to ERR: outstanding WRs complete with FLUSH_ERR (teardown).
    pub fn to_err(&self) -> Result<()> {
        let mut attr = sys::ibv_qp_attr {
            qp_state: sys::IBV_QPS_ERR,
            ..Default::default()
        };
        self.modify("ibv_modify_qp(->ERR)", &mut attr, sys::IBV_QP_STATE, || {
            format!("{} QP {:#08x}", self.qp_type.name(), self.qpn())
        })
    }

    /// `ibv_attach_mcast`: receives for the multicast group `mgid` (`mlid`:
    /// its LID on InfiniBand, 0 on RoCE and raw Ethernet) reach this QP too.
    pub fn attach_mcast(&self, mgid: [u8; 16], mlid: u16) -> Result<()> {
        let gid = sys::ibv_gid { raw: mgid };
        // SAFETY: the QP is live; `gid` is a valid ibv_gid the call only reads.
        let ret = unsafe { sys::ibv_attach_mcast(self.raw(), &gid, mlid) };
        VerbsError::check(ret, "ibv_attach_mcast", || {
            format!(
                "the device refused to attach the {} QP to the multicast group",
                self.qp_type.name()
            )
        })?;
        Ok(())
    }

    /// [`attach_mcast`](Self::attach_mcast), detached again when the member
    /// drops (it holds the QP, so before the QP can go).
    pub fn join_mcast(self: &Arc<Self>, mgid: [u8; 16], mlid: u16) -> Result<McastMember> {
        self.attach_mcast(mgid, mlid)?;
        Ok(McastMember {
            qp: self.clone(),
            mgid,
            mlid,
        })
    }

    /// `ibv_detach_mcast` (best effort: destroying the QP detaches it too).
    pub fn detach_mcast(&self, mgid: [u8; 16], mlid: u16) {
        let gid = sys::ibv_gid { raw: mgid };
        // SAFETY: as for attach_mcast.
        unsafe { sys::ibv_detach_mcast(self.raw(), &gid, mlid) };
    }

    pub fn qpn(&self) -> u32 {
        // SAFETY: the QP is live; qp_num is fixed at creation.
        unsafe { self.qp.as_ref().qp_num }
    }

    pub fn qp_type(&self) -> QpType {
        self.qp_type
    }

    /// Granted capacities (max_inline_data is what `-I` may use).
    pub fn caps(&self) -> QpCaps {
        self.caps
    }

    /// Set iff the QP was created for the WR API.
    pub fn send_ops_flags(&self) -> Option<u64> {
        self.send_ops_flags
    }

    /// The raw QP, valid while `self` lives (post methods, mlx5dv_init_obj).
    pub fn raw(&self) -> *mut sys::ibv_qp {
        self.qp.as_ptr()
    }

    pub fn pd(&self) -> &Arc<Pd> {
        &self.pd
    }

    pub fn context(&self) -> &Arc<Context> {
        self.pd.context()
    }

    pub fn send_cq(&self) -> &Arc<Cq> {
        &self.send_cq
    }

    pub fn recv_cq(&self) -> &Arc<Cq> {
        &self.recv_cq
    }

    /// The largest max_inline_data the provider grants for `qp_type`, found
    /// by creating throw-away QPs (binary search up to `upper`). perftest
    /// instead hard-codes per-device values; this asks the device.
    pub fn probe_max_inline(pd: &Arc<Pd>, cq: &Arc<Cq>, qp_type: QpType, upper: u32) -> u32 {
        let fits = |n: u32| {
            let init = QpInit {
                max_send_wr: 1,
                max_recv_wr: 1,
                max_inline_data: n,
                ..QpInit::new(qp_type)
            };
            Qp::create(pd, cq, cq, &init)
                .ok()
                .map(|q| q.caps().max_inline_data)
        };
        if let Some(n) = fits(upper) {
            return n.max(upper);
        }
        let (mut lo, mut hi) = (0u32, upper); // fits(lo) assumed, !fits(hi)
        while hi - lo > 1 {
            let mid = lo + (hi - lo) / 2;
            match fits(mid) {
                Some(_) => lo = mid,
                None => hi = mid,
            }
        }
        fits(lo).map_or(lo, |n| n.max(lo))
    }
}

impl Drop for Qp {
    fn drop(&mut self) {
        // SAFETY: post objects hold an Arc<Qp>, so none is left; destroyed
        // once, before the PD and CQs (fields drop after this body).
        let ret = unsafe { sys::ibv_destroy_qp(self.qp.as_ptr()) };
        warn_if_failed("ibv_destroy_qp", ret);
    }
}

/// `ibv_query_qp` for the attributes in `mask`.
///
/// # Safety
/// `qp` must be a live QP.
pub unsafe fn query_raw(qp: *mut sys::ibv_qp, mask: u32) -> Result<sys::ibv_qp_attr> {
    // SAFETY: both structs are plain C data for which all-zero is valid.
    let mut attr: sys::ibv_qp_attr = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut init: sys::ibv_qp_init_attr = unsafe { std::mem::zeroed() };
    // SAFETY: the QP is live (caller); the provider fills `attr`/`init`,
    // which we own.
    let ret = unsafe { sys::ibv_query_qp(qp, &mut attr, mask as i32, &mut init) };
    VerbsError::check(ret, "ibv_query_qp", || {
        format!("the QP's attributes (mask {mask:#x}) could not be read back")
    })?;
    Ok(attr)
}

/// What the RDMA CM needs of a QP it did not create (`-R`): its number,
/// the CM's attributes applied, and the attributes read back. Verbs QPs and
/// the direct path's QPs both take them.
pub trait CmQp {
    fn qp_num(&self) -> u32;
    /// Applies attributes computed by `rdma_init_qp_attr`.
    fn apply_attr(&self, verb: &'static str, attr: sys::ibv_qp_attr, mask: u32) -> Result<()>;
    fn query_attr(&self, mask: u32) -> Result<sys::ibv_qp_attr>;
}

impl CmQp for Qp {
    fn qp_num(&self) -> u32 {
        self.qpn()
    }
    fn apply_attr(&self, verb: &'static str, attr: sys::ibv_qp_attr, mask: u32) -> Result<()> {
        self.apply(verb, attr, mask)
    }
    fn query_attr(&self, mask: u32) -> Result<sys::ibv_qp_attr> {
        self.query(mask)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn init_rc_sets_access_ud_sets_qkey() {
        let a = InitAttr::new(1, Access::REMOTE_WRITE | Access::LOCAL_WRITE);
        let (rc, m) = build_init(QpType::RC, &a);
        assert_eq!(rc.qp_state, sys::IBV_QPS_INIT);
        assert_eq!(rc.port_num, 1);
        assert_eq!(rc.qp_access_flags, 3);
        assert_ne!(m & sys::IBV_QP_ACCESS_FLAGS, 0);
        assert_eq!(m & sys::IBV_QP_QKEY, 0);
        let (ud, m) = build_init(QpType::UD, &a);
        assert_eq!(ud.qkey, UD_QKEY);
        assert_ne!(m & sys::IBV_QP_QKEY, 0);
        assert_eq!(m & sys::IBV_QP_ACCESS_FLAGS, 0);
    }

    #[test]
    fn raw_packet_transitions_take_state_and_port_only() {
        let a = InitAttr::new(2, Access::REMOTE_WRITE);
        let (i, m) = build_init(QpType::RAW_PACKET, &a);
        assert_eq!((i.qp_state, i.port_num), (sys::IBV_QPS_INIT, 2));
        assert_eq!(m, sys::IBV_QP_STATE | sys::IBV_QP_PORT);
        let (r, m) = build_rtr(QpType::RAW_PACKET, &RtrAttr::new(2, Mtu::MTU_1024, 5, 6));
        assert_eq!(
            (r.qp_state, r.dest_qp_num, r.path_mtu),
            (sys::IBV_QPS_RTR, 0, 0)
        );
        assert_eq!(m, sys::IBV_QP_STATE);
        let (s, m) = build_rts(QpType::RAW_PACKET, &RtsAttr::new(0x42, 8));
        assert_eq!(s.qp_state, sys::IBV_QPS_RTS);
        assert_eq!(m, sys::IBV_QP_STATE);
    }

    #[test]
    fn rtr_masks_per_type() {
        let mut r = RtrAttr::new(1, Mtu::MTU_1024, 0x1234, 0xabcdef);
        r.grh = Some(Grh::new([0xfe; 16], 3));
        r.max_dest_rd_atomic = 16;
        let (a, m) = build_rtr(QpType::RC, &r);
        assert_eq!(a.qp_state, sys::IBV_QPS_RTR);
        assert_eq!((a.path_mtu, a.dest_qp_num, a.rq_psn), (3, 0x1234, 0xabcdef));
        assert_eq!((a.max_dest_rd_atomic, a.min_rnr_timer), (16, 12));
        assert_eq!(a.ah_attr.is_global, 1);
        assert_eq!(a.ah_attr.grh.hop_limit, 0xff);
        assert_eq!(a.ah_attr.port_num, 1);
        let rc_mask = sys::IBV_QP_STATE
            | sys::IBV_QP_AV
            | sys::IBV_QP_PATH_MTU
            | sys::IBV_QP_DEST_QPN
            | sys::IBV_QP_RQ_PSN
            | sys::IBV_QP_MIN_RNR_TIMER
            | sys::IBV_QP_MAX_DEST_RD_ATOMIC;
        assert_eq!(m, rc_mask);
        let (_, m) = build_rtr(QpType::UC, &r);
        assert_eq!(
            m,
            rc_mask & !(sys::IBV_QP_MIN_RNR_TIMER | sys::IBV_QP_MAX_DEST_RD_ATOMIC)
        );
        let (_, m) = build_rtr(QpType::UD, &r);
        assert_eq!(m, sys::IBV_QP_STATE);
    }

    #[test]
    fn rts_masks_per_type() {
        let r = RtsAttr::new(0x42, 8);
        let (a, m) = build_rts(QpType::RC, &r);
        assert_eq!(
            (
                a.sq_psn,
                a.timeout,
                a.retry_cnt,
                a.rnr_retry,
                a.max_rd_atomic
            ),
            (0x42, 14, 7, 7, 8)
        );
        assert_ne!(m & sys::IBV_QP_MAX_QP_RD_ATOMIC, 0);
        for t in [QpType::UC, QpType::UD] {
            let (_, m) = build_rts(t, &r);
            assert_eq!(m, sys::IBV_QP_STATE | sys::IBV_QP_SQ_PSN);
        }
    }

    #[test]
    fn rtr_ah_attr_matches_fields() {
        let mut r = RtrAttr::new(2, Mtu::MTU_4096, 1, 2);
        r.dlid = 7;
        r.sl = 1;
        let ah = r.ah_attr();
        assert_eq!((ah.port, ah.dlid, ah.sl, ah.grh), (2, 7, 1, None));
    }
}
