//! `rdmaperf compare <bw-test>`: the same test under each post method the
//! device supports, in interleaved repetitions, side by side; for send-bw
//! also the receiver's cost per message. Three ways to run it:
//! - `--loopback`: both ends on this host, the same method on both;
//! - `... SERVER` (the client): every run is a fresh perftest session to an
//!   `rdmaperf compare` server, the method this side's (the sender's);
//! - no SERVER (the server): serves runs, one control connection each, with
//!   its own `--post` for every run, until the client's note says it sent
//!   its last (`ctrl::compare_ext`).

pub use super::common::compare_table::Unsupported;
use super::common::compare_table::{schedule, summarize, table, Sample};
use super::common::fail::Fail;
use super::common::out::Out;
use super::runs::{rdma_bw, send_bw};
use super::session::bw_result::SizeSummary;
use super::setup::method;
use super::setup::resources::Endpoint;
use super::side::{loopback_both, loopback_with, run_side};
use crate::cli::params::{Conn, Params, PostChoice, Verb};
use crate::ctrl::compare_ext::{self, Note};
use crate::run::stop;
use crate::verbs::QpType;
use serde::Serialize;

const METHODS: [(PostChoice, &str); 3] = [
    (PostChoice::Direct, "direct"),
    (PostChoice::WrApi, "wr-api"),
    (PostChoice::PostSend, "post-send"),
];

#[derive(Serialize)]
struct JsonOut<'a> {
    test: &'a str,
    device: String,
    size: u64,
    reps: u32,
    samples: &'a [Sample],
    summary: Vec<super::common::compare_table::Row>,
    unsupported: &'a [Unsupported],
    units: Units,
}

#[derive(Serialize)]
struct Units {
    mpps: &'static str,
    bw: &'static str,
    ns_per_call: &'static str,
    recv_ns_per_msg: &'static str,
}

/// `methods`: `--methods` (empty: every one, [`METHODS`]' order).
pub fn run(p: Params, reps: u32, methods: &[PostChoice]) -> i32 {
    stop::install();
    match compare(&p, reps, methods) {
        Ok(()) => stop::exit_status().unwrap_or(0),
        Err(f) => {
            eprintln!("rdmaperf compare {}: {}", p.tool.name(), f.msg);
            stop::exit_status().unwrap_or(f.status)
        }
    }
}

fn compare(p: &Params, reps: u32, methods: &[PostChoice]) -> Result<(), Fail> {
    if p.sizes.len() != 1 {
        return Err(Fail::new(
            "compare runs one message size; use -s instead of -a",
        ));
    }
    if p.duplex {
        return Err(Fail::new(
            "compare runs one direction (the sender's post cost, for send-bw the receiver's \
             too); drop -b",
        ));
    }
    if reps == 0 {
        return Err(Fail::new("--reps 0: at least one repetition is needed"));
    }
    if !p.loopback && p.reversed {
        return Err(refusal(
            "--reversed: compare between hosts varies the client's post method, so the \
             client must be the side that posts; drop --reversed and swap the roles (the \
             server on the host that receives, the client with SERVER on the host that sends)",
        ));
    }
    let ep = Endpoint::open(p)?;
    let qp_type = match p.conn {
        Conn::Rc => QpType::RC,
        Conn::Uc => QpType::UC,
        Conn::Ud => QpType::UD,
    };
    let device = ep.ctx.name().to_string();
    if !p.loopback && p.server.is_none() {
        let own = method::resolve(&ep.ctx, p, qp_type, &[p.op()])?;
        drop(ep);
        return serve(p, own.name(), &device);
    }
    let (runnable, unsupported) = methods_on(&ep, p, qp_type, methods);
    drop(ep);
    if runnable.is_empty() {
        return Err(none_runnable(&device, &unsupported));
    }
    if p.loopback {
        return compare_with(p, reps, &device, &runnable, &unsupported, loopback_one);
    }
    let total = runnable.len() as u32 * reps;
    let mut run = 0;
    compare_with(p, reps, &device, &runnable, &unsupported, |q| {
        run += 1;
        remote_one(q, run, run == total)
    })
}

/// The methods asked for (`methods`, empty: all) that `ep`'s device can
/// run, in the order asked, and those it can't with the reason.
fn methods_on(
    ep: &Endpoint,
    p: &Params,
    qp_type: QpType,
    methods: &[PostChoice],
) -> (Vec<(PostChoice, &'static str)>, Vec<Unsupported>) {
    let mut chosen: Vec<_> = METHODS
        .into_iter()
        .filter(|m| methods.is_empty() || methods.contains(&m.0))
        .collect();
    chosen.sort_by_key(|m| methods.iter().position(|c| *c == m.0));
    let mut runnable = Vec::new();
    let mut unsupported = Vec::new();
    for (choice, name) in chosen {
        let mut q = p.clone();
        q.post = choice;
        match method::resolve(&ep.ctx, &q, qp_type, &[p.op()]) {
            Ok(_) => runnable.push((choice, name)),
            Err(f) => unsupported.push(Unsupported {
                method: name,
                reason: f.msg,
            }),
        }
    }
    (runnable, unsupported)
}

/// Not one method asked for can run: each one's reason.
fn none_runnable(device: &str, unsupported: &[Unsupported]) -> Fail {
    let why: Vec<String> = unsupported
        .iter()
        .map(|u| format!("{}: {}", u.method, u.reason))
        .collect();
    refusal(&format!(
        "no post method asked for can run on {device} ({}); name others with --methods",
        why.join("; ")
    ))
}

/// One loopback repetition of `q` (the same method on both ends).
fn loopback_one(q: &Params) -> Result<SizeSummary, Fail> {
    let mut q = q.clone();
    q.loopback = false;
    if q.tool.verb != Verb::Send {
        let sums = loopback_with(&q, Out { quiet: true }, rdma_bw::run)?;
        return sums.into_iter().next().ok_or_else(no_result);
    }
    // SEND: the sender's row and post cost, and the receiver's cost per
    // message (the same method on both ends).
    let (server, client) = loopback_both(&q, send_bw::run)?;
    let mut s = client.into_iter().next().ok_or_else(no_result)?;
    s.recv_ns_per_msg = server.first().map_or(0.0, |r| r.recv_ns_per_msg);
    Ok(s)
}

/// A refusal before any run (exit status 2).
fn refusal(msg: &str) -> Fail {
    Fail {
        status: 2,
        ..Fail::new(msg)
    }
}

fn no_result() -> Fail {
    Fail::new("the run produced no result")
}

/// The client's name for `q.post`.
fn method_name(q: &Params) -> &'static str {
    METHODS
        .iter()
        .find(|m| m.0 == q.post)
        .map_or("auto", |m| m.1)
}

/// One run against an `rdmaperf compare` server: a fresh session whose
/// close carries this side's note (`last` ends the server) and brings back
/// the server's (for send-bw, its receive cost per message).
fn remote_one(q: &Params, run: u32, last: bool) -> Result<SizeSummary, Fail> {
    let mut q = q.clone();
    q.compare = true;
    compare_ext::provide(Note {
        method: method_name(&q).into(),
        last,
        run,
        recv_ns_per_msg: 0.0,
    });
    let out = Out { quiet: true };
    let sums = if q.tool.verb == Verb::Send {
        send_bw::run(&q, out)
    } else {
        rdma_bw::run(&q, out)
    };
    let peer = compare_ext::take();
    let mut s = sums?.into_iter().next().ok_or_else(no_result)?;
    match peer {
        Some(Ok(n)) => s.recv_ns_per_msg = n.recv_ns_per_msg,
        Some(Err(why)) => return Err(Fail::new(format!("the server's compare note: {why}"))),
        None => return Err(Fail::new("the run ended before the server's compare note")),
    }
    Ok(s)
}

/// The server: one run per client connection, each with this side's own
/// post method (`own`), until the client's note says it was its last.
fn serve(p: &Params, own: &str, device: &str) -> Result<(), Fail> {
    let mut sp = p.clone();
    sp.compare = true;
    sp.json_file = None;
    sp.output = None;
    println!(
        " compare server: {} on {device}, port {}, --post {own} here; the client \
         (`rdmaperf compare {} ... <this host>`) chooses the runs (for loopback on one host \
         give --loopback)",
        p.tool.perftest_name(),
        p.port,
        p.tool.name()
    );
    for run in 1.. {
        compare_ext::provide(Note {
            method: own.into(),
            last: false,
            run,
            recv_ns_per_msg: 0.0,
        });
        let res = run_side(&sp, Out { quiet: true });
        let note = compare_ext::take();
        res.map_err(|f| Fail {
            msg: format!("run {run}: {}", f.msg),
            ..f
        })?;
        let n = match note {
            Some(Ok(n)) => n,
            Some(Err(why)) => {
                return Err(Fail::new(format!("run {run}: the client's note: {why}")))
            }
            None => {
                return Err(Fail::new(format!(
                    "run {run}: no compare note from the client"
                )))
            }
        };
        println!(
            " run {run}: client --post {}{}",
            n.method,
            if n.last { " (its last)" } else { "" }
        );
        if n.last || stop::requested() {
            return Ok(());
        }
    }
    Ok(())
}

/// The comparison proper, given which methods can run and a way to run one
/// repetition of `p` with `p.post` set (a loopback run on a device; the
/// direct path on the queue model in tests): interleaved repetitions,
/// medians, the table on stdout and JSON when asked for.
pub fn compare_with(
    p: &Params,
    reps: u32,
    device: &str,
    runnable: &[(PostChoice, &'static str)],
    unsupported: &[Unsupported],
    mut run_one: impl FnMut(&Params) -> Result<SizeSummary, Fail>,
) -> Result<(), Fail> {
    let samples = run_samples(p, reps, runnable, &mut run_one)?;
    let rows = summarize(&samples);
    let bw_unit = if p.report_gbits { "Gb/sec" } else { "MiB/sec" };
    print_heading(p, reps, device);
    print!("{}", table(&rows, unsupported, bw_unit));
    if let Some(path) = &p.json_file {
        let j = JsonOut {
            test: p.tool.name(),
            device: device.to_string(),
            size: p.sizes[0],
            reps,
            samples: &samples,
            summary: rows,
            unsupported,
            units: Units {
                mpps: "Mpps",
                bw: bw_unit,
                ns_per_call: "ns",
                recv_ns_per_msg: "ns",
            },
        };
        write_json(path, &j)?;
    }
    Ok(())
}

/// One run per (repetition, method) in `schedule`'s interleaved order, until a
/// stop is requested.
fn run_samples(
    p: &Params,
    reps: u32,
    runnable: &[(PostChoice, &'static str)],
    run_one: &mut impl FnMut(&Params) -> Result<SizeSummary, Fail>,
) -> Result<Vec<Sample>, Fail> {
    let names: Vec<&'static str> = runnable.iter().map(|m| m.1).collect();
    let mut samples = Vec::new();
    for (rep, name) in schedule(&names, reps) {
        if stop::requested() {
            break;
        }
        let mut q = p.clone();
        q.post = runnable
            .iter()
            .find(|m| m.1 == name)
            .map(|m| m.0)
            .unwrap_or(PostChoice::PostSend);
        q.json_file = None;
        q.output = None;
        eprintln!(
            "compare: {} rep {}/{} with --post {name}",
            p.tool.name(),
            rep + 1,
            reps
        );
        let s = run_one(&q).map_err(|f| Fail::new(format!("--post {name}: {}", f.msg)))?;
        samples.push(Sample {
            method: name,
            rep,
            mpps: s.result.msg_rate,
            bw: s.result.bw_avg,
            ns_per_call: s.ns_per_call,
            ns_per_wr: s.ns_per_wr,
            recv_ns_per_msg: s.recv_ns_per_msg,
        });
    }
    Ok(samples)
}

/// The line above the table: test, device, size, iterations, repetitions.
fn print_heading(p: &Params, reps: u32, device: &str) {
    println!(
        " {} on {device}{}, {} B, {} iterations{} per run, {reps} interleaved repetitions (medians):",
        p.tool.perftest_name(),
        match &p.server {
            Some(h) => format!(" to the compare server {h}"),
            None => " (loopback)".into(),
        },
        p.sizes[0],
        if p.is_duration() {
            String::from("(duration)")
        } else {
            p.iters.to_string()
        },
        if p.num_qps > 1 {
            format!(" x {} QPs", p.num_qps)
        } else {
            String::new()
        }
    );
}

/// `--out_json_file`: the samples and the summary as pretty JSON.
fn write_json(path: &std::path::Path, j: &JsonOut<'_>) -> Result<(), Fail> {
    let text = serde_json::to_string_pretty(j).map_err(|e| Fail::new(e.to_string()))?;
    std::fs::write(path, text + "\n").map_err(|e| {
        Fail::new(format!(
            "writing {}: {e}; check the path given to --out_json_file",
            path.display()
        ))
    })
}
