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
    if let Err(why) = vm::available() {
        println!("SKIPPED: {why}");
        return;
    }
    let script = r#"
O="-d rxe0 -x 0 -F --timeout 20"
OS="-d rxe0 -x 0 -F"
single compare "$RDMAPERF_BIN compare write-bw $O -s 64 -n 300 --reps 2 --out_json_file=$RESULTS/compare.json"
single threads "$RDMAPERF_BIN write-bw --loopback $O -s 64 -n 300 --threads 2 --out_json_file=$RESULTS/threads.json"
single read_threads "$RDMAPERF_BIN read-bw --loopback $O -s 64 -n 200 -q 4 --threads 2"
pair stock "ib_write_bw $OS -q 2 -n 300 -s 64 -p \$PORT" "$RDMAPERF_BIN write-bw $O -q 2 -n 300 -s 64 --threads 2 -p \$PORT 127.0.0.1"
"#;
    let r = vm::Batch::new()
        .bin(env!("CARGO_BIN_EXE_rdmaperf"))
        .timeout_s(600)
        .run(script);

    let c = r.single("compare");
    println!("compare:\n{}", c.out);
    assert_eq!(c.rc, Some(0), "compare failed:\n{}", c.out);
    assert!(c.out.contains("vs post-send"), "no table:\n{}", c.out);
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
    let th = j["results"]["threads"]
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

    let p = r.pair("stock");
    assert_eq!(
        (p.server.rc, p.client.rc),
        (Some(0), Some(0)),
        "server:\n{}\nclient:\n{}",
        p.server.out,
        p.client.out
    );
    assert_eq!(
        row_iters(&p.client.out, "64"),
        Some(600),
        "{}",
        p.client.out
    );
    assert_eq!(
        row_iters(&p.server.out, "64"),
        Some(600),
        "{}",
        p.server.out
    );
}
