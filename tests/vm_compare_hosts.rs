//! `rdmaperf compare` between two hosts, in the soft-RoCE VM (one boot): an
//! `rdmaperf compare <tool>` server and an `rdmaperf compare <tool> ...
//! SERVER` client, two processes on rxe0 standing in for two hosts, for
//! every tool compare takes (write-bw, read-bw, atomic-bw, send-bw) and both
//! verbs methods (rxe has no direct path: it is listed with its reason).
//! The server gets the test's flags (`-s`, `-n`), as a perftest server does.
//! The server knows no methods beforehand and stops after the client's last
//! run; the client's table carries each method's post cost and its ratio to
//! post-send with the spread over the repetitions. `--methods` picks and
//! orders the methods. Refused with the reason: a stock perftest server, a
//! stock perftest client, a plain `rdmaperf write-bw` server, `--reversed`.

mod common;
use common::vm;
use common::vm_script::{pair, RDMAPERF};
use serde_json::Value;

const TOOLS: [&str; 4] = ["write-bw", "read-bw", "atomic-bw", "send-bw"];
const O: &str = "-d rxe0 -x 0 -F --timeout 30";

fn script() -> String {
    let r = RDMAPERF;
    let mut s = String::new();
    // The server takes the test's flags (a send-bw receiver counts -n
    // messages, as in perftest), never the methods or repetitions.
    for t in TOOLS {
        let size = if t == "atomic-bw" { 8 } else { 64 };
        let server = format!("{r} compare {t} {O} -s {size} -n 300");
        let json = format!("--out_json_file=$RESULTS/{t}.json");
        let client = format!("{r} compare {t} {O} -s {size} -n 300 --reps 2 {json}");
        s += &pair(&t.replace('-', "_"), &server, &client);
    }
    let w = "-s 64 -n 300";
    // --methods: post-send alone, three repetitions.
    s += &pair(
        "methods",
        &format!("{r} compare write-bw {O} {w}"),
        &format!("{r} compare write-bw {O} {w} --reps 3 --methods post-send"),
    );
    // Peers that cannot take part, each refused with its reason.
    s += &pair(
        "stock_server",
        &format!("ib_write_bw -d rxe0 -x 0 -F {w}"),
        &format!("{r} compare write-bw {O} {w} --reps 1"),
    );
    s += &pair(
        "stock_client",
        &format!("{r} compare write-bw {O} {w}"),
        &format!("ib_write_bw -d rxe0 -x 0 -F {w}"),
    );
    s += &pair(
        "plain_server",
        &format!("{r} write-bw {O} {w}"),
        &format!("{r} compare write-bw {O} {w} --reps 1"),
    );
    s += &format!(
        "single reversed \"$RDMAPERF_BIN compare write-bw {O} -s 64 --reversed 127.0.0.1\"\n"
    );
    s
}

#[test]
fn compare_between_two_processes_on_rxe() {
    let Some(r) = vm::Batch::rdmaperf().timeout_s(900).run_or_skip(&script()) else {
        return;
    };
    for t in TOOLS {
        let p = r.pair(&t.replace('-', "_"));
        println!(
            "{t} client:\n{}\n{t} server:\n{}",
            p.client.out, p.server.out
        );
        p.client
            .assert_ok_with(&["vs post-send", "spread", "direct     not run:"]);
        // The server served four runs (2 methods x 2 reps) and stopped.
        p.server.assert_ok_with(&[
            "compare server:",
            "run 1: client --post wr-api",
            "run 4: client --post post-send (its last)",
        ]);
        assert!(!p.server.out.contains("run 5"), "{}", p.server.out);
        let j: Value =
            serde_json::from_str(r.file(&format!("{t}.json")).expect("json")).expect("valid JSON");
        let order: Vec<&str> = j["samples"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["method"].as_str().unwrap())
            .collect();
        assert_eq!(order, ["wr-api", "post-send", "wr-api", "post-send"], "{t}");
        let rows = j["summary"].as_array().unwrap();
        assert_eq!(rows.len(), 2, "{t}: {rows:?}");
        for row in rows {
            assert!(row["mpps"].as_f64().unwrap() > 0.0, "{t}: {row}");
            assert!(row["ns_per_call"].as_f64().unwrap() > 0.0, "{t}: {row}");
            let (lo, hi) = (row["ratio_min"].as_f64(), row["ratio_max"].as_f64());
            let mid = row["ratio_to_post_send"].as_f64();
            assert!(lo.is_some() && lo <= hi && mid.is_some(), "{t}: {row}");
            // The receiver's cost per message came back from the server.
            let recv = row["recv_ns_per_msg"].as_f64().unwrap();
            assert_eq!(recv > 0.0, t == "send-bw", "{t}: {row}");
        }
        assert_eq!(rows[1]["ratio_min"].as_f64(), Some(1.0), "{t}");
        assert_eq!(rows[1]["ratio_max"].as_f64(), Some(1.0), "{t}");
    }

    let m = r.pair("methods");
    println!("--methods:\n{}", m.client.out);
    m.client.assert_ok_with(&["post-send"]);
    assert!(!m.client.out.contains(" wr-api "), "{}", m.client.out);
    m.server
        .assert_ok_with(&["run 3: client --post post-send (its last)"]);

    let s = r.pair("stock_server");
    s.client.assert_failed_with(&[
        "the server is stock perftest 6.06: compare between hosts needs `rdmaperf compare write-bw` on both hosts",
    ]);
    let s = r.pair("stock_client");
    s.server
        .assert_failed_with(&["the client is stock perftest 6.06"]);
    assert_ne!(s.client.rc, Some(0), "{}", s.client.out);
    let s = r.pair("plain_server");
    s.client.assert_failed_with(&[
        "we run `rdmaperf compare write-bw`, the server runs plain `rdmaperf write-bw`",
    ]);
    s.server.assert_failed_with(&[
        "the client runs `rdmaperf compare write-bw`, we run plain `rdmaperf write-bw`",
    ]);
    let rev = r.single("reversed");
    assert_eq!(rev.rc, Some(2), "{}", rev.out);
    assert!(
        rev.out.contains("--reversed: compare between hosts"),
        "{}",
        rev.out
    );
}
