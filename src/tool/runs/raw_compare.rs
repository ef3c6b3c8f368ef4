//! `rdmaperf compare raw-eth-bw [--reps N] [--methods m,...] <raw flags>`:
//! raw-eth-bw's sender run with each post method in turn (raw tools have no
//! control connection: the receiving side, if any, just counts), on fresh
//! QPs each time, interleaved (A B C A B C …), then the side-by-side table
//! of `common::compare_table`. A method the device cannot run is listed
//! with the reason.

use super::raw_send::run_once;
use crate::clock::Clock;
use crate::raw::cli;
use crate::raw::tools::RawTool;
use crate::report::stats::BwUnits;
use crate::run::stop;
use crate::tool::common::compare_table::{schedule, summarize, table, Sample, Unsupported};
use crate::tool::common::fail::Fail;
use crate::tool::setup::raw_method::{self, RawMethod};
use crate::tool::setup::raw_res::{RawPort, RawRes};

/// What `compare` takes before the raw flags.
#[derive(Debug, PartialEq, Eq)]
pub struct CompareArgs {
    pub reps: u32,
    pub methods: Vec<RawMethod>,
    /// The raw tool's own flags.
    pub rest: Vec<String>,
}

/// Splits `--reps N` and `--methods a,b` (either spelling with `=`) from
/// the raw flags. Default: 3 repetitions of every method.
pub fn split_args(argv: &[String]) -> Result<CompareArgs, String> {
    let mut a = CompareArgs {
        reps: 3,
        methods: RawMethod::ALL.to_vec(),
        rest: Vec::new(),
    };
    let mut it = argv.iter();
    while let Some(w) = it.next() {
        let (flag, inline) = match w.split_once('=') {
            Some((f, v)) => (f, Some(v.to_string())),
            None => (w.as_str(), None),
        };
        if flag != "--reps" && flag != "--methods" {
            a.rest.push(w.clone());
            continue;
        }
        let v = match inline.or_else(|| it.next().cloned()) {
            Some(v) => v,
            None => return Err(format!("{flag} needs a value")),
        };
        if flag == "--reps" {
            a.reps = v
                .parse()
                .ok()
                .filter(|r| *r >= 1)
                .ok_or_else(|| format!("--reps {v}: give a whole number of 1 or more"))?;
        } else {
            a.methods = v
                .split(',')
                .map(|m| {
                    raw_method::parse(Some(m))?.ok_or_else(|| {
                        "--methods auto: name the methods (post-send, wr-api, direct, direct-mpw)"
                            .to_string()
                    })
                })
                .collect::<Result<_, _>>()?;
        }
    }
    Ok(a)
}

/// Runs the comparison; returns the exit status.
pub fn main(argv: &[String]) -> i32 {
    let a = match split_args(argv) {
        Ok(a) => a,
        Err(e) => {
            eprintln!("rdmaperf compare raw-eth-bw: {e}");
            return 2;
        }
    };
    if let Some(e) = cli::compare_refusal(&a.rest) {
        eprintln!("{e}");
        return 2;
    }
    let p = match cli::prepare_runnable(RawTool::Bw, &a.rest) {
        Ok(p) => p,
        Err(status) => return status,
    };
    stop::install();
    match run(&p, &a) {
        Ok(()) => stop::exit_status().unwrap_or(0),
        Err(f) => {
            eprintln!("{}", f.msg);
            f.status
        }
    }
}

fn run(p: &crate::raw::params::RawParams, a: &CompareArgs) -> Result<(), Fail> {
    let port = RawPort::open(p)?;
    let mut names = Vec::new();
    let mut unsupported = Vec::new();
    for m in &a.methods {
        match raw_method::decide(Some(*m), &port.dev) {
            Ok(_) => names.push(m.name()),
            Err(reason) => unsupported.push(Unsupported {
                method: m.name(),
                reason,
            }),
        }
    }
    let mut samples = Vec::new();
    // One calibration for every run (each would otherwise take 50 ms).
    let clock = Clock::calibrate();
    for (rep, name) in schedule(&names, a.reps) {
        if stop::requested() {
            break;
        }
        let m = raw_method::parse(Some(name))
            .ok()
            .flatten()
            .unwrap_or(RawMethod::PostSend);
        let res = RawRes::create(&port, p, m)?;
        let r = run_once(p, (&port, &res, m), &clock)?;
        samples.push(Sample {
            method: name,
            rep,
            mpps: r.msg_rate,
            bw: r.bw_avg,
            ns_per_call: 0.0,
            ns_per_wr: 0.0,
            recv_ns_per_msg: 0.0,
        });
    }
    let unit = match BwUnits::of(p.report_gbits) {
        BwUnits::Gbit => "Gb/s",
        BwUnits::MiB => "MiB/s",
    };
    print!("{}", table(&summarize(&samples), &unsupported, unit));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn compare_flags_come_out_of_the_raw_ones() {
        let a = split_args(&v(
            "--client -B 02:00:00:00:00:01 --reps 5 --methods direct,post-send -n 9",
        ))
        .unwrap();
        assert_eq!(a.reps, 5);
        assert_eq!(a.methods, [RawMethod::Direct, RawMethod::PostSend]);
        assert_eq!(a.rest, v("--client -B 02:00:00:00:00:01 -n 9"));
        let d = split_args(&v("--client --reps=2")).unwrap();
        assert_eq!((d.reps, d.methods.len()), (2, 4));
        for (args, fix) in [
            ("--reps 0", "1 or more"),
            ("--methods mpw", "direct-mpw"),
            ("--methods auto", "name the methods"),
            ("--reps", "needs a value"),
        ] {
            let e = split_args(&v(args)).unwrap_err();
            assert!(e.contains(fix), "{args}: {e}");
        }
    }
}
