//! `--explain` on a tool: the port's counters and the device's facts read
//! before the tool starts and after it ends (never inside the measured
//! loop; the bracket also covers the set-up's few packets, which no rule's
//! threshold notices), the deltas set against the rules, the number set
//! against the link and PCIe ceilings, and a short verdict printed after
//! the result, perftest-style. Between two rdmaperf sides with `--explain`
//! each side's explanation crosses the control channel before the close
//! (`ctrl::after_run`) and the block shows the peer's findings too; against
//! stock perftest it says the facts are local only.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::time::{Duration, Instant};

use super::ceiling::{payload_fraction, pcie_gbps, roce_mtu, IB_OVERHEAD, ROCE_V2_OVERHEAD};
use super::counters::{deltas, Delta, Snapshot};
use super::direction;
use super::doctor::{fact_checks, HostFacts};
use super::rules::{evaluate, Check, Finding};
use super::sysfs::{DeviceFacts, SysRoot};

/// How long the packet counters must stand still to count as settled, and
/// how often they are read meanwhile.
const SETTLED: Duration = Duration::from_millis(150);
const SETTLE_POLL: Duration = Duration::from_millis(50);

/// The "before" half.
pub struct Bracket {
    root: SysRoot,
    facts: DeviceFacts,
    port: u32,
    /// The port's netdev (RoCE), whose driver statistics join the counters.
    netdev: Option<String>,
    before: Snapshot,
    /// Why the netdev gave no statistics, if it did not.
    no_eth: Option<String>,
    /// The deltas sent to the peer ([`Bracket::settled`]).
    at_exchange: RefCell<Option<BTreeMap<String, Delta>>>,
}

/// What `--explain` found.
#[derive(Debug)]
pub struct Explanation {
    pub device: String,
    pub port: u32,
    /// Link payload ceiling (Gb/s) and how it was derived.
    pub link: Option<(f64, String)>,
    /// PCIe payload ceiling (Gb/s).
    pub pcie: Option<f64>,
    /// The tool's number (Gb/s), when it has one.
    pub measured: Option<f64>,
    pub findings: Vec<Finding>,
    pub facts: Vec<Check>,
    pub notes: Vec<String>,
    pub deltas: BTreeMap<String, Delta>,
    /// This port's link rate (Gb/s) and netdev MTU, which the peer
    /// compares with its own.
    pub rate_gbps: Option<f64>,
    pub netdev_mtu: Option<u32>,
    /// The peer's side: its explanation (its `to_json`), or why there is
    /// none ([`Explanation::with_peer`]).
    pub peer: PeerFacts,
    /// A software device (rxe, siw): the CPU, not the link, is its ceiling.
    pub software: bool,
    /// The deltas as this side sent them to the peer ([`Bracket::settled`]),
    /// which the peer's are compared with.
    pub at_exchange: Option<BTreeMap<String, Delta>>,
}

/// What a software device's block says instead of the link advice.
pub const SOFTWARE: &str = "a software device (no PCIe function): this host's CPUs run its \
    transport, so the CPU, not the link, caps the number; the link ceiling does not apply, and \
    more QPs (-q) fill a hardware link, not this one: watch its kernel work (softirq, kworker \
    time) with `top` during the run, or measure on a hardware RDMA NIC";

/// What the peer contributed after the run.
#[derive(Clone, Debug, PartialEq)]
pub enum PeerFacts {
    /// The peer's explanation as it sent it (its [`Explanation::to_json`]).
    Received(serde_json::Value),
    /// Why there is none.
    Said(String),
}

impl PeerFacts {
    /// From what the control session's after-run exchange gave (`None`:
    /// the session ended before its close).
    pub fn from_exchange(e: Option<crate::ctrl::after_run::PeerExplain>) -> PeerFacts {
        use crate::ctrl::after_run::PeerExplain;
        match e {
            Some(PeerExplain::Received(b)) => match serde_json::from_slice(&b) {
                Ok(v) => PeerFacts::Received(v),
                Err(e) => PeerFacts::Said(format!("the peer's explanation is unreadable ({e})")),
            },
            Some(PeerExplain::Stock) => {
                PeerFacts::Said("the peer is stock perftest: local facts only".into())
            }
            Some(PeerExplain::NotAsked) => {
                PeerFacts::Said("the peer ran without --explain: local facts only".into())
            }
            Some(PeerExplain::Failed(why)) => {
                PeerFacts::Said(format!("the peer's were not received ({why})"))
            }
            None => PeerFacts::Said("the peer's were not exchanged (the run ended early)".into()),
        }
    }
}

impl Bracket {
    /// Reads the facts and the counters of `dev` (the first device when
    /// `None`) port `port`; `Err` says why there is nothing to read.
    pub fn start(root: SysRoot, dev: Option<&str>, port: u32) -> Result<Bracket, String> {
        let name = match dev {
            Some(d) => d.to_string(),
            None => root
                .devices()
                .into_iter()
                .next()
                .ok_or("no RDMA device in sysfs")?,
        };
        let facts = root.device(&name);
        if !facts.ports.iter().any(|p| p.port == port) {
            return Err(format!("{name} has no port {port} in sysfs"));
        }
        let netdev = facts
            .ports
            .iter()
            .find(|p| p.port == port)
            .and_then(|p| p.netdev.clone());
        let (before, no_eth) = Snapshot::read_port(&root, &name, port, netdev.as_deref());
        Ok(Bracket {
            root,
            facts,
            port,
            netdev,
            before,
            no_eth,
            at_exchange: RefCell::new(None),
        })
    }

    /// The explanation for the peer (after the run, before the close): read
    /// once the port's packet counters stop moving (work still in flight
    /// when the loops end — outstanding reads, retransmits — finishes
    /// first, at most `max`), so that both ends' counts cover the same
    /// packets; kept for the comparison with the peer's.
    pub fn settled(&self, host: &HostFacts, max: Duration) -> Explanation {
        let start = Instant::now();
        let mut last = self.packets();
        let mut quiet = Instant::now();
        while start.elapsed() < max && quiet.elapsed() < SETTLED {
            std::thread::sleep(SETTLE_POLL);
            let now = self.packets();
            if now != last {
                (last, quiet) = (now, Instant::now());
            }
        }
        let e = self.finish(None, host);
        *self.at_exchange.borrow_mut() = Some(e.deltas.clone());
        e
    }

    /// The port's packet counts (rxe's, and the PMA's where the driver has
    /// one: a few files, not the whole snapshot; on mlx5 each PMA read is a
    /// firmware query, hence the poll interval).
    fn packets(&self) -> Vec<Option<String>> {
        let base = format!(
            "sys/class/infiniband/{}/ports/{}",
            self.facts.name, self.port
        );
        [
            "hw_counters/sent_pkts",
            "hw_counters/rcvd_pkts",
            "counters/port_xmit_packets",
            "counters/port_rcv_packets",
        ]
        .iter()
        .map(|f| self.root.read(&format!("{base}/{f}")))
        .collect()
    }

    /// The "after" half: deltas, rules, ceilings.
    pub fn finish(&self, measured_gbps: Option<f64>, host: &HostFacts) -> Explanation {
        let netdev = self.netdev.as_deref();
        let (after, _) = Snapshot::read_port(&self.root, &self.facts.name, self.port, netdev);
        let d = deltas(&self.before, &after);
        let (findings, mut notes) = evaluate(&d);
        if let Some(why) = &self.no_eth {
            notes.push(format!("no netdev statistics: {why}"));
        }
        if self.before.0.is_empty() {
            notes.push("this port shows no counters in sysfs (no hw_counters/, no PMA)".into());
        }
        let port = self.facts.ports.iter().find(|p| p.port == self.port);
        let link = port.and_then(|p| {
            let rate = p.rate_gbps?;
            let (mtu, over, how) = match (p.link_layer.as_str(), p.netdev_mtu) {
                ("Ethernet", Some(m)) => (
                    roce_mtu(m),
                    ROCE_V2_OVERHEAD,
                    format!("RoCE MTU {} (netdev MTU {m})", roce_mtu(m)),
                ),
                ("Ethernet", None) => (
                    1024,
                    ROCE_V2_OVERHEAD,
                    "RoCE MTU assumed 1024 (netdev unknown)".into(),
                ),
                _ => (4096, IB_OVERHEAD, "IB MTU 4096 assumed".into()),
            };
            Some((
                rate * payload_fraction(mtu, over),
                format!("{} Gb/s link, {how}", rate),
            ))
        });
        let pcie = self
            .facts
            .pcie
            .as_ref()
            .and_then(|p| Some(pcie_gbps(p.speed_gts?, p.width?)));
        let facts = fact_checks(&self.root, &self.facts, host);
        Explanation {
            device: self.facts.name.clone(),
            port: self.port,
            link,
            pcie,
            measured: measured_gbps,
            findings,
            facts,
            notes,
            deltas: d,
            rate_gbps: port.and_then(|p| p.rate_gbps),
            netdev_mtu: port.and_then(|p| p.netdev_mtu),
            peer: PeerFacts::Said("the peer's are not exchanged".into()),
            software: self.facts.software,
            at_exchange: self.at_exchange.borrow().clone(),
        }
    }
}

impl Explanation {
    /// Everything the block says and every raw delta, for `--out_json`.
    pub fn to_json(&self) -> serde_json::Value {
        use serde_json::json;
        let deltas: serde_json::Map<String, serde_json::Value> = self
            .deltas
            .iter()
            .map(|(k, d)| {
                let v = match d {
                    Delta::Moved(n) => json!(n),
                    Delta::Vanished => json!("vanished"),
                    Delta::Reset => json!("reset"),
                };
                (k.clone(), v)
            })
            .collect();
        json!({
            "device": self.device,
            "port": self.port,
            "link_ceiling_gbps": self.link.as_ref().map(|l| l.0),
            "link_ceiling_from": self.link.as_ref().map(|l| l.1.clone()),
            "pcie_ceiling_gbps": self.pcie,
            "rate_gbps": self.rate_gbps,
            "netdev_mtu": self.netdev_mtu,
            "measured_gbps": self.measured,
            "findings": self.findings.iter().map(|f| json!({
                "code": f.code, "title": f.title, "evidence": f.evidence, "fix": f.fix,
            })).collect::<Vec<_>>(),
            "facts": self.facts.iter().map(|c| json!({
                "code": c.code, "what": c.what, "fix": c.fix,
            })).collect::<Vec<_>>(),
            "notes": self.notes,
            "software_device": self.software.then_some(SOFTWARE),
            "counter_deltas": deltas,
            "peer": match &self.peer {
                PeerFacts::Received(v) => v.clone(),
                PeerFacts::Said(why) => json!(why),
            },
        })
    }

    /// With the peer's side as the after-run exchange gave it; a peer
    /// whose MTU or link rate differs from ours is a finding here, and so
    /// are answers lost on the way from the responder back to the
    /// requester (`super::direction`: they replace the `timeout` and
    /// `response_loss` findings they explain).
    pub fn with_peer(mut self, peer: PeerFacts) -> Explanation {
        if let PeerFacts::Received(v) = &peer {
            self.findings
                .splice(0..0, mismatches(self.netdev_mtu, self.rate_gbps, v));
            let peer_deltas = direction::peer_deltas(v);
            let me = direction::End {
                name: &self.device,
                // What this side sent the peer, read at the same point as
                // the peer's (after the traffic settled).
                deltas: self.at_exchange.as_ref().unwrap_or(&self.deltas),
            };
            let them = direction::End {
                name: v["device"].as_str().unwrap_or("the peer"),
                deltas: &peer_deltas,
            };
            let (back, explained) = direction::judge(&me, &them);
            self.findings.retain(|f| !explained.contains(&f.code));
            direction::relabel(&me, &them, &mut self.findings);
            let codes: Vec<&str> = self.findings.iter().map(|f| f.code).collect();
            let gaps = direction::gap_findings(&me, &them, &codes);
            self.findings.extend(back);
            self.findings.extend(gaps);
            self.findings.sort_by(|a, b| b.score.total_cmp(&a.score));
        }
        self.peer = peer;
        self
    }

    /// With more findings ranked among the counter findings by score:
    /// after a GPU run, `super::gpu_findings::findings_for(root, gpu_bdf, dev)`'s
    /// (GPU far from the NIC, no GPUDirect path, IOMMU translating).
    pub fn with_findings(mut self, more: Vec<Finding>) -> Explanation {
        self.findings.extend(more);
        self.findings.sort_by(|a, b| b.score.total_cmp(&a.score));
        self
    }

    /// Adds this explanation as `"explain"` to the tool's `--out_json`
    /// file (written by the tool before this runs).
    pub fn add_to_json_file(&self, path: &std::path::Path) -> Result<(), String> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| format!("reading {}: {e}", path.display()))?;
        let mut v: serde_json::Value = serde_json::from_str(&text)
            .map_err(|e| format!("{} is not JSON: {e}", path.display()))?;
        let Some(obj) = v.as_object_mut() else {
            return Err(format!("{} holds no JSON object", path.display()));
        };
        obj.insert("explain".into(), self.to_json());
        let out = serde_json::to_string_pretty(&v).map_err(|e| e.to_string())?;
        std::fs::write(path, out + "\n").map_err(|e| format!("writing {}: {e}", path.display()))
    }

    /// The lowest ceiling that applies.
    pub fn ceiling(&self) -> Option<f64> {
        match (self.link.as_ref().map(|l| l.0), self.pcie) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// What to say when no finding or fact explains the number.
    fn verdict(&self, at_ceiling: bool, qps: u32) -> &'static str {
        if self.software {
            "nothing in the counters or the facts explains it (no loss, timeouts, RNR, \
             congestion); the CPU caps a software device (above), not the link"
        } else if at_ceiling {
            "at the ceiling: nothing to explain"
        } else if qps == 1 {
            "nothing in the counters or the facts explains it (no loss, timeouts, RNR, congestion); \
             one QP may not fill the link: try -q 4, larger -s, and for reads -o"
        } else {
            "nothing in the counters or the facts explains it (no loss, timeouts, RNR, congestion)"
        }
    }

    /// The block printed after the result.
    pub fn text(&self, qps: u32) -> String {
        let mut s = String::new();
        let peer_note = match &self.peer {
            PeerFacts::Received(_) => "the peer's below".to_string(),
            PeerFacts::Said(why) => why.clone(),
        };
        let _ = writeln!(
            s,
            " Explain ({} port {}; this side's counters over the run; {peer_note}):",
            self.device, self.port
        );
        self.ceilings_text(&mut s);
        let at_ceiling = !self.software
            && matches!((self.measured, self.ceiling()), (Some(m), Some(c)) if m >= 0.9 * c);
        let findings = self.findings.iter().map(|f| Row {
            code: f.code,
            head: f.title,
            evidence: Some(f.evidence.as_str()),
            fix: f.fix,
        });
        let facts = self.facts.iter().map(|c| Row {
            code: c.code,
            head: &c.what,
            evidence: None,
            fix: &c.fix,
        });
        if ranked_rows(&mut s, "", "     ", findings.chain(facts)) == 0 {
            let _ = writeln!(s, "  verdict: {}", self.verdict(at_ceiling, qps));
        }
        let moved = self.telling_counters();
        if !moved.is_empty() {
            let _ = writeln!(s, "  counters       {}", moved.join(", "));
        }
        for note in &self.notes {
            let _ = writeln!(s, "  note: {note}");
        }
        if let PeerFacts::Received(v) = &self.peer {
            s.push_str(&peer_text(v));
        }
        s
    }

    /// The link and PCIe ceilings, the software device's line, and the
    /// measured rate against the lower ceiling.
    fn ceilings_text(&self, s: &mut String) {
        if let Some((c, how)) = &self.link {
            let _ = writeln!(s, "  link ceiling   {c:.2} Gb/s of payload ({how})");
        }
        let _ = match self.pcie {
            Some(c) => writeln!(s, "  PCIe ceiling   {c:.2} Gb/s"),
            None => writeln!(
                s,
                "  PCIe ceiling   none (no PCIe function: software device)"
            ),
        };
        if self.software {
            let _ = writeln!(s, "  software       {}: {SOFTWARE}", self.device);
        }
        if let (Some(m), Some(c)) = (self.measured, self.ceiling()) {
            let _ = writeln!(
                s,
                "  measured       {m:.2} Gb/s = {:.0} % of the lower ceiling",
                100.0 * m / c
            );
        }
    }

    /// The counters that moved, as "name +delta". The netdev's traffic
    /// counters move in every run; only its pause, discard and error
    /// counters say something here (JSON has all).
    fn telling_counters(&self) -> Vec<String> {
        let telling = |k: &str| {
            !k.starts_with("eth.")
                || ["pause", "discard", "err", "drop"]
                    .iter()
                    .any(|w| k.contains(w) && !k.ends_with("_duration"))
        };
        self.deltas
            .iter()
            .filter(|(k, _)| telling(k))
            .filter_map(|(k, d)| d.value().filter(|v| *v > 0).map(|v| format!("{k} +{v}")))
            .collect()
    }
}

/// One ranked row of a verdict: a finding (with its evidence) or a fact.
struct Row<'a> {
    code: &'a str,
    head: &'a str,
    evidence: Option<&'a str>,
    fix: &'a str,
}

/// Writes `rows` numbered from 1 (`  {tag}{n}. code: head`, then the
/// evidence and fix lines indented by `pad`); returns how many there were.
fn ranked_rows<'a>(
    s: &mut String,
    tag: &str,
    pad: &str,
    rows: impl Iterator<Item = Row<'a>>,
) -> usize {
    let mut n = 0;
    for r in rows {
        n += 1;
        let _ = writeln!(s, "  {tag}{n}. {}: {}", r.code, r.head);
        if let Some(e) = r.evidence {
            let _ = writeln!(s, "{pad}evidence: {e}");
        }
        let _ = writeln!(s, "{pad}fix: {}", r.fix);
    }
    n
}

/// What differs between the two ends (ranked first: either caps the pair).
fn mismatches(mtu: Option<u32>, rate: Option<f64>, peer: &serde_json::Value) -> Vec<Finding> {
    let mut v = Vec::new();
    let peer_mtu = peer["netdev_mtu"].as_u64().map(|m| m as u32);
    if let (Some(a), Some(b)) = (mtu, peer_mtu) {
        if roce_mtu(a) != roce_mtu(b) {
            v.push(Finding {
                code: "mtu_mismatch",
                title: "the two ends' MTUs differ: the path MTU is the smaller one's",
                evidence: format!(
                    "netdev MTU here {a} (RoCE MTU {}), at the peer {b} (RoCE MTU {})",
                    roce_mtu(a),
                    roce_mtu(b)
                ),
                fix: "set the same MTU on both hosts and every switch port between (4200 or more \
                      for RoCE MTU 4096; 9000 is usual)",
                score: f64::INFINITY,
            });
        }
    }
    if let (Some(a), Some(b)) = (rate, peer["rate_gbps"].as_f64()) {
        if (a - b).abs() > 0.5 {
            v.push(Finding {
                code: "link_rate_mismatch",
                title: "the two ends' links run at different rates: the slower caps the pair",
                evidence: format!("{a} Gb/s here, {b} Gb/s at the peer"),
                fix: "check the slower end's cable, transceiver and autonegotiation \
                      (`ethtool <netdev>`, `ibstat`)",
                score: f64::INFINITY,
            });
        }
    }
    v
}

/// The peer's findings and facts as it sent them (its `to_json`), ranked
/// as it ranked them.
fn peer_text<'a>(v: &'a serde_json::Value) -> String {
    let mut s = String::new();
    let str_of = |x: &serde_json::Value, k: &str| x[k].as_str().unwrap_or("").to_string();
    let _ = writeln!(
        s,
        "  peer ({} port {}):",
        str_of(v, "device"),
        v["port"].as_u64().unwrap_or(0)
    );
    const NONE: &Vec<serde_json::Value> = &Vec::new();
    let findings = v["findings"].as_array().unwrap_or(NONE);
    let facts = v["facts"].as_array().unwrap_or(NONE);
    let row = |x: &'a serde_json::Value, head: &str, evidence: bool| Row {
        code: x["code"].as_str().unwrap_or(""),
        head: x[head].as_str().unwrap_or(""),
        evidence: evidence.then(|| x["evidence"].as_str().unwrap_or("")),
        fix: x["fix"].as_str().unwrap_or(""),
    };
    let findings = findings.iter().map(|f| row(f, "title", true));
    let facts = facts.iter().map(|c| row(c, "what", false));
    let n = ranked_rows(&mut s, "p", "      ", findings.chain(facts));
    if n == 0 {
        let _ = writeln!(s, "  peer verdict: nothing in its counters or facts");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn explanation(deltas: &[(&str, u64)], software: bool) -> Explanation {
        let deltas: BTreeMap<String, Delta> = deltas
            .iter()
            .map(|(k, v)| (k.to_string(), Delta::Moved(*v)))
            .collect();
        Explanation {
            device: "rxea".into(),
            port: 1,
            link: Some((9.26, "10 Gb/s link".into())),
            pcie: None,
            measured: Some(0.2),
            findings: evaluate(&deltas).0,
            facts: Vec::new(),
            notes: Vec::new(),
            deltas,
            rate_gbps: Some(10.0),
            netdev_mtu: Some(1500),
            peer: PeerFacts::Said("x".into()),
            software,
            at_exchange: None,
        }
    }

    /// The whole block: ceilings, the ranked findings then facts, the
    /// telling counters (the netdev's traffic counters left out), notes.
    #[test]
    fn the_text_block_lays_out_every_part() {
        let mut e = explanation(
            &[
                ("sent_pkts", 5),
                ("eth.rx_bytes", 9),
                ("eth.rx_discards", 2),
            ],
            false,
        );
        e.findings = vec![Finding {
            code: "loss",
            title: "t",
            evidence: "e".into(),
            fix: "f",
            score: 1.0,
        }];
        e.facts = vec![Check {
            code: "mtu",
            what: "w".into(),
            fix: "g".into(),
        }];
        e.notes = vec!["n".into()];
        assert_eq!(
            e.text(1),
            " Explain (rxea port 1; this side's counters over the run; x):\n  \
             link ceiling   9.26 Gb/s of payload (10 Gb/s link)\n  \
             PCIe ceiling   none (no PCIe function: software device)\n  \
             measured       0.20 Gb/s = 2 % of the lower ceiling\n  \
             1. loss: t\n     evidence: e\n     fix: f\n  \
             2. mtu: w\n     fix: g\n  \
             counters       eth.rx_discards +2, sent_pkts +5\n  \
             note: n\n"
        );
    }

    /// Lost read responses read as a timeout on this side alone; the
    /// peer's duplicates and its packets that never arrived turn it into
    /// return_path_loss (bw-diagnosis §4's read run).
    #[test]
    fn the_peers_counters_turn_a_timeout_into_return_path_loss() {
        let req = [
            ("sent_pkts", 2_000),
            ("rcvd_pkts", 7_178),
            ("completer_retry_err", 251),
        ];
        let alone = explanation(&req, true);
        let codes = |e: &Explanation| e.findings.iter().map(|f| f.code).collect::<Vec<_>>();
        assert_eq!(codes(&alone), ["timeout"]);
        let peer = serde_json::json!({
            "device": "rxeb", "netdev_mtu": 1500, "rate_gbps": 10.0,
            "counter_deltas": {"sent_pkts": 8_123, "rcvd_pkts": 2_000, "duplicate_request": 698},
        });
        let e = explanation(&req, true).with_peer(PeerFacts::Received(peer.clone()));
        assert_eq!(codes(&e), ["return_path_loss"]);
        assert!(
            e.findings[0].evidence.contains("rxeb sent_pkts +8123"),
            "{:?}",
            e.findings
        );
        // The same peer counters with nothing missing: a late answer stays a timeout.
        let mut late = peer;
        late["counter_deltas"]["sent_pkts"] = 7_178.into();
        let e = explanation(&req, true).with_peer(PeerFacts::Received(late));
        assert_eq!(codes(&e), ["timeout"]);
    }

    /// 5 % of send-bw's ACKs lost (measured): the retries stay at a clean
    /// run's level, so no rule fires on either side alone; the peer's
    /// counts name the loss, and the block never says "no loss" beside it.
    /// The clean run (every packet arrived) keeps the verdict.
    #[test]
    fn a_gap_with_quiet_retries_is_named_not_no_loss() {
        let req = [
            ("sent_pkts", 141_000),
            ("rcvd_pkts", 2_129),
            ("completer_retry_err", 22),
        ];
        let peer = serde_json::json!({
            "device": "rxeb", "netdev_mtu": 1500, "rate_gbps": 10.0,
            "counter_deltas": {"sent_pkts": 2_248, "rcvd_pkts": 141_000, "duplicate_request": 650},
        });
        assert!(explanation(&req, true).text(1).contains("(no loss,"));
        let e = explanation(&req, true).with_peer(PeerFacts::Received(peer.clone()));
        let text = e.text(1);
        assert!(
            text.contains("1. direction_loss: packets from the peer to this side were lost")
                && text.contains("rxeb sent_pkts +2248, rxea rcvd_pkts +2129: 119 (5.3 %)")
                && !text.contains("no loss"),
            "{text}"
        );
        let mut clean = peer;
        clean["counter_deltas"]["sent_pkts"] = 2_129.into();
        let text = explanation(&req, true)
            .with_peer(PeerFacts::Received(clean))
            .text(1);
        assert!(text.contains("verdict: nothing in the counters"), "{text}");
    }

    /// GPU findings rank among the counter findings by score.
    #[test]
    fn gpu_findings_rank_with_the_counters() {
        let lossy = [
            ("sent_pkts", 10_000),
            ("rcvd_pkts", 600),
            ("rcvd_seq_err", 1_380),
        ];
        let gpu = |code, score| Finding {
            code,
            title: "t",
            evidence: String::new(),
            fix: "f",
            score,
        };
        let e = explanation(&lossy, false)
            .with_findings(vec![gpu("gpu_far", 4.0), gpu("no_gpudirect", 1000.0)]);
        let codes: Vec<_> = e.findings.iter().map(|f| f.code).collect();
        // loss: 138 000 ppm / 1000 = 138.
        assert_eq!(codes, ["no_gpudirect", "loss", "gpu_far"]);
    }

    /// A software device gets no "try -q 4": the CPU is its ceiling, and
    /// the block and the JSON say so; a hardware one keeps the advice.
    #[test]
    fn a_software_device_is_told_the_cpu_is_its_ceiling() {
        let clean = [("sent_pkts", 82_000), ("rcvd_pkts", 3_000)];
        let sw = explanation(&clean, true);
        let t = sw.text(1);
        assert!(!t.contains("-q 4"), "{t}");
        assert!(
            t.contains("  software       rxea: a software device"),
            "{t}"
        );
        assert!(t.contains("the CPU caps a software device"), "{t}");
        assert!(sw.to_json()["software_device"].as_str().is_some());
        let hw = explanation(&clean, false);
        assert!(hw.text(1).contains("try -q 4"), "{}", hw.text(1));
        assert!(hw.to_json()["software_device"].is_null());
    }

    /// The peer's block: findings with their evidence, then facts, numbered
    /// on from each other; an empty verdict says so.
    #[test]
    fn the_peers_findings_and_facts_print_as_ranked_rows() {
        let v = serde_json::json!({
            "device": "rxeb", "port": 1,
            "findings": [{"code": "loss", "title": "t", "evidence": "e", "fix": "f"}],
            "facts": [{"code": "mtu", "what": "w", "fix": "g"}],
        });
        assert_eq!(
            peer_text(&v),
            "  peer (rxeb port 1):\n  p1. loss: t\n      evidence: e\n      fix: f\n  \
             p2. mtu: w\n      fix: g\n"
        );
        let quiet = serde_json::json!({"device": "rxeb", "port": 1});
        assert!(peer_text(&quiet).ends_with("  peer verdict: nothing in its counters or facts\n"));
    }

    /// The peer's MTU and rate against ours: a RoCE MTU that differs and a
    /// rate that differs are findings; the same MTU class (1500 and 1600
    /// both give RoCE 1024) is not.
    #[test]
    fn the_peers_mtu_and_rate_are_compared() {
        let peer = serde_json::json!({"netdev_mtu": 1500, "rate_gbps": 25.0});
        let codes = |mtu, rate| -> Vec<&'static str> {
            mismatches(Some(mtu), Some(rate), &peer)
                .iter()
                .map(|f| f.code)
                .collect()
        };
        assert_eq!(codes(9000, 100.0), ["mtu_mismatch", "link_rate_mismatch"]);
        assert!(codes(1600, 25.0).is_empty());
        let f = &mismatches(Some(9000), None, &peer)[0];
        assert!(
            f.evidence
                .contains("here 9000 (RoCE MTU 4096), at the peer 1500 (RoCE MTU 1024)"),
            "{}",
            f.evidence
        );
        assert!(mismatches(None, None, &peer).is_empty());
    }
}
