//! `raw-eth-bw --server`: perftest's raw_ethernet_bw receiver, one way
//! (`run_iter_bw_server`). Open the device and check the port (the
//! sender's `RawPort`), pick the receive path once (`--post`,
//! `setup::raw_recv_method`), create the QP, its receive buffer and the
//! steering rules (`setup::raw_recv_res`), post every receive, count
//! frames until `-n`, `-D` or Ctrl-C (`session::raw_recv_measure`), then
//! print perftest's BW table with the packet-rate line, the counts and the
//! findings, with the port's `out_of_buffer` drops read around the run.

use std::path::Path;

use crate::clock::Clock;
use crate::mlx5::device::{cq_from_ibv_cq, rq_from_ibv_qp};
use crate::post::verbs_cq::{VerbsCq, VerbsRecv};
use crate::post::{CompletionQueue, RecvQueue};
use crate::raw::params::RawParams;
use crate::raw::rx_drops;
use crate::run::raw_recv::{DirectRx, RawRecvCfg, RxClassify, VerbsRx};
use crate::tool::common::fail::Fail;
use crate::tool::session::raw_recv_measure::{self, RecvOutcome, TOOL_WAITS};
use crate::tool::setup::raw_method;
use crate::tool::setup::raw_recv_method::{decide_recv, RawRecvMethod};
use crate::tool::setup::raw_recv_res::RawRecvRes;
use crate::tool::setup::raw_res::RawPort;

/// Runs the server; the report is printed on stdout.
pub fn run(p: &RawParams) -> Result<(), Fail> {
    let asked = raw_method::parse(p.post.as_deref()).map_err(Fail::refused)?;
    let port = RawPort::open(p)?;
    let (method, why) = decide_recv(asked, &port.dev, p.raw.qps)
        .map_err(|e| Fail::refused(format!("rdmaperf raw-eth-bw: {e}")))?;
    let res = RawRecvRes::create(&port, p)?;
    println!(
        " raw-eth-bw server: 1 QP on {} port {}, {} rule(s), {} receives, {why}",
        port.ctx.name(),
        p.ib_port,
        res.rx.flows.len(),
        res.rx.slots
    );
    if let Some(g) = res.rx.mcast.as_ref().map(|m| m.mgid) {
        println!(" MGID: {}", mgid_text(&g));
    }
    let sysfs = Path::new("/sys");
    let before = rx_drops::read_out_of_buffer(sysfs, port.ctx.name(), p.ib_port);
    let clock = Clock::calibrate();
    // SAFETY: the MR holds `slots × stride` bytes, and lives (in `res`)
    // past every loop over it; only the NIC writes it meanwhile.
    let cfg = unsafe { res.rx.recv_cfg() };
    let mut out = match method {
        RawRecvMethod::Verbs => run_verbs(p, &res, &cfg, &clock)?,
        RawRecvMethod::Direct => run_direct(p, &res, &cfg, &clock)?,
    };
    let after = rx_drops::read_out_of_buffer(sysfs, port.ctx.name(), p.ib_port);
    out.counts.rq_dry = rx_drops::drops_between(before, after);
    print!(
        "{}",
        raw_recv_measure::report(p, &out, clock.hz(), port.gbps)
    );
    if let Some(e) = &out.error {
        return Err(Fail::new(format!(
            "rdmaperf raw-eth-bw --server: {} ({} frames counted)",
            raw_recv_measure::error_words(e),
            out.counts.packets
        )));
    }
    Ok(())
}

/// Every receive slot posted, then the receive loop run to its end (either method).
fn post_and_receive<R: RecvQueue, C: CompletionQueue, K: RxClassify>(
    p: &RawParams,
    (rq, cq): (&mut R, &mut C),
    cfg: &RawRecvCfg,
    clock: &Clock,
) -> Result<RecvOutcome, Fail> {
    raw_recv_measure::post_receives(rq, cfg, "rdmaperf raw-eth-bw --server").map_err(Fail::new)?;
    Ok(raw_recv_measure::receive::<_, _, K>(
        p,
        (rq, cq),
        cfg,
        clock,
        TOOL_WAITS,
    ))
}

/// `ibv_post_recv` and `ibv_poll_cq`.
fn run_verbs(
    p: &RawParams,
    res: &RawRecvRes,
    cfg: &RawRecvCfg,
    clock: &Clock,
) -> Result<RecvOutcome, Fail> {
    let mut rq = VerbsRecv::new(&res.qp).map_err(Fail::verbs)?;
    let mut cq = VerbsCq::new(&res.rx.cq, 16).map_err(Fail::verbs)?;
    post_and_receive::<_, _, VerbsRx>(p, (&mut rq, &mut cq), cfg, clock)
}

/// The mlx5 direct RQ and CQ poller.
fn run_direct(
    p: &RawParams,
    res: &RawRecvRes,
    cfg: &RawRecvCfg,
    clock: &Clock,
) -> Result<RecvOutcome, Fail> {
    // SAFETY: the QP lives in `res` past this call (which drops the RQ
    // before returning), nothing was posted to its RQ, and only this RQ
    // posts to it.
    let rq = unsafe { rq_from_ibv_qp(res.qp.raw()) };
    let mut rq = rq.map_err(|e| Fail::new(e.to_string()))?;
    // SAFETY: the CQ lives in `res` past this call, is fresh, and is
    // polled by this poller only.
    let cq = unsafe { cq_from_ibv_cq(res.rx.cq.raw()) };
    let mut cq = cq.map_err(|e| Fail::new(e.to_string()))?;
    cq.attach_recv(rq.qpn(), rq.ring());
    post_and_receive::<_, _, DirectRx>(p, (&mut rq, &mut cq), cfg, clock)
}

/// A GID as perftest prints the raw tools' MGID: 16 hex bytes joined by `:`.
pub fn mgid_text(g: &[u8; 16]) -> String {
    g.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}
