//! What the raw tools' client-against-server model tests share: the two
//! command lines (MACs, IPs and ports mirrored), their parsing, and
//! `raw::steer`'s rules turned into the model's flow-table rules.

use rdmaperf::model::{FlowRule, IpMatch, L4Match};
use rdmaperf::raw::params::{self, RawParams};
use rdmaperf::raw::{args, tools::RawTool};
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

fn some_if<T: Copy + PartialEq + Default>(m: vflow::Masked<T>) -> Option<T> {
    (m.mask != T::default()).then_some(m.val)
}

/// One of `raw::steer`'s rules as the model's flow table holds it, steering
/// to raw QP `ring`. The model matches no ethertype and whole MACs only.
pub fn model_rule(r: &vflow::FlowRule, ring: usize) -> FlowRule {
    assert_eq!(r.ether_type.mask, 0, "the model matches no ethertype");
    let mut m = match r.kind {
        vflow::FlowKind::Sniffer => return FlowRule::sniffer(ring),
        vflow::FlowKind::AllDefault => return FlowRule::promiscuous(ring),
        vflow::FlowKind::Normal => FlowRule::mac(ring, r.dst_mac.val),
    };
    assert_eq!(r.dst_mac.mask, [0xff; 6]);
    m = match r.ip {
        Some(vflow::IpMatch::V4(ip)) => m.with_ip(IpMatch::V4 {
            src: some_if(ip.src),
            dst: some_if(ip.dst),
        }),
        Some(vflow::IpMatch::V6(ip)) => m.with_ip(IpMatch::V6 {
            src: some_if(ip.src),
            dst: some_if(ip.dst),
        }),
        None => m,
    };
    match r.l4 {
        Some(l4) => m.with_l4(L4Match {
            tcp: l4.tcp,
            src_port: some_if(l4.src_port),
            dst_port: some_if(l4.dst_port),
        }),
        None => m,
    }
}
