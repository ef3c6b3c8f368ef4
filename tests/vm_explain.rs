//! `--explain` on a real wire: two soft-RoCE devices on the two ends of a
//! veth pair (link-local GIDs, so the packets cross the veth and a qdisc on
//! it acts; bw-diagnosis.md §4), write-bw and send-bw between them with
//! `--explain` on both sides: a clean run gives no loss or timeout finding,
//! netem loss on the request path gives the loss finding at the sender and
//! the out-of-sequence finding at the receiver with their counters as
//! evidence, a delay above the QP's ACK timeout (150 ms one way against perftest's
//! 67 ms) gives the timeout finding,
//! and a stock perftest 4.5 receiver with two receives gives the RNR
//! finding at the rdmaperf sender, which explains its own counters and says
//! the peer is stock perftest. Loss on the way back only (netem on the
//! responder's veth: write ACKs, read responses) gives `return_path_loss`
//! on both ends, naming the direction with both ends' counters, where the
//! requester alone would have said timeout (reads) or nothing (ACKs); the
//! clean write and read runs do not give it. 5 % of send-bw's ACKs lost
//! leaves the retries at a clean run's level; the packets the responder
//! sent against those the requester received still name that direction
//! (`direction_loss`, or `return_path_loss`), never "no loss"; the clean
//! runs name no direction. Every block on these software
//! devices says the CPU, not the link, is the ceiling, never "try -q 4".
//! `rdmaperf doctor --probe-dmabuf` says rxe takes no dma-buf MRs (NCCL's
//! probe: EOPNOTSUPP from a provider without `reg_dmabuf_mr`). Between two rdmaperf sides each block also
//! shows the peer's findings (exchanged before the close). (rdmaperf's own receiver reposts fast
//! enough that `-r 2` ran dry in no run under emulation; the receiver-side
//! RNR rule is checked on recorded counters in `src/explain/rules.rs`.)

mod common;
use common::vm;

const SCRIPT: &str = r#"
KD=$(ls -d "${RDMAPERF_VM_DIR:-$RDMAPERF_REPO/.vm}"/kernel-* 2>/dev/null | head -1)
for m in veth sch_netem; do
    modprobe -d "$KD" $m > $RESULTS/mod.txt 2>&1 || { echo "modprobe $m from $KD failed: $(cat $RESULTS/mod.txt)" > $RESULTS/mod.missing; exit 0; }
done
rdma link delete rxe0
ip link add v0 type veth peer name v1
ip link set v0 up; ip link set v1 up
rdma link add rxea type rxe netdev v0; rdma link add rxeb type rxe netdev v1
gid0_ready rxea && gid0_ready rxeb || echo "GID 0 of rxea/rxeb not set after 10 s" > $RESULTS/gid.missing
# NCCL's dma-buf probe (explain::gpu_topo, verbs::dmabuf_probe) on rxe: its provider has no
# reg_dmabuf_mr, so the verb fails with EOPNOTSUPP before the kernel.
single doctor_dmabuf "\"\$RDMAPERF_BIN\" doctor --probe-dmabuf"
W='write-bw -x 0 -s 65536 --explain --timeout 60'
srv() { echo "\"\$RDMAPERF_BIN\" $1 -d rxeb -p \$PORT"; }
cli() { echo "\"\$RDMAPERF_BIN\" $1 -d rxea -p \$PORT 127.0.0.1"; }
pair clean "$(srv "$W -D 3")" "$(cli "$W -D 3")"
tc qdisc add dev v0 root netem loss 2%
pair loss "$(srv "$W -D 3")" "$(cli "$W -D 3 --out_json_file=$RESULTS/loss.json")"
tc -s qdisc show dev v0 > $RESULTS/loss.qdisc 2>&1
tc qdisc del dev v0 root
tc qdisc add dev v0 root netem delay 150ms
pair delay "$(srv "$W -D 10")" "$(cli "$W -D 10")"
tc qdisc del dev v0 root
# Loss on the way back only: netem on v1, the responder rxeb's egress (ACKs of writes, read
# responses); the requests on v0 are untouched. Then a clean read for its noise floor.
R='read-bw -x 0 -s 65536 --explain --timeout 60'
tc qdisc add dev v1 root netem loss 30%
pair ackloss "$(srv "$W -D 4")" "$(cli "$W -D 4 --out_json_file=$RESULTS/ackloss.json")"
# The same with 16 KiB writes: the ACK timer caps the retries (one per QP timeout), so per
# packet they stay under a clean 64 KiB run's rate; the missing ACKs decide.
pair ackloss16k "$(srv "${W/65536/16384} -D 4")" "$(cli "${W/65536/16384} -D 4")"
tc qdisc change dev v1 root netem loss 5%
# send-bw with 5 % of the ACKs lost: the retries stay at a clean run's level (cumulative ACKs),
# only the packets the responder sent against those the requester received show the loss.
S='send-bw -x 0 -s 65536 --explain --timeout 60'
pair sendack5 "$(srv "$S -D 3")" "$(cli "$S -D 3")"
pair readloss "$(srv "$R -D 3")" "$(cli "$R -D 3")"
tc -s qdisc show dev v1 > $RESULTS/back.qdisc 2>&1
tc qdisc del dev v1 root
pair readclean "$(srv "$R -D 3")" "$(cli "$R -D 3")"
# RNR against a stock perftest 4.5 receiver with two receives (it reposts slowly enough to run
# dry; bw-diagnosis §4): the rdmaperf sender explains its own counters only.
pair rnr 'ib_send_bw -d rxeb -x 0 -s 4096 -D 3 -r 2 -F -p $PORT' "$(cli 'send-bw -x 0 -s 4096 -D 3 --explain --timeout 60')"
"#;

/// The finding codes of an `--explain` block ("  1. loss: ...").
fn findings(out: &str) -> Vec<String> {
    let Some(at) = out.find(" Explain (") else {
        return vec!["<no Explain block>".into()];
    };
    out[at..]
        .lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let (num, rest) = l.split_once(". ")?;
            num.parse::<u32>().ok()?;
            Some(rest.split(':').next()?.to_string())
        })
        .collect()
}

/// The peer's finding codes in the block ("  p1. out_of_sequence: ...").
fn peer_findings(out: &str) -> Vec<String> {
    out.lines()
        .filter_map(|l| {
            let (num, rest) = l.trim_start().split_once(". ")?;
            num.strip_prefix('p')?.parse::<u32>().ok()?;
            Some(rest.split(':').next()?.to_string())
        })
        .collect()
}

/// The packets missing on the request direction, as return_path_loss's
/// evidence gives them ("; the other way rxea sent_pkts +5, rxeb rcvd_pkts
/// +3: 2 (40.0 %) did not arrive").
fn other_way_missing(out: &str) -> Option<u64> {
    let at = out.find("; the other way ")?;
    let rest = &out[at..];
    let colon = rest.find(": ")?;
    rest[colon + 2..].split(' ').next()?.parse().ok()
}

#[test]
fn findings_are_read_from_the_block() {
    let out = " Explain (rxea port 1; ...):\n  link ceiling ...\n  1. loss: packet loss\n     evidence: x\n  2. timeout: t\n  peer (rxeb port 1):\n  p1. out_of_sequence: o\n";
    assert_eq!(findings(out), ["loss", "timeout"]);
    assert_eq!(peer_findings(out), ["out_of_sequence"]);
    assert_eq!(findings("no block"), ["<no Explain block>"]);
    let ev = "evidence: x; the other way rxea sent_pkts +19331, rxeb rcvd_pkts +7027: 12304 (63.6 %) did not arrive";
    assert_eq!(other_way_missing(ev), Some(12304));
    assert_eq!(other_way_missing("no evidence"), None);
}

#[test]
fn explain_on_a_veth_pair_with_netem() {
    let Some(r) = vm::Batch::rdmaperf().run_or_skip(SCRIPT) else {
        return;
    };
    assert_eq!(r.status, 0, "VM batch failed:\n{}", r.console);
    if let Some(why) = r.file("mod.missing") {
        panic!("the VM's kernel lacks a module this test needs: {why}");
    }
    assert!(
        r.file("gid.missing").is_none(),
        "{:?}",
        r.file("gid.missing")
    );
    // The dma-buf probe says rxe takes no dma-buf MRs; no GPU in the VM.
    let doc = r.single("doctor_dmabuf");
    for want in [
        "dma-buf MRs on rxea: unsupported",
        "dma-buf MRs on rxeb: unsupported",
        " GPUs       none",
    ] {
        assert!(doc.out.contains(want), "no '{want}':\n{}", doc.out);
    }
    let show = |name: &str| {
        let p = r.pair(name);
        format!("--- server\n{}\n--- client\n{}", p.server.out, p.client.out)
    };

    let clean = r.pair("clean");
    clean.assert_ok();
    for (side, out) in [("server", &clean.server.out), ("client", &clean.client.out)] {
        let f = findings(out);
        assert!(
            !f.iter()
                .any(|c| ["loss", "out_of_sequence", "timeout"].contains(&c.as_str())),
            "clean {side}: {f:?}\n{}",
            show("clean")
        );
        assert!(
            out.contains("link ceiling") && out.contains("PCIe ceiling   none"),
            "{}",
            show("clean")
        );
        // The software line always; the verdict only when nothing else is
        // said (a loaded emulated host shows `reordered`: sequence errors with
        // every packet delivered).
        assert!(
            out.contains(": a software device (no PCIe function)") && !out.contains("-q 4"),
            "clean {side}: {}",
            show("clean")
        );
        assert!(
            findings(out).iter().any(|c| c == "reordered")
                || out.contains("verdict: nothing in the counters or the facts explains it (no loss, timeouts, RNR, congestion); the CPU caps a software device"),
            "clean {side}: {}",
            show("clean")
        );
    }
    let no_return = |name: &str| {
        let p = r.pair(name);
        p.assert_ok();
        for out in [&p.server.out, &p.client.out] {
            assert!(
                !findings(out).contains(&"return_path_loss".to_string()),
                "{}",
                show(name)
            );
        }
    };
    // A clean link loses nothing either way: no direction is named.
    for name in ["clean", "readclean"] {
        let p = r.pair(name);
        for out in [&p.server.out, &p.client.out] {
            assert!(
                !findings(out).contains(&"direction_loss".to_string()),
                "{}",
                show(name)
            );
        }
    }
    no_return("clean");
    no_return("readclean");
    no_return("loss");
    no_return("delay");

    // Loss on the way back: both ends name it, with both ends' counters.
    for name in ["ackloss", "ackloss16k", "readloss"] {
        let p = r.pair(name);
        p.assert_ok();
        for (side, out) in [("client", &p.client.out), ("server", &p.server.out)] {
            let f = findings(out);
            // The requester's timeout is explained away; sequence errors stay
            // only where the request direction lost packets too (a loaded
            // emulated host drops some on the veth: seen 63 % once).
            let forward_lost = other_way_missing(out).unwrap_or(0) > 0;
            assert!(
                f.contains(&"return_path_loss".to_string())
                    && !f.contains(&"timeout".to_string())
                    && (forward_lost
                        || !f
                            .iter()
                            .any(|c| ["loss", "out_of_sequence"].contains(&c.as_str()))),
                "{name} {side}: {f:?}\n{}\n{:?}",
                show(name),
                r.file("back.qdisc")
            );
            assert!(
                out.contains("evidence: requester rxea: completer_retry_err +")
                    && out.contains("responder rxeb: duplicate_request +")
                    && out.contains("did not arrive"),
                "{}",
                show(name)
            );
        }
        assert!(
            p.client.out.contains(
                "return_path_loss: packets from the peer (the responder) back to this side"
            ),
            "{}",
            show(name)
        );
    }
    // 5 % of send-bw's ACKs lost: both ends name the loss on the way back
    // (by the retries, or by the packet counts alone), never "no loss".
    let p = r.pair("sendack5");
    p.assert_ok();
    for (side, out) in [("client", &p.client.out), ("server", &p.server.out)] {
        let f = findings(out);
        assert!(
            (f.contains(&"return_path_loss".to_string())
                || f.contains(&"direction_loss".to_string()))
                && out.contains("rxeb sent_pkts +")
                && out.contains("did not arrive")
                && !out.contains("no loss"),
            "sendack5 {side}: {f:?}\n{}",
            show("sendack5")
        );
    }
    assert!(
        p.client.out.contains("packets from the peer")
            && p.server.out.contains("packets from this side"),
        "{}",
        show("sendack5")
    );
    let json: serde_json::Value =
        serde_json::from_str(r.file("ackloss.json").expect("the client's JSON report")).unwrap();
    assert!(
        json["explain"]["findings"]
            .as_array()
            .is_some_and(|f| f.iter().any(|f| f["code"] == "return_path_loss")),
        "{json}"
    );
    assert!(json["explain"]["software_device"].is_string(), "{json}");

    let loss = r.pair("loss");
    loss.assert_ok();
    assert!(
        findings(&loss.client.out).contains(&"loss".to_string()),
        "{}\n{:?}",
        show("loss"),
        r.file("loss.qdisc")
    );
    assert!(
        loss.client.out.contains("evidence: rcvd_seq_err +"),
        "{}",
        show("loss")
    );
    assert!(
        findings(&loss.server.out).contains(&"out_of_sequence".to_string()),
        "{}",
        show("loss")
    );
    // Both sides rdmaperf with --explain: each block shows the peer's
    // findings too (exchanged over the control channel before the close).
    assert!(
        loss.client.out.contains("; the peer's below):")
            && peer_findings(&loss.client.out).contains(&"out_of_sequence".to_string()),
        "{}",
        show("loss")
    );
    assert!(
        peer_findings(&loss.server.out).contains(&"loss".to_string()),
        "{}",
        show("loss")
    );

    // --out_json carries the explanation: findings with evidence and every raw delta.
    let json: serde_json::Value =
        serde_json::from_str(r.file("loss.json").expect("the client's JSON report")).unwrap();
    let ex = &json["explain"];
    assert_eq!(ex["device"], "rxea", "{json}");
    assert!(
        ex["findings"].as_array().unwrap().iter().any(
            |f| f["code"] == "loss" && f["evidence"].as_str().unwrap().contains("rcvd_seq_err")
        ),
        "{ex}"
    );
    assert!(
        ex["counter_deltas"]["rcvd_seq_err"].as_u64().unwrap() > 0,
        "{ex}"
    );
    assert_eq!(ex["peer"]["device"], "rxeb", "the peer's explanation: {ex}");
    assert!(
        ex["peer"]["findings"]
            .as_array()
            .is_some_and(|f| f.iter().any(|f| f["code"] == "out_of_sequence")),
        "{ex}"
    );
    assert!(
        json.get("results").is_some(),
        "the tool's own report is kept: {json}"
    );

    let delay = r.pair("delay");
    delay.assert_ok();
    assert!(
        findings(&delay.client.out).contains(&"timeout".to_string()),
        "{}",
        show("delay")
    );

    let rnr = r.pair("rnr");
    rnr.assert_ok();
    assert!(
        findings(&rnr.client.out).contains(&"rnr".to_string()),
        "{}",
        show("rnr")
    );
    assert!(
        rnr.client.out.contains("evidence: rcvd_rnr_err +"),
        "{}",
        show("rnr")
    );
    // A stock peer: this side's facts only, and the block says so.
    assert!(
        rnr.client.out.contains(
            " Explain (rxea port 1; this side's counters over the run; the peer is stock perftest: local facts only)"
        ),
        "{}",
        show("rnr")
    );
    assert!(peer_findings(&rnr.client.out).is_empty(), "{}", show("rnr"));
}
