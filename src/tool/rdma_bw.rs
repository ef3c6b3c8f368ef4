//! write-bw / read-bw / atomic-bw, unidirectional: perftest's choreography
//! (versions, sysdata, MTU, keys, connect, keys, barrier; client runs, then
//! barrier, report exchange, close), the bw loop with the chosen post method,
//! and the report.

use super::cm_data;
use super::direct;
use super::infinite;
use super::info::test_info;
use super::method::{self, Chosen, Method};
use super::progress;
use super::setup::{Endpoint, Resources};
use super::threads_bw;
use super::threads_stock;
use super::{landing, Fail, Out};
use crate::cli::params::{Conn, Mode, Params};
use crate::clock::{self, Clock};
use crate::ctrl::cm_link::CmLink;
use crate::ctrl::{BwReport, Channel, Dest, Listener, Role, Session};
use crate::post::event_cq;
use crate::post::post_send::PostSendQueue;
use crate::post::wr_api::{send_ops_flags, WrApiQueue};
use crate::post::{Completion, CompletionQueue, SendQueue, WcStatus, WrDesc};
use crate::report::{json, stats, text};
use crate::run::bw::{BwConfig, BwLoop, BwOutcome, Deadlines, QpCount, QpTarget, RunError};
use crate::run::geometry::Geometry;
use crate::run::stop;
use crate::verbs::QpType;
use std::time::Duration;

/// Open the control connection: TCP, or (`-R`) an RC QP connected by the
/// RDMA CM on `ep`'s device.
pub fn connect(p: &Params, ep: &Endpoint) -> Result<Session, Fail> {
    // A session the caller already opened for this pair (fabric mode's MPI link).
    if let Some(sess) = crate::ctrl::link::take() {
        return Ok(sess);
    }
    let t = Duration::from_secs(p.ctrl_timeout_s);
    if p.is_server() && !p.loopback && p.output.is_none() {
        // perftest's banner, before it waits for the client (TCP or rdma_cm).
        Out { quiet: false }.print(text::SERVER_WAIT_BANNER);
    }
    if p.cm_ctrl() {
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
        sess.set_local_params(super::peer_check::local_params(p));
        return Ok(sess);
    }
    let ch = match &p.server {
        Some(host) => {
            let how = crate::ctrl::ConnectHow {
                ipv6_only: p.conn_opts.ipv6_ctrl,
                source: p.conn_opts.source_ip,
            };
            Channel::connect_with(host, p.port, t, &how).map_err(Fail::ctrl)?
        }
        None => {
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
            })?
        }
    };
    let mut ch = ch;
    ch.set_step_timeout(Some(t));
    // Ctrl-C in any control step shuts the socket down, so a blocked read
    // returns at once (the peer sees us go, too).
    let watch = stop::watch_socket(ch.raw_fd());
    let mut sess = Session::new(ch).with_guard(Box::new(watch));
    sess.set_local_params(super::peer_check::local_params(p));
    Ok(sess)
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
        super::peer_check::versions(sess, p)?;
    }
    let page = crate::verbs::mr::page_size() as u32;
    let (cb, cl) = sess.exchange_sysdata(page, 64).map_err(Fail::ctrl)?;
    let mtu = sess.exchange_mtu(ep.mtu_enum(p)).map_err(Fail::ctrl)?;
    Ok((cb as u64, cl as u64, mtu))
}

/// perftest's duration state machine as clock deadlines from `start`
/// (margin, D - margin, D); None in iterations mode.
pub(crate) fn deadlines(p: &Params, clock: &Clock, start: u64) -> Option<Deadlines> {
    match p.mode {
        Mode::Duration { secs, margin } => Some(Deadlines {
            sample_start: start + clock.cycles_for(Duration::from_secs(margin as u64)),
            sample_stop: start + clock.cycles_for(Duration::from_secs((secs - margin) as u64)),
            end: start + clock.cycles_for(Duration::from_secs(secs as u64)),
        }),
        Mode::Iterations => None,
    }
}

/// The bw loop's configuration for one size.
pub(crate) fn bw_config(p: &Params, size: u64, g: &Geometry, clock: &Clock) -> BwConfig {
    BwConfig {
        op: p.op(),
        size: size as u32,
        iters: p.iters,
        post_list: p.post_list,
        tx_depth: p.tx_depth,
        cq_mod: p.cq_mod,
        inline: size <= p.inline_size as u64,
        positions: g.positions(),
        step: g.step(),
        stall_ticks: clock.cycles_for(Duration::from_secs(p.cq_timeout_s)),
        cost: !p.no_cost,
    }
}

pub(crate) fn qp_type(p: &Params) -> QpType {
    match p.conn {
        Conn::Rc => QpType::RC,
        Conn::Uc => QpType::UC,
        Conn::Ud => QpType::UD,
    }
}

/// What the client measured at one size (for `compare` and callers that aggregate).
#[derive(Clone, Debug)]
pub struct SizeSummary {
    pub size: u64,
    pub result: stats::BwResult,
    pub method: &'static str,
    /// CPU ns per post call and per WR (0 with --no-cost).
    pub ns_per_call: f64,
    pub ns_per_wr: f64,
}

/// What the client sends in the report exchange for one size's row.
pub(crate) fn report_of(size: u64, r: &stats::BwResult) -> BwReport {
    BwReport {
        size,
        iters: r.iters,
        bw_peak: r.bw_peak,
        bw_avg: r.bw_avg,
        msg_rate: r.msg_rate,
        per_port: None,
    }
}

impl SizeSummary {
    /// The summary of one size's run; the post cost is 0 when it was not
    /// measured (`--no-cost`).
    pub fn of(p: &Params, size: u64, run: &SizeRun, method: &'static str, clock: &Clock) -> Self {
        let o = &run.outcome;
        let per_call = if o.post_calls > 0 {
            clock.nanos(o.post_ticks) / o.post_calls as f64
        } else {
            0.0
        };
        SizeSummary {
            size,
            result: run.row,
            method,
            ns_per_call: per_call,
            ns_per_wr: per_call / p.post_list.max(1) as f64,
        }
    }
}

/// Runs one side; the client returns what it measured per size (the server nothing).
pub fn run(p: &Params, out: Out) -> Result<Vec<SizeSummary>, Fail> {
    let ep = Endpoint::open(p)?;
    let method = method::resolve(&ep.ctx, p, qp_type(p), &[p.op()])?;
    let mut sess = connect(p, &ep)?;
    if p.threads > 1 && !p.is_server() {
        // Against stock perftest, thread i talks to its own server on port
        // p+i (one stock process per port, as NVIDIA's scripts run them);
        // between two rdmaperf ends one connection carries every thread.
        let peer = super::peer_check::versions(&mut sess, p)?;
        if !peer.is_rdmaperf() {
            return threads_stock::run(p, out, &ep, method, sess);
        }
    }
    run_session(p, out, &ep, method, sess)
}

/// [`run`] on an open control session (versions possibly exchanged).
pub(crate) fn run_session(
    p: &Params,
    out: Out,
    ep: &Endpoint,
    method: Method,
    mut sess: Session,
) -> Result<Vec<SizeSummary>, Fail> {
    let op = p.op();
    let flags = (method == Method::WrApi).then(|| send_ops_flags(&[op]));
    let (cb, cl, mtu) = preamble(&mut sess, ep, p)?;
    let mut counters = super::counters::for_run(p, ep)?;
    let (res, chosen) = if method == Method::Direct {
        Resources::create_for(ep, p, cb, cl, method, &[op])?
    } else {
        (
            Resources::create(ep, p, cb, cl, flags)?,
            Chosen::plain(method),
        )
    };
    // Auto may have fallen back from direct (the reason is in the banner).
    let method = chosen.method;
    let _cm = cm_data::connect_qps(&mut sess, ep, p, &res)?;
    let clock = Clock::calibrate();
    crate::run::watchdog::configure(&clock);
    let mtu_bytes = crate::verbs::Mtu(mtu as u32).bytes().unwrap_or(0);
    let info = test_info(p, ep, &res, mtu_bytes, &chosen, &clock);
    out.print(&text::info_block(&info));

    let my: Vec<Dest> = (0..res.num_qps()).map(|i| res.dest(ep, i)).collect();
    let mut rem = Vec::with_capacity(my.len());
    for (i, d) in my.iter().enumerate() {
        let r = sess.hand_shake(d).map_err(Fail::ctrl)?;
        super::peer_check::key(p, &rem, &r, i, false)?;
        rem.push(r);
    }
    res.connect(ep, p, mtu, &rem, !p.is_server())?;
    for (i, d) in my.iter().enumerate() {
        let r = sess.hand_shake(d).map_err(Fail::ctrl)?;
        super::peer_check::key(p, &rem, &r, i, true)?;
        rem[i] = r;
    }
    for (l, r) in my.iter().zip(&rem) {
        out.print(&text::address_line(
            text::Side::Local,
            &to_text_dest(l),
            &info,
        ));
        out.print(&text::address_line(
            text::Side::Remote,
            &to_text_dest(r),
            &info,
        ));
    }
    sess.hand_shake(&my[0]).map_err(Fail::ctrl)?;

    if p.is_server() {
        // The client runs now; the next exchange waits for its end.
        sess.set_peer_run_timeout(None);
        sess.wait_for_peer_run();
        sess.hand_shake(&my[0]).map_err(Fail::ctrl)?;
        let mine = BwReport {
            size: p.max_size(),
            iters: p.iters,
            ..Default::default()
        };
        let theirs = sess.exchange_bw_report(&mine).map_err(Fail::ctrl)?;
        out.print(&text::bw_header(&info));
        let r = stats::BwResult {
            size: theirs.size,
            iters: theirs.iters,
            bw_peak: theirs.bw_peak,
            bw_avg: theirs.bw_avg,
            msg_rate: theirs.msg_rate,
            bw_peak_exact: 0.0,
        };
        out.print(&text::bw_row(&r, &info, 0.0));
        if let Some(c) = counters.as_mut() {
            out.print(&c.report()?);
        }
        out.print(super::result_line(p));
        if let Some(f) = &p.json_file {
            // The client's numbers, as the row above (perftest master writes them too).
            json::JsonReport::new(f, &info)
                .push(json::Record::bw(&r, &info, 0.0))
                .map_err(|e| Fail::new(e.to_string()))?;
        }
        let landing_result = if p.check_landing {
            Some(check_landing(p, &res, theirs.iters))
        } else {
            None
        };
        sess.close(&my[0]).map_err(Fail::ctrl)?;
        if let Some(l) = landing_result {
            l?;
        }
        return Ok(Vec::new());
    }

    // Direct: one set of queues for every size (the SQ/CQ indices carry over).
    let mut dq = if method == Method::Direct {
        Some(direct::open_queues(&res, &[])?)
    } else {
        None
    };
    let targets = qp_targets(&res, &rem);
    let mut report = p
        .json_file
        .as_ref()
        .map(|f| json::JsonReport::new(f, &info));
    let mut last = BwReport::default();
    let mut failure: Option<Fail> = None;
    let mut costs: Vec<(u64, f64, f64)> = Vec::new();
    let mut summaries = Vec::with_capacity(p.sizes.len());
    let workers = if p.threads > 1 {
        Some(threads_bw::plan(p, ep.ctx.name()).map_err(Fail::new)?)
    } else {
        None
    };
    let mut thread_lines = String::new();
    out.print(&text::bw_header(&info));
    // The server is silent until our run ends: its control connection's end
    // of file means it exited (noticed at once, not after --cq-timeout).
    let watch = sess.watch_peer();
    for (i, &size) in p.sizes.iter().enumerate() {
        progress::sweep(i, p.sizes.len(), size);
        let ticker = match p.mode {
            Mode::Duration { secs, .. } if !p.run_infinitely => {
                progress::Ticker::start(secs as u64)
            }
            _ => None,
        };
        let cpu = match p.mode {
            Mode::Duration { secs, margin } if p.cpu_util => {
                Some(super::cpu_util::Sampler::start(margin, secs - 2 * margin))
            }
            _ => None,
        };
        let mut per_thread = None;
        let run = if let Some(w) = &workers {
            let (run, lines) = threads_bw::run_size(p, &res, w, size, &targets, method, &clock)?;
            per_thread = Some(threads_bw::lines_json(&lines));
            let unit = if p.report_gbits { "Gb/sec" } else { "MiB/sec" };
            thread_lines.push_str(&format!(
                " {size} B:\n{}",
                threads_bw::lines_text(&lines, unit)
            ));
            run
        } else {
            // One measurement (with the --run_infinitely printer) over any queues.
            macro_rules! measured {
                ($sqs:expr, $cq:expr) => {
                    infinite::with_printer(p, &info, &clock, size, out, &mut report, |per| {
                        measure_size_periods(
                            p,
                            &res.geometry,
                            size,
                            &targets,
                            $sqs,
                            $cq,
                            &clock,
                            per,
                        )
                    })??
                };
            }
            match method {
                Method::PostSend => {
                    let mut sqs = res
                        .qps
                        .iter()
                        .map(|qp| PostSendQueue::new(qp, p.post_list as usize, None))
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(Fail::verbs)?;
                    let mut cq = event_cq::verbs(&res.cq, 16, p.use_event).map_err(Fail::verbs)?;
                    measured!(&mut sqs, &mut cq)
                }
                Method::WrApi => {
                    let mut sqs = res
                        .qps
                        .iter()
                        .map(|qp| WrApiQueue::new(qp, None))
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(Fail::verbs)?;
                    let mut cq = event_cq::verbs(&res.cq, 16, p.use_event).map_err(Fail::verbs)?;
                    measured!(&mut sqs, &mut cq)
                }
                Method::Direct => {
                    let q = dq
                        .as_mut()
                        .ok_or_else(|| Fail::new("--post direct: queues not opened (internal)"))?;
                    measured!(&mut q.sqs, &mut q.cq)
                }
            }
        };
        drop(ticker);
        let cpu = cpu.map_or(0.0, |c| c.finish());
        let r = &run.row;
        if !p.run_infinitely {
            if p.sizes.len() > 1 {
                // The sweep's "[i/n] size" progress (stderr, on a terminal) must not prefix the row.
                progress::clear();
            }
            // --run_infinitely printed its period rows; no whole-run row (perftest neither).
            out.print(&text::bw_row(r, &info, cpu));
            if let Some(c) = counters.as_mut() {
                out.print(&c.report()?);
            }
        }
        if run.unknown_qpn_cqes > 0 {
            out.print(&unknown_qpn_line(run.unknown_qpn_cqes));
        }
        let summary = SizeSummary::of(p, size, &run, method.name(), &clock);
        let cost =
            (run.outcome.post_calls > 0).then_some((size, summary.ns_per_call, summary.ns_per_wr));
        costs.extend(cost);
        summaries.push(summary);
        if let Some(j) = report.as_mut().filter(|_| !p.run_infinitely) {
            let mut rec = json::Record::bw(r, &info, cpu);
            if let Some((_, call, wr)) = cost {
                rec = rec
                    .with("post_ns_per_call", (call * 10.0).round() / 10.0)
                    .with("post_ns_per_wr", (wr * 10.0).round() / 10.0);
            }
            if let Some(t) = per_thread.take() {
                rec = rec.with("threads", t);
            }
            if method == Method::Direct {
                rec = rec.with("unknown_qpn_cqes", run.unknown_qpn_cqes);
            }
            if let Some(e) = &run.error {
                rec = rec.with("error", e.as_str());
            }
            j.push(rec).map_err(|e| Fail::new(e.to_string()))?;
        }
        last = report_of(size, r);
        if let Some(e) = run.error {
            res.to_err();
            failure = Some(Fail::new(e));
            break;
        }
    }
    drop(watch);
    if p.sizes.len() > 1 {
        progress::clear();
    }
    out.print(super::result_line(p));
    if p.output.is_none() {
        out.print(&thread_lines);
        out.print(&post_cost_line(&costs, method.name()));
    }
    if let Some(f) = failure {
        // Partial results are printed (and written) above; the peer sees us go.
        return Err(f);
    }
    check_limits(p, &last)?;
    sess.hand_shake(&my[0]).map_err(Fail::ctrl)?;
    sess.exchange_bw_report(&last).map_err(Fail::ctrl)?;
    sess.close(&my[0]).map_err(Fail::ctrl)?;
    Ok(summaries)
}

/// The post cost after the table: one line for one size; for an `-a` sweep
/// one summary (medians and ranges over the sizes; JSON has every size).
fn post_cost_line(costs: &[(u64, f64, f64)], method: &str) -> String {
    match costs {
        [] => String::new(),
        [(size, call, wr)] => {
            format!(
                " Post cost ({size} B): {call:.1} ns per post call, {wr:.1} ns per WR ({method})\n"
            )
        }
        _ => {
            let stat = |k: fn(&(u64, f64, f64)) -> f64| {
                let mut v: Vec<f64> = costs.iter().map(k).collect();
                v.sort_by(f64::total_cmp);
                let n = v.len();
                let med = if n % 2 == 1 {
                    v[n / 2]
                } else {
                    (v[n / 2 - 1] + v[n / 2]) / 2.0
                };
                (med, v[0], v[n - 1])
            };
            let (cm, c0, c1) = stat(|c| c.1);
            let (wm, w0, w1) = stat(|c| c.2);
            let lo = costs.iter().map(|c| c.0).min().unwrap_or(0);
            let hi = costs.iter().map(|c| c.0).max().unwrap_or(0);
            format!(
                " Post cost ({lo}..{hi} B, {} sizes): median {cm:.1} ns per post call ({c0:.1}-{c1:.1}), \
                 median {wm:.1} ns per WR ({w0:.1}-{w1:.1}) ({method}); per size in --out_json\n",
                costs.len()
            )
        }
    }
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

/// Each QP's addressing: our send half (perftest geometry of the largest
/// size) and the peer's advertised buffer.
/// Targets for QPs that share one buffer at `mr_addr` laid out by `g`.
pub fn qp_targets_shared(g: &Geometry, mr_addr: u64, lkey: u32, rem: &[Dest]) -> Vec<QpTarget> {
    rem.iter()
        .enumerate()
        .map(|(i, r)| QpTarget {
            laddr: mr_addr + g.send_offset(i as u64),
            lkey,
            raddr: r.vaddr,
            rkey: r.rkey,
        })
        .collect()
}

/// Each QP's target: where it sends from (its MR, see
/// [`Resources::qp_mem`]) and the peer's address and rkey for it.
pub fn qp_targets(res: &Resources, rem: &[Dest]) -> Vec<QpTarget> {
    rem.iter()
        .enumerate()
        .map(|(i, r)| {
            let (mr, gi) = res.qp_mem(i);
            QpTarget {
                laddr: mr.addr() + res.geometry.send_offset(gi),
                lkey: res.send_lkey(mr),
                raddr: r.vaddr,
                rkey: r.rkey,
            }
        })
        .collect()
}

/// One size's result: what the loop measured, the error (worded for the
/// user) if it stopped early, and the report row.
#[derive(Clone, Debug)]
pub struct SizeRun {
    pub outcome: BwOutcome,
    pub error: Option<String>,
    pub row: stats::BwResult,
    /// CQEs of QPs the poller does not know, dropped during this size
    /// (direct poller: e.g. a destroyed QP's; reported, never silent).
    pub unknown_qpn_cqes: u64,
}

/// The loop outcome and its peak timestamps.
pub(crate) struct Measured {
    pub(crate) outcome: BwOutcome,
    pub(crate) tposted: Vec<u64>,
    pub(crate) tcompleted: Vec<u64>,
}

/// Run one size with post method `S` and poller `C` (monomorphised per
/// method) over `sqs` (one per target), and compute the row.
pub(crate) fn measure_size<S: SendQueue, C: CompletionQueue>(
    p: &Params,
    base: &Geometry,
    size: u64,
    targets: &[QpTarget],
    sqs: &mut [S],
    cq: &mut C,
    clock: &Clock,
) -> Result<SizeRun, Fail> {
    measure_size_periods(p, base, size, targets, sqs, cq, clock, None)
}

/// [`measure_size`], publishing `--run_infinitely` periods into `periods`
/// (then the run has no end but a stop request).
#[allow(clippy::too_many_arguments)]
pub(crate) fn measure_size_periods<S: SendQueue, C: CompletionQueue>(
    p: &Params,
    base: &Geometry,
    size: u64,
    targets: &[QpTarget],
    sqs: &mut [S],
    cq: &mut C,
    clock: &Clock,
    periods: Option<&crate::run::period::PeriodLog>,
) -> Result<SizeRun, Fail> {
    if targets.len() != sqs.len() {
        return Err(Fail::new(format!(
            "internal: {} send queues for {} targets; report this",
            sqs.len(),
            targets.len()
        )));
    }
    let g = Geometry::new(size, base.cycle_buffer, base.cache_line, base.slots);
    let total = (p.iters * sqs.len() as u64) as usize;
    let peak_len = if p.no_peak { 0 } else { total };
    let mut tposted = vec![0u64; peak_len];
    let mut tcompleted = vec![0u64; peak_len];
    let mut counts = vec![QpCount::default(); sqs.len()];
    let mut list = vec![WrDesc::default(); p.post_list as usize];
    let mut wcs = [Completion::default(); 16];
    let start = clock::now();
    let deadlines = match periods {
        Some(_) => Some(infinite::endless(start)),
        None => deadlines(p, clock, start),
    };
    let cfg = bw_config(p, size, &g, clock);
    let unknown_before = cq.unknown_qpn_cqes();
    let outcome = BwLoop {
        cfg,
        sqs,
        cq,
        targets,
        counts: &mut counts,
        list: &mut list,
        wcs: &mut wcs,
        tposted: &mut tposted,
        tcompleted: &mut tcompleted,
        deadlines,
        periods,
        now: clock::now,
    }
    .run();
    let error = outcome.error.map(|e| describe(e, &counts));
    let m = Measured {
        outcome,
        tposted,
        tcompleted,
    };
    let row = result(p, size, &m, clock)?;
    Ok(SizeRun {
        outcome,
        error,
        row,
        unknown_qpn_cqes: cq.unknown_qpn_cqes() - unknown_before,
    })
}

/// The line printed under a row when the direct poller dropped CQEs of QPs
/// it does not know (libmlx5 would have returned them as errors).
pub(crate) fn unknown_qpn_line(n: u64) -> String {
    format!(
        " Unknown-QPN CQEs : {n} (completions for QPs this run did not create were dropped; \
         another process or a destroyed QP shares the CQ — report this)\n"
    )
}

pub(crate) fn describe(e: RunError, counts: &[QpCount]) -> String {
    let waiting = || {
        counts
            .iter()
            .enumerate()
            .find(|(_, c)| c.scnt > c.ccnt)
            .map_or((0, 0), |(i, c)| (i, c.scnt - c.ccnt))
    };
    match e {
        RunError::Completion { qp, wr_id, wc } if wc.status == WcStatus::SUCCESS => format!(
            "unexpected completion on the send CQ: opcode {}, QPN {:#x}, wr_id {wr_id:#x} (QP index \
             {qp}) is not a completion of a WR this run posted (a receive, or another QP's); the \
             run stopped so it is not counted — report this with the command line",
            wc.opcode.0, wc.qp_num
        ),
        RunError::Completion { wc, .. } if super::peer_exited_before(&wc) => format!(
            "{}; our outstanding work then failed with {} — partial result above, the peer's \
             own output says why it stopped",
            super::PEER_EXITED,
            wc.status.name()
        ),
        RunError::PeerExited => {
            let (qp, n) = waiting();
            format!(
                "{} while QP {qp} had {n} messages outstanding; partial result above — the \
                 peer's own output says why it stopped",
                super::PEER_EXITED
            )
        }
        RunError::PeerFinished => {
            let (qp, n) = waiting();
            format!(
                "the peer ended its run (it sent its next control message) while QP {qp} still \
                 had {n} messages outstanding: the two sides expected different amounts of work \
                 — give both the same -n (or -D) and -q"
            )
        }
        RunError::Completion { qp, wr_id, wc } => format!(
            "completion with error on QP {qp}: status {} ({}), vendor error {:#x}{}, wr_id {wr_id:#x} \
             (message {} of that QP); the run stopped — check that both sides use the same -s/-a/-c and test, the peer's rkey/permissions, and the link",
            wc.status.name(),
            wc.status.0,
            wc.vendor_err,
            if wc.syndrome != 0 { format!(", syndrome {:#x}", wc.syndrome) } else { String::new() },
            wr_id & 0xffff_ffff_ffff
        ),
        RunError::Post { qp, err } => format!(
            "posting on QP {qp} failed: {err:?} (after {} messages); the QP is no longer usable",
            counts.get(qp as usize).map(|c| c.scnt).unwrap_or(0)
        ),
        RunError::Poll { err } => format!("polling the CQ failed: {err:?}"),
        RunError::Stalled { qp, outstanding, last_completed, idle_ticks: _ } => format!(
            "no completion for --cq-timeout seconds (plus the time the data in flight needs at \
             256 KiB/s): QP {qp} has {outstanding} messages outstanding, {last_completed} completed, \
             and the peer is still connected; the link or the peer's QP stopped — check the peer \
             (same -n/-s/-c/-q on both sides?), or raise --cq-timeout"
        ),
        RunError::Interrupted => "interrupted: QPs moved to ERR, partial result above".into(),
    }
}

pub(crate) fn result(
    p: &Params,
    size: u64,
    m: &Measured,
    clock: &Clock,
) -> Result<stats::BwResult, Fail> {
    let o = &m.outcome;
    let nqp = p.num_qps;
    let units = if p.report_gbits {
        stats::BwUnits::Gbit
    } else {
        stats::BwUnits::MiB
    };
    let duration = p.is_duration() || o.error.is_some();
    // Without peak, perftest's formula reads the interval from tposted[0]/tcompleted[0].
    let (tp, tc);
    let (tposted, tcompleted): (&[u64], &[u64]) = if p.no_peak || duration {
        tp = [o.t_start];
        tc = [o.t_end];
        (&tp, &tc)
    } else {
        (&m.tposted, &m.tcompleted)
    };
    let inp = stats::BwInput {
        size,
        iters: if duration { o.measured } else { p.iters },
        num_qps: nqp,
        duration,
        no_peak: p.no_peak || duration,
        post_list: p.post_list,
        cq_mod: p.cq_mod,
        tposted,
        tcompleted,
        hz: clock.hz(),
        units,
        inf_bidir_factor: 1,
    };
    stats::bw_perftest(&inp).map_err(|e| Fail::new(format!("computing the result: {e}")))
}

pub(crate) fn check_limits(p: &Params, r: &BwReport) -> Result<(), Fail> {
    if let Some(l) = p.limit_bw {
        if r.bw_avg < l {
            return Err(Fail::new(format!(
                "average bandwidth {:.2} is below --limit_bw {l:.2}",
                r.bw_avg
            )));
        }
    }
    if let Some(l) = p.limit_msgrate {
        if r.msg_rate < l {
            return Err(Fail::new(format!(
                "message rate {:.6} Mpps is below --limit_msgrate {l}",
                r.msg_rate
            )));
        }
    }
    Ok(())
}

/// Server side of `--check-landing`: did the client's writes land where perftest's geometry says?
fn check_landing(p: &Params, res: &Resources, client_iters: u64) -> Result<(), Fail> {
    let size = p.max_size();
    let g = Geometry::new(
        size,
        res.geometry.cycle_buffer,
        res.geometry.cache_line,
        res.geometry.slots,
    );
    let mut all_ok = true;
    for q in 0..res.num_qps() as u64 {
        let (mr, gi) = res.qp_mem(q as usize);
        let buf = mr.buf().map(|b| b.as_slice()).unwrap_or(&[]);
        let off = res.geometry.recv_offset(gi) as usize;
        let region = &buf[off..off + res.geometry.slot as usize];
        let msgs = if p.is_duration() {
            u64::MAX
        } else {
            client_iters / p.num_qps as u64
        };
        let l = landing::check(region, &g, msgs);
        let ok = l.ok();
        all_ok &= ok;
        println!(
            "landing check: {} qp={q} slots={} written={} pattern={} stray={}",
            if ok { "ok" } else { "FAILED" },
            l.slots,
            l.written,
            l.pattern,
            l.stray_bytes
        );
    }
    if all_ok {
        Ok(())
    } else {
        Err(Fail::new("landing check failed: the client's data is not where perftest's buffer geometry puts it"))
    }
}

#[cfg(test)]
mod tests {
    use super::post_cost_line;

    #[test]
    fn one_post_cost_line_per_run() {
        assert_eq!(post_cost_line(&[], "wr-api"), "");
        assert_eq!(
            post_cost_line(&[(64, 30.04, 30.0)], "wr-api"),
            " Post cost (64 B): 30.0 ns per post call, 30.0 ns per WR (wr-api)\n"
        );
        let sweep = [(2, 40.0, 40.0), (4, 30.0, 30.0), (8, 35.0, 17.5)];
        let l = post_cost_line(&sweep, "post-send");
        assert_eq!(l.lines().count(), 1, "{l}");
        assert!(
            l.starts_with(" Post cost (2..8 B, 3 sizes): median 35.0 ns per post call (30.0-40.0), median 30.0 ns per WR (17.5-40.0) (post-send)"),
            "{l}"
        );
    }
}
