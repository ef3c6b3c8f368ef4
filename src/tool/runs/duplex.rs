//! `-b` (bidirectional) write-bw / read-bw / send-bw: walks perftest's duplex
//! choreography (`ctrl::choreo`: a barrier before each run, for write/read
//! `-a` one after it, then the report exchange). Both sides' QPs go to RTS and
//! both sides measure: write/read run the ordinary bw loop on each side;
//! send runs the combined TX/RX loop (`run::duplex`). Each side prints the
//! sum of its own and the peer's report (send `-D` exchanges no report and
//! prints its own row, as perftest does).

use super::send_bw::{
    barrier, describe_recv, failed_run, no_resources, open, send_completion_hint, ud_dests, window,
    Opened, Ready, Receiver, SetUp,
};
use crate::cli::params::{Params, Verb};
use crate::clock;
use crate::ctrl::choreo::Barrier;
use crate::ctrl::choreo::Entry;
use crate::ctrl::{BwReport, Session, Step};
use crate::post::verbs_cq::{VerbsCq, VerbsRecv};
use crate::post::{Completion, CompletionQueue, RecvQueue, SendQueue};
use crate::report::info::TestInfo;
use crate::report::{json, stats, text};
use crate::run::bw::BwConfig;
use crate::run::duplex::{DuplexConfig, DuplexLoop};
use crate::run::geometry::Geometry;
use crate::run::recv::{RecvBuf, RecvConfig, RxCount};
use crate::tool::common::fail::Fail;
use crate::tool::common::out::Out;
use crate::tool::session::bw_measure::{bw_config, describe, measure_size, qp_targets, LoopBufs};
use crate::tool::session::bw_result::{check_limits, report_of, result, row_of, Measured};
use crate::tool::session::control::connect;
use crate::tool::session::direct::{self, DirectQueues, DirectRx};
use crate::tool::session::queues;
use crate::tool::setup::method::Method;
use crate::verbs::UdDest;

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
    let o = open(p0)?;
    let p = &o.p;
    let mut sess = connect(p, &o.ep)?;
    // Set-up steps (versions .. the last key exchange) change the resources;
    // the barriers, runs and reports after them only read them, so the
    // direct queues can borrow them for every size.
    let (r, su) = SetUp::walk(&o, &mut sess, out, set_up_step)?;
    run_sizes(&o, sess, su, r, out)
}

/// The steps after the set-up: barriers (the header before the first run),
/// one run per size on both sides, the report exchange and the summed row;
/// then the result line, the limits and the close.
/// (`r` is dropped first, `sess` last: the QPs go before the control
/// connection closes, as they did in one function.)
fn run_sizes(o: &Opened, mut sess: Session, mut su: SetUp, r: Ready, out: Out) -> Result<(), Fail> {
    let (p, steps, r) = (&o.p, &o.steps, &r);
    let send = p.tool.verb == Verb::Send;
    let (uds, receiver, report) = (&su.uds, &mut su.receiver, &mut su.report);
    let mut header = false;
    // The local report of the last run, and the last printed (summed) result.
    let mut local = BwReport::default();
    let mut shown = BwReport::default();
    // --post direct: the SQs and send CQ poller, and for SEND the RQs and
    // receive CQ poller, opened once and kept across sizes.
    let mut direct = DirectSide::open(r, uds, send)?;
    for (i, e) in steps.iter().enumerate().skip(su.runs_from) {
        if e.waits_for_peer_run {
            sess.wait_for_peer_run();
        }
        match e.step {
            Step::Barrier(b) => {
                if b == Barrier::BeforeRun && !header {
                    out.print(&text::bw_header(&r.info));
                    header = true;
                }
                let drx = direct.as_mut().and_then(|d| d.rx.as_mut());
                let rx = receiver.as_mut().map(|rx| (rx, drx));
                barrier(&mut sess, &e.step, b, rx, p, r, &steps[i..])?;
            }
            Step::Run { size } => {
                let size = size.unwrap_or(p.sizes[0]);
                let (row, err) =
                    measure_one(p, r, &mut sess, receiver, uds, direct.as_mut(), size)?;
                local = report_of(size, &row);
                // perftest prints the local row only where no report follows (send -D).
                let alone = !steps[i..].iter().any(|e| e.step == Step::BwReport);
                if alone || err.is_some() {
                    out.print(&text::bw_row(&row, &r.info, 0.0));
                    push_json(report, &row, &r.info, err.as_deref())?;
                    shown = local;
                }
                if let Some(e) = err {
                    return Err(failed_run(p, r, out, e));
                }
            }
            Step::BwReport => {
                let theirs = sess.exchange_bw_report(&local).map_err(Fail::ctrl)?;
                shown = print_sum(p, &r.info, &local, &theirs, report, out)?;
            }
            Step::Close => break,
            s => {
                return Err(Fail::new(format!(
                    "internal: {} -b has no step {s} here",
                    p.tool.name()
                )))
            }
        }
    }
    drop(direct);
    close(p, r, sess, &shown, out)
}

/// The result line, the limits and the close handshake (a failed close wins).
fn close(p: &Params, r: &Ready, sess: Session, shown: &BwReport, out: Out) -> Result<(), Fail> {
    out.print(crate::tool::common::out::result_line(p));
    // perftest checks --limit_bw/--limit_msgrate against the summed line.
    let limits = check_limits(p, shown);
    sess.close(&r.my[0]).map_err(Fail::ctrl)?;
    limits
}

/// The set-up steps after the MTU: keys, connect (both sides go to RTS;
/// SEND's receiver and UD destinations) and barriers; `rest` starts at the
/// step.
fn set_up_step(
    o: &Opened,
    su: &mut SetUp,
    sess: &mut Session,
    rest: &[Entry],
    out: Out,
) -> Result<(), Fail> {
    let (p, ep, e) = (&o.p, &o.ep, &rest[0]);
    let r = su.ready.as_mut().ok_or_else(no_resources)?;
    match e.step {
        Step::Keys { qp, round } => {
            r.keys(sess, p, &e.step, qp, round, out)?;
        }
        Step::Connect => {
            // Duplex: both sides send, so both go to RTS.
            r.res.connect(ep, p, r.mtu, &r.rem, true)?;
            if p.tool.verb == Verb::Send {
                su.receiver = Some(Receiver::new(&r.res, p)?);
                su.uds = ud_dests(ep, p, &r.res, &r.rem)?;
            }
        }
        Step::Barrier(b) => {
            let rx = su.receiver.as_mut().map(|rx| (rx, None));
            barrier(sess, &e.step, b, rx, p, r, rest)?;
        }
        s => {
            return Err(Fail::new(format!(
                "internal: {} -b has step {s} before its set-up ends",
                p.tool.name()
            )))
        }
    }
    Ok(())
}

/// The direct queues of a duplex side (see `run`).
struct DirectSide<'r> {
    tx: DirectQueues<'r>,
    /// SEND only: the receive side.
    rx: Option<DirectRx<'r>>,
}

impl<'r> DirectSide<'r> {
    /// With --post direct: the SQs and send CQ poller, and for SEND the RQs
    /// and receive CQ poller; None with a verbs method.
    fn open(r: &'r Ready, uds: &[Option<UdDest>], send: bool) -> Result<Option<Self>, Fail> {
        Ok(match r.method {
            Method::Direct => Some(DirectSide {
                tx: direct::open_queues(&r.res, uds, false)?,
                rx: send.then(|| direct::open_recv(&r.res, false)).transpose()?,
            }),
            _ => None,
        })
    }
}

/// One size on this side (SEND with the receiver, write/read without), with
/// a peer that exits mid-run noticed at once.
fn measure_one(
    p: &Params,
    r: &Ready,
    sess: &mut Session,
    receiver: &mut Option<Receiver>,
    uds: &[Option<UdDest>],
    direct: Option<&mut DirectSide<'_>>,
    size: u64,
) -> Result<(stats::BwResult, Option<String>), Fail> {
    let watch = sess.watch_peer();
    let (row, err) = match receiver.as_mut() {
        Some(rx) => send_one(p, r, rx, uds, direct, size)?,
        None => rdma_one(p, r, direct, size)?,
    };
    drop(watch);
    Ok((row, err))
}

/// The summed row (ours + the peer's report), and with --report-both each
/// side's own row; returns what was shown.
fn print_sum(
    p: &Params,
    info: &TestInfo,
    local: &BwReport,
    theirs: &BwReport,
    report: &mut Option<json::JsonReport>,
    out: Out,
) -> Result<BwReport, Fail> {
    let (mine, remote) = (row_of(local), row_of(theirs));
    let sum = mine.sum(&remote);
    out.print(&text::bw_row(&sum, info, 0.0));
    push_json(report, &sum, info, None)?;
    if p.report_both {
        // perftest's --report-both: each side's own row under its banner.
        for (side, row) in [(text::Side::Local, &mine), (text::Side::Remote, &remote)] {
            out.print(&text::report_both_banner(side, info));
            out.print(&text::bw_row(row, info, 0.0));
        }
    }
    Ok(report_of(local.size, &sum))
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
    direct: Option<&mut DirectSide<'_>>,
    size: u64,
) -> Result<(stats::BwResult, Option<String>), Fail> {
    let res = &r.res;
    let targets = qp_targets(res, &r.rem);
    if let Some(d) = direct {
        let q = &mut d.tx;
        let g = &res.geometry;
        let run = direct::run_size(p, g, size, &targets, &mut q.sqs, &mut q.cq, &r.clock)?;
        return Ok((run.row, run.error));
    }
    let mut cq = VerbsCq::new(&res.cq, 16).map_err(Fail::verbs)?;
    let g = &res.geometry;
    let run = match r.method {
        Method::PostSend => {
            let mut sqs = queues::post_send(&res.qps, p.post_list, queues::connected())?;
            measure_size(p, g, size, &targets, &mut sqs, &mut cq, &r.clock, None)?
        }
        Method::WrApi => {
            let mut sqs = queues::wr_api(&res.qps, queues::connected())?;
            measure_size(p, g, size, &targets, &mut sqs, &mut cq, &r.clock, None)?
        }
        Method::Direct => {
            return Err(Fail::new(
                "internal: -b --post direct without its queues; please report this",
            ))
        }
    };
    Ok((run.row, run.error))
}

/// send: the combined TX/RX loop with the side's post method (the direct
/// queues when there are).
fn send_one(
    p: &Params,
    r: &Ready,
    rx: &mut Receiver,
    uds: &[Option<UdDest>],
    direct: Option<&mut DirectSide<'_>>,
    size: u64,
) -> Result<(stats::BwResult, Option<String>), Fail> {
    let qps = &r.res.qps;
    let (bufs, counts, rqs) = (&rx.bufs, &mut rx.counts, &mut rx.rqs);
    let cfg = rx
        .cfg
        .take()
        .ok_or_else(|| Fail::new("internal: receives not posted before the run"))?;
    let side = RxSide { bufs, counts, cfg };
    match (r.method, direct) {
        (Method::Direct, Some(DirectSide { tx, rx: Some(drx) })) => {
            let q = Queues {
                sqs: &mut tx.sqs,
                rqs: &mut drx.rqs,
                scq: &mut tx.cq,
                rcq: &mut drx.cq,
            };
            send_loop(p, r, side, q, size)
        }
        (Method::PostSend, _) => {
            let mut sqs = queues::post_send(qps, p.post_list, uds.iter().cloned())?;
            verbs_send_loop(p, r, side, &mut sqs, rqs, size)
        }
        (Method::WrApi, _) => {
            let mut sqs = queues::wr_api(qps, uds.iter().cloned())?;
            verbs_send_loop(p, r, side, &mut sqs, rqs, size)
        }
        (Method::Direct, _) => Err(Fail::new(
            "internal: send-bw -b --post direct without its queues; please report this",
        )),
    }
}

/// [`send_loop`] with a verbs method's send queues: libibverbs pollers of
/// the send and receive CQs, the verbs receive queues.
fn verbs_send_loop<S: SendQueue>(
    p: &Params,
    r: &Ready,
    side: RxSide<'_>,
    sqs: &mut [S],
    rqs: &mut [VerbsRecv],
    size: u64,
) -> Result<(stats::BwResult, Option<String>), Fail> {
    let batch = p.cqe_poll as usize;
    let mut scq = VerbsCq::new(&r.res.cq, batch).map_err(Fail::verbs)?;
    let mut rcq = VerbsCq::new(&r.res.rcq, batch).map_err(Fail::verbs)?;
    let q = Queues {
        sqs,
        rqs,
        scq: &mut scq,
        rcq: &mut rcq,
    };
    send_loop(p, r, side, q, size)
}

/// The receive state the duplex SEND loop works on (the Receiver's).
struct RxSide<'a> {
    bufs: &'a [RecvBuf],
    counts: &'a mut [RxCount],
    cfg: RecvConfig,
}

/// One side's queues for the duplex SEND loop, of one method.
struct Queues<'a, S, R, C, D> {
    sqs: &'a mut [S],
    rqs: &'a mut [R],
    scq: &'a mut C,
    rcq: &'a mut D,
}

/// One size of the duplex SEND loop, monomorphised per post method; the row
/// is computed with perftest's sender formula from this side's sends
/// (duration: sends + receives in the window).
fn send_loop<S: SendQueue, R: RecvQueue, C: CompletionQueue, D: CompletionQueue>(
    p: &Params,
    r: &Ready,
    rx: RxSide<'_>,
    q: Queues<'_, S, R, C, D>,
    size: u64,
) -> Result<(stats::BwResult, Option<String>), Fail> {
    let res = &r.res;
    let clock = &r.clock;
    let rx_cfg = rx.cfg;
    let sqs = q.sqs;
    let targets = qp_targets(res, &r.rem);
    let mut b = LoopBufs::new(p, sqs.len());
    let mut rwcs = vec![Completion::default(); p.cqe_poll as usize];
    let o = DuplexLoop {
        cfg: duplex_config(p, r, size, rx_cfg),
        sqs,
        rqs: q.rqs,
        scq: q.scq,
        rcq: q.rcq,
        targets: &targets,
        bufs: rx.bufs,
        counts: &mut b.counts,
        rx_counts: rx.counts,
        list: &mut b.list,
        wcs: &mut b.wcs,
        rwcs: &mut rwcs,
        tposted: &mut b.tposted,
        tcompleted: &mut b.tcompleted,
        now: clock::now,
    }
    .run();
    let err = o.tx.error.map(|e| {
        if o.rx_error {
            return describe_recv(e, size, &rx_cfg);
        }
        let d = describe(e, &b.counts);
        send_completion_hint(&d, size).unwrap_or(d)
    });
    let m = Measured {
        outcome: o.tx,
        tposted: b.tposted,
        tcompleted: b.tcompleted,
    };
    let row = result(p, size, &m, clock)?;
    Ok((row, err))
}

/// The duplex loop's settings for `size`: the bw loop's (without the
/// per-call cost), the receiver's, and the -D window.
fn duplex_config(p: &Params, r: &Ready, size: u64, rx: RecvConfig) -> DuplexConfig {
    let res = &r.res;
    let g = Geometry::new(
        size,
        res.geometry.cycle_buffer,
        res.geometry.cache_line,
        res.geometry.slots,
    );
    DuplexConfig {
        tx: BwConfig {
            cost: false,
            ..bw_config(p, size, &g, &r.clock)
        },
        rx,
        wait_first_rx: p.is_server(),
        window: window(p, &r.clock),
    }
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
