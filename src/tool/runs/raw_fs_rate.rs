//! `rdmaperf raw-eth-fs-rate`: perftest's raw_ethernet_fs_rate. The device,
//! port and raw packet QPs as raw-eth-bw's (`setup::raw_res`), the rules of
//! `raw::steer::fs_rules` encoded before the clock starts, the creations
//! timed by `run::fs_rate`, every flow destroyed after the timing, and
//! perftest's report (`report::fs_rate`).

use crate::clock::{self, Clock};
use crate::raw::params::RawParams;
use crate::raw::steer;
use crate::report::fs_rate;
use crate::run::fs_rate::{run_fs, FlowMaker};
use crate::tool::common::fail::Fail;
use crate::tool::session::bw_measure::window;
use crate::tool::setup::raw_method::RawMethod;
use crate::tool::setup::raw_res::{RawPort, RawQp, RawRes};
use crate::verbs::flow::{encode, EncodedRule, Flow};
use crate::verbs::VerbsError;

/// The QPs and each one's encoded rules.
struct Maker<'a> {
    qps: &'a [RawQp],
    rules: Vec<EncodedRule>,
}

impl FlowMaker for Maker<'_> {
    type Flow = Flow;
    type Error = VerbsError;
    fn create(&mut self, qp: usize, rule: usize) -> Result<Flow, VerbsError> {
        Flow::create_encoded(&self.qps[qp].qp, &mut self.rules[rule])
    }
}

/// Runs the flow-rule rate test; the report is printed on stdout.
pub fn run(p: &RawParams) -> Result<(), Fail> {
    let port = RawPort::open(p)?;
    let res = RawRes::create(&port, p, RawMethod::PostSend)?;
    let per_qp = steer::fs_rule_count(p) as usize;
    let total = per_qp * res.qps.len();
    let mut m = Maker {
        qps: &res.qps,
        rules: steer::fs_rules(p, per_qp as u64)
            .iter()
            .map(encode)
            .collect(),
    };
    let clock = Clock::calibrate();
    let iterations = p.raw.duration.is_none();
    let stamps = if iterations { total } else { 0 };
    let (mut tp, mut tc) = (vec![0u64; stamps], vec![0u64; stamps]);
    let mut flows = Vec::with_capacity(total);
    let deadlines = p
        .raw
        .duration
        .map(|secs| window(secs, secs / 4, &clock, clock::now()));
    let o = run_fs(
        &mut m,
        res.qps.len(),
        per_qp,
        deadlines,
        clock::now,
        &mut tp,
        &mut tc,
        &mut flows,
    );
    let made = flows.len();
    drop(flows);
    if let Some(e) = o.error {
        return Err(Fail::new(format!(
            "rdmaperf raw-eth-fs-rate: rule {} of {total}: {e}",
            made + 1
        )));
    }
    if o.interrupted {
        return Ok(());
    }
    let report = if iterations {
        let mut deltas: Vec<u64> = tp.iter().zip(&tc).map(|(p, c)| c - p).collect();
        fs_rate::iterations(p.raw.iters, &mut deltas, clock.mhz())
    } else {
        fs_rate::duration(o.measured, o.t_end - o.t_start, clock.mhz())
    };
    print!("{report}");
    Ok(())
}
