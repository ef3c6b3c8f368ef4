//! `--threads N` against stock perftest: stock perftest is single-threaded,
//! so each of our threads talks to its own stock server — thread i on port
//! p+i, with its share of the `-q` QPs (one stock process per port, as
//! NVIDIA's scripts run them). Thread 0 keeps the connection already open on
//! port p (it told us the peer is stock); every thread runs the ordinary
//! single-threaded client, pinned to its core, and the report sums them.
//! Between two rdmaperf ends one connection carries all threads instead
//! (`threads_bw`).

use super::bw_session;
use super::threads_bw::{self, ThreadLine};
use crate::cli::params::Params;
use crate::ctrl::Session;
use crate::report::{json, stats, text};
use crate::run::threads::Worker;
use crate::tool::common::fail::Fail;
use crate::tool::common::out::Out;
use crate::tool::session::bw_result::SizeSummary;
use crate::tool::session::info::params_info;
use crate::tool::setup::method::Method;
use crate::tool::setup::resources::Endpoint;

/// Thread `i`'s parameters: its port, its QPs, one thread, no report file.
fn thread_params(p: &Params, i: usize, w: &Worker) -> Result<Params, Fail> {
    let mut q = p.clone();
    q.threads = 1;
    q.cpus = None;
    q.num_qps = w.qps.len() as u32;
    q.port = p.port.checked_add(i as u16).ok_or_else(|| {
        Fail::new(format!(
            "--threads {}: port {} + {i} passes 65535; pick a lower -p",
            p.threads, p.port
        ))
    })?;
    q.json_file = None;
    Ok(q)
}

fn pin(w: &Worker) {
    if let Some(cpu) = w.cpu {
        // Best effort, as a stock process would run unpinned; the report
        // names the CPU only when pinning worked.
        core_affinity::set_for_current(core_affinity::CoreId { id: cpu });
    }
}

pub fn run(
    p: &Params,
    out: Out,
    ep: &Endpoint,
    method: Method,
    sess0: Session,
) -> Result<Vec<SizeSummary>, Fail> {
    let workers = threads_bw::plan(p, ep.ctx.name()).map_err(Fail::new)?;
    let params: Vec<Params> = workers
        .iter()
        .enumerate()
        .map(|(i, w)| thread_params(p, i, w))
        .collect::<Result<_, _>>()?;
    let plan: Vec<String> = params
        .iter()
        .map(|q| format!("port {} with -q {}", q.port, q.num_qps))
        .collect();
    out.print(&format!(
        " The peer is stock perftest: thread i talks to its own server on port {}+i ({})\n",
        p.port,
        plan.join(", ")
    ));
    let quiet = Out { quiet: true };
    let results: Vec<Result<Vec<SizeSummary>, Fail>> = std::thread::scope(|s| {
        let others: Vec<_> = workers
            .iter()
            .zip(&params)
            .skip(1)
            .map(|(w, q)| {
                s.spawn(move || {
                    pin(w);
                    bw_session::open_and_run(q, quiet)
                })
            })
            .collect();
        // Thread 0 is this thread: its session is already open.
        pin(&workers[0]);
        let mut all = vec![bw_session::run_session(
            &params[0], quiet, ep, method, sess0,
        )];
        all.extend(others.into_iter().map(|h| {
            h.join()
                .unwrap_or_else(|_| Err(Fail::new("a worker thread panicked")))
        }));
        all
    });
    let mut per_thread = Vec::with_capacity(results.len());
    for (i, r) in results.into_iter().enumerate() {
        per_thread.push(r.map_err(|f| {
            Fail::new(format!(
                "thread {i} (stock server on port {}): {}",
                params[i].port, f.msg
            ))
        })?);
    }
    report(p, out, &workers, &per_thread)
}

/// Sums the threads per size; prints the table, per-thread lines and JSON.
fn report(
    p: &Params,
    out: Out,
    workers: &[Worker],
    per_thread: &[Vec<SizeSummary>],
) -> Result<Vec<SizeSummary>, Fail> {
    let info = params_info(p);
    let mut report = p
        .json_file
        .as_ref()
        .map(|f| json::JsonReport::new(f, &info));
    let unit = if p.report_gbits { "Gb/sec" } else { "MiB/sec" };
    let mut sums = Vec::new();
    let mut lines_out = String::new();
    out.print(&text::bw_header(&info));
    for (k, first) in per_thread[0].iter().enumerate() {
        let total = size_total(per_thread, k, first.size);
        out.print(&text::bw_row(&total, &info, 0.0));
        let lines = size_lines(per_thread, workers, k);
        lines_out.push_str(&format!(
            " {} B:\n{}",
            first.size,
            threads_bw::lines_text(&lines, unit)
        ));
        if let Some(j) = report.as_mut() {
            let rec = json::Record::bw(&total, &info, 0.0)
                .with("threads", threads_bw::lines_json(&lines));
            j.push(rec).map_err(|e| Fail::new(e.to_string()))?;
        }
        sums.push(size_summary(per_thread, k, first, total));
    }
    out.print(crate::tool::common::out::result_line(p));
    if p.output.is_none() {
        out.print(&lines_out);
    }
    Ok(sums)
}

/// Thread `t`'s row for size number `k` (zero when it has none).
fn at(t: &[SizeSummary], k: usize) -> stats::BwResult {
    t.get(k).map(|s| s.result).unwrap_or_default()
}

/// Size number `k` over all threads: their rows summed (no exact peak).
fn size_total(per_thread: &[Vec<SizeSummary>], k: usize, size: u64) -> stats::BwResult {
    stats::BwResult {
        size,
        iters: per_thread.iter().map(|t| at(t, k).iters).sum(),
        bw_peak: per_thread.iter().map(|t| at(t, k).bw_peak).sum(),
        bw_avg: per_thread.iter().map(|t| at(t, k).bw_avg).sum(),
        msg_rate: per_thread.iter().map(|t| at(t, k).msg_rate).sum(),
        bw_peak_exact: 0.0,
    }
}

/// Each thread's line for size number `k`.
fn size_lines(per_thread: &[Vec<SizeSummary>], workers: &[Worker], k: usize) -> Vec<ThreadLine> {
    per_thread
        .iter()
        .zip(workers)
        .enumerate()
        .map(|(i, (t, w))| ThreadLine {
            thread: i,
            cpu: w.cpu,
            qps: w.qps.len(),
            mpps: at(t, k).msg_rate,
            bw: at(t, k).bw_avg,
        })
        .collect()
}

/// What `compare` keeps of size number `k`: the summed row and the threads'
/// mean post costs.
fn size_summary(
    per_thread: &[Vec<SizeSummary>],
    k: usize,
    first: &SizeSummary,
    total: stats::BwResult,
) -> SizeSummary {
    let n = per_thread.len() as f64;
    SizeSummary {
        size: first.size,
        result: total,
        method: first.method,
        ns_per_call: per_thread
            .iter()
            .map(|t| t.get(k).map_or(0.0, |s| s.ns_per_call))
            .sum::<f64>()
            / n,
        ns_per_wr: per_thread
            .iter()
            .map(|t| t.get(k).map_or(0.0, |s| s.ns_per_wr))
            .sum::<f64>()
            / n,
        recv_ns_per_msg: 0.0,
    }
}
