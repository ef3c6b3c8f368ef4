//! perftest's control channel over rdma_cm (`-R`): no TCP; an RC QP connected
//! by the RDMA CM on the `-p` port carries every control message as one SEND
//! into a pre-posted receive (perftest `rdma_client_connect` /
//! `rdma_server_connect`, `rdma_write_data` / `rdma_read_data`).
//!
//! Waits block on the CQ's completion channel and the CM event channel with
//! poll(2) instead of spinning (perftest spins, which is why its `-R` servers
//! burn a core), so a waiting side leaves the CPU to the measuring one; a
//! DISCONNECTED event ends a wait at once (the peer exited), and `cancel` is
//! checked every 100 ms (Ctrl-C).

use std::collections::VecDeque;
use std::net::{SocketAddr, SocketAddrV4, ToSocketAddrs};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::error::{CtrlError, Dir};
use crate::post::post_send::PostSendQueue;
use crate::post::verbs_cq::{VerbsCq, VerbsRecv};
use crate::post::{Completion, CompletionQueue, Op, RecvQueue, SendQueue, WcStatus, WrDesc};
use crate::sys;
use crate::verbs::cm::{self, CmEventType, CmId, CmWaitError, ConnParam, EventChannel};
use crate::verbs::{Access, AlignedBuf, CmQp, Context, Cq, InitAttr, Mr, Pd, Qp, QpInit, QpType};

/// Bytes per message slot: bigger than any control message (the largest,
/// perftest master's negotiation blob, is 320 B; a key is 56 or 64 B).
const SLOT: usize = 512;
/// Receives kept posted (perftest posts one; more cost nothing).
const RECVS: usize = 4;
const SEND_ID: u64 = u64::MAX;
/// perftest's CM timeouts for address and route resolution.
const RESOLVE_MS: i32 = 2000;
/// Pause between connect attempts while the server is not listening yet.
const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// Checked between waits; true once the run should stop (Ctrl-C).
pub type Cancel = fn() -> bool;

/// A connected rdma_cm control link.
pub struct CmLink {
    // Drop order: QP before its CQ/PD/MR; the id after the QP is gone.
    qp: Arc<Qp>,
    sq: PostSendQueue,
    rq: VerbsRecv,
    pcq: VerbsCq,
    cq: Arc<Cq>,
    mr: Mr,
    id: CmId,
    /// Received messages not read yet, in order (the front may be partly read).
    msgs: VecDeque<Vec<u8>>,
    peer: SocketAddr,
    cancel: Cancel,
    gone: bool,
}

impl std::fmt::Debug for CmLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CmLink")
            .field("peer", &self.peer)
            .field("qpn", &self.qp.qpn())
            .finish()
    }
}

fn cm_err(step: &str, peer: impl ToString, detail: impl ToString) -> CtrlError {
    CtrlError::Cm {
        step: step.to_owned(),
        peer: peer.to_string(),
        detail: detail.to_string(),
    }
}

/// The QP, CQ and buffers of a link, created before the CM connection.
struct Parts {
    qp: Arc<Qp>,
    cq: Arc<Cq>,
    mr: Mr,
}

fn parts(ctx: &Arc<Context>, port_num: u8, peer: &str) -> Result<Parts, CtrlError> {
    let verr = |e: crate::verbs::VerbsError| cm_err("resources", peer, e);
    let pd = Pd::new(ctx).map_err(verr)?;
    let buf = AlignedBuf::with_align(SLOT * (1 + RECVS), 4096).map_err(verr)?;
    let mr = Mr::new(&pd, buf, Access::LOCAL_WRITE).map_err(verr)?;
    let cq = Cq::new(ctx, (2 * (1 + RECVS)) as u32, true).map_err(verr)?;
    let init = QpInit {
        qp_type: QpType::RC,
        max_send_wr: 2,
        max_recv_wr: RECVS as u32,
        max_send_sge: 1,
        max_recv_sge: 1,
        max_inline_data: 0,
        sq_sig_all: false,
        send_ops_flags: None,
    };
    let qp = Qp::create(&pd, &cq, &cq, &init).map_err(verr)?;
    qp.to_init(&InitAttr::new(port_num, Access::LOCAL_WRITE))
        .map_err(verr)?;
    Ok(Parts { qp, cq, mr })
}

/// RTR then RTS with the CM's attributes (perftest's server then sets
/// min_rnr_timer 12; we put it in RTR directly).
pub fn to_rts(id: &CmId, qp: &dyn CmQp, step: &str, peer: &str) -> Result<(), CtrlError> {
    let e = |x: crate::verbs::VerbsError| cm_err(step, peer, x);
    if id.is_ud() {
        // UD, as librdmacm does it: the CM's INIT attributes (its Q_Key,
        // RDMA_UDP_QKEY, is what the peer sends with) by INIT->INIT, then
        // RTR with the state alone and RTS with sq_psn 0.
        let (init, mask) = id.qp_attr(sys::IBV_QPS_INIT).map_err(e)?;
        qp.apply_attr("ibv_modify_qp(INIT->INIT, rdma_cm qkey)", init, mask)
            .map_err(e)?;
        let rtr = sys::ibv_qp_attr {
            qp_state: sys::IBV_QPS_RTR,
            ..Default::default()
        };
        qp.apply_attr("ibv_modify_qp(INIT->RTR, UD)", rtr, sys::IBV_QP_STATE)
            .map_err(e)?;
        let rts = sys::ibv_qp_attr {
            qp_state: sys::IBV_QPS_RTS,
            sq_psn: 0,
            ..Default::default()
        };
        return qp
            .apply_attr(
                "ibv_modify_qp(RTR->RTS, UD)",
                rts,
                sys::IBV_QP_STATE | sys::IBV_QP_SQ_PSN,
            )
            .map_err(e);
    }
    let (mut rtr, mut mask) = id.qp_attr(sys::IBV_QPS_RTR).map_err(e)?;
    rtr.min_rnr_timer = 12;
    mask |= sys::IBV_QP_MIN_RNR_TIMER;
    qp.apply_attr("ibv_modify_qp(INIT->RTR, rdma_cm)", rtr, mask)
        .map_err(e)?;
    let (rts, mask) = id.qp_attr(sys::IBV_QPS_RTS).map_err(e)?;
    qp.apply_attr("ibv_modify_qp(RTR->RTS, rdma_cm)", rts, mask)
        .map_err(e)
}

/// perftest's connection parameters: retry 7, rnr_retry 7; READ/ATOMIC
/// tests also ask for `out_reads` outstanding reads each way.
pub fn conn_param(qp_num: u32, out_reads: u8) -> ConnParam {
    ConnParam {
        qp_num,
        responder_resources: out_reads,
        initiator_depth: out_reads,
        retry_count: 7,
        rnr_retry_count: 7,
        tos: None,
        src: None,
    }
}

/// The server's IPv4 address (perftest's rdma_cm path is AF_INET only).
pub fn resolve_v4(host: &str, port: u16) -> Result<SocketAddrV4, CtrlError> {
    let addrs = (host, port)
        .to_socket_addrs()
        .map_err(|source| CtrlError::Resolve {
            host: host.to_owned(),
            port,
            source,
        })?;
    addrs
        .filter_map(|a| match a {
            SocketAddr::V4(v4) => Some(v4),
            SocketAddr::V6(_) => None,
        })
        .next()
        .ok_or_else(|| {
            cm_err(
                "address",
                format!("{host}:{port}"),
                "-R needs an IPv4 address (rdma_cm as perftest uses it is AF_INET only); \
                 give the server's IPv4 address on the RDMA netdev",
            )
        })
}

/// The id is on the device we opened (-d), or an error naming both.
pub fn check_device(id: &CmId, ctx: &Context, peer: &str) -> Result<(), CtrlError> {
    match id.device_name() {
        Some(n) if n != ctx.name() => Err(cm_err(
            "route",
            peer,
            format!(
                "the route to {peer} goes through device {n}, not {} — give -d {n}, or an \
                 address reached through {}",
                ctx.name(),
                ctx.name()
            ),
        )),
        _ => Ok(()),
    }
}

/// Why one connect attempt failed.
enum Attempt {
    /// REJECTED/UNREACHABLE: the server is not listening (yet).
    Refused(cm::CmEvent),
    Fail(CtrlError),
}

/// Client side: resolve, connect with `param`, retrying until `deadline`
/// while the server is not listening yet (REJECTED/UNREACHABLE), as perftest
/// retries. RC (`ud` false): returns after CONNECT_RESPONSE — move the QP
/// to RTS, then [`CmId::establish`]. UD: returns after ESTABLISHED, whose
/// event carries the peer's address ([`cm::UdParam`]).
pub fn connect_id(
    ch: &Arc<EventChannel>,
    ctx: &Context,
    dst: SocketAddrV4,
    deadline: Instant,
    cancel: Cancel,
    param: ConnParam,
    ud: bool,
) -> Result<(CmId, cm::CmEvent), CtrlError> {
    let peer = dst.to_string();
    let start = Instant::now();
    let no_server = |ev: &cm::CmEvent| CtrlError::NoServer {
        host: dst.ip().to_string(),
        port: dst.port(),
        waited: start.elapsed(),
        last: format!("rdma_cm: {} (status {})", ev.kind.name(), ev.status),
    };
    let mut refused = None;
    loop {
        let id = CmId::with_ps(ch, ud).map_err(|e| cm_err("rdma_create_id", &peer, e))?;
        match attempt(&id, ctx, dst, deadline, cancel, &param) {
            Ok(ev) => return Ok((id, ev)),
            Err(Attempt::Refused(ev)) if Instant::now() + RETRY_PAUSE < deadline => {
                refused = Some(ev);
                drop(id);
                std::thread::sleep(RETRY_PAUSE);
            }
            Err(Attempt::Refused(ev)) => return Err(no_server(&ev)),
            Err(Attempt::Fail(e)) => {
                return Err(match &refused {
                    // The time ran out inside a retry (a slow address or
                    // route resolution): the server refused before, say so.
                    Some(ev) if Instant::now() >= deadline => no_server(ev),
                    _ => e,
                });
            }
        }
    }
}

fn attempt(
    id: &CmId,
    ctx: &Context,
    dst: SocketAddrV4,
    deadline: Instant,
    cancel: Cancel,
    param: &ConnParam,
) -> Result<cm::CmEvent, Attempt> {
    let peer = dst.to_string();
    let fail = |step: &str, e: &dyn std::fmt::Display| Attempt::Fail(cm_err(step, &peer, e));
    let wait = |want: CmEventType| match cm::expect(id, want, deadline, &cancel) {
        Ok(ev) => Ok(ev),
        Err(CmWaitError::Unexpected { got, .. }) if got.kind.is_refusal() => {
            Err(Attempt::Refused(got))
        }
        Err(e) => {
            let hint = if want == CmEventType::CONNECT_RESPONSE || want == CmEventType::ESTABLISHED
            {
                ""
            } else {
                " — give the server's IPv4 address on the RDMA netdev (rdma_cm cannot route \
                 127.0.0.1; see `ip addr` and `rdma link`)"
            };
            Err(Attempt::Fail(cm_err(
                &want.name(),
                &peer,
                format!("{e}{hint}"),
            )))
        }
    };
    id.resolve_addr(dst, param.src, RESOLVE_MS)
        .map_err(|e| fail("address", &e))?;
    wait(CmEventType::ADDR_RESOLVED)?;
    check_device(id, ctx, &peer).map_err(Attempt::Fail)?;
    if let Some(tos) = param.tos {
        id.set_tos(tos).map_err(|e| fail("ToS", &e))?;
    }
    id.resolve_route(RESOLVE_MS)
        .map_err(|e| fail("route", &e))?;
    wait(CmEventType::ROUTE_RESOLVED)?;
    id.connect(param).map_err(|e| fail("connect", &e))?;
    // UD (SIDR): the reply arrives as ESTABLISHED, with the peer's address.
    wait(if id.is_ud() {
        CmEventType::ESTABLISHED
    } else {
        CmEventType::CONNECT_RESPONSE
    })
}

/// Server side: listen on `port` and take one connect request; the listening
/// id is returned too so the caller decides when the port is free again.
pub fn accept_request(
    ch: &Arc<EventChannel>,
    port: u16,
    until: Option<Instant>,
    cancel: Cancel,
    backlog: i32,
) -> Result<(CmId, CmId), CtrlError> {
    let here = format!("port {port}");
    let listen = CmId::new(ch).map_err(|e| cm_err("rdma_create_id", &here, e))?;
    listen
        .listen(port, backlog)
        .map_err(|e| cm_err("listen", &here, e))?;
    let req = next_request(&listen, until, cancel, port)?;
    Ok((listen, req))
}

/// The next CONNECT_REQUEST on `listen`'s channel, as an id we own.
pub fn next_request(
    listen: &CmId,
    until: Option<Instant>,
    cancel: Cancel,
    port: u16,
) -> Result<CmId, CtrlError> {
    // Without a bound: a day (the caller's Ctrl-C still ends it at once).
    let until = until.unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400));
    match cm::expect(listen, CmEventType::CONNECT_REQUEST, until, &cancel) {
        Ok(ev) => CmId::from_request(listen.channel(), &ev).ok_or_else(|| {
            cm_err(
                "accept",
                format!("port {port}"),
                "connect request without an id",
            )
        }),
        Err(CmWaitError::Timeout(_)) => Err(CtrlError::AcceptTimeout {
            port,
            waited: until.saturating_duration_since(Instant::now()),
        }),
        Err(e) => Err(cm_err("accept", format!("port {port}"), e)),
    }
}

impl CmLink {
    /// Client: connect to `host:port` (retrying for `deadline` while the
    /// server is not up), on `ctx` (the -d device).
    pub fn connect(
        ctx: &Arc<Context>,
        port_num: u8,
        host: &str,
        port: u16,
        deadline: Duration,
        cancel: Cancel,
        src: Option<std::net::Ipv4Addr>,
    ) -> Result<CmLink, CtrlError> {
        let dst = resolve_v4(host, port)?;
        let peer = dst.to_string();
        let ch = EventChannel::new().map_err(|e| cm_err("event channel", &peer, e))?;
        let p = parts(ctx, port_num, &peer)?;
        let qpn = p.qp.qpn();
        let until = Instant::now() + deadline.max(Duration::from_secs(2));
        let param = ConnParam {
            src,
            ..conn_param(qpn, 0)
        };
        let (id, _) = connect_id(&ch, ctx, dst, until, cancel, param, false)?;
        to_rts(&id, &*p.qp, "connect", &peer)?;
        id.establish().map_err(|e| cm_err("establish", &peer, e))?;
        CmLink::finish_setup(p, id, SocketAddr::V4(dst), cancel)
    }

    /// Server: wait for one client on `port` (for `timeout`, or until Ctrl-C).
    /// The listening id is gone when this returns, so the port can be
    /// listened on again (perftest does so for the data QPs).
    pub fn accept(
        ctx: &Arc<Context>,
        port_num: u8,
        port: u16,
        timeout: Option<Duration>,
        cancel: Cancel,
    ) -> Result<CmLink, CtrlError> {
        let here = format!("port {port}");
        let ch = EventChannel::new().map_err(|e| cm_err("event channel", &here, e))?;
        let (listen, id) =
            accept_request(&ch, port, timeout.map(|t| Instant::now() + t), cancel, 1)?;
        drop(listen);
        check_device(&id, ctx, &here)?;
        let p = parts(ctx, port_num, &here)?;
        let link_peer = match id.peer_v4() {
            Some(a) => SocketAddr::V4(a),
            None => SocketAddr::from(([0, 0, 0, 0], port)),
        };
        // Receives first: the client sends as soon as it is connected.
        let link = CmLink::finish_setup(p, id, link_peer, cancel)?;
        to_rts(&link.id, &*link.qp, "accept", &here)?;
        link.id
            .accept(&conn_param(link.qp.qpn(), 0))
            .map_err(|e| cm_err("accept", &here, e))?;
        Ok(link)
    }

    fn finish_setup(
        p: Parts,
        id: CmId,
        peer: SocketAddr,
        cancel: Cancel,
    ) -> Result<CmLink, CtrlError> {
        let verr = |e: crate::verbs::VerbsError| cm_err("resources", peer, e);
        let sq = PostSendQueue::new(&p.qp, 1, None).map_err(verr)?;
        let rq = VerbsRecv::new(&p.qp).map_err(verr)?;
        let pcq = VerbsCq::new(&p.cq, 8).map_err(verr)?;
        let mut link = CmLink {
            qp: p.qp,
            sq,
            rq,
            pcq,
            cq: p.cq,
            mr: p.mr,
            id,
            msgs: VecDeque::new(),
            peer,
            cancel,
            gone: false,
        };
        for slot in 1..=RECVS {
            link.post_recv(slot)?;
        }
        Ok(link)
    }

    fn post_recv(&mut self, slot: usize) -> Result<(), CtrlError> {
        let addr = self.mr.addr() + (slot * SLOT) as u64;
        let (lkey, peer) = (self.mr.lkey(), self.peer);
        self.rq
            .post_recv(slot as u64, addr, lkey, SLOT as u32)
            .map_err(|e| cm_err("post receive", peer, format!("{e:?}")))
    }

    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// One message: a signaled SEND, waited for.
    pub fn send(
        &mut self,
        step: &str,
        msg: &[u8],
        timeout: Option<Duration>,
    ) -> Result<(), CtrlError> {
        if msg.len() > SLOT {
            return Err(cm_err(
                step,
                self.peer,
                format!("message of {} B > {SLOT} B", msg.len()),
            ));
        }
        if let Some(b) = self.mr.buf_mut() {
            b.as_mut_slice()[..msg.len()].copy_from_slice(msg);
        }
        let wr = WrDesc {
            wr_id: SEND_ID,
            laddr: self.mr.addr(),
            lkey: self.mr.lkey(),
            len: msg.len() as u32,
            signaled: true,
            ..WrDesc::default()
        };
        let peer = self.peer;
        self.sq
            .post(Op::Send, &[wr])
            .map_err(|e| cm_err(step, peer, format!("posting the SEND: {e:?}")))?;
        let mut sent = false;
        self.wait(step, Dir::Writing, msg.len(), timeout, &mut sent)
    }

    /// Reads until `buf` holds `total` bytes (messages are read in order; a
    /// message longer than asked for keeps its rest for the next read).
    pub fn recv_more(
        &mut self,
        step: &str,
        buf: &mut Vec<u8>,
        total: usize,
        timeout: Option<Duration>,
    ) -> Result<(), CtrlError> {
        while buf.len() < total {
            if self.msgs.is_empty() {
                let mut unused = false;
                if let Err(e) = self.wait(step, Dir::Reading, total, timeout, &mut unused) {
                    return Err(with_got(e, buf));
                }
            }
            let Some(front) = self.msgs.front_mut() else {
                continue;
            };
            let n = (total - buf.len()).min(front.len());
            buf.extend(front.drain(..n));
            if front.is_empty() {
                self.msgs.pop_front();
            }
        }
        Ok(())
    }

    /// Length of the next whole message (waiting for it): for formats whose
    /// size depends on the peer's version (56- or 64-byte binary keys).
    pub fn next_len(&mut self, step: &str, timeout: Option<Duration>) -> Result<usize, CtrlError> {
        while self.msgs.is_empty() {
            let mut unused = false;
            self.wait(step, Dir::Reading, 0, timeout, &mut unused)?;
        }
        Ok(self.msgs.front().map_or(0, Vec::len))
    }

    /// Processes completions until `done` (a send completed) or, for reads,
    /// a message is pending.
    fn wait(
        &mut self,
        step: &str,
        dir: Dir,
        expected: usize,
        timeout: Option<Duration>,
        sent: &mut bool,
    ) -> Result<(), CtrlError> {
        let start = Instant::now();
        let mut wcs = [Completion::default(); 8];
        let fds = [self.cq.channel_fd().unwrap_or(-1), self.id.channel().fd()];
        let mut armed = false;
        loop {
            let n = self
                .pcq
                .poll(&mut wcs)
                .map_err(|e| cm_err(step, self.peer, format!("polling: {e:?}")))?;
            for wc in &wcs[..n] {
                self.completion(step, dir, wc, sent)?;
            }
            let satisfied = match dir {
                Dir::Writing => *sent,
                Dir::Reading => !self.msgs.is_empty(),
            };
            if satisfied {
                return Ok(());
            }
            if n > 0 {
                continue;
            }
            if (self.cancel)() {
                return Err(self.interrupted(step, dir));
            }
            if self.gone {
                return Err(self.closed(step, dir, expected));
            }
            let left = self.time_left(start, timeout, step, dir, expected)?;
            if !armed {
                // Arm, then poll once more: a completion that landed before
                // the arm raises no event.
                self.cq
                    .req_notify(false)
                    .map_err(|e| cm_err(step, self.peer, e))?;
                armed = true;
                continue;
            }
            let ready = cm::poll_any(&fds, left.min(Duration::from_millis(100)));
            if ready & 1 != 0 {
                self.cq
                    .wait_event()
                    .map_err(|e| cm_err(step, self.peer, e))?;
                armed = false;
            }
            if ready & 2 != 0 {
                self.drain_cm_events();
            }
        }
    }

    /// A stop request ended the wait.
    fn interrupted(&self, step: &str, dir: Dir) -> CtrlError {
        CtrlError::Io {
            dir,
            step: step.to_owned(),
            peer: self.peer,
            source: std::io::Error::new(std::io::ErrorKind::Interrupted, "interrupted"),
        }
    }

    /// What is left of `timeout` since `start` (an hour when there is none);
    /// a timeout error once nothing is.
    fn time_left(
        &self,
        start: Instant,
        timeout: Option<Duration>,
        step: &str,
        dir: Dir,
        expected: usize,
    ) -> Result<Duration, CtrlError> {
        let Some(t) = timeout else {
            return Ok(Duration::from_secs(3600));
        };
        let l = t.saturating_sub(start.elapsed());
        if l.is_zero() {
            return Err(CtrlError::Timeout {
                dir,
                step: step.to_owned(),
                peer: self.peer,
                waited: t,
                got: 0,
                expected,
                bytes: Box::default(),
            });
        }
        Ok(l)
    }

    /// Reads every pending CM event; a disconnect or device removal for this
    /// link marks it gone.
    fn drain_cm_events(&mut self) {
        while let Ok(Some(ev)) = self.id.channel().next(Duration::ZERO) {
            if ev.is_for(&self.id)
                && (ev.kind == CmEventType::DISCONNECTED || ev.kind == CmEventType::DEVICE_REMOVAL)
            {
                self.gone = true;
            }
        }
    }

    fn completion(
        &mut self,
        step: &str,
        dir: Dir,
        wc: &Completion,
        sent: &mut bool,
    ) -> Result<(), CtrlError> {
        if wc.status != WcStatus::SUCCESS {
            self.gone = true;
            if wc.status == WcStatus::WR_FLUSH_ERR
                || wc.status == WcStatus::RETRY_EXC_ERR
                || wc.status == WcStatus::RNR_RETRY_EXC_ERR
            {
                return Err(self.closed(step, dir, 0));
            }
            return Err(cm_err(
                step,
                self.peer,
                format!(
                    "completion with error: {} (vendor error {:#x})",
                    wc.status.name(),
                    wc.vendor_err
                ),
            ));
        }
        if wc.wr_id == SEND_ID {
            *sent = true;
            return Ok(());
        }
        let slot = wc.wr_id as usize;
        let len = (wc.byte_len as usize).min(SLOT);
        let at = slot * SLOT;
        if let Some(b) = self.mr.buf() {
            self.msgs.push_back(b.as_slice()[at..at + len].to_vec());
        }
        self.post_recv(slot)
    }

    fn closed(&self, step: &str, dir: Dir, expected: usize) -> CtrlError {
        CtrlError::PeerClosed {
            dir,
            step: step.to_owned(),
            peer: self.peer,
            got: 0,
            expected,
            bytes: Box::default(),
        }
    }

    /// Ends the link: disconnect (the peer sees DISCONNECTED).
    pub fn finish(self) {
        self.id.disconnect();
    }
}

fn with_got(e: CtrlError, buf: &[u8]) -> CtrlError {
    match e {
        CtrlError::PeerClosed {
            dir,
            step,
            peer,
            expected,
            ..
        } => CtrlError::PeerClosed {
            dir,
            step,
            peer,
            got: buf.len(),
            expected,
            bytes: buf.into(),
        },
        other => other,
    }
}
