//! Ctrl-C mid-run on the real verbs path (soft-RoCE VM): the interrupted side
//! prints its partial result, moves its QPs to ERR, exits 130; the peer sees it
//! go and exits non-zero with a message instead of hanging.

mod common;
use common::vm;
use std::sync::OnceLock;

/// Both tests' cases in one VM boot: the mid-run SIGINT first, then the
/// control-step SIGINTs (their status lines in `ctl_rc.txt`).
fn batch() -> Option<&'static vm::BatchResult> {
    static BATCH: OnceLock<vm::BatchResult> = OnceLock::new();
    vm::shared_batch(&BATCH, env!("CARGO_BIN_EXE_rdmaperf"), 400, || {
        format!("{MID_RUN}{CONTROL_STEPS}")
    })
}

/// The server in the background; the client gets SIGINT 12 s into a 30 s run.
const MID_RUN: &str = r#"
O="-d rxe0 -x 0 -F -s 64 -p 18600"
timeout 120 $RDMAPERF_BIN write-bw $O -D 30 > $RESULTS/srv.out 2>&1 & S=$!
wait_port 18600 $S
$RDMAPERF_BIN write-bw $O -D 30 127.0.0.1 > $RESULTS/cli.out 2>&1 & C=$!
sleep 12; kill -INT $C; kill -INT $C; wait $C; echo "client_rc=$?" > $RESULTS/rc.txt
wait $S; echo "server_rc=$?" >> $RESULTS/rc.txt
"#;

/// A server in accept, then a server waiting for the client's -D 10 run.
const CONTROL_STEPS: &str = r#"
O="-d rxe0 -x 0 -F -s 64"
now() { date +%s.%N; }
# 1. Server waiting in accept.
timeout 60 $RDMAPERF_BIN write-bw $O -p 18610 > $RESULTS/accept.out 2>&1 & S=$!
wait_port 18610 $S; sleep 1
t0=$(now); kill -INT $S; wait $S; echo "accept_rc=$? dt=$(echo "$(now) - $t0" | bc)" >> $RESULTS/ctl_rc.txt
# 2. Server blocked in the handshake that waits for the client's -D 10 run.
timeout 60 $RDMAPERF_BIN write-bw $O -D 10 -p 18611 > $RESULTS/wait.out 2>&1 & S=$!
wait_port 18611 $S
timeout 60 $RDMAPERF_BIN write-bw $O -D 10 -p 18611 127.0.0.1 > $RESULTS/wait.peer 2>&1 & C=$!
sleep 5
t0=$(now); kill -INT $S; wait $S; echo "wait_rc=$? dt=$(echo "$(now) - $t0" | bc)" >> $RESULTS/ctl_rc.txt
wait $C; echo "peer_rc=$?" >> $RESULTS/ctl_rc.txt
"#;

#[test]
fn sigint_mid_run_keeps_partial_result() {
    // Server in the background; the client gets SIGINT 12 s into a 30 s run
    // (past the 7.5 s warm-up), delivered twice back to back the way GNU
    // timeout(1) forwards it (to the child and to its process group): one
    // request, so the partial result must still be printed.
    let Some(r) = batch() else {
        return;
    };
    let [rc, cli, srv] = r.shown_files(["rc.txt", "cli.out", "srv.out"]);
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

/// SIGINT while a side is blocked in the control channel (a server waiting for
/// its client, a server waiting for the client's run to end): the socket is
/// shut down by the handler, so the side exits 130 at once instead of
/// waiting for a timeout, and the peer is told.
#[test]
fn sigint_in_control_steps_exits_at_once() {
    let Some(r) = batch() else {
        return;
    };
    let [rc, accept, wait, peer] =
        r.shown_files(["ctl_rc.txt", "accept.out", "wait.out", "wait.peer"]);
    let field = |name: &str| -> Option<(i32, f64)> {
        let l = rc.lines().find(|l| l.starts_with(name))?;
        let code = l
            .split_whitespace()
            .next()?
            .split('=')
            .nth(1)?
            .parse()
            .ok()?;
        let dt = l
            .split("dt=")
            .nth(1)
            .and_then(|d| d.trim().parse().ok())
            .unwrap_or(f64::MAX);
        Some((code, dt))
    };
    let (code, dt) = field("accept_rc").expect("accept case ran");
    assert_eq!(code, 130, "server in accept must exit 130:\n{accept}");
    assert!(dt < 3.0, "server in accept took {dt} s to exit");
    assert!(accept.contains("interrupted"), "{accept}");
    let (code, dt) = field("wait_rc").expect("wait case ran");
    assert_eq!(
        code, 130,
        "server waiting for the run must exit 130:\n{wait}"
    );
    assert!(dt < 3.0, "server waiting for the run took {dt} s to exit");
    let peer_rc = rc
        .lines()
        .find(|l| l.starts_with("peer_rc="))
        .expect("peer ran");
    assert_ne!(
        peer_rc, "peer_rc=0",
        "the client must fail when the server is gone:\n{peer}"
    );
    assert!(
        peer.contains("rdmaperf write-bw:"),
        "the client must say why:\n{peer}"
    );
}
