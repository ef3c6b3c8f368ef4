//! `-R`: the data QPs connected by the RDMA CM instead of by the key
//! messages (perftest `create_rdma_cm_connection`): a hand_shake, the client
//! connects QP after QP to the server's `-p` port while the server accepts as
//! many requests, a hand_shake. The CM sets each QP's path, PSNs and
//! timeouts (`rdma_init_qp_attr`); the key messages that follow carry only the
//! rkeys and addresses.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::cli::params::Params;
use crate::cli::params::{Conn, Verb};
use crate::ctrl::cm_link::{self, Cancel};
use crate::ctrl::{Dest, Session};
use crate::run::stop;
use crate::tool::common::fail::Fail;
use crate::tool::setup::resources::{Endpoint, Resources};
use crate::verbs::cm::{CmId, EventChannel};
use crate::verbs::{Ah, CmQp, UdDest};

/// The CM ids of the data QPs: kept for the run (dropping one disconnects).
pub struct CmQps {
    ids: Vec<CmId>,
    _ch: Arc<EventChannel>,
    /// UD client: where each QP sends, from the CM's replies (the peer's QPN,
    /// its Q_Key and the address vector); empty otherwise.
    pub ud: Vec<UdDest>,
}

impl Drop for CmQps {
    fn drop(&mut self) {
        for id in self.ids.iter().filter(|id| !id.is_ud()) {
            id.disconnect();
        }
    }
}

const CANCEL: Cancel = stop::requested;

/// Connects every QP of `res` through the CM (no-op without `-R`).
pub fn connect_qps(
    sess: &mut Session,
    ep: &Endpoint,
    p: &Params,
    res: &Resources,
) -> Result<Option<CmQps>, Fail> {
    if !p.rdma_cm {
        return Ok(None);
    }
    // perftest syncs before and after, with a key message of zeros.
    let blank = Dest {
        gid: Some([0; 16]),
        ..Dest::default()
    };
    sess.hand_shake_step("rdma_cm sync before connecting the QPs", &blank)
        .map_err(Fail::ctrl)?;
    let ch = EventChannel::new().map_err(Fail::verbs)?;
    let timeout = Duration::from_secs(p.ctrl_timeout_s);
    // perftest asks for outstanding reads only in READ/ATOMIC tests.
    let out_reads = match p.tool.verb {
        Verb::Read | Verb::Atomic => res.out_reads.min(255) as u8,
        _ => 0,
    };
    let cm = DataCm {
        ch: &ch,
        ep,
        p,
        res,
        out_reads,
        timeout,
        ud: p.conn == Conn::Ud,
    };
    let qps = res.cm_qps();
    let (ids, uds) = match &p.server {
        Some(host) => cm.connect(host, &qps)?,
        None => (cm.accept(&qps)?, Vec::new()),
    };
    sess.hand_shake_step("rdma_cm sync after connecting the QPs", &blank)
        .map_err(Fail::ctrl)?;
    Ok(Some(CmQps {
        ids,
        _ch: ch,
        ud: uds,
    }))
}

/// What connecting the data QPs needs, on either side.
struct DataCm<'a> {
    ch: &'a Arc<EventChannel>,
    ep: &'a Endpoint,
    p: &'a Params,
    res: &'a Resources,
    /// The outstanding reads asked for (READ/ATOMIC only).
    out_reads: u8,
    /// Per QP, for its CM exchange.
    timeout: Duration,
    ud: bool,
}

impl DataCm<'_> {
    /// The client: each QP connected to the server's port in turn; UD: where
    /// each one sends.
    fn connect(&self, host: &str, qps: &[&dyn CmQp]) -> Result<(Vec<CmId>, Vec<UdDest>), Fail> {
        let p = self.p;
        let dst = cm_link::resolve_v4(host, p.port).map_err(Fail::ctrl)?;
        let mut ids = Vec::with_capacity(qps.len());
        let mut uds = Vec::new();
        for &qp in qps {
            let (id, ud) = self.connect_one(host, dst, qp)?;
            uds.extend(ud);
            ids.push(id);
        }
        Ok((ids, uds))
    }

    /// One client QP: connected, to RTS, its retry count and TOS checked;
    /// a UD QP's destination from the reply, a connected one established.
    fn connect_one(
        &self,
        host: &str,
        dst: std::net::SocketAddrV4,
        qp: &dyn CmQp,
    ) -> Result<(CmId, Option<UdDest>), Fail> {
        let (p, ep, ud) = (self.p, self.ep, self.ud);
        let until = Instant::now() + self.timeout;
        let mut param = cm_link::conn_param(qp.qp_num(), self.out_reads);
        param.retry_count = p.conn_opts.retry_count;
        param.tos = p.conn_opts.tos;
        param.src = p.conn_opts.source_v4();
        let (id, ev) = cm_link::connect_id(self.ch, &ep.ctx, dst, until, CANCEL, param, ud)
            .map_err(Fail::ctrl)?;
        cm_link::to_rts(&id, qp, "data QP", host).map_err(Fail::ctrl)?;
        if !ud && p.conn_opts.retry_count != crate::cli::params::DEF_RETRY_COUNT {
            check_retry(qp, p.conn_opts.retry_count)?;
        }
        if let (Some(tos), false) = (p.conn_opts.tos, ud) {
            check_tos(qp, tos, ep)?;
        }
        let dest = match ev.ud {
            Some(u) => Some(UdDest {
                ah: Ah::from_raw(&self.res.pd, u.ah_attr).map_err(Fail::verbs)?,
                remote_qpn: u.qp_num,
                remote_qkey: u.qkey,
            }),
            None if ud => {
                return Err(Fail::new(
                    "rdma_cm: the UD reply carried no address; is the peer using -c UD too?",
                ))
            }
            None => {
                id.establish().map_err(Fail::verbs)?;
                None
            }
        };
        Ok((id, dest))
    }

    /// The server: listens on its port and accepts one request per QP.
    fn accept(&self, qps: &[&dyn CmQp]) -> Result<Vec<CmId>, Fail> {
        let p = self.p;
        let here = format!("port {}", p.port);
        let listen = CmId::with_ps(self.ch, self.ud).map_err(Fail::verbs)?;
        listen
            .listen(p.port, qps.len() as i32)
            .map_err(Fail::verbs)?;
        let mut ids = Vec::with_capacity(qps.len());
        for &qp in qps {
            let until = Some(Instant::now() + self.timeout);
            let id = cm_link::next_request(&listen, until, CANCEL, p.port).map_err(Fail::ctrl)?;
            cm_link::check_device(&id, &self.ep.ctx, &here).map_err(Fail::ctrl)?;
            cm_link::to_rts(&id, qp, "data QP", &here).map_err(Fail::ctrl)?;
            let mut param = cm_link::conn_param(qp.qp_num(), self.out_reads);
            param.retry_count = p.conn_opts.retry_count;
            id.accept(&param).map_err(Fail::verbs)?;
            ids.push(id);
        }
        Ok(ids)
    }
}

/// `-T`: on RoCE the CM turns the ToS into the GRH traffic class of the
/// data QP's path; read it back so a ToS that did not take is an error, not
/// a run on another DSCP. (On InfiniBand the ToS selects the SL through the
/// path record instead; nothing to compare there.)
fn check_tos(qp: &dyn CmQp, want: u8, ep: &Endpoint) -> Result<(), Fail> {
    if ep.port.link_layer != crate::verbs::LinkLayer::ETHERNET {
        return Ok(());
    }
    let a = qp.query_attr(crate::sys::IBV_QP_AV).map_err(Fail::verbs)?;
    let got = a.ah_attr.grh.traffic_class;
    if got != want {
        return Err(Fail::new(format!(
            "rdma_cm: the data QP's traffic class is {got} after RTS, not the -T {want} asked \
             for; the kernel's RDMA CM did not apply the ToS"
        )));
    }
    Ok(())
}

/// `--retry_count`: the client's data QP must hold it after the CM moved it
/// to RTS (read back), or the run would measure with another retry count.
fn check_retry(qp: &dyn CmQp, want: u8) -> Result<(), Fail> {
    let a = qp
        .query_attr(crate::sys::IBV_QP_RETRY_CNT)
        .map_err(Fail::verbs)?;
    if a.retry_cnt != want {
        return Err(Fail::new(format!(
            "rdma_cm: the data QP holds retry count {} after RTS, not the --retry_count {want} \
             asked for",
            a.retry_cnt
        )));
    }
    Ok(())
}
