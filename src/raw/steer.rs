//! The steering rules a raw tool attaches to its QP, built from the
//! parameters as perftest builds them (raw_ethernet_resources.c:
//! `set_up_flow_rules`, called per flow by `send_set_up_connection`, and
//! raw_ethernet_send_bw.c's `--sniffer`/`--promiscuous` rules). Pure: the
//! verbs side (`verbs::flow`) encodes and attaches them.
//!
//! perftest's choices kept here: the ETH spec matches the destination MAC
//! `-B` (this side's MAC) on both sides; the IP spec is always there when
//! an address was given, but its addresses, `-T` and `--flow_label` are
//! filled on the server only; flow `i`'s ports are the server's and the
//! client's port plus `i`, matched as destination and source on a server,
//! as source and destination on a client.

use super::ctx::Side;
use super::params::RawParams;
use super::values::Addr;
use crate::verbs::flow::{FlowKind, FlowRule, IpMatch, Ipv4Match, Ipv6Match, L4Match, Masked};

fn exact<T: Copy>(val: T, mask: T) -> Masked<T> {
    Masked { val, mask }
}

/// Every rule, in the order perftest creates them: the sniffer rule, the
/// promiscuous rule, then one rule per flow (`--flows`). None with
/// `--raw_mcast`: the QP's group membership steers then (perftest creates
/// rules only "for servers/duplex clients, that not test raw_mcast").
pub fn rules(p: &RawParams) -> Vec<FlowRule> {
    let mut v = Vec::new();
    if p.raw.raw_mcast {
        return v;
    }
    if p.sniffer {
        v.push(FlowRule::bare(FlowKind::Sniffer, p.ib_port));
    }
    if p.promiscuous {
        v.push(FlowRule::bare(FlowKind::AllDefault, p.ib_port));
    }
    v.extend((0..p.raw.flows).map(|i| flow_rule(p, i)));
    v
}

/// Flow `i`'s rule (`set_up_flow_rules` with perftest's local and remote
/// ports `server_port + i`, `client_port + i`).
pub fn flow_rule(p: &RawParams, i: u16) -> FlowRule {
    let r = &p.raw;
    let ports = r.server_port.unwrap_or(0).wrapping_add(i);
    rule_with_ports(p, i, (ports, r.client_port.unwrap_or(0).wrapping_add(i)))
}

/// raw-eth-fs-rate's rules (`set_up_fs_rules`), `per_qp` of them: rule 0
/// with ports 0 and 0 (perftest's first call passes its zeroed locals),
/// then rule `i` with the local port plus `i - 1` up to port 65535, after
/// that the remote port counting on. The base ports are `--local_port` and
/// `--remote_port` (0 under the old names, as perftest reads them).
pub fn fs_rules(p: &RawParams, per_qp: u64) -> Vec<FlowRule> {
    let r = &p.raw;
    let server = r.side == Some(Side::Server);
    let (sp, cp) = (r.server_port.unwrap_or(0), r.client_port.unwrap_or(0));
    let (base_local, base_remote) = match (r.new_names, server) {
        (false, _) => (0u32, 0u32),
        (true, true) => (sp as u32, cp as u32),
        (true, false) => (cp as u32, sp as u32),
    };
    let allowed = MAX_FS_PORT - sp as u64;
    let (mut local, mut remote, mut last_local) = (0u32, 0u32, 0u64);
    let mut v = Vec::with_capacity(per_qp as usize);
    for i in 0..per_qp {
        v.push(rule_with_ports(p, 0, (local as u16, remote as u16)));
        if i <= allowed {
            (local, remote, last_local) = (base_local + i as u32, base_remote, i);
        } else {
            (local, remote) = (base_local, base_remote + (i - last_local) as u32);
        }
    }
    v
}

/// perftest's `MAX_FS_PORT`.
pub const MAX_FS_PORT: u64 = 65536;

/// How many rules raw-eth-fs-rate builds per QP: `-n`, or in duration mode
/// `2 * MAX_FS_PORT - (server port + client port)` (`run_iter_fs`).
pub fn fs_rule_count(p: &RawParams) -> u64 {
    let r = &p.raw;
    match r.duration {
        None => r.iters,
        Some(_) => {
            2 * MAX_FS_PORT
                - (r.server_port.unwrap_or(0) as u64 + r.client_port.unwrap_or(0) as u64)
        }
    }
}

/// A normal rule on the receiving MAC with the L4 ports (`local`,
/// `remote`) as perftest's `set_up_flow_rules` takes them; `i` picks the
/// flow label.
fn rule_with_ports(p: &RawParams, i: u16, (local, remote): (u16, u16)) -> FlowRule {
    let r = &p.raw;
    let server = r.side == Some(Side::Server);
    let (ether_type, et_mask) = p.header.ethertype.map_or((0, 0), |t| (t, 0xffff));
    let ip = (r.server_ip.is_some() || r.client_ip.is_some()).then(|| ip_match(p, i, server));
    let l4 = match (r.server_port, r.client_port) {
        (Some(_), Some(_)) => {
            let (src, dst) = if server {
                (remote, local)
            } else {
                (local, remote)
            };
            Some(L4Match {
                tcp: r.tcp,
                src_port: exact(src, 0xffff),
                dst_port: exact(dst, 0xffff),
            })
        }
        _ => None,
    };
    FlowRule {
        kind: FlowKind::Normal,
        port: p.ib_port,
        dst_mac: exact(r.src_mac.unwrap_or_default(), [0xff; 6]),
        ether_type: exact(ether_type, et_mask),
        ip,
        l4,
    }
}

/// The IP spec: empty on a client (perftest's `fill_ip_common` fills it on
/// the server only); on a server, destination `-J`, source `-j`, with `-T`
/// and the `i`-th `--flow_label` (cycling) for IPv6.
fn ip_match(p: &RawParams, i: u16, server: bool) -> IpMatch {
    let r = &p.raw;
    if !r.raw_ipv6 {
        let mut m = Ipv4Match::default();
        if server {
            m.dst = exact(v4(r.server_ip), [0xff; 4]);
            m.src = exact(v4(r.client_ip), [0xff; 4]);
            if let Some(t) = p.header.tos {
                m.tos = exact(t, 0xff);
            }
        }
        return IpMatch::V4(m);
    }
    let mut m = Ipv6Match::default();
    if server {
        m.dst = exact(v6(r.server_ip), [0xff; 16]);
        m.src = exact(v6(r.client_ip), [0xff; 16]);
        if let Some(t) = p.header.tos {
            m.traffic_class = exact(t, 0xff);
        }
        if !p.flow_labels.is_empty() {
            let l = p.flow_labels[i as usize % p.flow_labels.len()];
            m.flow_label = exact(l, 0xfffff);
        }
    }
    IpMatch::V6(m)
}

fn v4(a: Option<Addr>) -> [u8; 4] {
    match a {
        Some(Addr::V4(b)) => b,
        _ => [0; 4],
    }
}

fn v6(a: Option<Addr>) -> [u8; 16] {
    match a {
        Some(Addr::V6(b)) => b,
        _ => [0; 16],
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::raw::{args, params, tools::RawTool};
    use crate::verbs::flow::encode;

    const M: &str = "-B 02:00:00:00:00:01 -E 02:00:00:00:00:02";

    fn p(cmd: &str) -> RawParams {
        let argv: Vec<String> = cmd.split_whitespace().map(String::from).collect();
        args::parse(&argv)
            .and_then(|a| params::resolve(RawTool::Bw, &a))
            .unwrap_or_else(|e| panic!("{cmd}: {e}"))
    }

    #[test]
    fn l2_only_matches_the_receiving_mac() {
        let r = rules(&p(&format!("--server {M}")));
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].kind, FlowKind::Normal);
        assert_eq!(r[0].dst_mac.val, [0x02, 0, 0, 0, 0, 1]);
        assert_eq!(r[0].dst_mac.mask, [0xff; 6]);
        assert_eq!((r[0].ether_type.mask, r[0].ip, r[0].l4), (0, None, None));
        assert_eq!(encode(&r[0]).len(), 20 + 40);
    }

    #[test]
    fn server_udp4_flows_match_each_flows_ports() {
        let cmd = format!("--server {M} -j 10.0.0.1 -J 10.0.0.2 -k 5000 -K 6000 --flows 3 -T 16");
        let r = rules(&p(&cmd));
        assert_eq!(r.len(), 3);
        for (i, f) in r.iter().enumerate() {
            let IpMatch::V4(ip) = f.ip.unwrap() else {
                panic!("v4")
            };
            assert_eq!((ip.dst.val, ip.src.val), ([10, 0, 0, 2], [10, 0, 0, 1]));
            assert_eq!((ip.tos.val, ip.tos.mask), (16, 0xff));
            let l4 = f.l4.unwrap();
            assert!(!l4.tcp);
            assert_eq!(l4.dst_port.val, 6000 + i as u16, "server's port + flow");
            assert_eq!(l4.src_port.val, 5000 + i as u16, "client's port + flow");
            assert_eq!(encode(f).len(), 20 + 40 + 32 + 16);
        }
    }

    #[test]
    fn client_ip_spec_is_left_empty_and_ports_swap() {
        let cmd = format!("--client {M} -j 10.0.0.1 -J 10.0.0.2 -k 5000 -K 6000 --tcp");
        let r = rules(&p(&cmd));
        assert_eq!(r[0].ip, Some(IpMatch::V4(Ipv4Match::default())));
        let l4 = r[0].l4.unwrap();
        assert!(l4.tcp);
        assert_eq!((l4.src_port.val, l4.dst_port.val), (6000, 5000));
    }

    #[test]
    fn ipv6_flow_labels_cycle_per_rule() {
        let cmd =
            format!("--server {M} --raw_ipv6 -j 1::1 -J 1::2 -k 1 -K 2 --flows 3 --flow_label 7,9");
        let r = rules(&p(&cmd));
        let labels: Vec<u32> = r
            .iter()
            .map(|f| match f.ip {
                Some(IpMatch::V6(m)) => m.flow_label.val,
                _ => panic!("v6"),
            })
            .collect();
        assert_eq!(labels, [7, 9, 7]);
        assert_eq!(encode(&r[0]).len(), 20 + 40 + 88 + 16);
    }

    #[test]
    fn fs_rate_rules_walk_the_ports_as_perftest() {
        let fs = |cmd: &str| {
            let argv: Vec<String> = cmd.split_whitespace().map(String::from).collect();
            args::parse(&argv)
                .and_then(|a| params::resolve(RawTool::FsRate, &a))
                .unwrap_or_else(|e| panic!("{cmd}: {e}"))
        };
        let p = fs(
            "--server --local_mac 02:00:00:00:00:01 --local_ip 10.0.0.2 \
             --remote_ip 10.0.0.1 --local_port 65534 --remote_port 100 -n 5",
        );
        assert_eq!(fs_rule_count(&p), 5);
        let r = fs_rules(&p, 5);
        let ports: Vec<(u16, u16)> = r
            .iter()
            .map(|f| {
                let l4 = f.l4.unwrap();
                (l4.dst_port.val, l4.src_port.val)
            })
            .collect();
        // Rule 0: perftest's zeroed locals; then local 65534 + i while
        // i <= 65536 - 65534, then the remote port counts on.
        assert_eq!(
            ports,
            [(0, 0), (65534, 100), (65535, 100), (0, 100), (65534, 101)]
        );
        let d = fs(
            "--server --local_mac 02:00:00:00:00:01 --local_ip 10.0.0.2 \
             --remote_ip 10.0.0.1 --local_port 1000 --remote_port 2000 -D 2",
        );
        assert_eq!(fs_rule_count(&d), 2 * 65536 - 3000);
        let old = fs(&format!(
            "--server {M} -j 10.0.0.1 -J 10.0.0.2 -k 5 -K 6 -n 5"
        ));
        let l4: Vec<u16> = fs_rules(&old, 4)
            .iter()
            .map(|f| f.l4.unwrap().dst_port.val)
            .collect();
        assert_eq!(l4, [0, 0, 1, 2], "old names: perftest's local_port is 0");
    }

    #[test]
    fn ethertype_promiscuous_and_sniffer() {
        let r = rules(&p(&format!(
            "--server {M} -Y 0x88b5 --promiscuous --sniffer"
        )));
        let kinds: Vec<FlowKind> = r.iter().map(|f| f.kind).collect();
        assert_eq!(
            kinds,
            [FlowKind::Sniffer, FlowKind::AllDefault, FlowKind::Normal]
        );
        assert_eq!(
            (r[2].ether_type.val, r[2].ether_type.mask),
            (0x88b5, 0xffff)
        );
        assert_eq!(encode(&r[0]).len(), 20);
    }
}
