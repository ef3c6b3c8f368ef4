//! A working link is never called stuck, a vanished peer is named at once,
//! and parameters the two sides disagree on are refused with both values
//! (issue 12, parts 1 and 6). One VM boot; rdmaperf against rdmaperf and
//! against stock perftest 4.5, both ways where a peer is involved.

mod common;
use common::vm;
use common::vm_cases::Cases;

/// Each case writes `NAME.out` (stdout+stderr of the side under test) and a
/// line `NAME rc=N dt=S` to rc.txt; dt counts from the fault (or the start).
const SCRIPT: &str = r#"
O="-d rxe0 -x 0 -F"
T="timeout -k 5 120"

# 1. One completion covers 80 MiB (-Q 20): far longer than --cq-timeout 1 on
#    this link, yet healthy. Against rdmaperf and a stock server.
BIG="-s 4M -n 20 -Q 20 -t 20 --cq-timeout 1"
$T $B write-bw $O $BIG -p 18800 > $RESULTS/big.peer 2>&1 & S=$!
wait_port 18800 $S; t0=$(now)
$T $B write-bw $O $BIG -p 18800 127.0.0.1 > $RESULTS/big.out 2>&1 & C=$!
done_case big $C $t0; wait $S; echo "big_srv rc=$? dt=0" >> $RESULTS/rc.txt
$T ib_write_bw $O -s 4M -n 20 -Q 20 -t 20 -p 18801 > $RESULTS/big_stock.peer 2>&1 & S=$!
wait_port 18801 $S; t0=$(now)
$T $B write-bw $O $BIG -p 18801 127.0.0.1 > $RESULTS/big_stock.out 2>&1 & C=$!
done_case big_stock $C $t0; reap $S

# 2. The server vanishes mid-run (ours by SIGINT, stock by SIGKILL): the
#    client says the peer exited, within seconds, and blames no rkey.
$B write-bw $O -s 64 -D 20 -p 18802 > $RESULTS/srv_int.peer 2>&1 & S=$!
wait_port 18802 $S
$T $B write-bw $O -s 64 -D 20 -p 18802 127.0.0.1 > $RESULTS/srv_int.out 2>&1 & C=$!
sleep 4; kill -INT $S; t0=$(now); done_case srv_int $C $t0; reap $S
ib_write_bw $O -s 64 -D 20 -p 18803 > $RESULTS/srv_kill.peer 2>&1 & S=$!
wait_port 18803 $S
$T $B write-bw $O -s 64 -D 20 -p 18803 127.0.0.1 > $RESULTS/srv_kill.out 2>&1 & C=$!
sleep 4; kill -KILL $S; t0=$(now); done_case srv_kill $C $t0; reap $S

# 3. SIGTERM to a read-bw client: the same words as write-bw.
$T $B read-bw $O -s 64 -D 20 -p 18804 > $RESULTS/read_term.peer 2>&1 & S=$!
wait_port 18804 $S
$B read-bw $O -s 64 -D 20 -p 18804 127.0.0.1 > $RESULTS/read_term.out 2>&1 & C=$!
sleep 4; kill -TERM $C; t0=$(now); done_case read_term $C $t0; reap $S

# 4. -c RC server, -c UC client (rdmaperf both): both refuse, naming both.
$T $B send-bw $O -c RC -s 64 -n 100 -p 18805 > $RESULTS/conn_srv.out 2>&1 & S=$!
wait_port 18805 $S; t0=$(now)
$T $B send-bw $O -c UC -s 64 -n 100 -p 18805 127.0.0.1 > $RESULTS/conn_cli.out 2>&1 & C=$!
done_case conn_cli $C $t0; done_case conn_srv $S $t0

# 5. -q 1 server, -q 2 client and the reverse; rdmaperf both, and against stock
#    (qcase: vm_cases::PRELUDE; the side under test is named by NAME's suffix).
qcase q12 "$B write-bw $O -s 64 -n 100 -q 1" "$B write-bw $O -s 64 -n 100 -q 2" 18806
qcase q21 "$B write-bw $O -s 64 -n 100 -q 2" "$B write-bw $O -s 64 -n 100 -q 1" 18807
qcase q12_stock_srv "ib_write_bw $O -s 64 -n 100 -q 1" "$B write-bw $O -s 64 -n 100 -q 2" 18808
qcase q21_stock_srv "ib_write_bw $O -s 64 -n 100 -q 2" "$B write-bw $O -s 64 -n 100 -q 1" 18809
qcase q12_stock_cli "$B write-bw $O -s 64 -n 100 -q 1" "ib_write_bw $O -s 64 -n 100 -q 2" 18810
qcase q21_stock_cli "$B write-bw $O -s 64 -n 100 -q 2" "ib_write_bw $O -s 64 -n 100 -q 1" 18811

# 6. send-bw with different -n: rdmaperf both (refused at the versions) and a
#    stock client sending fewer messages than our server expects.
qcase n_ours "$B send-bw $O -s 64 -n 2000" "$B send-bw $O -s 64 -n 1000" 18812
qcase n_stock_cli "$B send-bw $O -s 64 -n 2000" "ib_send_bw $O -s 64 -n 1000" 18813

# 7. Ctrl-C on a server still waiting for a client; -p 0 says its port.
$B write-bw $O -p 18814 > $RESULTS/accept_int.out 2>&1 & S=$!
wait_port 18814 $S; kill -INT $S; t0=$(now); done_case accept_int $S $t0
$B write-bw $O -p 0 > $RESULTS/port0.out 2>&1 & S=$!
sleep 3; kill -INT $S; t0=$(now); done_case port0 $S $t0

# 8. perftest's parameter rules (part 5): -m above the active MTU (1024 on
#    rxe here) is clamped with perftest's notice; UD refuses -s above the MTU;
#    -l without -Q prints perftest's CQ moderation notice.
t0=$(now)
$T $B write-bw --loopback $O -m 4096 -s 64 -n 100 -l 4 > $RESULTS/mtu.out 2>&1 & C=$!
done_case mtu $C $t0
$T $B send-bw $O -c UD -s 4096 -n 100 -p 18815 127.0.0.1 > $RESULTS/ud_size.out 2>&1 & C=$!
done_case ud_size $C $t0

# 9. Servers of write/read/atomic-bw write --out_json (part 2), against
#    rdmaperf and stock clients.
J="--out_json --out_json_file"
qcase json_w "$B write-bw $O -s 64 -n 100 $J=$RESULTS/json_w.json" "$B write-bw $O -s 64 -n 100" 18816
qcase json_r "$B read-bw $O -s 64 -n 100 $J=$RESULTS/json_r.json" "ib_read_bw $O -s 64 -n 100" 18817
qcase json_a "$B atomic-bw $O -n 100 $J=$RESULTS/json_a.json" "$B atomic-bw $O -n 100" 18818

# 10. Inline as perftest on a device it does not know (rxe): off, with its
#     notice when -I asks; --threads reports a peak.
t0=$(now)
$T $B write-lat --loopback $O -s 2 -n 100 -I 64 > $RESULTS/inline.out 2>&1 & C=$!
done_case inline $C $t0
$T $B write-bw --loopback $O -s 64 -n 200 --threads 2 -q 2 > $RESULTS/threads.out 2>&1 & C=$!
done_case threads $C $t0
"#;

#[test]
fn healthy_links_run_and_peer_problems_are_named() {
    let Some(c) = Cases::boot(900, SCRIPT) else {
        return;
    };
    // 1. Healthy big transfers complete: exit 0 and a 4 MiB row with 20 messages.
    for n in ["big", "big_stock"] {
        let file = format!("{n}.out");
        c.expect_exit(n, &file, 0, &[]);
        let out = c.get(&file);
        let rows = vm::bw_result_rows(out);
        c.expect(
            rows.iter().any(|&(s, it)| s == 4 << 20 && it == 20),
            format!("{n}: no 4194304 B row with 20 iterations:\n{out}"),
        );
    }
    c.expect(c.case("big_srv").0 == 0, "big: the server failed".into());
    // 2. The vanished server is named as such, fast, and no rkey is blamed.
    for n in ["srv_int", "srv_kill"] {
        let (rc, dt) = c.case(n);
        let out = c.get(&format!("{n}.out"));
        c.expect(rc != 0 && rc != 124, format!("{n}: rc {rc}:\n{out}"));
        c.expect(
            out.contains("the peer exited during the run"),
            format!("{n}: must say the peer exited:\n{out}"),
        );
        c.expect_absent(n, &format!("{n}.out"), &["rkey"]);
        c.expect(dt < 6.0, format!("{n}: noticed {dt} s after the peer went"));
    }
    // 3. read-bw SIGTERM: write-bw's wording, 143.
    let wording = "interrupted: QPs moved to ERR, partial result above";
    c.expect_exit("read_term", "read_term.out", 143, &[wording]);
    c.expect_absent("read_term", "read_term.out", &["completion with error"]);
    // 4. Connection types: both sides refuse, naming both values.
    for (n, want) in [
        ("conn_cli", "we run -c UC, the server runs -c RC"),
        ("conn_srv", "we run -c RC, the client runs -c UC"),
    ] {
        c.expect_refused(n, &format!("{n}.out"), &[want], 10.0);
    }
    // 5. -q: every rdmaperf side refuses at the key exchange, naming its -q.
    for (n, q) in [
        ("q12.cli", 2),
        ("q12.srv", 1),
        ("q21.cli", 1),
        ("q21.srv", 2),
        ("q12_stock_srv.cli", 2),
        ("q21_stock_srv.cli", 1),
        ("q12_stock_cli.srv", 1),
        ("q21_stock_cli.srv", 2),
    ] {
        let want = format!("number of QPs differs: we run -q {q}");
        c.expect_refused(n, n, &[&want], 15.0);
    }
    // 6. send-bw -n: named, both sides between rdmaperf ends; our server
    //    against a stock client that sends fewer messages, fast.
    for (n, want) in [
        ("n_ours.cli", "we run -n 1000, the server runs -n 2000"),
        ("n_ours.srv", "we run -n 2000, the client runs -n 1000"),
        ("n_stock_cli.srv", "the two sides' -n differ"),
    ] {
        c.expect_refused(n, n, &[want], 8.0);
    }
    // 7. Interrupted in accept: said so, 130; -p 0 names its port.
    let waiting = "interrupted while waiting for a client on port 18814";
    c.expect_exit("accept_int", "accept_int.out", 130, &[waiting]);
    c.expect_absent("accept_int", "accept_int.out", &["os error"]);
    let out = c.get("port0.out");
    c.expect(
        out.contains("-p 0: listening on port ") && out.contains("give the client -p "),
        format!("port0: must say its port:\n{out}"),
    );
    // 8. Parameter rules.
    c.expect_exit(
        "mtu",
        "mtu.out",
        0,
        &[
            "Requested mtu is higher than active mtu \nChanging to active mtu - 3",
            "Mtu             : 1024[B]",
            "Post List requested - CQ moderation will be the size of the post list",
        ],
    );
    c.expect_exit(
        "ud_size",
        "ud_size.out",
        1,
        &[
            "Max message size in UD cannot be greater than MTU",
            "use -s 1024",
        ],
    );
    // 9. Server JSON: valid, results an array, statistics named.
    for (n, size) in [("json_w", 64), ("json_r", 64), ("json_a", 8)] {
        let text = c.get(&format!("{n}.json"));
        let v: serde_json::Value = match serde_json::from_str(text) {
            Ok(v) => v,
            Err(e) => {
                c.expect(false, format!("{n}: no valid server JSON ({e}):\n{text}"));
                continue;
            }
        };
        c.expect(
            c.case(&format!("{n}.srv")).0 == 0 && c.case(&format!("{n}.cli")).0 == 0,
            format!("{n}: a side failed"),
        );
        let recs = v["results"].as_array().cloned().unwrap_or_default();
        c.expect(
            recs.len() == 1 && recs[0]["MsgSize"] == size && recs[0]["n_iterations"] == 100,
            format!("{n}: results must be an array with the one {size} B record:\n{text}"),
        );
        c.expect(
            v["test_info"]["Statistics"] == "perftest",
            format!("{n}: no Statistics in test_info:\n{text}"),
        );
    }
    // 10. Inline off on rxe with perftest's notice; a --threads peak.
    c.expect_exit(
        "inline",
        "inline.out",
        0,
        &[
            "Device not recognized to implement inline feature. Disabling it",
            "Max inline data : 0[B]",
        ],
    );
    let out = c.get("threads.out");
    let peak = out
        .lines()
        .find(|l| l.split_whitespace().next() == Some("64"))
        .and_then(|l| l.split_whitespace().nth(2)?.parse::<f64>().ok());
    c.expect(
        c.case("threads").0 == 0 && peak.is_some_and(|p| p > 0.0),
        format!("threads: the row must carry a peak above 0:\n{out}"),
    );
    c.finish();
}
