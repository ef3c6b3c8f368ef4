//! Ctrl-C mid-run on the real verbs path (soft-RoCE VM): the interrupted side
//! prints its partial result, moves its QPs to ERR, exits 130; the peer sees it
//! go and exits non-zero with a message instead of hanging.

mod common;
use common::vm;

#[test]
fn sigint_mid_run_keeps_partial_result() {
    if let Err(why) = vm::available() {
        println!("SKIPPED: {why}");
        return;
    }
    // Server in the background; the client gets SIGINT 6 s into a 30 s run.
    let script = r#"
O="-d rxe0 -x 0 -F -s 64 -p 18600"
timeout 120 $RDMAPERF_BIN write-bw $O -D 30 > $RESULTS/srv.out 2>&1 & S=$!
wait_port 18600 $S
timeout 120 $RDMAPERF_BIN write-bw $O -D 30 127.0.0.1 > $RESULTS/cli.out 2>&1 & C=$!
sleep 6; kill -INT $C; wait $C; echo "client_rc=$?" > $RESULTS/rc.txt
wait $S; echo "server_rc=$?" >> $RESULTS/rc.txt
"#;
    let r = vm::Batch::new()
        .bin(env!("CARGO_BIN_EXE_rdmaperf"))
        .timeout_s(240)
        .run(script);
    let rc = r.file("rc.txt").unwrap_or("").to_string();
    let cli = r.file("cli.out").unwrap_or("").to_string();
    let srv = r.file("srv.out").unwrap_or("").to_string();
    println!("{rc}\n--- client\n{cli}\n--- server\n{srv}");
    assert!(
        rc.contains("client_rc=130"),
        "client must exit 130 on SIGINT:\n{rc}"
    );
    assert!(
        cli.contains("interrupted"),
        "client must say it was interrupted:\n{cli}"
    );
    // The partial result row: 64-byte messages, a non-zero iteration count.
    let row = cli
        .lines()
        .find(|l| l.split_whitespace().next() == Some("64"))
        .unwrap_or_else(|| panic!("no partial result row:\n{cli}"));
    let iters: u64 = row.split_whitespace().nth(1).unwrap().parse().unwrap();
    assert!(
        iters > 0,
        "partial result must count the messages done: {row}"
    );
    assert!(
        rc.contains("server_rc=") && !rc.contains("server_rc=0"),
        "server must fail when the client vanishes:\n{rc}"
    );
    assert!(
        srv.contains("rdmaperf write-bw:"),
        "server must explain why it failed:\n{srv}"
    );
}
