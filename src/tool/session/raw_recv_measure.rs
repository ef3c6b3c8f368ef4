//! One run of the raw Ethernet receive loop (`run::raw_recv`, perftest's
//! `run_iter_bw_server`) for either receive path, and its report.
//!
//! The clock starts at the first frame (perftest's `set_on_first_rx_packet`:
//! a server started before its client measures the traffic, not the wait).
//! The run ends at `-n` frames, `-D` seconds after the first frame, on
//! Ctrl-C (the stop flag), or when no frame has come for `quiet` after the
//! first (frames the NIC dropped never arrive: perftest gives up after
//! 120 s, "Did not get Message"); the frames counted so far are reported
//! then, with the drops as a finding. Report: perftest's BW table (the
//! sender's, `raw_measure::report`: MsgRate in Mpps, the line-rate line),
//! then the loop's counts and findings.

use std::cell::Cell;
use std::time::Duration;

use super::raw_measure;
use crate::clock::{self, Clock};
use crate::post::{Completion, CompletionQueue, PostError, RecvQueue};
use crate::raw::params::RawParams;
use crate::report::stats::{self, BwInput, BwResult, BwUnits};
use crate::run::raw_recv::{
    post_all, run_raw_recv, RawRecvCfg, RawRecvCounts, RawRecvError, RxClassify,
};
use crate::run::stop;

/// perftest's server gives up after this long without a frame.
pub const QUIET: Duration = Duration::from_secs(120);

/// Why the run ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RecvEnd {
    /// `-n` frames arrived, or `-D` passed.
    Done,
    /// Ctrl-C (the stop flag).
    Interrupted,
    /// No frame for the quiet time after the first (or none in the
    /// first wait, where one is set).
    Quiet,
}

impl RecvEnd {
    /// In the wait for the first frame, none yet: whether the wait is over
    /// (Ctrl-C; or `first_ticks` past `start`, a quiet end).
    #[inline(always)]
    pub(super) fn first_over(&mut self, first_ticks: Option<u64>, start: u64) -> bool {
        if stop::requested() {
            return true;
        }
        let late = first_ticks.is_some_and(|t| clock::now().wrapping_sub(start) > t);
        if late {
            *self = RecvEnd::Quiet;
        }
        late
    }

    /// After a poll at `now`: whether the run stops here, and if so why
    /// (Ctrl-C; `quiet`, the silence too long; at the `-D` deadline `self`
    /// stays as it was).
    #[inline(always)]
    pub(super) fn stops(&mut self, now: u64, quiet: bool, deadline: Option<u64>) -> bool {
        if stop::requested() {
            *self = RecvEnd::Interrupted;
        } else if quiet {
            *self = RecvEnd::Quiet;
        } else if !deadline.is_some_and(|d| now >= d) {
            return false;
        }
        true
    }

    /// Once the loop is over (Ctrl-C late in it still counts): the run's
    /// end time, the last frame's on a quiet end, 0 with no frame.
    fn close(&mut self, last: u64, packets: u64) -> u64 {
        if stop::requested() {
            *self = RecvEnd::Interrupted;
        }
        match self {
            RecvEnd::Quiet => last,
            _ if packets == 0 => 0,
            _ => clock::now(),
        }
    }
}

/// What one run saw.
#[derive(Debug)]
pub struct RecvOutcome {
    pub counts: RawRecvCounts,
    /// The first frame's stamp and the end's (cycles); 0 when none came.
    pub t_first: u64,
    pub t_end: u64,
    pub end: RecvEnd,
    pub error: Option<RawRecvError>,
}

impl RecvOutcome {
    /// A run's outcome once its loop is over: `counts` from `t_first`, its
    /// end and end time as [`RecvEnd::close`] settles them from the last
    /// frame's stamp, and the loop's error if any.
    pub(super) fn closed(
        counts: RawRecvCounts,
        t_first: u64,
        (mut end, last): (RecvEnd, u64),
        rest: Result<(), RawRecvError>,
    ) -> Self {
        let t_end = end.close(last, counts.packets);
        Self {
            counts,
            t_first,
            t_end,
            end,
            error: rest.err(),
        }
    }
}

/// The frames to wait for: `-n` on each of the `-q` QPs (perftest's
/// `tot_iters`), or no bound under `-D`.
pub fn target(p: &RawParams) -> u64 {
    if p.raw.duration.is_some() {
        u64::MAX
    } else {
        p.raw.iters * p.raw.qps.max(1)
    }
}

/// Polls in a row that found completions before [`Watched`] reads as
/// empty once, so the loop looks at its end (`-D`, the quiet time).
const BUSY_POLLS: u32 = 64;

/// A CQ that stamps the last poll that found completions. The receive
/// loop asks whether to end only when a poll finds none, which a stream
/// at line rate may never give it: on a stop request, and after
/// [`BUSY_POLLS`] busy polls, this reads as empty without polling (the
/// completions wait for the next poll), so Ctrl-C and `-D` end the run
/// under any load.
struct Watched<'a, C> {
    cq: &'a mut C,
    last: &'a Cell<u64>,
    busy: u32,
}

impl<C: CompletionQueue> CompletionQueue for Watched<'_, C> {
    #[inline(always)]
    fn poll(&mut self, out: &mut [Completion]) -> Result<usize, PostError> {
        if stop::requested() || self.busy >= BUSY_POLLS {
            self.busy = 0;
            return Ok(0);
        }
        let n = self.cq.poll(out)?;
        if n > 0 {
            self.last.set(clock::now());
            self.busy += 1;
        } else {
            self.busy = 0;
        }
        Ok(n)
    }
}

/// How long the run waits for frames.
#[derive(Clone, Copy, Debug)]
pub struct Waits {
    /// For the first frame: `None` waits until Ctrl-C (a server waits for
    /// its client, as perftest's).
    pub first: Option<Duration>,
    /// Between frames after the first.
    pub quiet: Duration,
}

impl Waits {
    /// Once the first frame came at `t_first`: the `-D` deadline (none
    /// without `-D`) and the quiet time, in ticks of `clock`.
    pub(super) fn after_first(
        &self,
        p: &RawParams,
        clock: &Clock,
        t_first: u64,
    ) -> (Option<u64>, u64) {
        let deadline = p
            .raw
            .duration
            .map(|s| t_first + clock.cycles_for(Duration::from_secs(s)));
        (deadline, clock.cycles_for(self.quiet))
    }
}

/// The tool's waits: the first frame for ever, then [`QUIET`].
pub const TOOL_WAITS: Waits = Waits {
    first: None,
    quiet: QUIET,
};

/// Every receive slot of `cfg` posted (`post_all`), or what failed worded
/// for `who` (the command).
pub fn post_receives<R: RecvQueue>(rq: &mut R, cfg: &RawRecvCfg, who: &str) -> Result<(), String> {
    post_all(rq, cfg).map_err(|e| format!("{who}: posting the receives failed: {e:?}"))
}

/// Receives with every slot of `cfg` posted already (`post_all`); see the
/// module's words for when it ends.
pub fn receive<R: RecvQueue, C: CompletionQueue, K: RxClassify>(
    p: &RawParams,
    (rq, cq): (&mut R, &mut C),
    cfg: &RawRecvCfg,
    clock: &Clock,
    waits: Waits,
) -> RecvOutcome {
    let mut counts = RawRecvCounts::default();
    let until = target(p);
    let start = clock::now();
    let first_ticks = waits.first.map(|d| clock.cycles_for(d));
    let mut end = RecvEnd::Done;
    // The wait for the first frame.
    let first = run_raw_recv::<_, _, K>(rq, cq, cfg, &mut counts, until.min(1), &mut || {
        end.first_over(first_ticks, start)
    });
    let t_first = if counts.packets > 0 { clock::now() } else { 0 };
    let last = Cell::new(t_first);
    let (deadline, quiet_ticks) = waits.after_first(p, clock, t_first);
    let rest = first.and_then(|()| {
        if counts.packets == 0 {
            return Ok(());
        }
        let mut watched = Watched {
            cq,
            last: &last,
            busy: 0,
        };
        run_raw_recv::<_, _, K>(rq, &mut watched, cfg, &mut counts, until, &mut || {
            let now = clock::now();
            end.stops(now, now.wrapping_sub(last.get()) > quiet_ticks, deadline)
        })
    });
    RecvOutcome::closed(counts, t_first, (end, last.get()), rest)
}

/// perftest's numbers for the run: the frames counted over the time from
/// the first frame to the end (no peak, as the sender).
pub fn result(p: &RawParams, out: &RecvOutcome, hz: f64) -> Result<BwResult, String> {
    if out.counts.packets < 2 || out.t_end <= out.t_first {
        return Err(format!(
            "{} frames arrived: no interval to measure a rate over",
            out.counts.packets
        ));
    }
    stats::bw_perftest(&BwInput {
        size: p.size,
        iters: out.counts.packets,
        num_qps: 1,
        duration: p.raw.duration.is_some(),
        no_peak: true,
        post_list: 1,
        cq_mod: 1,
        tposted: &[out.t_first],
        tcompleted: &[out.t_end],
        hz,
        units: BwUnits::of(p.report_gbits),
        inf_bidir_factor: 1,
    })
    .map_err(|e| format!("the run's numbers: {e}"))
}

/// The table and line-rate line (or why there is no rate), then the
/// counts and the findings, one line each.
pub fn report(p: &RawParams, out: &RecvOutcome, hz: f64, gbps: Option<f64>) -> String {
    let mut s = match result(p, out, hz) {
        Ok(r) => raw_measure::report(p, &r, gbps),
        Err(e) => format!(" BW: not measured: {e}\n"),
    };
    match out.end {
        RecvEnd::Done => {}
        RecvEnd::Interrupted => s.push_str(" interrupted: the frames counted so far\n"),
        RecvEnd::Quiet => s.push_str(&format!(
            " stopped: no more frames came after {} of {} ({} did not arrive)\n",
            out.counts.packets,
            target(p),
            target(p).saturating_sub(out.counts.packets)
        )),
    }
    s.push_str(&counts_text(&out.counts, p.size));
    s
}

/// What arrived, a line each (`RawRecvCounts::lines`), then each finding
/// for frames of `size` bytes: the receive report's part the server and a
/// duplex side both print.
pub fn counts_text(c: &RawRecvCounts, size: u64) -> String {
    let lines = c.lines().into_iter().map(|l| format!(" {l}\n"));
    let findings = c
        .findings(size as u32)
        .into_iter()
        .map(|f| format!(" finding: {f}\n"));
    lines.chain(findings).collect()
}

/// The loop's error worded for the user.
pub fn error_words(e: &RawRecvError) -> String {
    match e {
        RawRecvError::Post(err) => format!("posting a receive failed: {err:?}"),
        RawRecvError::Poll(err) => format!("polling the CQ failed: {err:?}"),
        RawRecvError::Flushed => {
            "a receive was flushed: the QP went to the error state (check the port's link \
             and dmesg)"
                .into()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raw::{args, tools::RawTool};

    fn p(cmd: &str) -> RawParams {
        let argv: Vec<String> = cmd.split_whitespace().map(String::from).collect();
        args::parse(&argv)
            .and_then(|a| crate::raw::params::resolve(RawTool::Bw, &a))
            .unwrap()
    }

    fn outcome(packets: u64, span: u64, end: RecvEnd) -> RecvOutcome {
        RecvOutcome {
            counts: RawRecvCounts {
                packets,
                bytes: packets * 60,
                ..RawRecvCounts::default()
            },
            t_first: 1_000,
            t_end: 1_000 + span,
            end,
            error: None,
        }
    }

    #[test]
    fn the_rate_is_the_frames_over_the_time_from_the_first() {
        let p = p("--server -B 02:00:00:00:00:01 -n 1000 -s 64");
        // 1000 frames in 1 ms at 1 GHz: 1 Mpps.
        let r = result(&p, &outcome(1000, 1_000_000, RecvEnd::Done), 1e9).unwrap();
        assert_eq!((r.size, r.iters), (64, 1000));
        assert!((r.msg_rate - 1.0).abs() < 1e-9, "{r:?}");
        let e = result(&p, &outcome(1, 5, RecvEnd::Quiet), 1e9).unwrap_err();
        assert!(e.contains("1 frames arrived"), "{e}");
    }

    #[test]
    fn the_report_says_how_the_run_ended() {
        let p = p("--server -B 02:00:00:00:00:01 -n 1000 -s 64");
        let done = report(&p, &outcome(1000, 1_000_000, RecvEnd::Done), 1e9, None);
        assert!(done.contains("MsgRate[Mpps]"), "{done}");
        assert!(
            done.contains(" received 1000 frames, 60000 bytes"),
            "{done}"
        );
        assert!(!done.contains("stopped") && !done.contains("interrupted"));
        let cut = report(&p, &outcome(700, 1_000, RecvEnd::Quiet), 1e9, None);
        assert!(
            cut.contains("after 700 of 1000 (300 did not arrive)"),
            "{cut}"
        );
        let int = report(&p, &outcome(10, 1_000, RecvEnd::Interrupted), 1e9, None);
        assert!(int.contains(" interrupted: "), "{int}");
        let none = report(&p, &outcome(0, 0, RecvEnd::Interrupted), 1e9, None);
        assert!(none.starts_with(" BW: not measured: 0 frames"), "{none}");
    }

    #[test]
    fn duration_has_no_frame_target() {
        assert_eq!(target(&p("--server -B 02:00:00:00:00:01 -n 77")), 77);
        assert_eq!(target(&p("--server -B 02:00:00:00:00:01 -D 3")), u64::MAX);
        assert_eq!(target(&p("--server -B 02:00:00:00:00:01 -n 77 -q 4")), 308);
    }
}
