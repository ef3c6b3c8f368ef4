//! What the raw tools' client-against-server model tests share: the two
//! command lines (MACs, IPs and ports mirrored), their parsing, and
//! `raw::steer`'s rules turned into the model's flow-table rules.

use rdmaperf::model::FlowRule;
use rdmaperf::raw::params::{self, RawParams};
use rdmaperf::raw::{args, tools::RawTool};
use rdmaperf::selfcheck::model_flow;
use rdmaperf::verbs::flow as vflow;

pub const CLIENT: &str = "--client -B 02:00:00:00:00:01 -E 02:00:00:00:00:02 -j 10.0.0.1 \
                          -J 10.0.0.2 -k 5000 -K 6000";
pub const SERVER: &str = "--server -B 02:00:00:00:00:02 -E 02:00:00:00:00:01 -j 10.0.0.1 \
                          -J 10.0.0.2 -k 5000 -K 6000";

/// `cmd` parsed and resolved as `tool`'s parameters; panics naming the command line.
pub fn params(tool: RawTool, cmd: &str) -> RawParams {
    let argv: Vec<String> = cmd.split_whitespace().map(String::from).collect();
    args::parse(&argv)
        .and_then(|a| params::resolve(tool, &a))
        .unwrap_or_else(|e| panic!("{cmd}: {e}"))
}

/// One of `raw::steer`'s rules as the model's flow table holds it, steering
/// to raw QP `ring` (`selfcheck::model_flow`); panics on a rule the model
/// cannot hold (an ethertype match, a partial MAC).
pub fn model_rule(r: &vflow::FlowRule, ring: usize) -> FlowRule {
    model_flow::model_rule(r, ring).unwrap_or_else(|e| panic!("{e}"))
}
