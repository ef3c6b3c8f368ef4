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
use crate::post::wr_api::send_ops_flags;
use crate::report::info::TestInfo;
use crate::report::{json, text};
use crate::run::bw::QpTarget;
use crate::run::threads::Worker;
use crate::tool::common::cpu_util;
use crate::tool::common::fail::Fail;
use crate::tool::common::infinite;
use crate::tool::common::out::{result_line, Out};
use crate::tool::common::progress;
use crate::tool::common::scenario::qp_type;
use crate::tool::session::bw_measure::{measure_size, qp_targets, unknown_qpn_line};
use crate::tool::session::bw_result::{check_limits, report_of, row_of, SizeRun, SizeSummary};
use crate::tool::session::cm_data;
use crate::tool::session::control::{connect, preamble, to_text_dest};
use crate::tool::session::counters;
use crate::tool::session::direct::{self, DirectQueues};
use crate::tool::session::info::test_info;
use crate::tool::session::queues;
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
    let _cm = cm_data::connect_qps(&mut sess, ep, p, &res)?;
    let clock = Clock::calibrate();
    crate::run::watchdog::configure(&clock);
    let mtu_bytes = crate::verbs::Mtu(mtu as u32).bytes().unwrap_or(0);
    let info = test_info(p, ep, &res, mtu_bytes, &chosen, &clock);
    out.print(&text::info_block(&info));
    let (my, rem) = exchange_keys(&mut sess, ep, p, &res, mtu, &info, out)?;
    let side = Side {
        p,
        res: &res,
        info: &info,
        clock: &clock,
        // Auto may have fallen back from direct (the reason is in the banner).
        method: chosen.method,
        out,
    };
    let closing = if p.is_server() {
        serve(&side, &mut sess, &mut counters, &my)?
    } else {
        side.client(ep.ctx.name(), &mut sess, &mut counters, &my, &rem)?
    };
    sess.close(&my[0]).map_err(Fail::ctrl)?;
    closing.finish()
}

/// A side's summaries and the checks it reports after the close (the peer
/// waits for the close first). `sess` stays `run_session`'s: it closes
/// after the resources are gone when a step fails, as before the split.
struct Closing {
    summaries: Vec<SizeSummary>,
    checks: Vec<Result<(), Fail>>,
}

impl Closing {
    fn finish(self) -> Result<Vec<SizeSummary>, Fail> {
        for c in self.checks {
            c?;
        }
        Ok(self.summaries)
    }
}

/// What both halves of a session's run share.
struct Side<'a> {
    p: &'a Params,
    res: &'a Resources,
    info: &'a TestInfo,
    clock: &'a Clock,
    method: Method,
    out: Out,
}

/// Each QP's keys before and after connecting them, the address lines, and
/// the hand shake that ends the set-up; this side's and the peer's keys.
fn exchange_keys(
    sess: &mut Session,
    ep: &Endpoint,
    p: &Params,
    res: &Resources,
    mtu: u8,
    info: &TestInfo,
    out: Out,
) -> Result<(Vec<Dest>, Vec<Dest>), Fail> {
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
            info,
        ));
        out.print(&text::address_line(
            text::Side::Remote,
            &to_text_dest(r),
            info,
        ));
    }
    sess.hand_shake(&my[0]).map_err(Fail::ctrl)?;
    Ok((my, rem))
}

/// The server: silent while the client runs, then its row from the client's
/// report, the landing and validation checks, and the close.
fn serve(
    side: &Side,
    sess: &mut Session,
    counters: &mut Option<counters::Counters>,
    my: &[Dest],
) -> Result<Closing, Fail> {
    let (p, res, info, out) = (side.p, side.res, side.info, side.out);
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
    out.print(&text::bw_header(info));
    let r = row_of(&theirs);
    out.print(&text::bw_row(&r, info, 0.0));
    if let Some(c) = counters.as_mut() {
        out.print(&c.report()?);
    }
    out.print(result_line(p));
    if let Some(f) = &p.json_file {
        // The client's numbers, as the row above (perftest master writes them too).
        json::JsonReport::new(f, info)
            .push(json::Record::bw(&r, info, 0.0))
            .map_err(|e| Fail::new(e.to_string()))?;
    }
    let landing_result = if p.check_landing {
        Some(validate::check_landing(p, res, theirs.iters))
    } else {
        None
    };
    // A write's data landed here; a read's server only lent its buffer.
    let validation = (p.data_validation && p.tool.verb == Verb::Write).then(|| {
        let n = validate::messages_per_qp(p, theirs.iters);
        validate::report(p, res, n, "server")
    });
    Ok(Closing {
        summaries: Vec::new(),
        checks: landing_result.into_iter().chain(validation).collect(),
    })
}

/// -D: the progress ticker (not with --run_infinitely), and with --cpu_util
/// the CPU sampler over the sample window; started in that order.
fn duration_watchers(p: &Params) -> (Option<progress::Ticker>, Option<cpu_util::Sampler>) {
    let ticker = match p.mode {
        Mode::Duration { secs, .. } if !p.run_infinitely => progress::Ticker::start(secs as u64),
        _ => None,
    };
    let cpu = match p.mode {
        Mode::Duration { secs, margin } if p.cpu_util => {
            Some(cpu_util::Sampler::start(margin, secs - 2 * margin))
        }
        _ => None,
    };
    (ticker, cpu)
}

/// The client's sweep: its running totals.
#[derive(Default)]
struct Totals {
    last: BwReport,
    costs: Vec<(u64, f64, f64)>,
    summaries: Vec<SizeSummary>,
    thread_lines: String,
}

impl Side<'_> {
    /// The client: every size measured and reported, then the post cost,
    /// the limits, the read's validation, the report exchange and the close.
    fn client(
        &self,
        device: &str,
        sess: &mut Session,
        counters: &mut Option<counters::Counters>,
        my: &[Dest],
        rem: &[Dest],
    ) -> Result<Closing, Fail> {
        let (p, res, method) = (self.p, self.res, self.method);
        // Direct: one set of queues for every size (the SQ/CQ indices carry
        // over); with --threads each worker's, opened in the worker.
        let mut dq = if method == Method::Direct && p.threads <= 1 {
            Some(direct::open_queues(res, &[], p.use_event)?)
        } else {
            None
        };
        let targets = qp_targets(res, rem);
        let direct_threads = (method == Method::Direct && p.threads > 1)
            .then(|| threads_bw::direct_threads(res, &targets, p.threads as usize));
        let mut report = p
            .json_file
            .as_ref()
            .map(|f| json::JsonReport::new(f, self.info));
        let mut t = Totals {
            summaries: Vec::with_capacity(p.sizes.len()),
            ..Totals::default()
        };
        let mut failure: Option<Fail> = None;
        let workers = (p.threads > 1)
            .then(|| threads_bw::plan(p, device))
            .transpose()
            .map_err(Fail::new)?;
        self.out.print(&text::bw_header(self.info));
        // The server is silent until our run ends: its control connection's end
        // of file means it exited (noticed at once, not after --cq-timeout).
        let watch = sess.watch_peer();
        for (i, &size) in p.sizes.iter().enumerate() {
            progress::sweep(i, p.sizes.len(), size);
            let (ticker, cpu) = duration_watchers(p);
            let (run, per_thread) = match &workers {
                Some(w) => self.threaded(w, size, &targets, direct_threads.as_ref(), &mut t)?,
                None => (
                    self.measure(size, &targets, dq.as_mut(), &mut report)?,
                    None,
                ),
            };
            drop(ticker);
            let cpu = cpu.map_or(0.0, |c| c.finish());
            self.row(&run, size, cpu, counters, &mut report, per_thread, &mut t)?;
            if let Some(e) = run.error {
                res.to_err();
                failure = Some(Fail::new(e));
                break;
            }
        }
        drop(watch);
        self.end(sess, my, t, failure)
    }

    /// One size over the `--threads` workers; its per-thread lines go to
    /// the text after the table and to the JSON record.
    fn threaded(
        &self,
        w: &[Worker],
        size: u64,
        targets: &[QpTarget],
        dt: Option<&threads_bw::DirectThreads<'_>>,
        t: &mut Totals,
    ) -> Result<(SizeRun, Option<serde_json::Value>), Fail> {
        let p = self.p;
        let (run, lines) =
            threads_bw::run_size(p, self.res, w, size, targets, self.method, dt, self.clock)?;
        let unit = if p.report_gbits { "Gb/sec" } else { "MiB/sec" };
        t.thread_lines.push_str(&format!(
            " {size} B:\n{}",
            threads_bw::lines_text(&lines, unit)
        ));
        Ok((run, Some(threads_bw::lines_json(&lines))))
    }

    /// One measurement (with the --run_infinitely printer) over the
    /// method's queues.
    fn measure(
        &self,
        size: u64,
        targets: &[QpTarget],
        dq: Option<&mut DirectQueues<'_>>,
        report: &mut Option<json::JsonReport>,
    ) -> Result<SizeRun, Fail> {
        let (p, res, info, clock, out) = (self.p, self.res, self.info, self.clock, self.out);
        macro_rules! measured {
            ($sqs:expr, $cq:expr) => {
                infinite::with_printer(p, info, clock, size, out, report, |per| {
                    measure_size(p, &res.geometry, size, targets, $sqs, $cq, clock, per)
                })?
            };
        }
        match self.method {
            Method::PostSend => {
                let mut sqs = queues::post_send(&res.qps, p.post_list, queues::connected())?;
                let mut cq = event_cq::verbs(&res.cq, p.cqe_poll as usize, p.use_event)
                    .map_err(Fail::verbs)?;
                measured!(&mut sqs, &mut cq)
            }
            Method::WrApi => {
                let mut sqs = queues::wr_api(&res.qps, queues::connected())?;
                let mut cq = event_cq::verbs(&res.cq, p.cqe_poll as usize, p.use_event)
                    .map_err(Fail::verbs)?;
                measured!(&mut sqs, &mut cq)
            }
            Method::Direct => {
                let q =
                    dq.ok_or_else(|| Fail::new("--post direct: queues not opened (internal)"))?;
                measured!(&mut q.sqs, &mut q.cq)
            }
        }
    }

    /// A size's row, counters, post cost and JSON record.
    #[allow(clippy::too_many_arguments)]
    fn row(
        &self,
        run: &SizeRun,
        size: u64,
        cpu: f32,
        counters: &mut Option<counters::Counters>,
        report: &mut Option<json::JsonReport>,
        per_thread: Option<serde_json::Value>,
        t: &mut Totals,
    ) -> Result<(), Fail> {
        let (p, info, out, method) = (self.p, self.info, self.out, self.method);
        let r = &run.row;
        if !p.run_infinitely {
            if p.sizes.len() > 1 {
                // The sweep's "[i/n] size" progress (stderr, on a terminal) must not prefix the row.
                progress::clear();
            }
            // --run_infinitely printed its period rows; no whole-run row (perftest neither).
            out.print(&text::bw_row(r, info, cpu));
            if let Some(c) = counters.as_mut() {
                out.print(&c.report()?);
            }
        }
        if run.unknown_qpn_cqes > 0 {
            out.print(&unknown_qpn_line(run.unknown_qpn_cqes));
        }
        let summary = SizeSummary::of(p, size, run, method.name(), self.clock);
        let cost =
            (run.outcome.post_calls > 0).then_some((size, summary.ns_per_call, summary.ns_per_wr));
        t.costs.extend(cost);
        t.summaries.push(summary);
        if let Some(j) = report.as_mut().filter(|_| !p.run_infinitely) {
            let mut rec = json::Record::bw(r, info, cpu);
            if let Some((_, call, wr)) = cost {
                rec = rec
                    .with("post_ns_per_call", (call * 10.0).round() / 10.0)
                    .with("post_ns_per_wr", (wr * 10.0).round() / 10.0);
            }
            if let Some(t) = per_thread {
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
        t.last = report_of(size, r);
        Ok(())
    }

    /// After the sweep: the result line, the threads' lines and post cost,
    /// then (unless a size failed) the limits, the read's validation, the
    /// report exchange and the close.
    fn end(
        &self,
        sess: &mut Session,
        my: &[Dest],
        t: Totals,
        failure: Option<Fail>,
    ) -> Result<Closing, Fail> {
        let p = self.p;
        if p.sizes.len() > 1 {
            progress::clear();
        }
        self.out.print(result_line(p));
        if p.output.is_none() {
            self.out.print(&t.thread_lines);
            self.out
                .print(&post_cost_line(&t.costs, self.method.name()));
        }
        if let Some(f) = failure {
            // Partial results are printed (and written) above; the peer sees us go.
            return Err(f);
        }
        let last = t.last;
        check_limits(p, &last)?;
        // A read's data came here (checked before the close, reported after it).
        let validation = (p.data_validation && p.tool.verb == Verb::Read).then(|| {
            let n = validate::messages_per_qp(p, last.iters);
            validate::report(p, self.res, n, "client")
        });
        sess.hand_shake(&my[0]).map_err(Fail::ctrl)?;
        sess.exchange_bw_report(&last).map_err(Fail::ctrl)?;
        Ok(Closing {
            summaries: t.summaries,
            checks: validation.into_iter().collect(),
        })
    }
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
