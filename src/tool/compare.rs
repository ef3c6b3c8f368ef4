//! `rdmaperf compare <bw-test>`: the same test under each post method the
//! device supports, in interleaved repetitions, side by side; for send-bw
//! also the receiver's cost per message under the same method. Both ends run on
//! this host (loopback), so every repetition gets a fresh session without a
//! cooperating remote process.

pub use super::common::compare_table::Unsupported;
use super::common::compare_table::{schedule, summarize, table, Sample};
use super::common::fail::Fail;
use super::common::out::Out;
use super::runs::{rdma_bw, send_bw};
use super::session::bw_result::SizeSummary;
use super::setup::method;
use super::setup::resources::Endpoint;
use super::side::{loopback_both, loopback_with};
use crate::cli::params::{Conn, Params, PostChoice, Verb};
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

pub fn run(p: Params, reps: u32) -> i32 {
    stop::install();
    match compare(&p, reps) {
        Ok(()) => stop::exit_status().unwrap_or(0),
        Err(f) => {
            eprintln!("rdmaperf compare {}: {}", p.tool.name(), f.msg);
            stop::exit_status().unwrap_or(f.status)
        }
    }
}

fn compare(p: &Params, reps: u32) -> Result<(), Fail> {
    if p.server.is_some() {
        return Err(Fail::new(
            "compare runs both ends on this host (loopback) so each repetition gets a fresh session; \
             drop the server name (remote compare is not implemented)",
        ));
    }
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
    let ep = Endpoint::open(p)?;
    let qp_type = match p.conn {
        Conn::Rc => QpType::RC,
        Conn::Uc => QpType::UC,
        Conn::Ud => QpType::UD,
    };
    let mut runnable = Vec::new();
    let mut unsupported = Vec::new();
    for (choice, name) in METHODS {
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
    let device = ep.ctx.name().to_string();
    drop(ep);
    let send = p.tool.verb == Verb::Send;
    compare_with(p, reps, &device, &runnable, &unsupported, |q| {
        let none = || Fail::new("the run produced no result");
        if !send {
            let sums = loopback_with(q, Out { quiet: true }, rdma_bw::run)?;
            return sums.into_iter().next().ok_or_else(none);
        }
        // SEND: the sender's row and post cost, and the receiver's cost per
        // message (the same method on both ends).
        let (server, client) = loopback_both(q, send_bw::run)?;
        let mut s = client.into_iter().next().ok_or_else(none)?;
        s.recv_ns_per_msg = server.first().map_or(0.0, |r| r.recv_ns_per_msg);
        Ok(s)
    })
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
        " {} on {device}, {} B, {} iterations{} per run, {reps} interleaved repetitions (medians):",
        p.tool.perftest_name(),
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
