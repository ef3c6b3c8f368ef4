//! The rules that turn counter deltas into findings, as data. Each names
//! the counters whose sum signals it (mlx5 and rxe names side by side: a
//! port has one set), a threshold as a rate per million packets of the
//! same port (sent + received over the run) and an absolute floor, and
//! optionally counters that must stay quiet (a timeout is retries that
//! NAKs do not explain: NAKs at most a quarter of them). Rates, never "counter > 0": soft-RoCE under emulation shows ~300
//! retries and ~10 000 duplicates per million packets on a clean link
//! (bw-diagnosis §4), which must give no finding. Event counters (a link
//! going down) use the floor alone. docs/explain.md lists
//! this table.

use std::collections::BTreeMap;

use super::counters::Delta;

/// One signature.
pub struct Rule {
    pub code: &'static str,
    pub title: &'static str,
    /// Summed; the side that reads them is implied by the names.
    pub counters: &'static [&'static str],
    /// Per million packets of this port; 0: the floor alone decides.
    pub min_ppm: f64,
    /// At least this many events.
    pub min_count: u64,
    /// These must stay at or below `quiet_max_share` of the rule's own
    /// count (a timeout's retries are not explained by NAKs).
    pub quiet: &'static [&'static str],
    pub quiet_max_share: f64,
    pub fix: &'static str,
}

/// Packet counters (sent + received) that give the rates' denominator.
pub const PACKETS: [&str; 4] = [
    "sent_pkts",
    "rcvd_pkts",
    "pma.port_xmit_packets",
    "pma.port_rcv_packets",
];

/// Retries a NAK explains (sequence or RNR): a timeout is retries without them.
const NAKS: &[&str] = &[
    "packet_seq_err",
    "rcvd_seq_err",
    "implied_nak_seq_err",
    "rnr_nak_retry_err",
    "rcvd_rnr_err",
];

/// The explicit NAKs among them (a responder saw a gap or had no receive):
/// mlx5's implied NAK is left out, it is the requester's own conclusion
/// that a response was lost (`super::direction`).
pub const NAKS_SEQ_RNR: &[&str] = &[
    "packet_seq_err",
    "rcvd_seq_err",
    "rnr_nak_retry_err",
    "rcvd_rnr_err",
];

/// A requester's retransmits: mlx5 counts ACK timeouts, rxe every retry
/// (NAK, timeout or read-response gap).
pub const RETRIES: &[&str] = &["local_ack_timeout_err", "completer_retry_err"];

/// The table, in no particular order (findings are ranked by how far past
/// their threshold they are).
pub const RULES: &[Rule] = &[
    Rule {
        code: "loss",
        title: "packet loss toward the peer: it NAKed sequence gaps and this side resent (go-back-N)",
        counters: &["packet_seq_err", "rcvd_seq_err"],
        min_ppm: 1000.0,
        min_count: 10,
        quiet: &[],
        quiet_max_share: 0.0,
        fix: "find the drop: NIC and switch port discards and CRC/symbol errors on the path, PFC on \
              the RoCE priority or ECN; go-back-N costs several times the loss rate in bandwidth",
    },
    Rule {
        code: "out_of_sequence",
        title: "packets arrived out of sequence here: lost (or reordered) on the way in",
        counters: &["out_of_sequence", "out_of_seq_request"],
        min_ppm: 1000.0,
        min_count: 10,
        quiet: &[],
        quiet_max_share: 0.0,
        fix: "the drops are upstream of this port: sender-side switch ports and links; with no drop \
              anywhere it is reordering (ECMP, adaptive routing)",
    },
    Rule {
        code: "timeout",
        title: "retransmits on ACK timeout without NAKs: ACKs or read responses lost on the way back, \
                the tail of bursts lost, or the RTT exceeds the QP timeout",
        counters: RETRIES,
        min_ppm: 1000.0,
        min_count: 10,
        quiet: NAKS,
        quiet_max_share: 0.25,
        fix: "with --explain on both ends the peer's duplicate_request and packet counts tell lost \
              answers (return_path_loss) from late ones; a long path needs a larger QP timeout (-u); \
              otherwise look for a blackhole or tail drops (shallow buffers, policers)",
    },
    Rule {
        code: "response_loss",
        title: "responses arrived past a missing read response (implied NAKs): packets from the peer \
                back to this side were lost",
        counters: &["implied_nak_seq_err"],
        min_ppm: 1000.0,
        min_count: 10,
        quiet: &[],
        quiet_max_share: 0.0,
        fix: "the drop is on the responder-to-requester direction: that direction's switch ports, \
              this side's receive path (NIC port discards, CRC errors); the request direction is clean",
    },
    Rule {
        code: "rnr",
        title: "RNR NAKs: the receiver had no receive posted when SENDs arrived",
        counters: &["rnr_nak_retry_err", "rcvd_rnr_err"],
        min_ppm: 100.0,
        min_count: 5,
        quiet: &[],
        quiet_max_share: 0.0,
        fix: "give the receiver more receives (-r on its side) or post them sooner",
    },
    Rule {
        code: "rnr_receiver",
        title: "this side had no receive posted when SENDs arrived (it answered RNR)",
        counters: &["out_of_buffer", "send_rnr_err"],
        min_ppm: 100.0,
        min_count: 5,
        quiet: &[],
        quiet_max_share: 0.0,
        fix: "raise -r (receive depth) here, or post receives sooner",
    },
    Rule {
        code: "cnp_throttled",
        title: "congestion control cut this sender's rate (CNPs handled)",
        counters: &["rp_cnp_handled"],
        min_ppm: 100.0,
        min_count: 10,
        quiet: &[],
        quiet_max_share: 0.0,
        fix: "congestion on the path or at the receiver: incast, ECN marking at switches \
              (np_ecn_marked_roce_packets at the peer), PFC",
    },
    Rule {
        code: "ecn_marked",
        title: "ECN-marked packets arrived here and this side sent CNPs",
        counters: &["np_ecn_marked_roce_packets", "np_cnp_sent"],
        min_ppm: 100.0,
        min_count: 10,
        quiet: &[],
        quiet_max_share: 0.0,
        fix: "the fabric marks congestion toward this host: incast or a slow receiver (PCIe, host)",
    },
    Rule {
        code: "local_drop",
        title: "the local send path refused packets before the wire (a qdisc or shaper dropped them)",
        counters: &["send_err"],
        min_ppm: 1000.0,
        min_count: 10,
        quiet: &[],
        quiet_max_share: 0.0,
        fix: "check `tc -s qdisc` on the netdev: a rate limit or a short queue",
    },
    Rule {
        code: "link_down",
        title: "the link went down during the run",
        counters: &["link_downed", "pma.link_downed"],
        min_ppm: 0.0,
        min_count: 1,
        quiet: &[],
        quiet_max_share: 0.0,
        fix: "cable, transceiver or switch port; the netdev's link_down_events_phy counts flaps",
    },
    Rule {
        code: "link_errors",
        title: "errors on the link (symbol, receive or ICRC errors)",
        counters: &["pma.symbol_error", "pma.port_rcv_errors", "pma.link_error_recovery", "rx_icrc_encapsulated"],
        min_ppm: 0.0,
        min_count: 1,
        quiet: &[],
        quiet_max_share: 0.0,
        fix: "a marginal link: reseat or replace the cable/transceiver, check FEC on both ends",
    },
    Rule {
        code: "pause_received",
        title: "the network paused this port (pause/PFC frames received): it could not absorb our traffic",
        counters: &["eth.rx_pause_ctrl_phy", "eth.rx_prio*_pause", "eth.rx_global_pause"],
        min_ppm: 100.0,
        min_count: 10,
        quiet: &[],
        quiet_max_share: 0.0,
        fix: "congestion downstream (switch egress, the peer): pause keeps RoCE lossless but caps the \
              rate; find the congested port, use ECN to slow senders before PFC triggers",
    },
    Rule {
        code: "pause_sent",
        title: "this port sent pause/PFC frames: the NIC or host could not absorb incoming traffic",
        counters: &["eth.tx_pause_ctrl_phy", "eth.tx_prio*_pause", "eth.tx_global_pause"],
        min_ppm: 100.0,
        min_count: 10,
        quiet: &[],
        quiet_max_share: 0.0,
        fix: "the receiving host is the bottleneck: PCIe link (see the PCIe ceiling), NUMA placement, \
              memory bandwidth; or its receive buffer is too small",
    },
    Rule {
        code: "nic_discard",
        title: "the NIC dropped packets for lack of port buffer",
        counters: &[
            "eth.rx_discards_phy",
            "eth.tx_discards_phy",
            "eth.rx_prio*_buf_discard",
            "eth.rx_prio*_cong_discard",
        ],
        min_ppm: 100.0,
        min_count: 10,
        quiet: &[],
        quiet_max_share: 0.0,
        fix: "enable PFC on the RoCE priority or ECN so the fabric slows the sender instead of \
              dropping; without either, RoCE loses packets under load",
    },
    Rule {
        code: "fcs_errors",
        title: "frames arrived with bad FCS or symbol errors (a bad link)",
        counters: &["eth.rx_crc_errors_phy", "eth.rx_symbol_err_phy", "eth.rx_pcs_symbol_err_phy"],
        min_ppm: 0.0,
        min_count: 1,
        quiet: &[],
        quiet_max_share: 0.0,
        fix: "cable, transceiver or switch port: reseat or replace, check FEC on both ends",
    },
    Rule {
        code: "retries_exceeded",
        title: "a QP ran out of retries (the run failed or lost a QP)",
        counters: &["req_transport_retries_exceeded", "retry_exceeded_err", "req_rnr_retries_exceeded", "retry_rnr_exceeded_err"],
        min_ppm: 0.0,
        min_count: 1,
        quiet: &[],
        quiet_max_share: 0.0,
        fix: "see the other findings: loss, timeouts or RNR exhausted retry_cnt / rnr_retry",
    },
];

/// One wrong fact about the host (what `doctor` and `doctor --cuda` report,
/// and `--explain` carries beside the counter findings): here, below every
/// reader that makes one, so none of them imports another for it.
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    pub code: &'static str,
    pub what: String,
    pub fix: String,
}

/// One finding: the rule, its evidence and the fix.
#[derive(Clone, Debug, PartialEq)]
pub struct Finding {
    pub code: &'static str,
    pub title: &'static str,
    pub evidence: String,
    pub fix: &'static str,
    /// How far past the threshold (ranking).
    pub score: f64,
}

/// Whether counter `name` is named by `pattern`: the name itself, or with
/// one `*` standing for any run of characters (mlx5's per-priority
/// `rx_prio3_pause`, whose priorities depend on the PFC set-up).
pub fn named_by(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((head, tail)) => {
            name.len() >= head.len() + tail.len() && name.starts_with(head) && name.ends_with(tail)
        }
    }
}

fn sum(d: &BTreeMap<String, Delta>, names: &[&str]) -> (u64, Vec<String>) {
    let mut total = 0;
    let mut parts = Vec::new();
    for (k, x) in d {
        if !names.iter().any(|n| named_by(n, k)) {
            continue;
        }
        if let Some(v) = x.value() {
            total += v;
            if v > 0 {
                parts.push(format!("{k} +{v}"));
            }
        }
    }
    (total, parts)
}

/// The findings the deltas of one port give, ranked, and notes on what
/// could not be judged (no packet counters, counters that vanished).
pub fn evaluate(d: &BTreeMap<String, Delta>) -> (Vec<Finding>, Vec<String>) {
    let mut notes: Vec<String> = d
        .iter()
        .filter(|(_, v)| matches!(v, Delta::Vanished | Delta::Reset))
        .map(|(k, v)| {
            format!(
                "{k}: {} between the two reads, left out",
                if *v == Delta::Vanished {
                    "appeared or vanished"
                } else {
                    "reset"
                }
            )
        })
        .collect();
    let (packets, _) = sum(d, &PACKETS);
    let mut out = Vec::new();
    for r in RULES {
        let (n, parts) = sum(d, r.counters);
        if n < r.min_count.max(1) {
            continue;
        }
        let ppm = (packets > 0).then(|| n as f64 * 1e6 / packets as f64);
        let score = match (r.min_ppm > 0.0, ppm) {
            (false, _) => n as f64 / r.min_count.max(1) as f64,
            (true, Some(p)) if p >= r.min_ppm => p / r.min_ppm,
            (true, Some(_)) => continue,
            (true, None) => {
                notes.push(format!(
                    "{}: {} but no packet counters to rate it against",
                    r.code,
                    parts.join(", ")
                ));
                continue;
            }
        };
        let (q, _) = sum(d, r.quiet);
        if !r.quiet.is_empty() && q as f64 > r.quiet_max_share * n as f64 {
            continue;
        }
        let evidence = match ppm {
            Some(p) => format!(
                "{} = {:.0} per million packets ({packets} packets; threshold {:.0})",
                parts.join(", "),
                p,
                r.min_ppm
            ),
            None => parts.join(", "),
        };
        out.push(Finding {
            code: r.code,
            title: r.title,
            evidence,
            fix: r.fix,
            score,
        });
    }
    out.sort_by(|a, b| b.score.total_cmp(&a.score));
    notes.sort();
    (out, notes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explain::counters::{deltas, Snapshot};

    use crate::explain::counters::moved_by as d;
    fn codes(d: &BTreeMap<String, Delta>) -> Vec<&'static str> {
        evaluate(d).0.iter().map(|f| f.code).collect()
    }

    #[test]
    fn a_star_names_every_priority() {
        assert!(named_by("eth.rx_prio*_pause", "eth.rx_prio3_pause"));
        assert!(!named_by(
            "eth.rx_prio*_pause",
            "eth.rx_prio3_pause_duration"
        ));
        assert!(!named_by("eth.rx_prio*_pause", "eth.rx_pause"));
        assert!(named_by("rcvd_seq_err", "rcvd_seq_err"));
        assert!(!named_by("rcvd_seq_err", "rcvd_seq_errs"));
    }

    /// mlx5's netdev statistics (names from en_stats.c): pauses received
    /// on PFC priority 3 and sent globally, and port-buffer discards, at
    /// rates over the threshold; the pause durations are not counted as
    /// pauses; a quiet netdev gives nothing.
    #[test]
    fn pause_frames_and_discards_from_the_netdev() {
        let busy = d(&[
            ("sent_pkts", 1_000_000),
            ("rcvd_pkts", 20_000),
            ("eth.rx_prio3_pause", 900),
            ("eth.rx_prio3_pause_duration", 1_000_000),
            ("eth.tx_pause_ctrl_phy", 300),
            ("eth.rx_discards_phy", 250),
        ]);
        let c = codes(&busy);
        for want in ["pause_received", "pause_sent", "nic_discard"] {
            assert!(c.contains(&want), "{want}: {:?}", evaluate(&busy));
        }
        let f = evaluate(&busy).0;
        let p = f.iter().find(|f| f.code == "pause_received").unwrap();
        assert!(
            p.evidence.contains("eth.rx_prio3_pause +900") && !p.evidence.contains("duration"),
            "{}",
            p.evidence
        );
        let quiet = d(&[
            ("sent_pkts", 1_000_000),
            ("rcvd_pkts", 20_000),
            ("eth.rx_prio3_pause", 5),
            ("eth.rx_packets", 20_000),
        ]);
        assert!(codes(&quiet).is_empty(), "{:?}", evaluate(&quiet));
        let crc = d(&[("sent_pkts", 1000), ("eth.rx_crc_errors_phy", 1)]);
        assert_eq!(codes(&crc), ["fcs_errors"]);
    }

    /// Recorded on rxe in the VM (bw-diagnosis §4): a clean 3 s write-bw
    /// shows retries and duplicates that are emulation noise.
    #[test]
    fn the_clean_link_noise_floor_gives_no_finding() {
        let req = d(&[
            ("sent_pkts", 82_000),
            ("rcvd_pkts", 3_000),
            ("completer_retry_err", 24),
            ("rcvd_seq_err", 1),
        ]);
        let resp = d(&[
            ("sent_pkts", 3_000),
            ("rcvd_pkts", 82_000),
            ("duplicate_request", 714),
            ("out_of_seq_request", 1),
        ]);
        assert!(codes(&req).is_empty(), "{:?}", evaluate(&req));
        assert!(codes(&resp).is_empty(), "{:?}", evaluate(&resp));
    }

    #[test]
    fn loss_on_the_request_path_is_found_on_both_sides() {
        let req = d(&[
            ("sent_pkts", 10_000),
            ("rcvd_pkts", 600),
            ("rcvd_seq_err", 138),
            ("completer_retry_err", 137),
        ]);
        let resp = d(&[
            ("sent_pkts", 600),
            ("rcvd_pkts", 9_800),
            ("out_of_seq_request", 144),
            ("duplicate_request", 544),
        ]);
        assert_eq!(codes(&req), ["loss"]); // retries come with NAKs: not a timeout
        assert_eq!(codes(&resp), ["out_of_sequence"]);
        let f = &evaluate(&req).0[0];
        assert!(
            f.evidence.contains("rcvd_seq_err +138") && f.evidence.contains("per million"),
            "{}",
            f.evidence
        );
    }

    #[test]
    fn timeouts_rnr_cnp_and_events() {
        let timeout = d(&[
            ("sent_pkts", 3_500),
            ("rcvd_pkts", 400),
            ("completer_retry_err", 19),
            ("ack_deferred", 163),
        ]);
        assert_eq!(codes(&timeout), ["timeout"]);
        // Measured in the VM (tests/vm_explain.rs, 150 ms one way): a few
        // NAKs beside many retries is still a timeout.
        let slow = d(&[
            ("sent_pkts", 9_498),
            ("rcvd_pkts", 4_501),
            ("completer_retry_err", 36),
            ("rcvd_seq_err", 3),
        ]);
        assert_eq!(codes(&slow), ["timeout"]);
        let rnr = d(&[
            ("sent_pkts", 30_000),
            ("rcvd_pkts", 2_000),
            ("rcvd_rnr_err", 113),
            ("completer_retry_err", 66),
        ]);
        assert_eq!(codes(&rnr), ["rnr"]);
        let rnr_rx = d(&[
            ("sent_pkts", 2_000),
            ("rcvd_pkts", 30_000),
            ("send_rnr_err", 117),
        ]);
        assert_eq!(codes(&rnr_rx), ["rnr_receiver"]);
        let cnp = d(&[
            ("pma.port_xmit_packets", 1_000_000),
            ("pma.port_rcv_packets", 50_000),
            ("rp_cnp_handled", 5_000),
        ]);
        assert_eq!(codes(&cnp), ["cnp_throttled"]);
        // mlx5: read responses past a missing one (implied NAKs) name the
        // return path, and are not a timeout.
        let implied = d(&[
            ("pma.port_xmit_packets", 50_000),
            ("pma.port_rcv_packets", 900_000),
            ("implied_nak_seq_err", 2_000),
            ("local_ack_timeout_err", 3),
        ]);
        assert_eq!(codes(&implied), ["response_loss"]);
        let down = d(&[("sent_pkts", 5), ("link_downed", 1)]);
        assert_eq!(codes(&down), ["link_down"]);
        let shaped = d(&[
            ("sent_pkts", 60_000),
            ("rcvd_pkts", 1_000),
            ("send_err", 50_008),
            ("completer_retry_err", 1),
        ]);
        assert_eq!(codes(&shaped), ["local_drop"]);
    }

    /// A 32-bit counter that wrapped still rates right; a counter that
    /// vanished between the reads is a note, not a number.
    #[test]
    fn wrap_and_vanished_counters() {
        let before = Snapshot(
            [
                ("sent_pkts", 4_294_960_000u64),
                ("rcvd_pkts", 10),
                ("rcvd_seq_err", 4_294_967_200),
                ("out_of_buffer", 5),
            ]
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect(),
        );
        let after = Snapshot(
            [
                ("sent_pkts", 2_704u64),
                ("rcvd_pkts", 20),
                ("rcvd_seq_err", 40),
            ]
            .iter()
            .map(|(k, v)| (k.to_string(), *v))
            .collect(),
        );
        let dl = deltas(&before, &after);
        assert_eq!(dl["rcvd_seq_err"], Delta::Moved(136));
        let (f, notes) = evaluate(&dl);
        assert_eq!(f.iter().map(|f| f.code).collect::<Vec<_>>(), ["loss"]);
        assert!(
            notes.iter().any(|n| n.starts_with("out_of_buffer")),
            "{notes:?}"
        );
    }

    #[test]
    fn no_packet_counters_is_said_not_guessed() {
        let (f, notes) = evaluate(&d(&[("rcvd_seq_err", 500)]));
        assert!(f.is_empty());
        assert!(
            notes.iter().any(|n| n.contains("no packet counters")),
            "{notes:?}"
        );
    }

    #[test]
    fn every_rule_is_well_formed() {
        let mut seen = std::collections::BTreeSet::new();
        for r in RULES {
            assert!(seen.insert(r.code), "duplicate code {}", r.code);
            assert!(!r.counters.is_empty() && !r.fix.is_empty());
            assert!(
                r.min_ppm > 0.0 || r.min_count > 0,
                "{}: needs a threshold",
                r.code
            );
        }
    }
}
