//! Issue #5 in the soft-RoCE VM: `compare` across post methods (rxe: wr-api and
//! post-send run, direct is listed as unsupported with its reason) and the
//! multi-threaded client (`--threads 2`) against rdmaperf and stock perftest.

mod common;
use common::vm;
use serde_json::Value;

fn row_iters(out: &str, size: &str) -> Option<u64> {
    out.lines()
        .find(|l| l.split_whitespace().next() == Some(size) && l.split_whitespace().count() >= 5)
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
}

#[test]
fn compare_and_threads_on_rxe() {
    let script = r#"
O="-d rxe0 -x 0 -F --timeout 20"
OS="-d rxe0 -x 0 -F"
single compare "$RDMAPERF_BIN compare write-bw --loopback $O -s 64 -n 300 --reps 2 --out_json_file=$RESULTS/compare.json"
single compare_send "$RDMAPERF_BIN compare send-bw --loopback $O -s 64 -n 300 --reps 2 --out_json_file=$RESULTS/compare_send.json"
single threads "$RDMAPERF_BIN write-bw --loopback $O -s 64 -n 300 --threads 2 --out_json_file=$RESULTS/threads.json"
single read_threads "$RDMAPERF_BIN read-bw --loopback $O -s 64 -n 200 -q 4 --threads 2"
# Against stock perftest: one stock server per thread, thread i on port 18700+i.
for i in 0 1; do
  ib_write_bw $OS -q 1 -n 300 -s 64 -p $((18700 + i)) > $RESULTS/stock.server$i.out 2>&1 &
  eval "S$i=\$!"
done
wait_port 18700 $S0; wait_port 18701 $S1
timeout 120 $RDMAPERF_BIN write-bw $O -q 2 -n 300 -s 64 --threads 2 -p 18700 \
  --out_json_file=$RESULTS/stock.json 127.0.0.1 > $RESULTS/stock.client.out 2>&1
echo $? > $RESULTS/stock.client.rc
wait $S0; echo $? > $RESULTS/stock.server0.rc
wait $S1; echo $? > $RESULTS/stock.server1.rc
"#;
    let Some(r) = vm::Batch::rdmaperf().timeout_s(600).run_or_skip(script) else {
        return;
    };

    let c = r.single("compare");
    println!("compare:\n{}", c.out);
    c.assert_ok_with(&["vs post-send"]);
    let j: Value =
        serde_json::from_str(r.file("compare.json").expect("compare.json")).expect("valid JSON");
    let samples = j["samples"].as_array().unwrap();
    let order: Vec<&str> = samples
        .iter()
        .map(|s| s["method"].as_str().unwrap())
        .collect();
    assert_eq!(
        order,
        ["wr-api", "post-send", "wr-api", "post-send"],
        "interleaved A B A B"
    );
    assert!(samples.iter().all(|s| s["mpps"].as_f64().unwrap() > 0.0));
    let summary = j["summary"].as_array().unwrap();
    assert_eq!(summary.len(), 2);
    assert_eq!(summary[1]["ratio_to_post_send"].as_f64(), Some(1.0));
    let un = j["unsupported"].as_array().unwrap();
    assert_eq!(un[0]["method"], "direct");
    assert!(un[0]["reason"].as_str().unwrap().contains("EOPNOTSUPP"));

    // send-bw: the receiver's cost per message beside the sender's post
    // cost, for each method that ran (the same method on both ends).
    let c = r.single("compare_send");
    println!("compare send-bw:\n{}", c.out);
    c.assert_ok_with(&["recv ns/msg"]);
    let j: Value = serde_json::from_str(r.file("compare_send.json").expect("compare_send.json"))
        .expect("valid JSON");
    let summary = j["summary"].as_array().unwrap();
    assert_eq!(summary.len(), 2, "wr-api and post-send ran");
    for row in summary {
        let recv = row["recv_ns_per_msg"].as_f64().unwrap();
        let post = row["ns_per_call"].as_f64().unwrap();
        assert!(recv > 0.0 && post > 0.0, "both costs measured: {row}");
    }
    assert_eq!(j["units"]["recv_ns_per_msg"], "ns");
    assert_eq!(j["unsupported"][0]["method"], "direct");

    let t = r.single("threads");
    println!("threads:\n{}", t.out);
    assert_eq!(t.rc, Some(0), "--threads 2 loopback failed:\n{}", t.out);
    assert_eq!(
        row_iters(&t.out, "64"),
        Some(600),
        "2 QPs x 300:\n{}",
        t.out
    );
    assert!(
        t.out.contains("Thread 0 (CPU") && t.out.contains("Thread 1 (CPU"),
        "{}",
        t.out
    );
    let j: Value =
        serde_json::from_str(r.file("threads.json").expect("threads.json")).expect("valid JSON");
    let th = j["results"][0]["threads"]
        .as_array()
        .expect("per-thread results");
    assert_eq!(th.len(), 2);
    assert!(th
        .iter()
        .all(|x| x["MsgRate"].as_f64().unwrap() > 0.0 && x["qps"] == 1));

    let rt = r.single("read_threads");
    assert_eq!(rt.rc, Some(0), "read-bw --threads 2 failed:\n{}", rt.out);
    assert_eq!(row_iters(&rt.out, "65536"), None);
    assert_eq!(row_iters(&rt.out, "64"), Some(800), "{}", rt.out);

    let client = r.file("stock.client.out").unwrap_or("").to_string();
    let rc = |f: &str| r.file(f).map(|s| s.trim().to_string());
    println!("stock client:\n{client}");
    assert_eq!(rc("stock.client.rc").as_deref(), Some("0"), "{client}");
    assert!(
        client.contains("port 18700 with -q 1, port 18701 with -q 1"),
        "the client says which stock server each thread uses:\n{client}"
    );
    // The sum of both threads; each stock server saw its own 300.
    assert_eq!(row_iters(&client, "64"), Some(600), "{client}");
    for i in 0..2 {
        let out = r.file(&format!("stock.server{i}.out")).unwrap_or("");
        assert_eq!(
            rc(&format!("stock.server{i}.rc")).as_deref(),
            Some("0"),
            "{out}"
        );
        assert_eq!(row_iters(out, "64"), Some(300), "server {i}:\n{out}");
    }
    let j: Value =
        serde_json::from_str(r.file("stock.json").expect("stock.json")).expect("valid JSON");
    let th = j["results"][0]["threads"]
        .as_array()
        .expect("per-thread records in the JSON");
    assert_eq!(th.len(), 2, "{j}");
}
