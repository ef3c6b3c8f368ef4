//! `--run_infinitely` for the bw client: the loop runs until Ctrl-C/SIGTERM
//! and publishes a period every -D seconds (perftest default 5); a printer
//! thread prints each period's row (perftest prints one `print_report_bw` row
//! per period from its own print thread) and writes one JSON record per period.

use super::fail::Fail;
use super::out::Out;
use crate::cli::params::{Mode, Params};
use crate::clock::Clock;
use crate::report::info::TestInfo;
use crate::report::{json, stats, text};
use crate::run::bw::Deadlines;
use crate::run::period::{PeriodLog, PeriodSample};
use std::time::Duration;

/// The period length in seconds (-D, default 5), when --run_infinitely is on.
pub fn period_secs(p: &Params) -> Option<u64> {
    match p.mode {
        Mode::Duration { secs, .. } if p.run_infinitely => Some(secs as u64),
        _ => None,
    }
}

/// The loop's deadlines for an endless run: sampling from `start`, no end.
pub fn endless(start: u64) -> Deadlines {
    Deadlines {
        sample_start: start,
        sample_stop: u64::MAX,
        end: u64::MAX,
    }
}

/// One period's row: perftest's duration formula over the period's messages
/// and interval (no peak).
pub fn period_row(
    p: &Params,
    size: u64,
    s: &PeriodSample,
    hz: f64,
) -> Result<stats::BwResult, Fail> {
    let tp = [s.t_start];
    let tc = [s.t_end.max(s.t_start + 1)];
    stats::bw_perftest(&stats::BwInput {
        size,
        iters: s.messages,
        num_qps: p.num_qps,
        duration: true,
        no_peak: true,
        post_list: p.post_list,
        cq_mod: p.cq_mod,
        tposted: &tp,
        tcompleted: &tc,
        hz,
        units: stats::BwUnits::of(p.report_gbits),
        inf_bidir_factor: 1,
    })
    .map_err(|e| Fail::new(format!("computing a period's result: {e}")))
}

/// Runs `measure` (the bw loop) with a period log and a printer thread when
/// --run_infinitely is on; plainly (`None`) otherwise.
pub fn with_printer<T>(
    p: &Params,
    info: &TestInfo,
    clock: &Clock,
    size: u64,
    out: Out,
    report: &mut Option<json::JsonReport>,
    measure: impl FnOnce(Option<&PeriodLog>) -> T,
) -> Result<T, Fail> {
    let Some(secs) = period_secs(p) else {
        return Ok(measure(None));
    };
    let log = PeriodLog::new(clock.cycles_for(Duration::from_secs(secs)));
    let hz = clock.hz();
    std::thread::scope(|s| {
        let printer = s.spawn(|| print_periods(p, info, &log, size, hz, out, report));
        let r = measure(Some(&log));
        log.finish();
        let printed = printer
            .join()
            .unwrap_or_else(|_| Err(Fail::new("the period printer thread panicked")));
        printed.map(|()| r)
    })
}

/// Printer side: one row (and JSON record) per published period until the
/// loop finishes; a period cut short by the stop is not printed (perftest
/// prints nothing when killed either).
fn print_periods(
    p: &Params,
    info: &TestInfo,
    log: &PeriodLog,
    size: u64,
    hz: f64,
    out: Out,
    report: &mut Option<json::JsonReport>,
) -> Result<(), Fail> {
    let mut seen = 0;
    loop {
        let done = log.finished();
        while let Some(s) = log.next(&mut seen) {
            let r = period_row(p, size, &s, hz)?;
            out.print(&text::bw_row(&r, info, 0.0));
            if let Some(j) = report.as_mut() {
                let rec = json::Record::bw(&r, info, 0.0).with("period", s.index);
                j.push(rec).map_err(|e| Fail::new(e.to_string()))?;
            }
        }
        if done {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::args::PerfArgs;
    use crate::cli::params::{resolve, Kind, Tool, Verb};

    #[test]
    fn a_period_row_is_that_periods_rate() {
        let args = |run_infinitely| PerfArgs {
            post: "auto".into(),
            timeout: 30,
            cq_timeout: 10,
            duration: Some(2),
            run_infinitely,
            ..Default::default()
        };
        let tool = Tool {
            verb: Verb::Write,
            kind: Kind::Bw,
        };
        let p = resolve(tool, &args(true)).unwrap();
        assert_eq!(period_secs(&p), Some(2));
        // 1 MHz clock: 2e6 ticks = 2 s; 200000 messages of 65536 B.
        let s = PeriodSample {
            index: 3,
            messages: 200_000,
            t_start: 5_000_000,
            t_end: 7_000_000,
        };
        let r = period_row(&p, 65536, &s, 1e6).unwrap();
        assert_eq!(r.iters, 200_000);
        assert_eq!(r.bw_peak, 0.0);
        assert!((r.msg_rate - 0.1).abs() < 1e-9, "{}", r.msg_rate);
        assert!((r.bw_avg - 6250.0).abs() < 1e-6, "{}", r.bw_avg);
        let plain = resolve(tool, &args(false)).unwrap();
        assert_eq!(period_secs(&plain), None);
    }
}
