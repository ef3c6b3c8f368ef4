//! The model's flow table: the steering rules a raw packet QP installs
//! (`ibv_create_flow`: an ETH spec on the destination MAC, optional
//! IPv4/IPv6 addresses and TCP/UDP ports; `IBV_FLOW_ATTR_ALL_DEFAULT` for
//! `--promiscuous`, `IBV_FLOW_ATTR_SNIFFER` for `--sniffer`), matched
//! against the NIC's reading of a frame (`headers.rs`), the table itself
//! ([`EthRx`]) and the port's receive counters ([`RawRxStats`]).

#[cfg(test)]
use super::headers::v4_udp;
use super::headers::Headers;

/// Which kind of rule (`enum ibv_flow_attr_type`): what the user states.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FlowKind {
    /// `IBV_FLOW_ATTR_NORMAL`: frames matching every spec of the rule.
    Normal,
    /// `IBV_FLOW_ATTR_ALL_DEFAULT`: frames no normal rule took.
    AllDefault,
    /// `IBV_FLOW_ATTR_SNIFFER`: a copy of every frame.
    Sniffer,
}

/// An IP spec: addresses to match (`None`: any).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum IpMatch {
    V4 {
        src: Option<[u8; 4]>,
        dst: Option<[u8; 4]>,
    },
    V6 {
        src: Option<[u8; 16]>,
        dst: Option<[u8; 16]>,
    },
}

/// A TCP or UDP spec: ports to match (`None`: any).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct L4Match {
    pub tcp: bool,
    pub src_port: Option<u16>,
    pub dst_port: Option<u16>,
}

/// One steering rule: frames it takes go to raw QP `ring`'s RQ.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowRule {
    pub ring: usize,
    pub kind: FlowKind,
    pub dst_mac: Option<[u8; 6]>,
    pub ip: Option<IpMatch>,
    pub l4: Option<L4Match>,
}

impl FlowRule {
    /// perftest's rule: an ETH spec on this side's MAC.
    pub fn mac(ring: usize, dst_mac: [u8; 6]) -> Self {
        Self {
            ring,
            kind: FlowKind::Normal,
            dst_mac: Some(dst_mac),
            ip: None,
            l4: None,
        }
    }
    /// `--promiscuous`: every frame no other rule took.
    pub fn promiscuous(ring: usize) -> Self {
        Self {
            kind: FlowKind::AllDefault,
            dst_mac: None,
            ..Self::mac(ring, [0; 6])
        }
    }
    /// `--sniffer`: a copy of every frame.
    pub fn sniffer(ring: usize) -> Self {
        Self {
            kind: FlowKind::Sniffer,
            ..Self::promiscuous(ring)
        }
    }
    /// With an IP spec.
    pub fn with_ip(self, ip: IpMatch) -> Self {
        Self {
            ip: Some(ip),
            ..self
        }
    }
    /// With a TCP/UDP spec.
    pub fn with_l4(self, l4: L4Match) -> Self {
        Self {
            l4: Some(l4),
            ..self
        }
    }

    /// Whether a normal rule's specs all match `h`.
    pub(crate) fn matches(&self, h: &Headers) -> bool {
        if self.dst_mac.is_some_and(|m| m != h.dst_mac) {
            return false;
        }
        let ip_ok = match (self.ip, &h.ip) {
            (None, _) => true,
            (Some(IpMatch::V4 { src, dst }), Some(ip)) if !ip.v6 => {
                src.map_or(true, |a| a[..] == ip.src[..4])
                    && dst.map_or(true, |a| a[..] == ip.dst[..4])
            }
            (Some(IpMatch::V6 { src, dst }), Some(ip)) if ip.v6 => {
                src.map_or(true, |a| a == ip.src) && dst.map_or(true, |a| a == ip.dst)
            }
            _ => false,
        };
        let l4_ok = match (self.l4, &h.l4) {
            (None, _) => true,
            (Some(m), Some(l4)) => {
                m.tcp == l4.tcp
                    && m.src_port.map_or(true, |p| p == l4.src_port)
                    && m.dst_port.map_or(true, |p| p == l4.dst_port)
            }
            _ => false,
        };
        ip_ok && l4_ok
    }
}

/// What the port's receive side has done, since the model was made.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RawRxStats {
    /// Frames offered (`Model::deliver`).
    pub frames: u64,
    /// Receives completed successfully (a sniffer's copy counts too).
    pub delivered: u64,
    /// Frames no rule took: dropped.
    pub no_match: u64,
    /// Per raw QP: frames its rule took while no receive was posted
    /// (dropped: the RQ ran dry).
    pub out_of_buffer: Vec<u64>,
    /// Receives completed with a local length error (the frame was longer
    /// than the WQE's buffers).
    pub too_long: u64,
    /// Receives completed with another error (a bad lkey).
    pub errors: u64,
    /// CQEs not written: the CQ was full (the model's overrun).
    pub cq_full: u64,
}

/// The port's flow table and counters.
#[derive(Default, Debug)]
pub(crate) struct EthRx {
    pub(crate) rules: Vec<FlowRule>,
    pub(crate) stats: RawRxStats,
    /// RQs handed out by `Model::raw_rq` (each once).
    pub(crate) rq_taken: Vec<usize>,
}

impl EthRx {
    /// The raw QPs (receive rings) frame `h` goes to, in order.
    pub(crate) fn targets(&self, h: &Headers) -> Vec<usize> {
        let mut v: Vec<usize> = Vec::new();
        let mut push = |r: usize| {
            if !v.contains(&r) {
                v.push(r);
            }
        };
        for r in self.rules.iter().filter(|r| r.kind == FlowKind::Sniffer) {
            push(r.ring);
        }
        let normal = self
            .rules
            .iter()
            .find(|r| r.kind == FlowKind::Normal && r.matches(h));
        let chosen = normal.or_else(|| self.rules.iter().find(|r| r.kind == FlowKind::AllDefault));
        // mlx5 joins rules of the same kind and specs into one flow-table
        // entry with a destination per QP (fs_core appends the
        // destination; mlx5_ib asks no FLOW_ACT_NO_APPEND), and the entry
        // sends each destination a copy: perftest's server attaches the
        // same rules to each of its `-q` QPs.
        if let Some(c) = chosen {
            for r in self.rules.iter().filter(|r| r.same_entry(c)) {
                push(r.ring);
            }
        }
        v
    }
}

impl FlowRule {
    /// Whether `self` and `o` fall in one flow-table entry: the same kind
    /// and specs, whatever the QP.
    fn same_entry(&self, o: &FlowRule) -> bool {
        FlowRule {
            ring: o.ring,
            ..*self
        } == *o
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_match_their_specs_only() {
        let h = Headers::parse(&v4_udp());
        let mac = [2, 0, 0, 0, 0, 1];
        assert!(FlowRule::mac(0, mac).matches(&h));
        assert!(!FlowRule::mac(0, [2, 0, 0, 0, 0, 9]).matches(&h));
        let v4 = |dst| IpMatch::V4 { src: None, dst };
        assert!(FlowRule::mac(0, mac)
            .with_ip(v4(Some([192, 168, 0, 199])))
            .matches(&h));
        assert!(!FlowRule::mac(0, mac)
            .with_ip(v4(Some([192, 168, 0, 1])))
            .matches(&h));
        let v6 = IpMatch::V6 {
            src: None,
            dst: None,
        };
        assert!(!FlowRule::mac(0, mac).with_ip(v6).matches(&h));
        let udp = |dst_port| L4Match {
            tcp: false,
            src_port: Some(12345),
            dst_port,
        };
        assert!(FlowRule::mac(0, mac).with_l4(udp(Some(53))).matches(&h));
        assert!(!FlowRule::mac(0, mac).with_l4(udp(Some(54))).matches(&h));
        let tcp = L4Match {
            tcp: true,
            ..udp(None)
        };
        assert!(!FlowRule::mac(0, mac).with_l4(tcp).matches(&h));
    }

    #[test]
    fn the_same_rule_on_several_qps_copies_the_frame_to_each() {
        let h = Headers::parse(&v4_udp());
        let mac = [2, 0, 0, 0, 0, 1];
        let table = |rules: Vec<FlowRule>| EthRx {
            rules,
            ..EthRx::default()
        };
        let same = table((0..3).map(|q| FlowRule::mac(q, mac)).collect());
        assert_eq!(same.targets(&h), vec![0, 1, 2]);
        // A narrower rule matching too is another entry: the first wins.
        let v4 = IpMatch::V4 {
            src: None,
            dst: None,
        };
        let other = table(vec![
            FlowRule::mac(0, mac),
            FlowRule::mac(1, mac).with_ip(v4),
        ]);
        assert_eq!(other.targets(&h), vec![0]);
        let leftovers = table(vec![FlowRule::promiscuous(2), FlowRule::promiscuous(3)]);
        assert_eq!(leftovers.targets(&h), vec![2, 3]);
    }
}
