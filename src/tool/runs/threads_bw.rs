//! `--threads N` on the bw client: the QPs are spread round-robin over N
//! worker threads; each thread builds its own send queues and polls its own CQ
//! (created per thread in `setup`), pinned to its core (`--cpus`, else the
//! device's NUMA-local cores). One control connection carries all QPs: this
//! is the mode between two rdmaperf ends (against stock perftest, see
//! `threads_stock`: one stock server per thread).

use crate::cli::params::Params;
use crate::clock::{self, Clock};
use crate::mlx5::{DirectCq, DirectSq, HwMmio};
use crate::post::post_send::PostSendQueue;
use crate::post::verbs_cq::VerbsCq;
use crate::post::wr_api::WrApiQueue;
use crate::post::SendQueue;
use crate::report::stats;
use crate::run::bw::{BwOutcome, QpTarget};
use crate::run::geometry::Geometry;
use crate::run::threads::{aggregate, run, Aggregate, Kept, QueueFactory, Worker, WorkerOutcome};
use crate::tool::common::cpus;
use crate::tool::common::fail::Fail;
use crate::tool::session::bw_measure::{bw_config, deadlines, describe};
use crate::tool::session::bw_result::SizeRun;
use crate::tool::session::direct;
use crate::tool::setup::method::Method;
use crate::tool::setup::resources::Resources;
use crate::verbs::{Cq, Qp, VerbsError};
use std::sync::Arc;

/// Verbs queues for one thread, built inside it.
struct VerbsFactory<'a, S, B> {
    qps: &'a [Arc<Qp>],
    cqs: &'a [Arc<Cq>],
    targets: &'a [QpTarget],
    build: B,
    _s: std::marker::PhantomData<fn() -> S>,
}

impl<S: SendQueue, B: Fn(&Arc<Qp>) -> Result<S, VerbsError> + Sync> QueueFactory
    for VerbsFactory<'_, S, B>
{
    type Sq = S;
    type Cq = VerbsCq;
    fn build(&self, t: usize, qps: &[usize]) -> Result<(Vec<S>, VerbsCq, Vec<QpTarget>), String> {
        let sqs = qps
            .iter()
            .map(|&q| (self.build)(&self.qps[q]).map_err(|e| e.to_string()))
            .collect::<Result<Vec<_>, _>>()?;
        let cq = VerbsCq::new(&self.cqs[t], 16).map_err(|e| e.to_string())?;
        Ok((sqs, cq, qps.iter().map(|&q| self.targets[q]).collect()))
    }
}

/// The direct queues of every worker, kept across sizes (their ring
/// indices carry over, `run::threads::Kept`): a worker opens its QPs' SQs
/// and the direct poller of its own CQ at the first size
/// (`session::direct::open_thread_queues`).
pub type DirectThreads<'a> = Kept<DirectOpen<'a>>;

/// The workers' direct queues for a test, [`DirectThreads`] once kept.
pub fn direct_threads<'a>(
    res: &'a Resources,
    targets: &'a [QpTarget],
    threads: usize,
) -> DirectThreads<'a> {
    Kept::new(DirectOpen { res, targets }, threads)
}

/// Opens one worker's direct queues, inside the worker.
pub struct DirectOpen<'a> {
    res: &'a Resources,
    targets: &'a [QpTarget],
}

impl QueueFactory for DirectOpen<'_> {
    type Sq = DirectSq<HwMmio>;
    type Cq = DirectCq;
    fn build(
        &self,
        t: usize,
        qps: &[usize],
    ) -> Result<(Vec<DirectSq<HwMmio>>, DirectCq, Vec<QpTarget>), String> {
        let (sqs, cq) = direct::open_thread_queues(self.res, t, qps).map_err(|f| f.msg)?;
        Ok((sqs, cq, qps.iter().map(|&q| self.targets[q]).collect()))
    }
}

/// One thread's line in the report.
#[derive(Clone, Debug)]
pub struct ThreadLine {
    pub thread: usize,
    pub cpu: Option<usize>,
    pub qps: usize,
    pub mpps: f64,
    pub bw: f64,
}

/// The workers: cores and QPs per thread.
pub fn plan(p: &Params, device: &str) -> Result<Vec<Worker>, String> {
    let t = p.threads as usize;
    let online: Vec<usize> = core_affinity::get_core_ids()
        .unwrap_or_default()
        .iter()
        .map(|c| c.id)
        .collect();
    let local = cpus::device_local_cpus(std::path::Path::new("/sys"), device);
    let picked = cpus::pick(t, p.cpus.as_deref(), local.as_deref(), &online)?;
    Ok((0..t)
        .map(|i| Worker {
            cpu: Some(picked[i]),
            qps: cpus::qps_of(i, t, p.num_qps as usize),
        })
        .collect())
}

/// Run one size on all threads; returns the aggregate row, per-thread lines
/// and the first error. `direct`: the workers' direct queues when the method
/// is direct.
#[allow(clippy::too_many_arguments)]
pub fn run_size(
    p: &Params,
    res: &Resources,
    workers: &[Worker],
    size: u64,
    targets: &[QpTarget],
    method: Method,
    direct: Option<&DirectThreads<'_>>,
    clock: &Clock,
) -> Result<(SizeRun, Vec<ThreadLine>), Fail> {
    let g = Geometry::new(
        size,
        res.geometry.cycle_buffer,
        res.geometry.cache_line,
        res.geometry.slots,
    );
    let cfg = bw_config(p, size, &g, clock);
    let deadlines = deadlines(p, clock, clock::now());
    let peak = !p.no_peak && !p.is_duration();
    let now = clock::now;
    let outs = match method {
        Method::PostSend => {
            let f = VerbsFactory {
                qps: &res.qps,
                cqs: &res.thread_cqs,
                targets,
                build: |qp: &Arc<Qp>| PostSendQueue::new(qp, p.post_list as usize, None),
                _s: std::marker::PhantomData,
            };
            run(&f, workers, cfg, deadlines, peak, &now)
        }
        Method::WrApi => {
            let f = VerbsFactory {
                qps: &res.qps,
                cqs: &res.thread_cqs,
                targets,
                build: |qp: &Arc<Qp>| WrApiQueue::new(qp, None),
                _s: std::marker::PhantomData,
            };
            run(&f, workers, cfg, deadlines, peak, &now)
        }
        Method::Direct => {
            let f = direct.ok_or_else(|| {
                Fail::new(
                    "internal: --threads --post direct without its queues; please report this",
                )
            })?;
            run(f, workers, cfg, deadlines, peak, &now)
        }
    }
    .map_err(Fail::new)?;
    summarize(p, size, &outs, clock)
}

fn row(
    p: &Params,
    size: u64,
    n: u64,
    t0: u64,
    t1: u64,
    nqp: u32,
    clock: &Clock,
) -> Result<stats::BwResult, Fail> {
    let inp = stats::BwInput {
        size,
        iters: n,
        num_qps: nqp,
        duration: true,
        no_peak: true,
        post_list: p.post_list,
        cq_mod: p.cq_mod,
        tposted: &[t0],
        tcompleted: &[t1],
        hz: clock.hz(),
        units: stats::BwUnits::of(p.report_gbits),
        inf_bidir_factor: 1,
    };
    stats::bw_perftest(&inp).map_err(|e| Fail::new(format!("computing the result: {e}")))
}

/// One thread's BW peak from its stamps (perftest's formula, iterations mode).
fn thread_peak(p: &Params, size: u64, o: &WorkerOutcome, clock: &Clock) -> Result<f64, Fail> {
    let inp = stats::BwInput {
        size,
        iters: p.iters,
        num_qps: o.worker.qps.len() as u32,
        duration: false,
        no_peak: false,
        post_list: p.post_list,
        cq_mod: p.cq_mod,
        tposted: &o.tposted,
        tcompleted: &o.tcompleted,
        hz: clock.hz(),
        units: stats::BwUnits::of(p.report_gbits),
        inf_bidir_factor: 1,
    };
    stats::bw_perftest(&inp)
        .map(|r| r.bw_peak)
        .map_err(|e| Fail::new(format!("computing thread peak: {e}")))
}

fn summarize(
    p: &Params,
    size: u64,
    outs: &[WorkerOutcome],
    clock: &Clock,
) -> Result<(SizeRun, Vec<ThreadLine>), Fail> {
    let a = aggregate(outs);
    // All messages of all threads over the span from the first start to the last end.
    let mut row_total = row(
        p,
        size,
        a.measured,
        a.t_start,
        a.t_end.max(a.t_start + 1),
        1,
        clock,
    )?;
    let lines = thread_lines(p, size, outs, clock)?;
    // The peak: the sum of the threads' peaks, each perftest's formula over
    // its own QPs' stamps (perftest's multi-process runs are summed the same way).
    if outs
        .iter()
        .all(|o| !o.tposted.is_empty() && o.outcome.error.is_none())
    {
        let mut sum = 0.0;
        for o in outs {
            sum += thread_peak(p, size, o, clock)?;
        }
        row_total.bw_peak = sum;
    }
    let error = outs.iter().enumerate().find_map(|(i, o)| {
        o.outcome.error.map(|e| {
            // describe() numbers QPs within the thread; name the run's QP index.
            let msg = describe(e, &o.counts);
            format!("thread {i} (its QPs {:?} of the run): {msg}", o.worker.qps)
        })
    });
    let outcome = summed_outcome(outs, &a);
    Ok((
        SizeRun {
            outcome,
            error,
            row: row_total,
            // Not counted with --threads: the workers' pollers stay inside
            // the thread engine (run::threads).
            unknown_qpn_cqes: 0,
        },
        lines,
    ))
}

/// Each thread's own row: its messages over its own span.
fn thread_lines(
    p: &Params,
    size: u64,
    outs: &[WorkerOutcome],
    clock: &Clock,
) -> Result<Vec<ThreadLine>, Fail> {
    let mut lines = Vec::new();
    for (i, o) in outs.iter().enumerate() {
        let r = row(
            p,
            size,
            o.outcome.measured,
            o.outcome.t_start,
            o.outcome.t_end.max(o.outcome.t_start + 1),
            1,
            clock,
        )?;
        lines.push(ThreadLine {
            thread: i,
            cpu: o.worker.cpu,
            qps: o.worker.qps.len(),
            mpps: r.msg_rate,
            bw: r.bw_avg,
        });
    }
    Ok(lines)
}

/// The threads' outcomes as one: counts and post costs summed, the span and
/// measured messages from `aggregate`, the first error.
fn summed_outcome(outs: &[WorkerOutcome], a: &Aggregate) -> BwOutcome {
    BwOutcome {
        posted: outs.iter().map(|o| o.outcome.posted).sum(),
        completed: outs.iter().map(|o| o.outcome.completed).sum(),
        t_start: a.t_start,
        t_end: a.t_end,
        measured: a.measured,
        error: outs.iter().find_map(|o| o.outcome.error),
        post_ticks: outs.iter().map(|o| o.outcome.post_ticks).sum(),
        post_calls: outs.iter().map(|o| o.outcome.post_calls).sum(),
    }
}

/// The per-thread lines printed under the table.
pub fn lines_text(lines: &[ThreadLine], bw_unit: &str) -> String {
    lines
        .iter()
        .map(|l| {
            format!(
                " Thread {} (CPU {}, {} QP{}): {:.6} Mpps, {:.2} {bw_unit}\n",
                l.thread,
                l.cpu.map_or("-".to_string(), |c| c.to_string()),
                l.qps,
                if l.qps == 1 { "" } else { "s" },
                l.mpps,
                l.bw
            )
        })
        .collect()
}

/// The per-thread lines as a JSON array (for the record of each size).
pub fn lines_json(lines: &[ThreadLine]) -> serde_json::Value {
    serde_json::Value::Array(
        lines
            .iter()
            .map(|l| {
                serde_json::json!({
                    "thread": l.thread,
                    "cpu": l.cpu,
                    "qps": l.qps,
                    "MsgRate": (l.mpps * 1e6).round() / 1e6,
                    "BW_average": (l.bw * 100.0).round() / 100.0,
                })
            })
            .collect(),
    )
}
