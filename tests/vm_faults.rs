//! Faults on the real verbs path (soft-RoCE VM, one boot for all cases): a peer
//! SIGKILLed in the handshake and in the measured loop, SIGTERM mid-run, a
//! memlock limit too low, and error completions. Every case runs under
//! `timeout`, and the survivor must leave by itself, well before that, with a
//! non-zero status and a message that says what happened.

mod common;
use common::vm_cases::Cases;

/// The guest script. Each case writes `NAME.out` (stdout+stderr of the side
/// under test) and a line `NAME rc=N dt=S` to rc.txt, where dt is the time
/// from the fault to that side's exit.
const SCRIPT: &str = r#"
O="-d rxe0 -x 0 -F"
T="timeout -k 5 90"

# The victims run without `timeout`: SIGKILL to a `timeout` process would
# leave its child running.

# 1. A client that sends its version and is SIGKILLed: the server is mid-handshake.
$T $B write-bw $O -p 18700 > $RESULTS/hs.out 2>&1 & S=$!
wait_port 18700 $S
( exec 3<>/dev/tcp/127.0.0.1/18700; printf '6.06\0\0\0\0\0\0\0\0\0\0\0\0' >&3; exec sleep 60 ) & K=$!
sleep 1; kill -KILL $K; t0=$(now); done_case hs $S $t0

# 2. A stock client SIGKILLed 1 s after it started (handshake or loop, whichever).
$T $B write-bw $O -s 64 -D 20 -p 18701 > $RESULTS/stock_kill.out 2>&1 & S=$!
wait_port 18701 $S
ib_write_bw $O -s 64 -D 20 -p 18701 127.0.0.1 > $RESULTS/stock_kill.peer 2>&1 & C=$!
sleep 1; kill -KILL $C; t0=$(now); done_case stock_kill $S $t0

# 3. Our client SIGKILLed 3 s into the measured loop: the server survives.
$T $B write-bw $O -s 64 -D 20 -p 18702 > $RESULTS/loop_srv.out 2>&1 & S=$!
wait_port 18702 $S
$B write-bw $O -s 64 -D 20 -p 18702 127.0.0.1 > $RESULTS/loop_srv.peer 2>&1 & C=$!
sleep 4; kill -KILL $C; t0=$(now); done_case loop_srv $S $t0

# 4. A stock server SIGKILLed 3 s into the loop: our client survives (its QP's
#    peer is gone, so its WRITEs stop completing).
ib_write_bw $O -s 64 -D 20 -p 18703 > $RESULTS/loop_cli.peer 2>&1 & S=$!
wait_port 18703 $S
$T $B write-bw $O -s 64 -D 20 -p 18703 127.0.0.1 > $RESULTS/loop_cli.out 2>&1 & C=$!
sleep 4; kill -KILL $S; t0=$(now); done_case loop_cli $C $t0

# 5. SIGTERM to our client mid-run: 143 and a partial result.
$T $B write-bw $O -s 64 -D 20 -p 18704 > $RESULTS/term.peer 2>&1 & S=$!
wait_port 18704 $S
$B write-bw $O -s 64 -D 20 -p 18704 127.0.0.1 > $RESULTS/term.out 2>&1 & C=$!
sleep 5; kill -TERM $C; t0=$(now); done_case term $C $t0
wait $S

# 6. Locked-memory limit 64 KiB for a 64 MiB buffer. Root ignores RLIMIT_MEMLOCK
#    (CAP_IPC_LOCK), so the client runs without that capability.
$T $B write-bw $O -s 8M -q 4 -n 5 -p 18705 > $RESULTS/memlock.peer 2>&1 & S=$!
wait_port 18705 $S
t0=$(now)
$T setpriv --bounding-set -ipc_lock bash -c "ulimit -l 64; exec $B write-bw $O -s 8M -q 4 -n 5 -p 18705 127.0.0.1" > $RESULTS/memlock.out 2>&1 & C=$!
done_case memlock $C $t0
wait $S

# 7-8. The client under test against a stock server that is killed once the client is done.
stock_srv_case() { # NAME SERVER-CMD CLIENT-CMD PORT
    $T $2 -p $4 > $RESULTS/$1.peer 2>&1 & S=$!
    wait_port $4 $S
    t0=$(now)
    $T $3 -p $4 127.0.0.1 > $RESULTS/$1.out 2>&1 & C=$!
    done_case $1 $C $t0
    sleep 1; kill $S 2>/dev/null; wait $S
}
# 7. Error completion: our 64 KiB WRITEs into a stock server that registered
#    a buffer for 64-byte messages (mismatched -s) -> IBV_WC_REM_ACCESS_ERR.
stock_srv_case access "ib_write_bw $O -s 64 -n 1000" "$B write-bw $O -s 65536 -n 1000" 18706
# 8. WRITEs to a stock ib_read_bw server, whose QP allows remote reads only
#    -> IBV_WC_REM_INV_REQ_ERR.
stock_srv_case invreq "ib_read_bw $O -s 64 -n 1000" "$B write-bw $O -s 64 -n 1000" 18707
"#;

/// The partial/final result row of a 64-byte run and its iteration count.
fn row_iters(out: &str, size: &str) -> Option<u64> {
    out.lines()
        .find(|l| l.split_whitespace().next() == Some(size))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

#[test]
fn faults_end_runs_with_clear_errors() {
    let Some(c) = Cases::boot(600, SCRIPT) else {
        return;
    };
    // Every survivor leaves by itself (not by `timeout`: 124/137), fast.
    for n in [
        "hs",
        "stock_kill",
        "loop_srv",
        "loop_cli",
        "memlock",
        "access",
    ] {
        let (rc, dt) = c.case(n);
        c.expect(
            rc != 0 && rc != 124 && rc != 137,
            format!("{n}: must fail by itself, got rc {rc}"),
        );
        c.expect(
            dt < 45.0,
            format!("{n}: took {dt} s after the fault to exit"),
        );
        let out = c.get(&format!("{n}.out"));
        c.expect(
            out.contains("rdmaperf write-bw:"),
            format!("{n}: no error message:\n{out}"),
        );
    }
    // A vanished peer is named as such.
    for n in ["hs", "stock_kill", "loop_srv"] {
        let out = c.get(&format!("{n}.out")).to_lowercase();
        c.expect(
            out.contains("peer") || out.contains("closed") || out.contains("connection"),
            format!("{n}: the message must say the peer/connection went away:\n{out}"),
        );
    }
    // The client whose server vanished explains the stopped completions.
    let out = c.get("loop_cli.out");
    c.expect(
        out.contains("completion") || out.contains("peer"),
        format!("loop_cli: must name the failed completions or the peer:\n{out}"),
    );
    // SIGTERM: 143, "interrupted", partial row with messages counted.
    c.expect_exit("term", "term.out", 143, &["interrupted"]);
    let out = c.get("term.out");
    c.expect(
        row_iters(out, "64").is_some_and(|n| n > 0),
        format!("term: no partial result row:\n{out}"),
    );
    // memlock: names `ulimit -l`, the bytes needed and the limit in force.
    let out = c.get("memlock.out");
    c.expect(
        out.contains("ulimit -l") && out.contains("RLIMIT_MEMLOCK is 65536 bytes"),
        format!("memlock: must name ulimit -l and the 64 KiB limit:\n{out}"),
    );
    c.expect(
        out.contains("67108864 bytes must be locked"),
        format!("memlock: must name the bytes needed (64 MiB):\n{out}"),
    );
    // Error completions: status name, vendor error, QP, wr_id, partial row.
    for (n, size, status) in [
        ("access", "65536", "IBV_WC_REM_ACCESS_ERR"),
        ("invreq", "64", "IBV_WC_REM_INV_REQ_ERR"),
    ] {
        let out = c.get(&format!("{n}.out"));
        for part in [status, "vendor error", "on QP 0", "wr_id"] {
            c.expect(
                out.contains(part),
                format!("{n}: message lacks {part:?}:\n{out}"),
            );
        }
        c.expect(
            row_iters(out, size).is_some(),
            format!("{n}: no partial result row:\n{out}"),
        );
    }
    c.finish();
}
