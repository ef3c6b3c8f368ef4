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
/// promiscuous rule, then one rule per flow (`--flows`).
pub fn rules(p: &RawParams) -> Vec<FlowRule> {
    let mut v = Vec::new();
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
    let server = r.side == Some(Side::Server);
    let (ether_type, et_mask) = p.ethertype.map_or((0, 0), |t| (t, 0xffff));
    let ip = (r.server_ip.is_some() || r.client_ip.is_some()).then(|| ip_match(p, i, server));
    let l4 = match (r.server_port, r.client_port) {
        (Some(sp), Some(cp)) => {
            let (local, remote) = (sp.wrapping_add(i), cp.wrapping_add(i));
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
            if let Some(t) = p.tos {
                m.tos = exact(t, 0xff);
            }
        }
        return IpMatch::V4(m);
    }
    let mut m = Ipv6Match::default();
    if server {
        m.dst = exact(v6(r.server_ip), [0xff; 16]);
        m.src = exact(v6(r.client_ip), [0xff; 16]);
        if let Some(t) = p.tos {
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
