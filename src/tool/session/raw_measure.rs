//! One run of the raw Ethernet sender loop (`run::raw_bw`), for any post
//! method: the loop's numbers from the raw parameters, the duration window
//! (`bw_measure::window`, as the other bw tools), the run, and the report:
//! perftest's BW table (MsgRate in Mpps) and, under it, the packet rate
//! against the port's line rate (`raw::line_rate::rate_line`).

use super::bw_measure::window;
use crate::clock::{self, Clock};
use crate::mlx5::raw_sq::RawPkt;
use crate::post::{Completion, CompletionQueue};
use crate::raw::line_rate;
use crate::raw::params::RawParams;
use crate::raw::rate::RawRate;
use crate::raw::slots::Slots;
use crate::report::info::{OutputMode, TestInfo};
use crate::report::stats::{self, BwInput, BwResult, BwUnits};
use crate::report::text;
use crate::run::bw::{BwOutcome, QpCount, RunError};
use crate::run::pace::{SwPace, Unpaced};
use crate::run::raw_bw::{Alone, Beside, RawBwConfig, RawBwLoop, RawPost};
use std::time::Duration;

/// perftest's `-Q`, held to the TX depth so a window always holds a
/// completion; at least 1.
pub fn cq_mod(p: &RawParams) -> u32 {
    (p.raw.cq_mod.min(p.raw.tx_depth).max(1)) as u32
}

/// The loop's numbers.
pub fn config(p: &RawParams, clock: &Clock) -> RawBwConfig {
    RawBwConfig {
        iters: if p.raw.duration.is_some() {
            0
        } else {
            p.raw.iters
        },
        post_list: p.post_list,
        tx_depth: (p.raw.tx_depth as u32).max(p.post_list),
        cq_mod: cq_mod(p),
        stall_ticks: clock.cycles_for(Duration::from_secs(5)),
    }
}

/// perftest's per-frame stamps for the BW peak (`tposted`, `tcompleted`:
/// `-n` × QPs each), or none when the peak is off (`RawParams::no_peak`).
#[derive(Clone, Debug, Default)]
pub struct Stamps {
    pub tposted: Vec<u64>,
    pub tcompleted: Vec<u64>,
}

impl Stamps {
    /// The stamps a run of `p` on `qps` QPs keeps, allocated before it.
    pub fn for_run(p: &RawParams, qps: usize) -> Stamps {
        if p.no_peak || p.raw.duration.is_some() {
            return Stamps::default();
        }
        let n = (p.raw.iters as usize).saturating_mul(qps);
        Stamps {
            tposted: vec![0; n],
            tcompleted: vec![0; n],
        }
    }
}

/// Runs the loop over `posts` (one per QP, buffers at `bases`) and `cq`,
/// keeping no peak stamps.
pub fn measure<P: RawPost, C: CompletionQueue>(
    p: &RawParams,
    posts: &mut [P],
    cq: &mut C,
    bases: &[u64],
    slots: Slots,
    clock: &Clock,
) -> BwOutcome {
    measure_beside(p, (posts, cq), (bases, slots), clock, &mut Alone)
}

/// [`measure`] with `beside` (`-b`'s receive side) in the same loop.
pub fn measure_beside<P: RawPost, C: CompletionQueue, B: Beside>(
    p: &RawParams,
    queues: (&mut [P], &mut C),
    frames: (&[u64], Slots),
    clock: &Clock,
    beside: &mut B,
) -> BwOutcome {
    measure_stamped(p, queues, frames, clock, (beside, &mut Stamps::default()))
}

/// [`measure_beside`] keeping `stamps` (from [`Stamps::for_run`]) for the
/// peak.
pub fn measure_stamped<P: RawPost, C: CompletionQueue, B: Beside>(
    p: &RawParams,
    (posts, cq): (&mut [P], &mut C),
    (bases, slots): (&[u64], Slots),
    clock: &Clock,
    (beside, stamps): (&mut B, &mut Stamps),
) -> BwOutcome {
    let cfg = config(p, clock);
    let mut counts = vec![QpCount::default(); posts.len()];
    let mut list = vec![RawPkt::default(); cfg.post_list as usize];
    let mut wcs = vec![Completion::default(); 16];
    let start = clock::now();
    let deadlines = p
        .raw
        .duration
        .map(|secs| window(secs, secs / 4, clock, start));
    let mut lp = RawBwLoop {
        cfg,
        posts,
        cq,
        bases,
        slots,
        counts: &mut counts,
        list: &mut list,
        wcs: &mut wcs,
        tposted: &mut stamps.tposted,
        tcompleted: &mut stamps.tcompleted,
        deadlines,
        now: clock::now,
    };
    // The limiter is chosen here, once: the unlimited loop has no pacing
    // code. Packet pacing (PP) is the QP's own, set when it was created.
    match &p.rate {
        Some(RawRate::Sw(r)) => {
            let gap = clock.cycles_for(Duration::from_secs_f64(r.burst_gap_secs(p.size)));
            lp.run_beside(&mut SwPace::new(gap, r.burst, clock::now()), beside)
        }
        _ => lp.run_beside(&mut Unpaced, beside),
    }
}

/// perftest's numbers for the run, without a peak (no stamps kept).
pub fn result(p: &RawParams, out: &BwOutcome, qps: u32, hz: f64) -> Result<BwResult, String> {
    result_stamped(p, out, &Stamps::default(), qps, hz)
}

/// perftest's numbers for the run, the peak from `stamps` when the run
/// kept them and sent every frame (an interrupted run, or one with no
/// stamps, reports none, as `-N`).
pub fn result_stamped(
    p: &RawParams,
    out: &BwOutcome,
    stamps: &Stamps,
    qps: u32,
    hz: f64,
) -> Result<BwResult, String> {
    let duration = p.raw.duration.is_some();
    let whole = stamps.tposted.len() as u64 == out.measured && out.error.is_none();
    let peak = !stamps.tposted.is_empty() && whole;
    let ends = ([out.t_start], [out.t_end]);
    let (tposted, tcompleted): (&[u64], &[u64]) = if peak {
        (&stamps.tposted, &stamps.tcompleted)
    } else {
        (&ends.0, &ends.1)
    };
    stats::bw_perftest(&BwInput {
        size: p.size,
        iters: if duration {
            out.measured
        } else {
            out.measured / qps.max(1) as u64
        },
        num_qps: qps,
        duration,
        no_peak: !peak,
        post_list: p.post_list,
        cq_mod: cq_mod(p),
        tposted,
        tcompleted,
        hz,
        units: BwUnits::of(p.report_gbits),
        inf_bidir_factor: 1,
    })
    .map_err(|e| format!("the run's numbers: {e}"))
}

/// The table (header and row) and the line-rate line under it (when the
/// port's speed is known).
pub fn report(p: &RawParams, r: &BwResult, gbps: Option<f64>) -> String {
    let info = TestInfo {
        output: OutputMode::Full,
        bw_units: BwUnits::of(p.report_gbits),
        ..TestInfo::default()
    };
    let mut s = text::bw_header(&info);
    s.push_str(&text::bw_row(r, &info, 0.0));
    s.push_str(text::RESULT_LINE);
    s.push('\n');
    match gbps {
        Some(g) => s.push_str(&line_rate::rate_line(p.size, g, r.msg_rate)),
        None => s.push_str(" Packet rate: the port's speed is unknown (no sysfs rate)\n"),
    }
    s
}

/// The banner's rate line ("Rate limit : 2.5 Gb/s, SW, burst 128"), when
/// the run is limited.
pub fn rate_banner(p: &RawParams) -> Option<String> {
    Some(match p.rate.as_ref()? {
        RawRate::Sw(r) => format!(" Rate limit : {}", r.describe()),
        RawRate::Pp(pp) => format!(
            " Rate limit : {} kbit/s, PP (the NIC paces), max burst {} B, typical frame {} B \
             (0: the device's default)",
            pp.kbps, pp.max_burst, pp.typical_pkt
        ),
    })
}

/// The loop's error worded for the user.
pub fn error_words(e: &RunError) -> String {
    match e {
        RunError::Interrupted => "interrupted".into(),
        RunError::Completion { qp, wc, .. } => format!(
            "QP {qp}: a send completed with status {} (vendor error {:#x}): the NIC refused a \
             frame (a minimum inline header the device wants, or a steering/permission \
             problem)",
            wc.status.name(),
            wc.vendor_err
        ),
        RunError::Post { qp, err } => format!("QP {qp}: posting failed: {err:?}"),
        RunError::Poll { err } => format!("polling the CQ failed: {err:?}"),
        RunError::Stalled {
            qp, outstanding, ..
        } => format!(
            "QP {qp}: no completion for 5 s with {outstanding} frames outstanding: check the \
             port's link (ibv_devinfo) and the device's minimum inline header"
        ),
        RunError::PeerExited | RunError::PeerFinished => "the peer went away".into(),
    }
}
