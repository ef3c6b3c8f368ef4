//! `-b` (bidirectional) write-bw / read-bw / send-bw: walks perftest's duplex
//! choreography (`ctrl::choreo`: a barrier before each run, for write/read
//! `-a` one after it, then the report exchange). Both sides' QPs go to RTS and
//! both sides measure: write/read run the ordinary bw loop on each side;
//! send runs the combined TX/RX loop (`run::duplex`). Each side prints the
//! sum of its own and the peer's report (send `-D` exchanges no report and
//! prints its own row, as perftest does).

use super::send_bw::{barrier, clamp_for_ud, describe_recv, ud_dests, Ready, Receiver};
use crate::cli::params::{Mode, Params, Verb};
use crate::clock;
use crate::ctrl::choreo::Barrier;
use crate::ctrl::{choreography, BwReport, Step};
use crate::post::post_send::PostSendQueue;
use crate::post::verbs_cq::VerbsCq;
use crate::post::wr_api::{send_ops_flags, WrApiQueue};
use crate::post::{Completion, SendQueue, WrDesc};
use crate::report::info::TestInfo;
use crate::report::{json, stats, text};
use crate::run::bw::{BwConfig, QpCount};
use crate::run::duplex::{DuplexConfig, DuplexLoop};
use crate::run::geometry::Geometry;
use crate::run::recv::Window;
use crate::tool::build::method::{self, Method};
use crate::tool::build::setup::Endpoint;
use crate::tool::common::fail::Fail;
use crate::tool::common::out::Out;
use crate::tool::common::scenario::qp_type;
use crate::tool::session::bw_measure::{bw_config, describe, measure_size, qp_targets};
use crate::tool::session::bw_result::{check_limits, report_of, result, Measured};
use crate::tool::session::control::connect;
use crate::verbs::{Mtu, UdDest};
use std::time::Duration;

pub fn run(p0: &Params, out: Out) -> Result<(), Fail> {
    if p0.run_infinitely {
        return Err(Fail::new(format!(
            "{} -b --run_infinitely: not implemented yet in rdmaperf; use -D, or stock {} -b",
            p0.tool.name(),
            p0.tool.perftest_name()
        )));
    }
    if p0.threads > 1 {
        return Err(Fail::new(format!(
            "{} -b --threads: the multi-threaded engine is not wired into duplex tests; use -q without --threads",
            p0.tool.name()
        )));
    }
    let ep = Endpoint::open(p0)?;
    let local_mtu = Mtu(ep.mtu_enum(p0) as u32).bytes().unwrap_or(1024) as u64;
    let mut p = p0.clone();
    clamp_for_ud(&mut p, local_mtu)?;
    let p = &p;
    let steps = choreography(&crate::tool::common::scenario::scenario(
        p,
        local_mtu as u32,
    ));
    let send = p.tool.verb == Verb::Send;
    let op = p.op();
    let method = method::resolve(&ep.ctx, p, qp_type(p), &[op])?;
    if method == Method::Direct {
        return Err(Fail::new(format!(
            "{} -b --post direct: the direct path is not wired into duplex tests yet; use --post wr-api",
            p.tool.name()
        )));
    }
    let flags = (method == Method::WrApi).then(|| send_ops_flags(&[op]));

    let mut sess = connect(p, &ep)?;
    let mut cb_cl = (0u32, 0u32);
    let mut ready: Option<Ready> = None;
    let mut uds: Vec<Option<UdDest>> = Vec::new();
    let mut receiver: Option<Receiver> = None;
    let mut report = None;
    let mut header = false;
    // The local report of the last run, and the last printed (summed) result.
    let mut local = BwReport::default();
    let mut shown = BwReport::default();
    for (i, e) in steps.iter().enumerate() {
        if e.waits_for_peer_run {
            sess.wait_for_peer_run();
        }
        match e.step {
            Step::Versions => {
                crate::tool::common::peer_check::versions(&mut sess, p)?;
            }
            Step::SysData => {
                let page = crate::verbs::mr::page_size() as u32;
                cb_cl = sess.exchange_sysdata(page, 64).map_err(Fail::ctrl)?;
            }
            Step::Mtu => {
                let (r, j) = Ready::at_mtu(&mut sess, &ep, p, cb_cl, flags, method, out)?;
                ready = Some(r);
                report = j;
            }
            _ => {
                let r = ready
                    .as_mut()
                    .ok_or_else(|| Fail::new("internal: no resources"))?;
                match e.step {
                    Step::Keys { qp, round } => {
                        r.keys(&mut sess, p, &e.step, qp, round, out)?;
                    }
                    Step::Connect => {
                        // Duplex: both sides send, so both go to RTS.
                        r.res.connect(&ep, p, r.mtu, &r.rem, true)?;
                        if send {
                            receiver = Some(Receiver::new(&r.res, p)?);
                            uds = ud_dests(&ep, p, &r.res, &r.rem)?;
                        }
                    }
                    Step::Barrier(b) => {
                        if b == Barrier::BeforeRun && !header {
                            out.print(&text::bw_header(&r.info));
                            header = true;
                        }
                        let rx = receiver.as_mut().map(|rx| (rx, None));
                        barrier(&mut sess, &e.step, b, rx, p, r, &steps[i..])?;
                    }
                    Step::Run { size } => {
                        let size = size.unwrap_or(p.sizes[0]);
                        let watch = sess.watch_peer();
                        let (row, err) = match receiver.as_mut() {
                            Some(rx) => send_one(p, r, rx, &uds, method, size)?,
                            None => rdma_one(p, r, method, size)?,
                        };
                        drop(watch);
                        local = report_of(size, &row);
                        // perftest prints the local row only where no report follows (send -D).
                        let alone = !steps[i..].iter().any(|e| e.step == Step::BwReport);
                        if alone || err.is_some() {
                            out.print(&text::bw_row(&row, &r.info, 0.0));
                            push_json(&mut report, &row, &r.info, err.as_deref())?;
                            shown = local;
                        }
                        if let Some(e) = err {
                            r.res.to_err();
                            out.print(crate::tool::common::out::result_line(p));
                            // The peer sees the control connection close.
                            return Err(Fail::new(e));
                        }
                    }
                    Step::BwReport => {
                        let theirs = sess.exchange_bw_report(&local).map_err(Fail::ctrl)?;
                        let mine = stats::BwResult {
                            size: local.size,
                            iters: local.iters,
                            bw_peak: local.bw_peak,
                            bw_avg: local.bw_avg,
                            msg_rate: local.msg_rate,
                            bw_peak_exact: 0.0,
                        };
                        let remote = stats::BwResult {
                            size: theirs.size,
                            iters: theirs.iters,
                            bw_peak: theirs.bw_peak,
                            bw_avg: theirs.bw_avg,
                            msg_rate: theirs.msg_rate,
                            bw_peak_exact: 0.0,
                        };
                        let sum = mine.sum(&remote);
                        out.print(&text::bw_row(&sum, &r.info, 0.0));
                        push_json(&mut report, &sum, &r.info, None)?;
                        shown = report_of(local.size, &sum);
                        if p.report_both {
                            // perftest's --report-both: each side's own row under its banner.
                            for (side, row) in
                                [(text::Side::Local, &mine), (text::Side::Remote, &remote)]
                            {
                                out.print(&text::report_both_banner(side, &r.info));
                                out.print(&text::bw_row(row, &r.info, 0.0));
                            }
                        }
                    }
                    Step::Close => break,
                    Step::RunForever | Step::Exit | Step::Versions | Step::SysData | Step::Mtu => {
                        return Err(Fail::new(format!(
                            "internal: {} -b has no step {} here",
                            p.tool.name(),
                            e.step
                        )))
                    }
                }
            }
        }
    }
    let r = ready.ok_or_else(|| Fail::new("internal: no resources"))?;
    out.print(crate::tool::common::out::result_line(p));
    // perftest checks --limit_bw/--limit_msgrate against the summed line.
    let limits = check_limits(p, &shown);
    sess.close(&r.my[0]).map_err(Fail::ctrl)?;
    limits
}

fn push_json(
    report: &mut Option<json::JsonReport>,
    row: &stats::BwResult,
    info: &TestInfo,
    err: Option<&str>,
) -> Result<(), Fail> {
    if let Some(j) = report.as_mut() {
        let mut rec = json::Record::bw(row, info, 0.0);
        if let Some(e) = err {
            rec = rec.with("error", e);
        }
        j.push(rec).map_err(|e| Fail::new(e.to_string()))?;
    }
    Ok(())
}

/// write/read: this side's half of the duplex run is the ordinary bw loop.
fn rdma_one(
    p: &Params,
    r: &Ready,
    method: Method,
    size: u64,
) -> Result<(stats::BwResult, Option<String>), Fail> {
    let res = &r.res;
    let targets = qp_targets(res, &r.rem);
    let mut cq = VerbsCq::new(&res.cq, 16).map_err(Fail::verbs)?;
    let run = match method {
        Method::PostSend => {
            let mut sqs = res
                .qps
                .iter()
                .map(|qp| PostSendQueue::new(qp, p.post_list as usize, None))
                .collect::<Result<Vec<_>, _>>()
                .map_err(Fail::verbs)?;
            measure_size(
                p,
                &res.geometry,
                size,
                &targets,
                &mut sqs,
                &mut cq,
                &r.clock,
            )?
        }
        Method::WrApi => {
            let mut sqs = res
                .qps
                .iter()
                .map(|qp| WrApiQueue::new(qp, None))
                .collect::<Result<Vec<_>, _>>()
                .map_err(Fail::verbs)?;
            measure_size(
                p,
                &res.geometry,
                size,
                &targets,
                &mut sqs,
                &mut cq,
                &r.clock,
            )?
        }
        Method::Direct => return Err(Fail::new("internal: --post direct in a duplex test")),
    };
    Ok((run.row, run.error))
}

/// send: the combined TX/RX loop with post method `method`.
fn send_one(
    p: &Params,
    r: &Ready,
    rx: &mut Receiver,
    uds: &[Option<UdDest>],
    method: Method,
    size: u64,
) -> Result<(stats::BwResult, Option<String>), Fail> {
    let qps = &r.res.qps;
    match method {
        Method::PostSend => {
            let mut sqs = qps
                .iter()
                .zip(uds)
                .map(|(qp, ud)| PostSendQueue::new(qp, p.post_list as usize, ud.clone()))
                .collect::<Result<Vec<_>, _>>()
                .map_err(Fail::verbs)?;
            send_loop(p, r, rx, &mut sqs, size)
        }
        Method::WrApi => {
            let mut sqs = qps
                .iter()
                .zip(uds)
                .map(|(qp, ud)| WrApiQueue::new(qp, ud.clone()))
                .collect::<Result<Vec<_>, _>>()
                .map_err(Fail::verbs)?;
            send_loop(p, r, rx, &mut sqs, size)
        }
        Method::Direct => Err(Fail::new("internal: --post direct in a duplex test")),
    }
}

/// One size of the duplex SEND loop, monomorphised per post method; the row
/// is computed with perftest's sender formula from this side's sends
/// (duration: sends + receives in the window).
fn send_loop<S: SendQueue>(
    p: &Params,
    r: &Ready,
    rx: &mut Receiver,
    sqs: &mut [S],
    size: u64,
) -> Result<(stats::BwResult, Option<String>), Fail> {
    let res = &r.res;
    let clock = &r.clock;
    let rx_cfg = rx
        .cfg
        .take()
        .ok_or_else(|| Fail::new("internal: receives not posted before the run"))?;
    let targets = qp_targets(res, &r.rem);
    let g = Geometry::new(
        size,
        res.geometry.cycle_buffer,
        res.geometry.cache_line,
        res.geometry.slots,
    );
    let nqp = sqs.len();
    let total = (p.iters * nqp as u64) as usize;
    let peak_len = if p.no_peak { 0 } else { total };
    let mut tposted = vec![0u64; peak_len];
    let mut tcompleted = vec![0u64; peak_len];
    let mut counts = vec![QpCount::default(); nqp];
    let mut list = vec![WrDesc::default(); p.post_list as usize];
    let batch = p.cqe_poll as usize;
    let mut wcs = vec![Completion::default(); batch];
    let mut rwcs = vec![Completion::default(); batch];
    let mut scq = VerbsCq::new(&res.cq, batch).map_err(Fail::verbs)?;
    let mut rcq = VerbsCq::new(&res.rcq, batch).map_err(Fail::verbs)?;
    let secs = |s: u32| clock.cycles_for(Duration::from_secs(s as u64));
    let window = match p.mode {
        Mode::Duration { secs: d, margin } => Some(Window {
            margin: secs(margin),
            sample_stop: secs(d - margin),
            end: secs(d),
        }),
        Mode::Iterations => None,
    };
    let cfg = DuplexConfig {
        tx: BwConfig {
            cost: false,
            ..bw_config(p, size, &g, clock)
        },
        rx: rx_cfg,
        wait_first_rx: p.is_server(),
        window,
    };
    let o = DuplexLoop {
        cfg,
        sqs,
        rqs: &mut rx.rqs,
        scq: &mut scq,
        rcq: &mut rcq,
        targets: &targets,
        bufs: &rx.bufs,
        counts: &mut counts,
        rx_counts: &mut rx.counts,
        list: &mut list,
        wcs: &mut wcs,
        rwcs: &mut rwcs,
        tposted: &mut tposted,
        tcompleted: &mut tcompleted,
        now: clock::now,
    }
    .run();
    let err = o.tx.error.map(|e| {
        if o.rx_error {
            return describe_recv(e, size, &rx_cfg);
        }
        let d = describe(e, &counts);
        if d.starts_with("completion with error") {
            format!(
                "{d}; for SEND, a remote error usually means the peer's receive buffers are smaller \
                 than {size} B (give both sides the same -s/-a/-c) or it has no receive posted"
            )
        } else {
            d
        }
    });
    let m = Measured {
        outcome: o.tx,
        tposted,
        tcompleted,
    };
    let row = result(p, size, &m, clock)?;
    Ok((row, err))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::args::PerfArgs;
    use crate::cli::params::{resolve, Kind, Tool as PTool};

    #[test]
    fn atomic_bw_duplex_uses_perftests_atomic_choreography() {
        let a = PerfArgs {
            post: "auto".into(),
            timeout: 30,
            cq_timeout: 10,
            bidirectional: true,
            server: Some("127.0.0.1".into()),
            ..Default::default()
        };
        let tool = PTool {
            verb: Verb::Atomic,
            kind: Kind::Bw,
        };
        let p = resolve(tool, &a).unwrap();
        let s = crate::tool::common::scenario::scenario(&p, 1024);
        assert_eq!(s.tool, crate::ctrl::Tool::AtomicBw);
        assert!(s.duplex);
        assert_eq!(s.role, crate::ctrl::Role::Client);
    }
}
