//! What one size of a bandwidth run measured: the loop outcome, perftest's
//! row computed from it, the summary `compare` aggregates, the report the
//! client sends, and the --limit_bw/--limit_msgrate check.

use crate::cli::params::Params;
use crate::clock::Clock;
use crate::ctrl::BwReport;
use crate::report::stats;
use crate::run::bw::BwOutcome;
use crate::tool::common::fail::Fail;

/// What the client measured at one size (for `compare` and callers that aggregate).
#[derive(Clone, Debug)]
pub struct SizeSummary {
    pub size: u64,
    pub result: stats::BwResult,
    pub method: &'static str,
    /// CPU ns per post call and per WR (0 with --no-cost).
    pub ns_per_call: f64,
    pub ns_per_wr: f64,
    /// A SEND receiver's CPU ns per message received (its polls that found
    /// completions and the reposts); 0 on a sender or with --no-cost.
    pub recv_ns_per_msg: f64,
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

/// The row a report carries (the peer's, for the summed line).
pub(crate) fn row_of(r: &BwReport) -> stats::BwResult {
    stats::BwResult {
        size: r.size,
        iters: r.iters,
        bw_peak: r.bw_peak,
        bw_avg: r.bw_avg,
        msg_rate: r.msg_rate,
        bw_peak_exact: 0.0,
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
            recv_ns_per_msg: 0.0,
        }
    }
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

pub(crate) fn result(
    p: &Params,
    size: u64,
    m: &Measured,
    clock: &Clock,
) -> Result<stats::BwResult, Fail> {
    let o = &m.outcome;
    let nqp = p.num_qps;
    let units = stats::BwUnits::of(p.report_gbits);
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
    if let Some(l) = p.limits.bw {
        if r.bw_avg < l {
            return Err(Fail::new(format!(
                "average bandwidth {:.2} {u} is below --limit_bw {l:.2} {u}",
                r.bw_avg,
                u = if p.report_gbits { "Gb/sec" } else { "MB/sec" }
            )));
        }
    }
    if let Some(l) = p.limits.msgrate {
        if r.msg_rate < l {
            return Err(Fail::new(format!(
                "message rate {:.6} Mpps is below --limit_msgrate {l}",
                r.msg_rate
            )));
        }
    }
    Ok(())
}
