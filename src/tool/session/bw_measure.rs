//! One size of the bw loop, shared by every bandwidth tool (write/read/
//! atomic-bw, send-bw, -b, --threads, --post direct): the loop's
//! configuration and deadlines, each QP's target, the run, and the error
//! worded for the user.

use super::bw_result::{result, Measured, SizeRun};
use crate::cli::params::{Mode, Params};
use crate::cli::rate::RateKind;
use crate::clock::{self, Clock};
use crate::ctrl::Dest;
use crate::post::{Completion, CompletionQueue, SendQueue, WcStatus, WrDesc};
use crate::run::bw::{BwConfig, BwLoop, BwOutcome, Deadlines, QpCount, QpTarget, RunError};
use crate::run::geometry::Geometry;
use crate::run::pace::SwPace;
use crate::tool::common::fail::Fail;
use crate::tool::common::infinite;
use crate::tool::setup::resources::Resources;
use std::time::Duration;

/// perftest's duration state machine as clock deadlines from `start`
/// (margin, D - margin, D); None in iterations mode.
pub(crate) fn deadlines(p: &Params, clock: &Clock, start: u64) -> Option<Deadlines> {
    match p.mode {
        Mode::Duration { secs, margin } => Some(window(secs as u64, margin as u64, clock, start)),
        Mode::Iterations => None,
    }
}

/// `-D secs` with `margin` seconds of warm-up and cool-down, from `start`
/// (the raw tools use it too).
pub(crate) fn window(secs: u64, margin: u64, clock: &Clock, start: u64) -> Deadlines {
    Deadlines {
        sample_start: start + clock.cycles_for(Duration::from_secs(margin)),
        sample_stop: start + clock.cycles_for(Duration::from_secs(secs - margin)),
        end: start + clock.cycles_for(Duration::from_secs(secs)),
    }
}

/// The bw loop's configuration for one size.
pub(crate) fn bw_config(p: &Params, size: u64, g: &Geometry, clock: &Clock) -> BwConfig {
    BwConfig {
        op: p.op(),
        size: size as u32,
        iters: p.iters,
        post_list: p.post_list,
        tx_depth: p.tx_depth,
        cq_mod: p.cq_mod,
        inline: size <= p.inline_size as u64,
        positions: g.positions(),
        step: g.step(),
        stall_ticks: clock.cycles_for(Duration::from_secs(p.cq_timeout_s)),
        cost: !p.no_cost,
    }
}

/// Each QP's addressing: our send half (perftest geometry of the largest
/// size) and the peer's advertised buffer.
/// Targets for QPs that share one buffer at `mr_addr` laid out by `g`.
pub fn qp_targets_shared(g: &Geometry, mr_addr: u64, lkey: u32, rem: &[Dest]) -> Vec<QpTarget> {
    rem.iter()
        .enumerate()
        .map(|(i, r)| QpTarget {
            laddr: mr_addr + g.send_offset(i as u64),
            lkey,
            raddr: r.vaddr,
            rkey: r.rkey,
        })
        .collect()
}

/// Each QP's target: where it sends from (its MR, see
/// [`Resources::qp_mem`]) and the peer's address and rkey for it.
pub fn qp_targets(res: &Resources, rem: &[Dest]) -> Vec<QpTarget> {
    rem.iter()
        .enumerate()
        .map(|(i, r)| {
            let (mr, gi) = res.qp_mem(i);
            QpTarget {
                laddr: mr.addr() + res.geometry.send_offset(gi),
                lkey: res.send_lkey(mr),
                raddr: r.vaddr,
                rkey: r.rkey,
            }
        })
        .collect()
}

/// The bw loop's arrays for one size, allocated before the run: the peak's
/// stamps (none with --no_peak), per-QP counts, the post list and the poll
/// batch.
pub(crate) struct LoopBufs {
    pub(crate) tposted: Vec<u64>,
    pub(crate) tcompleted: Vec<u64>,
    pub(crate) counts: Vec<QpCount>,
    pub(crate) list: Vec<WrDesc>,
    pub(crate) wcs: Vec<Completion>,
}

impl LoopBufs {
    /// For `nqp` send queues of `p.iters` messages each.
    pub(crate) fn new(p: &Params, nqp: usize) -> LoopBufs {
        let total = (p.iters * nqp as u64) as usize;
        let peak_len = if p.no_peak { 0 } else { total };
        LoopBufs {
            tposted: vec![0u64; peak_len],
            tcompleted: vec![0u64; peak_len],
            counts: vec![QpCount::default(); nqp],
            list: vec![WrDesc::default(); p.post_list as usize],
            wcs: vec![Completion::default(); p.cqe_poll as usize],
        }
    }
}

/// Run one size with post method `S` and poller `C` (monomorphised per
/// method) over `sqs` (one per target), and compute the row; with
/// `--run_infinitely`, publishing periods into `periods` (then the run has
/// no end but a stop request).
#[allow(clippy::too_many_arguments)]
pub(crate) fn measure_size<S: SendQueue, C: CompletionQueue>(
    p: &Params,
    base: &Geometry,
    size: u64,
    targets: &[QpTarget],
    sqs: &mut [S],
    cq: &mut C,
    clock: &Clock,
    periods: Option<&crate::run::period::PeriodLog>,
) -> Result<SizeRun, Fail> {
    if targets.len() != sqs.len() {
        return Err(Fail::new(format!(
            "internal: {} send queues for {} targets; report this",
            sqs.len(),
            targets.len()
        )));
    }
    let g = Geometry::new(size, base.cycle_buffer, base.cache_line, base.slots);
    let mut b = LoopBufs::new(p, sqs.len());
    let start = clock::now();
    let deadlines = match periods {
        Some(_) => Some(infinite::endless(start)),
        None => deadlines(p, clock, start),
    };
    let cfg = bw_config(p, size, &g, clock);
    if p.warm_up {
        warm_up(cfg, sqs, cq, targets, &mut b.wcs)?;
    }
    let unknown_before = cq.unknown_qpn_cqes();
    let mut lp = BwLoop {
        cfg,
        sqs,
        cq,
        targets,
        counts: &mut b.counts,
        list: &mut b.list,
        wcs: &mut b.wcs,
        tposted: &mut b.tposted,
        tcompleted: &mut b.tcompleted,
        deadlines,
        periods,
        now: clock::now,
    };
    let outcome = run_limited(p, size, clock, &mut lp);
    let error = outcome.error.map(|e| describe(e, &b.counts));
    let m = Measured {
        outcome,
        tposted: b.tposted,
        tcompleted: b.tcompleted,
    };
    let row = result(p, size, &m, clock)?;
    Ok(SizeRun {
        outcome,
        error,
        row,
        unknown_qpn_cqes: cq.unknown_qpn_cqes() - unknown_before,
    })
}

/// Runs the loop with `--rate_limit`'s software pacer or without. The
/// limiter is chosen here, once: the unlimited loop has no pacing code.
fn run_limited<S: SendQueue, C: CompletionQueue, F: Fn() -> u64>(
    p: &Params,
    size: u64,
    clock: &Clock,
    lp: &mut BwLoop<'_, S, C, F>,
) -> BwOutcome {
    match p.rate.as_ref().filter(|r| r.kind == RateKind::Sw) {
        Some(r) => {
            let gap = clock.cycles_for(Duration::from_secs_f64(r.burst_gap_secs(size)));
            lp.run_paced(&mut SwPace::new(gap, r.burst, clock::now()))
        }
        None => lp.run(),
    }
}

/// perftest `perform_warm_up`: before the measurement, each QP posts one
/// TX depth of messages (one post list with -l) and waits for them all.
fn warm_up<S: SendQueue, C: CompletionQueue>(
    cfg: BwConfig,
    sqs: &mut [S],
    cq: &mut C,
    targets: &[QpTarget],
    wcs: &mut [Completion],
) -> Result<(), Fail> {
    let session = if cfg.post_list == 1 {
        cfg.tx_depth
    } else {
        cfg.post_list
    };
    let cfg = BwConfig {
        iters: session as u64,
        cost: false,
        ..cfg
    };
    let mut counts = vec![QpCount::default(); sqs.len()];
    let mut list = vec![WrDesc::default(); cfg.post_list as usize];
    let o = BwLoop {
        cfg,
        sqs,
        cq,
        targets,
        counts: &mut counts,
        list: &mut list,
        wcs,
        tposted: &mut [],
        tcompleted: &mut [],
        deadlines: None,
        periods: None,
        now: clock::now,
    }
    .run();
    match o.error {
        Some(e) => Err(Fail::new(format!(
            "--perform_warm_up: the warm-up failed: {}",
            describe(e, &counts)
        ))),
        None => Ok(()),
    }
}

/// The line printed under a row when the direct poller dropped CQEs of QPs
/// it does not know (libmlx5 would have returned them as errors).
pub(crate) fn unknown_qpn_line(n: u64) -> String {
    format!(
        " Unknown-QPN CQEs : {n} (completions for QPs this run did not create were dropped; \
         another process or a destroyed QP shares the CQ — report this)\n"
    )
}

pub(crate) fn describe(e: RunError, counts: &[QpCount]) -> String {
    let waiting = || {
        counts
            .iter()
            .enumerate()
            .find(|(_, c)| c.scnt > c.ccnt)
            .map_or((0, 0), |(i, c)| (i, c.scnt - c.ccnt))
    };
    match e {
        RunError::Completion { qp, wr_id, wc } if wc.status == WcStatus::SUCCESS => format!(
            "unexpected completion on the send CQ: opcode {}, QPN {:#x}, wr_id {wr_id:#x} (QP index \
             {qp}) is not a completion of a WR this run posted (a receive, or another QP's); the \
             run stopped so it is not counted — report this with the command line",
            wc.opcode.0, wc.qp_num
        ),
        RunError::Completion { wc, .. } if crate::tool::common::peer_exit::peer_exited_before(&wc) => format!(
            "{}; our outstanding work then failed with {} — partial result above, the peer's \
             own output says why it stopped",
            crate::tool::common::peer_exit::PEER_EXITED,
            wc.status.name()
        ),
        RunError::PeerExited => {
            let (qp, n) = waiting();
            format!(
                "{} while QP {qp} had {n} messages outstanding; partial result above — the \
                 peer's own output says why it stopped",
                crate::tool::common::peer_exit::PEER_EXITED
            )
        }
        RunError::PeerFinished => {
            let (qp, n) = waiting();
            format!(
                "the peer ended its run (it sent its next control message) while QP {qp} still \
                 had {n} messages outstanding: the two sides expected different amounts of work \
                 — give both the same -n (or -D) and -q"
            )
        }
        RunError::Completion { qp, wr_id, wc } => format!(
            "completion with error on QP {qp}: status {} ({}), vendor error {:#x}{}, wr_id {wr_id:#x} \
             (message {} of that QP); the run stopped — check that both sides use the same -s/-a/-c and test, the peer's rkey/permissions, and the link",
            wc.status.name(),
            wc.status.0,
            wc.vendor_err,
            if wc.syndrome != 0 { format!(", syndrome {:#x}", wc.syndrome) } else { String::new() },
            wr_id & 0xffff_ffff_ffff
        ),
        RunError::Post { qp, err } => format!(
            "posting on QP {qp} failed: {err:?} (after {} messages); the QP is no longer usable",
            counts.get(qp as usize).map(|c| c.scnt).unwrap_or(0)
        ),
        RunError::Poll { err } => format!("polling the CQ failed: {err:?}"),
        RunError::Stalled { qp, outstanding, last_completed, idle_ticks: _ } => format!(
            "no completion for --cq-timeout seconds (plus the time the data in flight needs at \
             256 KiB/s): QP {qp} has {outstanding} messages outstanding, {last_completed} completed, \
             and the peer is still connected; the link or the peer's QP stopped — check the peer \
             (same -n/-s/-c/-q on both sides?), or raise --cq-timeout"
        ),
        RunError::Interrupted => "interrupted: QPs moved to ERR, partial result above".into(),
    }
}
