//! One raw-eth-lat run (`run::raw_lat`) for any post method, either side:
//! the loop's numbers from the raw parameters, the receives posted, the
//! stamps, and the report: perftest's latency table (`print_report_lat`:
//! t_min, t_max, t_typical, t_avg, t_stdev, 99% and 99.9%, one way: half
//! the round trip), or under `-D` its duration table (t_avg and tps).

use std::time::Duration;

use crate::clock::Clock;
use crate::mlx5::raw_sq::RawPkt;
use crate::raw::ctx::Side;
use crate::raw::params::RawParams;
use crate::raw::slots::Slots;
use crate::report::info::{OutputMode, TestInfo};
use crate::report::stats::{self, LatUnits};
use crate::report::text;
use crate::run::lat::{LatError, LatOutcome};
use crate::run::raw_lat::RawLatConfig;
use crate::tool::setup::raw_lat_res::rx_depth;

/// The tool's stall allowance (as raw-eth-bw's sender).
pub const STALL: Duration = Duration::from_secs(5);

/// A SEND ping-pong reports half the round trip (perftest's rtt_factor 2).
const RTT_FACTOR: u32 = 2;

/// What one run did, with its stamps.
pub struct RawLatRun {
    pub outcome: LatOutcome,
    /// One stamp per send (iterations mode).
    pub tposted: Vec<u64>,
    /// `-D`: the sample window in ticks.
    pub window: u64,
}

impl RawLatRun {
    /// Before the run: a stamp per send in iterations mode, none under `-D`.
    pub fn new(cfg: &RawLatConfig, window: u64) -> RawLatRun {
        let stamps = if cfg.end == 0 { cfg.iters } else { 0 };
        RawLatRun {
            outcome: LatOutcome::default(),
            tposted: vec![0; stamps as usize],
            window,
        }
    }

    /// After it: the outcome, the stamps cut to the sends made.
    pub fn ended(mut self, outcome: LatOutcome) -> RawLatRun {
        self.tposted.truncate(outcome.iters as usize);
        self.outcome = outcome;
        self
    }
}

/// The frames a side sends: one per flow, each at its flow region's start
/// (perftest's `primary_send_addr + flow_buff_size × index`).
pub fn frames(base: u64, slots: &Slots) -> Vec<RawPkt> {
    (0..slots.flows.max(1))
        .map(|f| RawPkt {
            addr: base + f * slots.flow_bytes,
            len: slots.frame_len,
        })
        .collect()
}

/// The loop's numbers, the run starting at `start`; and the `-D` sample
/// window's length.
pub fn config(p: &RawParams, clock: &Clock, stall: Duration, start: u64) -> (RawLatConfig, u64) {
    let mut c = RawLatConfig {
        iters: p.raw.iters,
        initiator: p.raw.side != Some(Side::Server),
        cq_mod: p.raw.cq_mod.min(p.raw.tx_depth).max(1),
        rx_depth: rx_depth(p),
        stall_ticks: clock.cycles_for(stall),
        frame_len: (p.size as u32).saturating_sub(4),
        end: 0,
        sample_start: 0,
        sample_stop: 0,
    };
    let Some(secs) = p.raw.duration else {
        return (c, 0);
    };
    // perftest's warm-up and cool-down: a quarter of -D each side.
    let at = |s: u64| start + clock.cycles_for(Duration::from_millis(s));
    let ms = secs * 1000;
    c.end = at(ms).max(start + 1);
    c.sample_start = at(ms / 4);
    c.sample_stop = at(ms - ms / 4);
    (c, c.sample_stop - c.sample_start)
}

/// perftest's table: the header, one row, the closing line. Iterations
/// mode needs two stamps (one round trip).
pub fn report(p: &RawParams, run: &RawLatRun, hz: f64) -> Result<String, String> {
    let Some(secs) = p.raw.duration else {
        return lat_table(p, stats::lat_deltas(&run.tposted), run.outcome.iters, hz);
    };
    let info = table_info(Some(secs));
    let mut s = text::lat_header(&info);
    let measured = run.outcome.measured;
    if measured == 0 {
        return Err("no round trip ended inside the sample window".into());
    }
    let r = stats::lat_duration(run.window, measured, hz, RTT_FACTOR)
        .map_err(|e| format!("the run's numbers: {e}"))?;
    s.push_str(&text::lat_duration_row(p.size, measured, &r, &info, 0.0));
    s.push_str(text::RESULT_LINE);
    s.push('\n');
    Ok(s)
}

fn table_info(duration: Option<u64>) -> TestInfo {
    TestInfo {
        output: OutputMode::Full,
        duration_s: duration.map(|s| s as u32),
        ..TestInfo::default()
    }
}

/// perftest's `print_report_lat` over the samples `deltas` (cycles of a
/// round trip; one way is half): the header, the `-U`/`-H` dumps, the row
/// with `iters` as `#iterations`, the closing line.
pub fn lat_table(p: &RawParams, mut d: Vec<u64>, iters: u64, hz: f64) -> Result<String, String> {
    let info = table_info(None);
    let mut s = text::lat_header(&info);
    s.push_str(&dumps(p, &d, hz, &info));
    let st = stats::lat_exact(&mut d, hz, RTT_FACTOR, LatUnits::Usec)
        .map_err(|e| format!("the run's numbers: {e}"))?;
    s.push_str(&text::lat_row(p.size, iters, &st, &info, 0.0));
    s.push_str(text::RESULT_LINE);
    s.push('\n');
    Ok(s)
}

/// The table's header and closing line without a row (what
/// raw_ethernet_burst_lat's server prints).
pub fn no_row() -> String {
    text::lat_header(&table_info(None)) + text::RESULT_LINE
}

/// `-U` (the samples in order) and `-H` (sorted, less perftest's two
/// largest, `LAT_MEASURE_TAIL`), each as perftest's "#, usec" lines, then
/// the table's header again, as `print_report_lat` prints them.
fn dumps(p: &RawParams, deltas: &[u64], hz: f64, info: &TestInfo) -> String {
    let q = stats::lat_quotient(hz, RTT_FACTOR, LatUnits::Usec);
    let mut s = String::new();
    if p.unsorted {
        s.push_str(&text::lat_dump(LatUnits::Usec, deltas, q));
    }
    if p.histogram {
        let mut sorted = deltas.to_vec();
        sorted.sort_unstable();
        sorted.truncate(sorted.len().saturating_sub(2));
        s.push_str(&text::lat_dump(LatUnits::Usec, &sorted, q));
    }
    if p.unsorted || p.histogram {
        s.push_str(&text::lat_header(info));
    }
    s
}

/// The loop's error worded for the user.
pub fn error_words(e: &LatError, o: &LatOutcome) -> String {
    match e {
        LatError::Stalled { at } => format!(
            "no frame for {} s while waiting for round trip {at} ({} frames sent): a frame was \
             lost or the peer is not running: check that it runs with the mirrored addresses \
             (its -B is our -E), the same -n, and the port's link",
            STALL.as_secs(),
            o.iters
        ),
        LatError::Completion { wc } => format!(
            "a completion failed with status {} (vendor error {:#x}) after {} frames: the NIC \
             refused a frame (a minimum inline header the device wants, or a steering/permission \
             problem)",
            wc.status.name(),
            wc.vendor_err,
            o.iters
        ),
        LatError::Post { err } => format!("posting failed after {} frames: {err:?}", o.iters),
        LatError::Poll { err } => format!("polling a CQ failed: {err:?}"),
        LatError::PeerExited { .. } | LatError::PeerFinished { .. } => "the peer went away".into(),
        LatError::Interrupted => "interrupted".into(),
    }
}
