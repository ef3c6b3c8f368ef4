//! perftest's rules for the raw tools, in the order perftest checks them:
//! the parser's own (`-q`, `-b`), `set_raw_eth_parameters` (old and new
//! address names), then `force_dependecies`' raw Ethernet block and
//! `flow_rules_force_dependecies`. The first refusal is the one printed.
//! (`-a`, `-R`, `-x`, `--mmap`, `--pin_cores`, `--numa_node` and `-G` are
//! refused by the flag table, `raw::args`.)

use super::ctx::{Raw, Side};
use super::tools::Test;

/// One rule: a short name, the perftest rule it mirrors, and the check.
pub struct RawRule {
    pub name: &'static str,
    pub mirrors: &'static str,
    pub check: fn(&Raw) -> Result<(), String>,
}

fn refuse(bad: bool, msg: &str) -> Result<(), String> {
    if bad {
        Err(msg.to_string())
    } else {
        Ok(())
    }
}

/// `-v` turns duplex on before perftest's later raw rules read it.
fn duplex(r: &Raw) -> bool {
    r.duplex || r.mac_fwd
}

fn port_given(r: &Raw) -> bool {
    r.server_port.is_some()
}

pub const RULES: &[RawRule] = &[
    RawRule {
        name: "qps_bw_only",
        mirrors: "parser: 'Multiple QPs only available on bw tests'",
        check: |r| refuse(r.tool.test() != Test::Bw && r.qps > 1, "-q: Multiple QPs only available on bw tests: drop -q, or use raw-eth-bw"),
    },
    RawRule {
        name: "bidir_lat",
        mirrors: "parser: 'Bidirectional is only available in BW test'",
        check: |r| refuse(r.tool.test() == Test::Lat && r.duplex, "-b: Bidirectional is only available in BW test: drop -b (raw-eth-lat is a ping-pong already)"),
    },
    RawRule {
        name: "old_new_names",
        mirrors: "set_raw_eth_parameters",
        check: |r| refuse(r.old_names && r.new_names, "Mix of source with local|remote and dest with local|remote is not supported: use either -B/-E/-J/-j/-K/-k or --local_mac/--remote_mac, --local_ip/--remote_ip, --local_port/--remote_port"),
    },
    RawRule {
        name: "side",
        mirrors: "force_dependecies: 'you must choose test side --client or --server'",
        check: |r| refuse(r.side.is_none(), "you must choose test side --client or --server (-P or -Z): raw Ethernet tools have no server name to tell the sides apart"),
    },
    RawRule {
        name: "source_mac",
        mirrors: "force_dependecies: 'you must enter source mac'",
        check: |r| refuse(r.src_mac.is_none(), "you must enter source mac by this format -B XX:XX:XX:XX:XX:XX (this port's MAC; --local_mac with the new names)"),
    },
    RawRule {
        name: "dest_mac",
        mirrors: "force_dependecies: 'you must enter dest mac' (latency, or a client without --raw_mcast)",
        check: |r| {
            let needs = r.tool.test() == Test::Lat
                || (r.side == Some(Side::Client) && !r.raw_mcast);
            refuse(needs && r.dst_mac.is_none(), "you must enter dest mac by this format -E XX:XX:XX:XX:XX:XX (the peer port's MAC; --remote_mac with the new names)")
        },
    },
    RawRule {
        name: "port_pair",
        mirrors: "force_dependecies: 'you must enter server&client port'",
        check: |r| refuse(r.server_port.is_some() != r.client_port.is_some(), "if you would like to send UDP header, you must enter both ports: -K (destination) and -k (source), or --local_port and --remote_port"),
    },
    RawRule {
        name: "port_needs_ip",
        mirrors: "force_dependecies: 'Please provide source_ip and/or dest_ip when using UDP'",
        check: |r| refuse(port_given(r) && (r.server_ip.is_none() || r.client_ip.is_none()), "Please provide source_ip and dest_ip when using UDP: add -J (destination IP) and -j (source IP), or --local_ip and --remote_ip"),
    },
    RawRule {
        name: "tcp_needs_ports",
        mirrors: "force_dependecies: 'Please provide UDP information (IP & UDP Port src/dest) in order to use TCP'",
        check: |r| refuse(r.tcp && !port_given(r), "--tcp: Please provide UDP information (IP & UDP Port src/dest) in order to use TCP: add -J/-j and -K/-k"),
    },
    RawRule {
        name: "mcast_unidir",
        mirrors: "force_dependecies: 'Multicast feature works on unidirectional traffic only'",
        check: |r| refuse(r.raw_mcast && duplex(r), "--raw_mcast: Multicast feature works on unidirectional traffic only: drop -b/-v"),
    },
    RawRule {
        name: "flows_need_l4",
        mirrors: "flow_rules_force_dependecies: 'Flows feature works with UDP/TCP packets only for now'",
        check: |r| refuse(r.flows != 1 && !port_given(r), "--flows: Flows feature works with UDP/TCP packets only for now: add -J/-j and -K/-k"),
    },
    RawRule {
        name: "flows_full_cycle",
        mirrors: "flow_rules_force_dependecies: 'Current iteration number will not complete full cycle on all flows'",
        check: |r| {
            let cycle = u64::from(r.flows) * u64::from(r.flows_burst);
            if r.flows != 1 && r.duration.is_none() && r.iters / cycle < 1 {
                return Err(format!("-n {}: Current iteration number will not complete full cycle on all flows: set -n to a multiple of {cycle} (--flows × --flows_burst)", r.iters));
            }
            Ok(())
        },
    },
    RawRule {
        name: "flows_fs_rate",
        mirrors: "flow_rules_force_dependecies: 'FS rate test not requiring flows parameter'",
        check: |r| refuse(r.flows != 1 && r.tool.test() == Test::FsRate, "--flows: FS rate test not requiring flows parameter: drop --flows"),
    },
    RawRule {
        name: "flows_unidir",
        mirrors: "flow_rules_force_dependecies: 'Flows is currently designed to work with unidir tests only'",
        check: |r| refuse(r.flows != 1 && duplex(r), "--flows: Flows is currently designed to work with unidir tests only: drop -b/-v"),
    },
    RawRule {
        name: "flows_burst_needs_flows",
        mirrors: "flow_rules_force_dependecies: 'Flows burst is designed to work with more then single flow'",
        check: |r| refuse(r.flows == 1 && r.flows_burst > 1, "--flows_burst: Flows burst is designed to work with more then single flow: add --flows N (N > 1)"),
    },
    RawRule {
        name: "lat_by_bw_iterations",
        mirrors: "force_dependecies: 'Latency under load test is currently support iteration mode only'",
        check: |r| refuse(r.tool.test() == Test::LatByBw && r.duration.is_some(), "-D: Latency under load test is currently support iteration mode only: drop -D and set the frames with -n"),
    },
    RawRule {
        name: "lat_by_bw_unidir",
        mirrors: "force_dependecies: 'Bi-Dir is not supported in LAT under load test'",
        check: |r| refuse(r.tool.test() == Test::LatByBw && duplex(r), "-b: Bi-Dir is not supported in LAT under load test: drop -b (and -v, which turns it on)"),
    },
];

/// The first rule `r` breaks, in perftest's order.
pub fn check(r: &Raw) -> Result<(), String> {
    RULES.iter().try_for_each(|rule| (rule.check)(r))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_every_rule_mirrors_something() {
        for (i, a) in RULES.iter().enumerate() {
            assert!(!a.mirrors.is_empty(), "{}", a.name);
            assert!(
                RULES[i + 1..].iter().all(|b| b.name != a.name),
                "{}",
                a.name
            );
        }
    }
}
