//! One raw-eth-burst-lat run (`run::raw_burst_lat`) for any post method,
//! either side: the loop's numbers from the raw parameters, the receives
//! posted, the stamps, and the report. The client prints perftest's
//! latency table over its `-n / --reply_every` samples (each a reply's
//! arrival less its frame's post, halved: `print_report_lat` for
//! LAT_BY_BW); the server prints the table's header and closing line
//! only, as raw_ethernet_burst_lat's does.

use std::time::Duration;

use crate::clock::Clock;
use crate::raw::cli::burst_size;
use crate::raw::ctx::Side;
use crate::raw::params::RawParams;
use crate::run::lat::{LatError, LatOutcome};
use crate::run::raw_burst_lat::{BurstCounts, BurstLatConfig};
use crate::tool::session::raw_lat_measure as lat;

/// What one run did, with its stamps.
pub struct BurstLatRun {
    pub outcome: LatOutcome,
    pub counts: BurstCounts,
    pub stamps: Stamps,
}

impl BurstLatRun {
    /// Before the run: the client's stamps, one per reply it is owed.
    pub fn new(cfg: &BurstLatConfig) -> BurstLatRun {
        let n = (if cfg.initiator { cfg.replies() } else { 0 }) as usize;
        BurstLatRun {
            outcome: LatOutcome::default(),
            counts: BurstCounts::default(),
            stamps: Stamps {
                posted: vec![0; n],
                completed: vec![0; n],
            },
        }
    }

    /// After it: the outcome and counts, the stamps cut to the replies
    /// that came.
    pub fn ended(mut self, outcome: LatOutcome, counts: BurstCounts) -> BurstLatRun {
        let taken = counts.received as usize;
        self.stamps.posted.truncate(taken);
        self.stamps.completed.truncate(taken);
        (self.outcome, self.counts) = (outcome, counts);
        self
    }
}

/// The client's stamps: the post of each `--reply_every`-th frame, the
/// arrival of each reply (a sample is the second less the first).
pub struct Stamps {
    pub posted: Vec<u64>,
    pub completed: Vec<u64>,
}

/// The loop's numbers (`-Q` held to `-t`, as perftest).
pub fn config(p: &RawParams, clock: &Clock, stall: Duration) -> BurstLatConfig {
    let tx_depth = p.raw.tx_depth.max(1);
    BurstLatConfig {
        iters: p.raw.iters,
        initiator: p.raw.side != Some(Side::Server),
        burst: burst_size(p).unwrap_or(tx_depth),
        reply_every: p.reply_every.max(1) as u64,
        tx_depth,
        cq_mod: p.raw.cq_mod.min(tx_depth).max(1),
        stall_ticks: clock.cycles_for(stall),
        frame_len: (p.size as u32).saturating_sub(4),
    }
}

/// The client's table over the replies that came (`#iterations`: the
/// frames sent, `-n` in a whole run); the server's header and line.
pub fn report(p: &RawParams, run: &BurstLatRun, hz: f64) -> Result<String, String> {
    if p.raw.side == Some(Side::Server) {
        return Ok(lat::no_row());
    }
    let d = run
        .stamps
        .completed
        .iter()
        .zip(&run.stamps.posted)
        .map(|(c, s)| c.wrapping_sub(*s))
        .collect();
    lat::lat_table(p, d, run.outcome.iters, hz)
}

/// The loop's error worded for the user: a stall names the reply
/// (`client`) or frame (server) awaited, or the replies' completions a
/// server waits for at the end; the rest as raw-eth-lat words them.
pub fn error_words(client: bool, e: &LatError, o: &LatOutcome) -> String {
    let LatError::Stalled { at } = e else {
        return lat::error_words(e, o);
    };
    let what = if client {
        format!(
            "reply {at} (the server skips a reply while -t of its replies are outstanding, as \
             perftest's does: a -t below --burst_size / --reply_every can cost one)"
        )
    } else if o.measured < *at {
        format!("frame {at}")
    } else {
        "its replies to complete (the NIC sent nothing)".to_string()
    };
    format!(
        "nothing for {} s while waiting for {what} ({} frames sent, {} received): a frame was \
         lost or the peer is not running: check that it runs with the mirrored addresses (its \
         -B is our -E), the same -n and --reply_every, and the port's link",
        lat::STALL.as_secs(),
        o.iters,
        o.measured
    )
}
