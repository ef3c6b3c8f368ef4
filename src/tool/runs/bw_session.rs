//! write-bw / read-bw / atomic-bw on one open control session: perftest's
//! choreography (sysdata, MTU, keys, connect, keys, barrier; client runs,
//! then barrier, report exchange, close), the bw loop with the chosen post
//! method, and the report. `rdma_bw` opens the session (and hands a stock
//! peer's `--threads` run to `threads_stock`, which runs one of these per
//! thread).

use super::threads_bw;
use crate::cli::params::{Mode, Params, Verb};
use crate::clock::Clock;
use crate::ctrl::{BwReport, Dest, Session};
use crate::post::event_cq;
use crate::post::post_send::PostSendQueue;
use crate::post::wr_api::{send_ops_flags, WrApiQueue};
use crate::report::{json, text};
use crate::tool::common::cpu_util;
use crate::tool::common::fail::Fail;
use crate::tool::common::infinite;
use crate::tool::common::out::{result_line, Out};
use crate::tool::common::progress;
use crate::tool::common::scenario::qp_type;
use crate::tool::session::bw_measure::{measure_size_periods, qp_targets, unknown_qpn_line};
use crate::tool::session::bw_result::{check_limits, report_of, row_of, SizeSummary};
use crate::tool::session::cm_data;
use crate::tool::session::control::{connect, preamble, to_text_dest};
use crate::tool::session::counters;
use crate::tool::session::direct;
use crate::tool::session::info::test_info;
use crate::tool::session::validate;
use crate::tool::setup::method::{self, Chosen, Method};
use crate::tool::setup::resources::{Endpoint, Resources};

/// One connection's whole run, opened here: what each thread of a
/// `--threads` run against stock perftest runs (`threads_stock`; its
/// parameters have one thread).
pub(crate) fn open_and_run(p: &Params, out: Out) -> Result<Vec<SizeSummary>, Fail> {
    let ep = Endpoint::open(p)?;
    let method = method::resolve(&ep.ctx, p, qp_type(p), &[p.op()])?;
    let sess = connect(p, &ep)?;
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
    let mut counters = counters::for_run(p, ep)?;
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
        crate::tool::common::peer_check::key(p, &rem, &r, i, false)?;
        rem.push(r);
    }
    res.connect(ep, p, mtu, &rem, !p.is_server())?;
    for (i, d) in my.iter().enumerate() {
        let r = sess.hand_shake(d).map_err(Fail::ctrl)?;
        crate::tool::common::peer_check::key(p, &rem, &r, i, true)?;
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
        let r = row_of(&theirs);
        out.print(&text::bw_row(&r, &info, 0.0));
        if let Some(c) = counters.as_mut() {
            out.print(&c.report()?);
        }
        out.print(result_line(p));
        if let Some(f) = &p.json_file {
            // The client's numbers, as the row above (perftest master writes them too).
            json::JsonReport::new(f, &info)
                .push(json::Record::bw(&r, &info, 0.0))
                .map_err(|e| Fail::new(e.to_string()))?;
        }
        let landing_result = if p.check_landing {
            Some(validate::check_landing(p, &res, theirs.iters))
        } else {
            None
        };
        // A write's data landed here; a read's server only lent its buffer.
        let validation = (p.data_validation && p.tool.verb == Verb::Write).then(|| {
            let n = validate::messages_per_qp(p, theirs.iters);
            validate::report(p, &res, n, "server")
        });
        sess.close(&my[0]).map_err(Fail::ctrl)?;
        if let Some(l) = landing_result {
            l?;
        }
        if let Some(v) = validation {
            v?;
        }
        return Ok(Vec::new());
    }

    // Direct: one set of queues for every size (the SQ/CQ indices carry
    // over); with --threads each worker's, opened in the worker.
    let mut dq = if method == Method::Direct && p.threads <= 1 {
        Some(direct::open_queues(&res, &[], p.use_event)?)
    } else {
        None
    };
    let targets = qp_targets(&res, &rem);
    let direct_threads = (method == Method::Direct && p.threads > 1)
        .then(|| threads_bw::direct_threads(&res, &targets, p.threads as usize));
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
                Some(cpu_util::Sampler::start(margin, secs - 2 * margin))
            }
            _ => None,
        };
        let mut per_thread = None;
        let run = if let Some(w) = &workers {
            let dt = direct_threads.as_ref();
            let (run, lines) =
                threads_bw::run_size(p, &res, w, size, &targets, method, dt, &clock)?;
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
                    let mut cq = event_cq::verbs(&res.cq, p.cqe_poll as usize, p.use_event)
                        .map_err(Fail::verbs)?;
                    measured!(&mut sqs, &mut cq)
                }
                Method::WrApi => {
                    let mut sqs = res
                        .qps
                        .iter()
                        .map(|qp| WrApiQueue::new(qp, None))
                        .collect::<Result<Vec<_>, _>>()
                        .map_err(Fail::verbs)?;
                    let mut cq = event_cq::verbs(&res.cq, p.cqe_poll as usize, p.use_event)
                        .map_err(Fail::verbs)?;
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
    out.print(result_line(p));
    if p.output.is_none() {
        out.print(&thread_lines);
        out.print(&post_cost_line(&costs, method.name()));
    }
    if let Some(f) = failure {
        // Partial results are printed (and written) above; the peer sees us go.
        return Err(f);
    }
    check_limits(p, &last)?;
    // A read's data came here (checked before the close, reported after it).
    let validation = (p.data_validation && p.tool.verb == Verb::Read).then(|| {
        let n = validate::messages_per_qp(p, last.iters);
        validate::report(p, &res, n, "client")
    });
    sess.hand_shake(&my[0]).map_err(Fail::ctrl)?;
    sess.exchange_bw_report(&last).map_err(Fail::ctrl)?;
    sess.close(&my[0]).map_err(Fail::ctrl)?;
    if let Some(v) = validation {
        v?;
    }
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
