//! Which direction lost packets, from both ends' counters (the peer's come
//! in its explanation after the run, `ctrl::after_run`). Loss on the way
//! from the requester to the responder shows on one side alone: sequence
//! NAKs at the requester, out-of-sequence requests at the responder (the
//! `loss` and `out_of_sequence` rules). Loss on the way back (ACKs of
//! writes and sends, read responses) does not: the requester resends on
//! its ACK timer or on a read-response gap without any NAK, which alone
//! reads as a timeout (`rules::RULES`' `timeout`). The responder's
//! `duplicate_request` (rxe and mlx5 alike; hw/mlx5/counters.c
//! retrans_q_cnts, sw/rxe/rxe_hw_counters.c) says the resent requests had
//! arrived the first time; the packets the responder sent that never
//! arrived at the requester (its sent count against the requester's
//! received count, or mlx5's `implied_nak_seq_err` at the requester) say
//! the answers were lost, not late. A late answer (RTT above the QP
//! timeout) shows the same duplicates with nothing missing: that stays a
//! timeout. Measured on soft-RoCE (tests/vm_explain.rs, bw-diagnosis §4).

use std::collections::BTreeMap;

use super::counters::Delta;
use super::rules::{Finding, NAKS_SEQ_RNR, RETRIES};

/// Counters a requester counts retries by (ACK timer, rxe's every retry)
/// and mlx5's implied NAK (a read response or ACK past a missing one).
const IMPLIED: &[&str] = &["implied_nak_seq_err"];
const DUPLICATES: &[&str] = &["duplicate_request"];
const OOS: &[&str] = &["out_of_sequence", "out_of_seq_request"];
const SENT: &[&str] = &["sent_pkts", "pma.port_xmit_packets"];
const RCVD: &[&str] = &["rcvd_pkts", "pma.port_rcv_packets"];

/// Retries per million packets of the requester's port, as the `timeout`
/// rule asks (the clean-link noise under emulation is ~300).
const MIN_PPM: f64 = 1000.0;
const MIN_COUNT: u64 = 10;
/// The share of the responder's packets that must be missing at the
/// requester: a clean emulated link drops a few tenths of a percent
/// (veth backlog under TCG), netem's loss on the way back several percent.
pub const MIN_SHARE: f64 = 0.01;
/// The share of the responder's packets missing at the requester that
/// decides with any retry count past [`MIN_COUNT`] ([`return_loss`]): ten
/// times [`MIN_SHARE`], far above what a clean emulated link drops.
const GAP_ALONE: f64 = 0.1;
/// Packets one end sent that the other never counted, past which that
/// direction lost them whatever the retries say ([`gap_findings`]): both
/// ends read their counters once they stood still (`Bracket::settled`),
/// so nothing is in flight then, and a clean link shows no gap at all
/// (measured: 2842 sent, 2842 received); the floor and [`MIN_SHARE`]'s
/// tenth leave room for a counter read just before the last packets.
const GAP_COUNT: u64 = 10;

/// One end's name and counter deltas.
pub struct End<'a> {
    pub name: &'a str,
    pub deltas: &'a BTreeMap<String, Delta>,
}

fn sum(d: &BTreeMap<String, Delta>, names: &[&str]) -> u64 {
    names
        .iter()
        .filter_map(|n| d.get(*n).and_then(|x| x.value()))
        .sum()
}

/// The first of `names` that `d` has (one port has one set of packet counters).
fn first(d: &BTreeMap<String, Delta>, names: &[&str]) -> Option<(String, u64)> {
    names
        .iter()
        .find_map(|n| Some((n.to_string(), d.get(*n)?.value()?)))
}

/// The peer's counter deltas as its explanation carries them
/// (`counter_deltas`: a number, or "vanished"/"reset").
pub fn peer_deltas(peer: &serde_json::Value) -> BTreeMap<String, Delta> {
    peer["counter_deltas"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| {
                    let d = match (v.as_u64(), v.as_str()) {
                        (Some(n), _) => Delta::Moved(n),
                        (None, Some("reset")) => Delta::Reset,
                        _ => Delta::Vanished,
                    };
                    (k.clone(), d)
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Packets `from` counted as sent that `to` never counted as received
/// (both read after the traffic settled): the count, its share of what was
/// sent, and the evidence text. `None` when either lacks packet counters.
fn missing(from: &End, to: &End) -> Option<(u64, f64, String)> {
    let (sn, s) = first(from.deltas, SENT)?;
    let (rn, r) = first(to.deltas, RCVD)?;
    let gap = s.saturating_sub(r);
    let share = gap as f64 / s.max(1) as f64;
    let text = format!(
        "{} {sn} +{s}, {} {rn} +{r}: {gap} ({:.1} %) did not arrive",
        from.name,
        to.name,
        100.0 * share
    );
    Some((gap, share, text))
}

/// Evidence that `resp`'s answers to `req` were lost on the way back, or
/// `None`. `req` resent (timer, read-response gap) at the `timeout` rule's
/// rate; `resp` counted resent requests as duplicates; and more than
/// [`MIN_SHARE`] of the packets `resp` sent never arrived at `req` (or
/// mlx5's implied NAKs at `req` say so). Sequence NAKs at `req` do not
/// rule it out: rxe's go-back-N after a lost ACK can resend past the
/// responder's expected PSN (measured: 33 NAKs beside 72 retries with
/// 30 % of the ACKs lost and nothing lost toward the responder).
///
/// Where [`GAP_ALONE`] of the answers are missing, the retries need only
/// reach [`MIN_COUNT`], not the rate: a timed-out requester waits a QP
/// timeout per retry, so the retries a run can hold are capped by its
/// length, not by its packets. Large messages, or a faster link, put them
/// under any per-packet rate however many answers were lost (measured:
/// 30 % of the ACKs dropped gave 283 retries per million packets with
/// 16 KiB writes, 980 with 64 KiB, against a clean link's 200 to 300).
pub fn return_loss(req: &End, resp: &End) -> Option<(String, f64)> {
    let retries = sum(req.deltas, RETRIES);
    let implied = sum(req.deltas, IMPLIED);
    let signal = retries + implied;
    let naks = sum(req.deltas, NAKS_SEQ_RNR);
    let packets = sum(req.deltas, SENT) + sum(req.deltas, RCVD);
    let (dups, oos) = (sum(resp.deltas, DUPLICATES), sum(resp.deltas, OOS));
    if signal < MIN_COUNT || packets == 0 || dups < MIN_COUNT {
        return None;
    }
    let ppm = signal as f64 * 1e6 / packets as f64;
    let back = missing(resp, req);
    let share = back
        .as_ref()
        .filter(|(gap, _, _)| *gap >= MIN_COUNT)
        .map_or(0.0, |(_, share, _)| *share);
    if ppm < MIN_PPM && share < GAP_ALONE {
        return None;
    }
    if share < MIN_SHARE && implied < MIN_COUNT {
        return None;
    }
    let mut ev = format!(
        "requester {}: {} ({naks} sequence/RNR NAKs) = {ppm:.0} per million packets; \
         responder {}: duplicate_request +{dups}, out-of-sequence +{oos}",
        req.name,
        moved(req.deltas, &[RETRIES, IMPLIED].concat()),
        resp.name
    );
    if let Some((_, _, m)) = back {
        ev.push_str("; ");
        ev.push_str(&m);
    }
    if let Some((_, _, m)) = missing(req, resp) {
        ev.push_str("; the other way ");
        ev.push_str(&m);
    }
    Some((ev, (ppm / MIN_PPM).max(share / GAP_ALONE)))
}

/// Whether nothing measurable was lost from `from` to `to` (less than a
/// tenth of [`MIN_SHARE`]): sequence errors on that direction are then
/// the requester's go-back-N, not loss.
pub fn clean_way(from: &End, to: &End) -> bool {
    missing(from, to).is_some_and(|(_, share, _)| share < MIN_SHARE / 10.0)
}

/// The packets `from` sent that `to` never counted, when they are too many
/// to be in flight ([`GAP_COUNT`], a tenth of [`MIN_SHARE`]): that
/// direction lost them. `None` without packet counters or such a gap.
fn lost(from: &End, to: &End) -> Option<(f64, String)> {
    let (gap, share, text) = missing(from, to)?;
    (gap >= GAP_COUNT && share >= MIN_SHARE / 10.0).then_some((share, text))
}

/// Loss that no other finding names, from the two ends' packet counts
/// alone: cumulative ACKs and go-back-N resend without a NAK, so a few
/// percent of ACKs lost leave the retries at a clean run's level (measured:
/// 5 % of send-bw's ACKs dropped, 2129 of 2248 arrived, retries at the
/// noise floor). `codes` are this side's findings so far: `loss` (this side
/// the requester) names this side's direction, `out_of_sequence` (this
/// side the responder) the peer's, and so does `return_path_loss` where
/// [`return_loss`] finds it.
pub fn gap_findings(me: &End, peer: &End, codes: &[&str]) -> Vec<Finding> {
    let mut v = Vec::new();
    let to_me = codes.contains(&"out_of_sequence") || return_loss(me, peer).is_some();
    if let (false, Some((share, text))) = (to_me, lost(peer, me)) {
        v.push(Finding {
            code: "direction_loss",
            title: "packets from the peer to this side were lost (the transport's retries hid \
                    it: cumulative ACKs, go-back-N)",
            evidence: text,
            fix: GAP_FIX,
            score: share / MIN_SHARE,
        });
    }
    let from_me = codes.contains(&"loss") || return_loss(peer, me).is_some();
    if let (false, Some((share, text))) = (from_me, lost(me, peer)) {
        v.push(Finding {
            code: "direction_loss",
            title: "packets from this side to the peer were lost (the transport's retries hid \
                    it: cumulative ACKs, go-back-N)",
            evidence: text,
            fix: GAP_FIX,
            score: share / MIN_SHARE,
        });
    }
    v
}

const GAP_FIX: &str = "look for the drop on that direction alone: its switch ports, the \
                       receiving NIC's discards and CRC errors, the sending side's queue; \
                       unless other RDMA traffic shared either port during the run (these \
                       counters count the whole port)";

/// "name +n, name +n" of the counters among `names` that moved.
fn moved(d: &BTreeMap<String, Delta>, names: &[&str]) -> String {
    let v: Vec<String> = names
        .iter()
        .filter_map(|n| Some((n, d.get(*n)?.value().filter(|v| *v > 0)?)))
        .map(|(n, v)| format!("{n} +{v}"))
        .collect();
    v.join(", ")
}

/// The return-path findings of a pair, seen from `me`: lost answers from
/// the peer to this side (this side the requester), and this side's
/// answers lost on the way to the peer (this side the responder); with
/// the codes of this side's own findings they explain (to drop): the
/// requester's `timeout` and `response_loss`, and sequence errors on a
/// direction that lost nothing (`loss` here as requester, `out_of_sequence`
/// here as responder).
pub fn judge(me: &End, peer: &End) -> (Vec<Finding>, Vec<&'static str>) {
    let (mut v, mut explained) = (Vec::new(), Vec::new());
    if let Some((evidence, score)) = return_loss(me, peer) {
        v.push(Finding {
            code: "return_path_loss",
            title: "packets from the peer (the responder) back to this side were lost: ACKs or \
                    read responses; this side resent requests the peer already had",
            evidence,
            fix: FIX,
            score,
        });
        explained.extend(["timeout", "response_loss"]);
        if clean_way(me, peer) {
            explained.push("loss");
        }
    }
    if let Some((evidence, score)) = return_loss(peer, me) {
        v.push(Finding {
            code: "return_path_loss",
            title: "packets from this side (the responder) back to the peer were lost: ACKs or \
                    read responses; the peer resent requests this side already had",
            evidence,
            fix: FIX,
            score,
        });
        if clean_way(peer, me) {
            explained.push("out_of_sequence");
        }
    }
    (v, explained)
}

/// Sequence errors on a direction that lost nothing (the `loss` rule here
/// as requester, `out_of_sequence` here as responder) are not loss: the
/// finding becomes `reordered`, with both ends' counts as evidence. Only
/// the counts tell reordering from loss (bw-diagnosis §4, point 6).
pub fn relabel(me: &End, peer: &End, findings: &mut [Finding]) {
    for f in findings.iter_mut() {
        let (from, to) = match f.code {
            "loss" => (me, peer),
            "out_of_sequence" => (peer, me),
            _ => continue,
        };
        let Some((_, share, text)) = missing(from, to) else {
            continue;
        };
        if share >= MIN_SHARE / 10.0 {
            // Real loss: the finding names the direction; say how much.
            f.evidence = format!("{}; {text}", f.evidence);
        } else {
            f.code = "reordered";
            f.title = "sequence errors, yet nothing was lost on that direction: packets arrived \
                       reordered, or the requester resent ahead after its ACK timer fired";
            f.evidence = format!("{}; {text}", f.evidence);
            f.fix = "no drop to find: multipath (ECMP, adaptive routing) reorders a QP's packets, \
                     which RoCE takes as loss; or the requester's timer fires before the answers \
                     come (a busy responder or a long path: a larger -u)";
        }
    }
}

const FIX: &str = "the drop is on the responder-to-requester direction: that direction's switch \
                   ports, the requester's receive side (its NIC port discards, CRC errors) and \
                   the responder's transmit side; the request direction is clean";

#[cfg(test)]
mod tests {
    use super::*;

    use crate::explain::counters::moved_by as d;
    fn end<'a>(name: &'a str, deltas: &'a BTreeMap<String, Delta>) -> End<'a> {
        End { name, deltas }
    }

    /// Whether `req`'s and `resp`'s deltas give no return-path finding.
    fn no_return(req: &BTreeMap<String, Delta>, resp: &BTreeMap<String, Delta>) -> bool {
        judge(&end("a", req), &end("b", resp)).0.is_empty()
    }

    /// ib_read_bw with 2 % loss on the responses (bw-diagnosis §4): the
    /// requester's retries without NAKs, the responder's duplicates, and
    /// the responses that never arrived name the return path on both ends.
    #[test]
    fn lost_read_responses_name_the_return_path_on_both_ends() {
        let req = d(&[
            ("sent_pkts", 2_000),
            ("rcvd_pkts", 7_178),
            ("completer_retry_err", 251),
            ("ack_deferred", 7_720),
        ]);
        let resp = d(&[
            ("sent_pkts", 8_123),
            ("rcvd_pkts", 2_000),
            ("duplicate_request", 698),
        ]);
        let (f, explained) = judge(&end("rxea", &req), &end("rxeb", &resp));
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].title.starts_with("packets from the peer"), "{f:?}");
        assert_eq!(explained, ["timeout", "response_loss", "loss"]);
        for want in [
            "requester rxea: completer_retry_err +251",
            "responder rxeb: duplicate_request +698",
            "rxeb sent_pkts +8123, rxea rcvd_pkts +7178: 945 (11.6 %) did not arrive",
        ] {
            assert!(f[0].evidence.contains(want), "{want}: {}", f[0].evidence);
        }
        let (g, explained) = judge(&end("rxeb", &resp), &end("rxea", &req));
        assert_eq!(g.len(), 1, "{g:?}");
        assert!(g[0].title.starts_with("packets from this side"), "{g:?}");
        assert_eq!(explained, ["out_of_sequence"]);
    }

    /// write-bw with 30 % of the responder's packets (its ACKs) dropped by
    /// netem, measured in the VM: retries beside some NAKs at the requester
    /// (rxe's go-back-N), duplicates and a few out-of-sequence requests at
    /// the responder, 30 % of its packets missing, none the other way.
    #[test]
    fn lost_acks_name_the_return_path_and_explain_the_sequence_errors() {
        let req = d(&[
            ("sent_pkts", 30_829),
            ("rcvd_pkts", 3_523),
            ("completer_retry_err", 72),
            ("rcvd_seq_err", 33),
        ]);
        let resp = d(&[
            ("sent_pkts", 5_052),
            ("rcvd_pkts", 30_829),
            ("duplicate_request", 4_619),
            ("out_of_seq_request", 60),
        ]);
        let (f, explained) = judge(&end("rxea", &req), &end("rxeb", &resp));
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(explained, ["timeout", "response_loss", "loss"]);
        assert!(
            f[0].evidence.contains("1529 (30.3 %) did not arrive")
                && f[0].evidence.contains(
                    "the other way rxea sent_pkts +30829, rxeb rcvd_pkts +30829: 0 (0.0 %)"
                ),
            "{}",
            f[0].evidence
        );
        let (_, explained) = judge(&end("rxeb", &resp), &end("rxea", &req));
        assert_eq!(explained, ["out_of_sequence"]);
    }

    /// write-bw with 16 KiB messages and 30 % of the ACKs dropped,
    /// measured in the VM: the timer caps the retries (34 in 4 s, 288 per
    /// million packets: a clean link's rate); the 29 % of the ACKs missing
    /// at the requester decide. The clean 16 KiB run (27 retries, nothing
    /// missing), and a rate this low beside a 5 % gap a loaded veth could
    /// make, do not.
    #[test]
    fn lost_acks_with_few_retries_per_packet_name_the_return_path() {
        let req = d(&[
            ("sent_pkts", 112_903),
            ("rcvd_pkts", 5_329),
            ("completer_retry_err", 34),
        ]);
        let resp = d(&[
            ("sent_pkts", 7_543),
            ("rcvd_pkts", 112_903),
            ("duplicate_request", 519),
        ]);
        let (f, explained) = judge(&end("rxea", &req), &end("rxeb", &resp));
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(explained, ["timeout", "response_loss", "loss"]);
        assert!(
            f[0].evidence.contains("= 288 per million packets")
                && f[0].evidence.contains("2214 (29.4 %) did not arrive"),
            "{}",
            f[0].evidence
        );
        let clean_req = d(&[
            ("sent_pkts", 99_014),
            ("rcvd_pkts", 6_374),
            ("completer_retry_err", 27),
        ]);
        let clean_resp = d(&[
            ("sent_pkts", 6_374),
            ("rcvd_pkts", 99_014),
            ("duplicate_request", 198),
        ]);
        assert!(no_return(&clean_req, &clean_resp));
        let some_gap = d(&[
            ("sent_pkts", 6_700),
            ("rcvd_pkts", 99_014),
            ("duplicate_request", 198),
        ]);
        // Not the return path by the retries; the gap alone is named as
        // direction_loss (`gap_findings`).
        assert!(no_return(&clean_req, &some_gap));
    }

    /// The codes `gap_findings` gives `me` beside its own `codes`.
    fn gaps(
        me: &BTreeMap<String, Delta>,
        peer: &BTreeMap<String, Delta>,
        codes: &[&str],
    ) -> Vec<Finding> {
        gap_findings(&end("rxea", me), &end("rxeb", peer), codes)
    }

    /// send-bw with 5 % of the ACKs dropped, measured in the VM: 2129 of
    /// the 2248 packets the responder sent arrived, the retries stayed at
    /// a clean run's level, so no return_path_loss; the gap alone names the
    /// direction on both ends, with both counts.
    #[test]
    fn a_gap_the_retries_hide_is_named_on_both_ends() {
        let req = d(&[
            ("sent_pkts", 141_000),
            ("rcvd_pkts", 2_129),
            ("completer_retry_err", 22),
        ]);
        let resp = d(&[
            ("sent_pkts", 2_248),
            ("rcvd_pkts", 141_000),
            ("duplicate_request", 650),
        ]);
        assert!(no_return(&req, &resp));
        let f = gaps(&req, &resp, &[]);
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].code, "direction_loss");
        assert!(f[0].title.starts_with("packets from the peer to this side"));
        assert_eq!(
            f[0].evidence,
            "rxeb sent_pkts +2248, rxea rcvd_pkts +2129: 119 (5.3 %) did not arrive"
        );
        let g = gap_findings(&end("rxeb", &resp), &end("rxea", &req), &[]);
        assert_eq!(g.len(), 1, "{g:?}");
        assert!(g[0].title.starts_with("packets from this side to the peer"));
        // A direction another finding names already is not named twice.
        assert!(gaps(&req, &resp, &["out_of_sequence"]).is_empty());
        assert!(gap_findings(&end("rxeb", &resp), &end("rxea", &req), &["loss"]).is_empty());
    }

    /// A clean link sends exactly what the other end receives (measured:
    /// 2842 = 2842); a few packets, or a few tenths of a thousandth, are
    /// not loss either way; without packet counters nothing is said.
    #[test]
    fn a_clean_or_tiny_gap_is_not_named() {
        let req = d(&[
            ("sent_pkts", 180_000),
            ("rcvd_pkts", 2_842),
            ("completer_retry_err", 25),
        ]);
        let resp = d(&[
            ("sent_pkts", 2_842),
            ("rcvd_pkts", 180_000),
            ("duplicate_request", 800),
        ]);
        assert!(gaps(&req, &resp, &[]).is_empty());
        assert!(gaps(&resp, &req, &[]).is_empty());
        let few = d(&[("sent_pkts", 2_851), ("rcvd_pkts", 179_900)]);
        assert!(gaps(&req, &few, &[]).is_empty(), "9 packets");
        assert!(gaps(&few, &req, &[]).is_empty(), "100 of 180 000");
        assert!(gaps(&req, &d(&[("duplicate_request", 9)]), &[]).is_empty());
    }

    /// The clean link (retries at the noise floor), loss on the request
    /// path (NAKs), and a late answer (RTT above the QP timeout: the same
    /// duplicates, nothing missing) give no return-path finding.
    #[test]
    fn clean_request_loss_and_late_answers_are_not_return_loss() {
        let clean_req = d(&[
            ("sent_pkts", 82_000),
            ("rcvd_pkts", 3_000),
            ("completer_retry_err", 24),
        ]);
        let clean_resp = d(&[
            ("sent_pkts", 3_000),
            ("rcvd_pkts", 82_000),
            ("duplicate_request", 714),
        ]);
        assert!(no_return(&clean_req, &clean_resp));
        let fwd_req = d(&[
            ("sent_pkts", 10_000),
            ("rcvd_pkts", 600),
            ("rcvd_seq_err", 138),
            ("completer_retry_err", 137),
        ]);
        let fwd_resp = d(&[
            ("sent_pkts", 600),
            ("rcvd_pkts", 9_800),
            ("out_of_seq_request", 144),
            ("duplicate_request", 544),
        ]);
        assert!(no_return(&fwd_req, &fwd_resp));
        let late_req = d(&[
            ("sent_pkts", 3_500),
            ("rcvd_pkts", 400),
            ("completer_retry_err", 19),
        ]);
        let late_resp = d(&[
            ("sent_pkts", 400),
            ("rcvd_pkts", 3_500),
            ("duplicate_request", 2_451),
        ]);
        assert!(no_return(&late_req, &late_resp));
    }

    /// mlx5: implied NAKs at the requester (a read response past a missing
    /// one) with the responder's duplicates name the return path even when
    /// the packet counts cannot be compared (PMA counts all of a port's
    /// traffic).
    #[test]
    fn mlx5_implied_naks_name_the_return_path() {
        let req = d(&[
            ("pma.port_xmit_packets", 50_000),
            ("pma.port_rcv_packets", 900_000),
            ("implied_nak_seq_err", 2_000),
            ("local_ack_timeout_err", 3),
        ]);
        let resp = d(&[
            ("pma.port_xmit_packets", 880_000),
            ("pma.port_rcv_packets", 50_000),
            ("duplicate_request", 2_003),
        ]);
        let (f, _) = judge(&end("mlx5_0", &req), &end("mlx5_1", &resp));
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(
            f[0].evidence.contains("implied_nak_seq_err +2000"),
            "{}",
            f[0].evidence
        );
        // The responder sent fewer than the requester received (other
        // traffic): nothing missing, but the implied NAKs decide.
        assert!(
            f[0].evidence.contains(": 0 (0.0 %) did not arrive"),
            "{}",
            f[0].evidence
        );
    }

    /// The clean write run on a loaded emulated host (measured): NAKs and
    /// out-of-sequence requests with every packet delivered both ways are
    /// `reordered`, not loss; with packets missing they stay loss.
    #[test]
    fn sequence_errors_without_loss_are_reordering() {
        let req = d(&[
            ("sent_pkts", 37_381),
            ("rcvd_pkts", 2_171),
            ("rcvd_seq_err", 36),
        ]);
        let resp = d(&[
            ("sent_pkts", 2_171),
            ("rcvd_pkts", 37_381),
            ("out_of_seq_request", 44),
        ]);
        let mut mine = crate::explain::rules::evaluate(&resp).0;
        assert_eq!(
            mine.iter().map(|f| f.code).collect::<Vec<_>>(),
            ["out_of_sequence"]
        );
        relabel(&end("rxeb", &resp), &end("rxea", &req), &mut mine);
        assert_eq!(mine[0].code, "reordered");
        assert!(
            mine[0]
                .evidence
                .contains("rxea sent_pkts +37381, rxeb rcvd_pkts +37381: 0 (0.0 %)"),
            "{}",
            mine[0].evidence
        );
        let lossy = d(&[
            ("sent_pkts", 2_171),
            ("rcvd_pkts", 36_000),
            ("out_of_seq_request", 44),
        ]);
        let mut f = crate::explain::rules::evaluate(&lossy).0;
        relabel(&end("rxeb", &lossy), &end("rxea", &req), &mut f);
        assert_eq!(f[0].code, "out_of_sequence");
        assert!(
            f[0].evidence.ends_with(
                "; rxea sent_pkts +37381, rxeb rcvd_pkts +36000: 1381 (3.7 %) did not arrive"
            ),
            "{}",
            f[0].evidence
        );
    }

    #[test]
    fn the_peers_json_deltas_read_back() {
        let v = serde_json::json!({"counter_deltas": {"a": 5, "b": "vanished", "c": "reset"}});
        let m = peer_deltas(&v);
        assert_eq!(
            (m["a"], m["b"], m["c"]),
            (Delta::Moved(5), Delta::Vanished, Delta::Reset)
        );
        assert!(peer_deltas(&serde_json::json!({})).is_empty());
    }
}
