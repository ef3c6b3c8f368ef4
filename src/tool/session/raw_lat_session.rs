//! The raw latency tools' session on one QP, whichever post method built
//! its queues: raw-eth-lat's ping-pong (`run::raw_lat`) or
//! raw-eth-burst-lat's bursts (`run::raw_burst_lat`), chosen by the tool;
//! the receives posted first, the stamps sized and cut to what the run
//! did, then the report and the error's words for what ran.

use std::time::Duration;

use super::raw_burst_lat_measure::{self as burst, BurstLatRun};
use super::raw_lat_measure::{self as lat, RawLatRun};
use crate::clock::{self, Clock};
use crate::post::{CompletionQueue, PostError, RecvQueue};
use crate::raw::ctx::Side;
use crate::raw::params::RawParams;
use crate::raw::tools::RawTool;
use crate::run::lat::{LatError, LatOutcome};
use crate::run::raw_burst_lat::BurstLatLoop;
use crate::run::raw_bw::RawPost;
use crate::run::raw_lat::{RawLatLoop, RawQp};
use crate::tool::setup::raw_lat_res::rx_depth;

/// One side of a raw latency tool: its parameters, the clock, the stall
/// allowance.
pub struct Session<'a> {
    pub p: &'a RawParams,
    pub clock: &'a Clock,
    pub stall: Duration,
}

/// What ran.
pub enum Ran {
    PingPong(RawLatRun),
    Bursts(BurstLatRun),
}

impl Session<'_> {
    /// Posts the receives, then runs the tool's loop on `qp`.
    pub fn run<P, R, C, D>(&self, qp: RawQp<'_, P, R, C, D>) -> Result<Ran, PostError>
    where
        P: RawPost,
        R: RecvQueue,
        C: CompletionQueue,
        D: CompletionQueue,
    {
        let p = self.p;
        qp.rx.post_first(qp.rq, rx_depth(p))?;
        Ok(if p.raw.tool == RawTool::BurstLat {
            let cfg = burst::config(p, self.clock, self.stall);
            let mut run = BurstLatRun::new(&cfg);
            let (outcome, counts) = BurstLatLoop {
                cfg,
                qp,
                tposted: &mut run.stamps.posted,
                tcompleted: &mut run.stamps.completed,
                now: clock::now,
            }
            .run();
            Ran::Bursts(run.ended(outcome, counts))
        } else {
            let (cfg, window) = lat::config(p, self.clock, self.stall, clock::now());
            let mut run = RawLatRun::new(&cfg, window);
            let outcome = RawLatLoop {
                cfg,
                qp,
                tposted: &mut run.tposted,
                now: clock::now,
            }
            .run();
            Ran::PingPong(run.ended(outcome))
        })
    }
}

impl Ran {
    pub fn outcome(&self) -> &LatOutcome {
        match self {
            Ran::PingPong(r) => &r.outcome,
            Ran::Bursts(r) => &r.outcome,
        }
    }

    /// perftest's table for what ran.
    pub fn report(&self, p: &RawParams, hz: f64) -> Result<String, String> {
        match self {
            Ran::PingPong(r) => lat::report(p, r, hz),
            Ran::Bursts(r) => burst::report(p, r, hz),
        }
    }

    /// The loop's error `e` worded for the user.
    pub fn error_words(&self, p: &RawParams, e: &LatError) -> String {
        match self {
            Ran::PingPong(r) => lat::error_words(e, &r.outcome),
            Ran::Bursts(r) => burst::error_words(p.raw.side != Some(Side::Server), e, &r.outcome),
        }
    }
}
