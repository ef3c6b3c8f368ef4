//! `raw-eth-bw --server`: perftest's raw_ethernet_bw receiver, one way
//! (`run_iter_bw_server`). Open the device and check the port (the
//! sender's `RawPort`), pick the receive path once (`--post`,
//! `setup::raw_recv_method`), create the `-q` QPs, each with its receive
//! buffer, CQ and steering rules (`setup::raw_recv_res`), post every
//! receive, count frames until `-n` (× `-q`), `-D` or Ctrl-C
//! (`session::raw_recv_measure` on one QP, `raw_recv_qps_measure` on
//! several), then print perftest's BW table with the packet-rate line, the
//! counts and the findings, with the port's `out_of_buffer` drops read
//! around the run, and each QP's frames when there are several.

use std::path::Path;

use crate::clock::Clock;
use crate::mlx5::device::{cq_from_ibv_cq, rq_from_ibv_qp};
use crate::post::verbs_cq::{VerbsCq, VerbsRecv};
use crate::post::{CompletionQueue, RecvQueue};
use crate::raw::params::RawParams;
use crate::raw::rx_drops;
use crate::run::raw_recv::{DirectRx, RawRecvCfg, RawRecvCounts, RxClassify, VerbsRx};
use crate::run::raw_recv_qps::RecvQp;
use crate::tool::common::fail::Fail;
use crate::tool::session::raw_recv_measure::{self, RecvOutcome, Waits, TOOL_WAITS};
use crate::tool::session::raw_recv_qps_measure::{per_qp_line, receive_qps};
use crate::tool::setup::raw_method;
use crate::tool::setup::raw_recv_method::{decide_recv, RawRecvMethod};
use crate::tool::setup::raw_recv_res::{RawRecvQp, RawRecvRes};
use crate::tool::setup::raw_res::RawPort;

/// Runs the server; the report is printed on stdout.
pub fn run(p: &RawParams) -> Result<(), Fail> {
    let asked = raw_method::parse(p.post.as_deref()).map_err(Fail::refused)?;
    let port = RawPort::open(p)?;
    let (method, why) = decide_recv(asked, &port.dev)
        .map_err(|e| Fail::refused(format!("rdmaperf raw-eth-bw: {e}")))?;
    let res = RawRecvRes::create(&port, p)?;
    let first = &res.qps[0].rx;
    println!(
        " raw-eth-bw server: {} on {} port {}, {} rule(s) and {} receives{}, {why}",
        qps_words(res.qps.len()),
        port.ctx.name(),
        p.ib_port,
        first.flows.len(),
        first.slots,
        if res.qps.len() > 1 { " each" } else { "" },
    );
    // perftest prints the MGID as each QP joins.
    for g in res
        .qps
        .iter()
        .filter_map(|q| q.rx.mcast.as_ref().map(|m| m.mgid))
    {
        println!(" MGID: {}", mgid_text(&g));
    }
    let sysfs = Path::new("/sys");
    let before = rx_drops::read_out_of_buffer(sysfs, port.ctx.name(), p.ib_port);
    let clock = Clock::calibrate();
    let (mut out, per_qp) = match method {
        RawRecvMethod::Verbs => run_verbs(p, &res, &clock)?,
        RawRecvMethod::Direct => run_direct(p, &res, &clock)?,
    };
    let after = rx_drops::read_out_of_buffer(sysfs, port.ctx.name(), p.ib_port);
    out.counts.rq_dry = rx_drops::drops_between(before, after);
    print!(
        "{}",
        raw_recv_measure::report(p, &out, clock.hz(), port.gbps)
    );
    if per_qp.len() > 1 {
        print!("{}", per_qp_line(&per_qp));
    }
    if let Some(e) = &out.error {
        return Err(Fail::new(format!(
            "rdmaperf raw-eth-bw --server: {} ({} frames counted)",
            raw_recv_measure::error_words(e),
            out.counts.packets
        )));
    }
    Ok(())
}

/// "1 QP", "4 QPs".
fn qps_words(n: usize) -> String {
    format!("{n} QP{}", if n == 1 { "" } else { "s" })
}

/// Every receive slot of every QP posted, then the receive loop run to its
/// end (either method). Returns the outcome and each QP's frames.
fn post_and_receive<R: RecvQueue, C: CompletionQueue, K: RxClassify>(
    p: &RawParams,
    qps: &mut [RecvQp<R, C>],
    clock: &Clock,
) -> Result<(RecvOutcome, Vec<u64>), Fail> {
    post_every_receive(qps)?;
    Ok(receive::<_, _, K>(p, qps, clock, TOOL_WAITS))
}

/// Every receive slot of every QP posted (`post_all`).
pub fn post_every_receive<R: RecvQueue, C>(qps: &mut [RecvQp<R, C>]) -> Result<(), Fail> {
    for q in qps.iter_mut() {
        raw_recv_measure::post_receives(&mut q.rq, &q.cfg, "rdmaperf raw-eth-bw --server")
            .map_err(Fail::new)?;
    }
    Ok(())
}

/// The receive loop run to its end on QPs whose receives are posted: one
/// QP's loop, or the loop over all of them. Returns the outcome and each
/// QP's frames.
pub fn receive<R: RecvQueue, C: CompletionQueue, K: RxClassify>(
    p: &RawParams,
    qps: &mut [RecvQp<R, C>],
    clock: &Clock,
    waits: Waits,
) -> (RecvOutcome, Vec<u64>) {
    if let [one] = qps {
        let out = raw_recv_measure::receive::<_, _, K>(
            p,
            (&mut one.rq, &mut one.cq),
            &one.cfg,
            clock,
            waits,
        );
        let n = out.counts.packets;
        return (out, vec![n]);
    }
    let out = receive_qps::<_, _, K>(p, qps, clock, waits);
    (out, qps.iter().map(|q| q.counts.packets).collect())
}

/// A QP's receive slots.
fn cfg_of(q: &RawRecvQp) -> RawRecvCfg {
    // SAFETY: the MR holds `slots × stride` bytes, and lives (in the
    // server's `RawRecvRes`) past every loop over it; only the NIC writes
    // it meanwhile.
    unsafe { q.rx.recv_cfg() }
}

/// `ibv_post_recv` and `ibv_poll_cq`, on every QP.
fn run_verbs(
    p: &RawParams,
    res: &RawRecvRes,
    clock: &Clock,
) -> Result<(RecvOutcome, Vec<u64>), Fail> {
    let mut qps = Vec::with_capacity(res.qps.len());
    for q in &res.qps {
        qps.push(RecvQp {
            rq: VerbsRecv::new(&q.qp).map_err(Fail::verbs)?,
            cq: VerbsCq::new(&q.rx.cq, 16).map_err(Fail::verbs)?,
            cfg: cfg_of(q),
            counts: RawRecvCounts::default(),
        });
    }
    post_and_receive::<_, _, VerbsRx>(p, &mut qps, clock)
}

/// The mlx5 direct RQ and CQ poller, one of each per QP.
fn run_direct(
    p: &RawParams,
    res: &RawRecvRes,
    clock: &Clock,
) -> Result<(RecvOutcome, Vec<u64>), Fail> {
    let mut qps = Vec::with_capacity(res.qps.len());
    for q in &res.qps {
        // SAFETY: the QP lives in `res` past this call (which drops the RQ
        // before returning), nothing was posted to its RQ, and only this RQ
        // posts to it.
        let rq = unsafe { rq_from_ibv_qp(q.qp.raw()) };
        let rq = rq.map_err(|e| Fail::new(e.to_string()))?;
        // SAFETY: the CQ lives in `res` past this call, is fresh, is this
        // QP's alone, and is polled by this poller only.
        let cq = unsafe { cq_from_ibv_cq(q.rx.cq.raw()) };
        let mut cq = cq.map_err(|e| Fail::new(e.to_string()))?;
        cq.attach_recv(rq.qpn(), rq.ring());
        qps.push(RecvQp {
            rq,
            cq,
            cfg: cfg_of(q),
            counts: RawRecvCounts::default(),
        });
    }
    post_and_receive::<_, _, DirectRx>(p, &mut qps, clock)
}

/// A GID as perftest prints the raw tools' MGID: 16 hex bytes joined by `:`.
pub fn mgid_text(g: &[u8; 16]) -> String {
    g.iter()
        .map(|b| format!("{b:02x}"))
        .collect::<Vec<_>>()
        .join(":")
}
