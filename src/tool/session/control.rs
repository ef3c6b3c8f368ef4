//! The control session every two-sided tool opens first: TCP, `-R` (RDMA
//! CM) or a session the caller opened for the pair (fabric mode's MPI
//! link, `ctrl::link`); perftest's preamble on it; and the address lines'
//! form of a peer's `Dest`.

use crate::cli::params::Params;
use crate::ctrl::cm_link::CmLink;
use crate::ctrl::{Channel, Dest, Listener, Role, Session};
use crate::report::text;
use crate::run::stop;
use crate::tool::common::fail::Fail;
use crate::tool::common::out::Out;
use crate::tool::setup::resources::Endpoint;
use std::time::Duration;

/// Open the control connection: TCP, or (`-R`) an RC QP connected by the
/// RDMA CM on `ep`'s device.
pub fn connect(p: &Params, ep: &Endpoint) -> Result<Session, Fail> {
    // A session the caller already opened for this pair (fabric mode's MPI link).
    if let Some(sess) = crate::ctrl::link::take() {
        return Ok(sess);
    }
    let t = Duration::from_secs(p.ctrl_timeout_s);
    if p.listens() && !p.loopback && p.output.is_none() {
        // perftest's banner, before it waits for the client (TCP or rdma_cm).
        // perftest prints it on its receiving side even under --reversed,
        // where that side connects; we print it where someone waits.
        Out { quiet: false }.print(text::SERVER_WAIT_BANNER);
    }
    if p.cm_ctrl() {
        return cm_session(p, ep, t);
    }
    let ch = match &p.server {
        Some(host) => {
            let how = crate::ctrl::ConnectHow {
                ipv6_only: p.conn_opts.ipv6_ctrl,
                source: p.conn_opts.source_ip,
            };
            Channel::connect_with(host, p.port, t, &how).map_err(Fail::ctrl)?
        }
        None => accept_client(p, t)?,
    };
    let mut ch = ch;
    ch.set_step_timeout(Some(t));
    // Ctrl-C in any control step shuts the socket down, so a blocked read
    // returns at once (the peer sees us go, too).
    let watch = stop::watch_socket(ch.raw_fd());
    let mut sess = Session::new(ch).with_guard(Box::new(watch));
    sess.set_local_params(crate::tool::common::peer_check::local_params(p));
    Ok(sess)
}

/// `-R` on the control link: an rdma_cm connection (the client connects, the
/// server accepts; the loopback server waits at most `t`).
fn cm_session(p: &Params, ep: &Endpoint, t: Duration) -> Result<Session, Fail> {
    let (link, role) = match &p.server {
        Some(host) => (
            CmLink::connect(
                &ep.ctx,
                p.ib_port,
                host,
                p.port,
                t,
                stop::requested,
                p.conn_opts.source_v4(),
            ),
            Role::Client,
        ),
        None => {
            let accept = if p.loopback { Some(t) } else { None };
            (
                CmLink::accept(&ep.ctx, p.ib_port, p.port, accept, stop::requested),
                Role::Server,
            )
        }
    };
    let mut ch = Channel::from_cm(link.map_err(Fail::ctrl)?, role);
    ch.set_step_timeout(Some(t));
    let mut sess = Session::new(ch);
    sess.set_gid_index(ep.gid.map_or(0, |g| g.0));
    sess.set_local_params(crate::tool::common::peer_check::local_params(p));
    Ok(sess)
}

/// The TCP server: listens on `-p` and waits for the client (a loopback
/// server at most `t`); Ctrl-C while waiting ends the wait.
fn accept_client(p: &Params, t: Duration) -> Result<Channel, Fail> {
    // The loopback server must not wait forever for a client that failed.
    let accept = if p.loopback { Some(t) } else { None };
    // --ipv6-addr: perftest's AF_INET6 wildcard (Linux serves IPv4
    // clients on it too, as v4-mapped peers).
    let bind = p.conn_opts.ipv6_ctrl.then_some("::");
    let l = Listener::bind(bind, p.port).map_err(Fail::ctrl)?;
    let port = l.port();
    if p.port == 0 && !p.loopback {
        eprintln!(
            " -p 0: listening on port {port} (picked by the kernel); give the client -p {port}"
        );
    }
    // Ctrl-C while waiting for the client shuts the listener down.
    let _w = stop::watch_socket(l.raw_fd());
    l.accept(accept).map_err(|e| {
        if stop::requested() {
            // The shut-down listener's EINVAL is our signal's doing.
            Fail::new(format!(
                "interrupted while waiting for a client on port {port}"
            ))
        } else {
            Fail::ctrl(e)
        }
    })
}

/// The common preamble (perftest `exchange_versions`, `check_sys_data`,
/// `check_mtu`): returns the agreed cycle buffer, cache line and MTU enum.
pub(crate) fn preamble(
    sess: &mut Session,
    ep: &Endpoint,
    p: &Params,
) -> Result<(u64, u64, u8), Fail> {
    // Already done when the caller had to know the peer first (--threads).
    if sess.peer_version().is_none() {
        crate::tool::common::peer_check::versions(sess, p)?;
    }
    let page = crate::verbs::mr::page_size() as u32;
    let (cb, cl) = sess.exchange_sysdata(page, 64).map_err(Fail::ctrl)?;
    let mtu = sess.exchange_mtu(ep.mtu_enum(p)).map_err(Fail::ctrl)?;
    Ok((cb as u64, cl as u64, mtu))
}

pub(crate) fn to_text_dest(d: &Dest) -> text::Dest {
    text::Dest {
        lid: d.lid,
        qpn: d.qpn,
        psn: d.psn,
        out_reads: d.out_reads,
        rkey: d.rkey,
        vaddr: d.vaddr,
        srqn: d.srqn,
        gid: d.gid.unwrap_or([0; 16]),
    }
}
