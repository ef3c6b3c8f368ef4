//! Issue 12, part 6, against STOCK perftest 4.5 (rdmaperf against rdmaperf
//! refuses these at connect: tests/vm_peer_diag.rs). One VM boot, send-bw.
//!
//! A different `-c`: stock perftest's key message (LID:QPN:PSN:rkey:vaddr:GID)
//! is the same for RC, UC and UD and it sends no connection type, so nothing
//! at connect can tell; a SEND between QPs of different types is dropped by
//! the receiving QP without an error on either side. What shows:
//! - our server receives not one message while the stock sender finishes
//!   (it reported a rate): the server names -c (this side's) and fails,
//!   instead of "computing the result: ... run longer (-n or -D)";
//! - our UC/UD client "sends" everything and then the stock RC server never
//!   ends its run: the close handshake wait is bounded (--cq-timeout, plus
//!   -D) and the error says the rate counts messages that may never have
//!   arrived, naming -c, -n and -q (before: a hang at the close handshake).
//!
//! A different `-n` with a stock server: a larger server -n is the same wait
//! (named -n); a smaller one stalls our RC client on RNR once the server's
//! receives run out (stock's server reads first in its close handshake, so
//! no control message says it finished): the stall names -n and the count.

mod common;
use common::vm;

const SCRIPT: &str = r#"
B=$RDMAPERF_BIN
O="-d rxe0 -x 0 -F -s 64"
T="timeout -k 5 60"
now() { cut -d' ' -f1 /proc/uptime; }
since() { awk "BEGIN{printf \"%.1f\", $(now) - $1}"; }
# NAME SERVER-CMD CLIENT-CMD PORT: both sides' output in NAME.srv/.cli, their
# status and seconds since the client started in rc.txt; both are killed after 40 s.
qcase() {
    $T $2 -p $4 > $RESULTS/$1.srv 2>&1 & S=$!
    wait_port $4 $S; t0=$(now)
    $T $3 -p $4 127.0.0.1 > $RESULTS/$1.cli 2>&1 & C=$!
    ( sleep 40; kill $S $C 2>/dev/null ) & W=$!
    local rc=0; wait $C || rc=$?; echo "$1.cli rc=$rc dt=$(since $t0)" >> $RESULTS/rc.txt
    rc=0; wait $S || rc=$?; echo "$1.srv rc=$rc dt=$(since $t0)" >> $RESULTS/rc.txt
    kill $W 2>/dev/null; wait $W 2>/dev/null
}
qcase rc_uc "$B send-bw $O -n 1000" "ib_send_bw $O -n 1000 -c UC" 18950
qcase rc_ud "$B send-bw $O -n 1000" "ib_send_bw $O -n 1000 -c UD" 18951
qcase uc_rc "ib_send_bw $O -n 1000" "$B send-bw $O -n 1000 -c UC --cq-timeout 3" 18952
qcase ud_rc "ib_send_bw $O -n 1000" "$B send-bw $O -n 1000 -c UD --cq-timeout 3" 18953
qcase n_more "ib_send_bw $O -n 2000" "$B send-bw $O -n 1000 --cq-timeout 3" 18954
qcase n_less "ib_send_bw $O -n 1000" "$B send-bw $O -n 2000 --cq-timeout 3" 18955
echo finished >> $RESULTS/rc.txt
"#;

#[test]
fn mismatches_against_stock_perftest_are_named() {
    if let Err(why) = vm::available() {
        println!("SKIPPED: {why}");
        return;
    }
    let r = vm::Batch::new()
        .bin(env!("CARGO_BIN_EXE_rdmaperf"))
        .timeout_s(600)
        .run(SCRIPT);
    let rc_txt = r.file("rc.txt").unwrap_or("").to_string();
    for (name, body) in &r.files {
        println!("--- {name}\n{body}");
    }
    assert!(
        rc_txt.contains("finished"),
        "the batch did not finish:\n{rc_txt}"
    );
    let o = vm::outcomes(&rc_txt);
    let get = |n: &str| r.file(n).unwrap_or("").to_string();
    let mut failures = Vec::new();
    // (side under test, the texts its output must hold, the most seconds it may take).
    let cases: [(&str, &[&str], f64); 6] = [
        (
            "rc_uc.srv",
            &["not one message arrived", "-c RC", "same -c"],
            30.0,
        ),
        (
            "rc_ud.srv",
            &["not one message arrived", "-c RC", "same -c"],
            30.0,
        ),
        (
            "uc_rc.cli",
            &["has not ended its run", "with -c UC", "same flags"],
            30.0,
        ),
        (
            "ud_rc.cli",
            &["has not ended its run", "with -c UD", "same flags"],
            30.0,
        ),
        (
            "n_more.cli",
            &["has not ended its run", "-n 1000", "-n or -q differ"],
            30.0,
        ),
        (
            "n_less.cli",
            &["smaller -n", "perhaps 1000", "same -n"],
            30.0,
        ),
    ];
    for (name, want, max_s) in cases {
        let out = get(name);
        let Some(&(rc, dt)) = o.get(name) else {
            failures.push(format!("{name}: no status:\n{rc_txt}"));
            continue;
        };
        // Exit 1: refused with a reason; not killed (143) by the 40 s guard.
        if rc != 1 || dt > max_s {
            failures.push(format!(
                "{name}: rc {rc} after {dt} s (want 1 within {max_s} s):\n{out}"
            ));
        }
        for w in want {
            if !out.contains(w) {
                failures.push(format!("{name}: no {w:?} in:\n{out}"));
            }
        }
        if out.contains("run longer (-n or -D)") {
            failures.push(format!("{name}: still advises running longer:\n{out}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}
