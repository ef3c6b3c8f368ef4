//! perftest options beyond the basics, in the soft-RoCE VM (one boot for the
//! file): `--run_infinitely` (period rows until SIGINT, exit 130, the peer
//! ends with a message), `-e` (completion events) and atomic-bw `-b`,
//! against rdmaperf and stock perftest 4.5.

mod common;
use common::vm;
use std::sync::OnceLock;

static BATCH: OnceLock<vm::BatchResult> = OnceLock::new();

/// Shell helper `inf NAME SERVER CLIENT`: server in the background, client
/// started 'exec'-style (line-buffered) so SIGINT reaches the tool itself;
/// SIGINT 7 s in (10 s for stock perftest, slower to start under TCG).
const SCRIPT: &str = r#"
O="-d rxe0 -x 0 -F -s 64"
P=18700
inf() {
    P=$((P + 1)); export PORT=$P
    ( eval "exec timeout 60 $2" ) > $RESULTS/$1.srv 2>&1 & S=$!
    wait_port $P $S
    ( eval "exec stdbuf -oL -eL $3" ) > $RESULTS/$1.cli 2>&1 & C=$!
    sleep ${4:-7}; kill -INT $C; wait $C; echo $? > $RESULTS/$1.crc
    wait $S; echo $? > $RESULTS/$1.src
}
R=$RDMAPERF_BIN
inf inf_rr "$R write-bw $O -p \$PORT --run_infinitely -D 2" \
    "$R write-bw $O -p \$PORT --run_infinitely -D 2 --out_json --out_json_file=$RESULTS/inf_rr.json 127.0.0.1"
inf inf_rs "ib_write_bw $O -p \$PORT --run_infinitely -D 2" \
    "$R write-bw $O -p \$PORT --run_infinitely -D 2 127.0.0.1"
inf inf_sr "$R write-bw $O -p \$PORT --run_infinitely -D 2" \
    "ib_write_bw $O -p \$PORT --run_infinitely -D 2 127.0.0.1" 10
# -e: completion events (read/send/atomic; perftest refuses WRITE and -D).
E="$O -e -n 1000"
pair e_read_rr "$R read-bw $E -p \$PORT" "$R read-bw $E -p \$PORT 127.0.0.1"
pair e_send_rr "$R send-bw $E -p \$PORT" "$R send-bw $E -p \$PORT 127.0.0.1"
pair e_slat_rr "$R send-lat $E -p \$PORT" "$R send-lat $E -p \$PORT 127.0.0.1"
pair e_read_rs "ib_read_bw $E -p \$PORT" "$R read-bw $E -p \$PORT 127.0.0.1"
pair e_read_sr "$R read-bw $E -p \$PORT" "ib_read_bw $E -p \$PORT 127.0.0.1"
# atomic-bw -b (stock 4.5 allows it): both sides send atomics.
A="-d rxe0 -x 0 -F -b -n 1000"
pair ab_rr "$R atomic-bw $A -p \$PORT" "$R atomic-bw $A -p \$PORT 127.0.0.1"
pair ab_rs "ib_atomic_bw $A -p \$PORT" "$R atomic-bw $A -p \$PORT 127.0.0.1"
pair ab_sr "$R atomic-bw $A -p \$PORT" "ib_atomic_bw $A -p \$PORT 127.0.0.1"
# --mr_per_qp: one buffer and MR per QP; the landing check reads each QP's own MR.
M="$O -q 2 -n 500 --mr_per_qp"
pair m_write_rr "$R write-bw $M --check-landing -p \$PORT" "$R write-bw $M -p \$PORT 127.0.0.1"
pair m_write_rs "ib_write_bw $M -p \$PORT" "$R write-bw $M -p \$PORT 127.0.0.1"
pair m_write_sr "$R write-bw $M -p \$PORT" "ib_write_bw $M -p \$PORT 127.0.0.1"
pair m_read_rr "$R read-bw $M -p \$PORT" "$R read-bw $M -p \$PORT 127.0.0.1"
pair m_send_rr "$R send-bw $M -p \$PORT" "$R send-bw $M -p \$PORT 127.0.0.1"
pair m_send_rs "ib_send_bw $M -p \$PORT" "$R send-bw $M -p \$PORT 127.0.0.1"
pair m_send_sr "$R send-bw $M -p \$PORT" "ib_send_bw $M -p \$PORT 127.0.0.1"
exit 0 # the batch status then says only whether the VM itself worked
"#;

fn batch() -> Option<&'static vm::BatchResult> {
    vm::shared_batch(&BATCH, env!("CARGO_BIN_EXE_rdmaperf"), 600, || {
        SCRIPT.to_string()
    })
}

struct Case {
    cli: String,
    srv: String,
    crc: i32,
    src: i32,
}

fn case(r: &vm::BatchResult, name: &str) -> Case {
    let f = |ext: &str| r.file(&format!("{name}.{ext}")).unwrap_or("").to_string();
    let rc = |ext: &str| f(ext).trim().parse().unwrap_or(-1);
    let c = Case {
        cli: f("cli"),
        srv: f("srv"),
        crc: rc("crc"),
        src: rc("src"),
    };
    println!(
        "== {name}: client rc {} server rc {}\n--- client\n{}\n--- server\n{}",
        c.crc,
        c.srv_rc_str(),
        c.cli,
        c.srv
    );
    c
}

impl Case {
    fn srv_rc_str(&self) -> String {
        self.src.to_string()
    }
}

/// Rows of 64-byte results with a positive message count.
fn period_rows(out: &str) -> usize {
    vm::bw_result_rows(out)
        .iter()
        .filter(|(size, iters)| *size == 64 && *iters > 0)
        .count()
}

#[test]
fn run_infinitely_rdmaperf_both_sides() {
    let Some(r) = batch() else { return };
    let c = case(r, "inf_rr");
    // -D 2 and SIGINT 7 s in: periods end at 2, 4, 6 s.
    assert!(
        period_rows(&c.cli) >= 2,
        "at least 2 period rows:\n{}",
        c.cli
    );
    assert_eq!(c.crc, 130, "client exits 130 on SIGINT:\n{}", c.cli);
    assert!(c.cli.contains("interrupted"), "{}", c.cli);
    assert!(
        c.src != 0 && c.src != 124 && c.srv.contains("rdmaperf write-bw:"),
        "server ends (not a hang) with a message when the client goes:\n{}",
        c.srv
    );
    let json = r.file("inf_rr.json").unwrap_or("");
    let v: serde_json::Value = serde_json::from_str(json)
        .unwrap_or_else(|e| panic!("--out_json file is not JSON ({e}):\n{json}"));
    let results = v["results"].as_array().expect("results array");
    assert!(results.len() >= 2, "one record per period:\n{json}");
    assert_eq!(results[0]["period"], 0);
    assert_eq!(results[1]["period"], 1);
}

#[test]
fn run_infinitely_rdmaperf_client_stock_server() {
    let Some(r) = batch() else { return };
    let c = case(r, "inf_rs");
    assert!(period_rows(&c.cli) >= 2, "{}", c.cli);
    assert_eq!(c.crc, 130, "{}", c.cli);
    // Stock server waits in its hand_shake and fails when the client goes.
    assert!(
        c.src != 0 && c.src != 124,
        "stock server must end, not hang (rc {}):\n{}",
        c.src,
        c.srv
    );
}

#[test]
fn run_infinitely_stock_client_rdmaperf_server() {
    let Some(r) = batch() else { return };
    let c = case(r, "inf_sr");
    // Stock perftest prints a row per period and dies on SIGINT (no handler).
    assert!(period_rows(&c.cli) >= 2, "{}", c.cli);
    assert!(
        c.src != 0 && c.src != 124 && c.srv.contains("rdmaperf write-bw:"),
        "rdmaperf server ends with a message when the stock client dies:\n{}",
        c.srv
    );
}

/// The pair `name` (both outputs printed): both sides exited 0.
fn ok_pair(name: &str) -> Option<vm::Pair> {
    let pr = batch()?.pair(name);
    println!(
        "--- server\n{}\n--- client\n{}",
        pr.server.out, pr.client.out
    );
    pr.assert_ok();
    Some(pr)
}

fn events_pair(name: &str, rdmaperf_client: bool) {
    let Some(pr) = ok_pair(name) else { return };
    let (ours, _) = if rdmaperf_client {
        (&pr.client.out, &pr.server.out)
    } else {
        (&pr.server.out, &pr.client.out)
    };
    assert!(
        ours.contains(" Test with events. Using rxe0_comp0\n"),
        "info block names events like perftest:\n{ours}"
    );
    let rows = vm::bw_result_rows(&pr.client.out);
    assert_eq!(
        rows,
        vec![(64, 1000)],
        "one 64 B row of 1000 messages:\n{}",
        pr.client.out
    );
}

#[test]
fn events_read_bw_rdmaperf_both_sides() {
    events_pair("e_read_rr", true);
}

#[test]
fn events_send_bw_rdmaperf_both_sides() {
    events_pair("e_send_rr", true);
}

#[test]
fn events_read_bw_rdmaperf_client_stock_server() {
    events_pair("e_read_rs", true);
}

#[test]
fn events_read_bw_stock_client_rdmaperf_server() {
    events_pair("e_read_sr", false);
}

#[test]
fn events_send_lat_rdmaperf_both_sides() {
    let Some(pr) = ok_pair("e_slat_rr") else {
        return;
    };
    assert!(pr
        .client
        .out
        .contains(" Test with events. Using rxe0_comp0\n"));
    // The latency row: 64 B, 1000 iterations.
    let row = pr
        .client
        .out
        .lines()
        .find(|l| l.split_whitespace().take(2).collect::<Vec<_>>() == ["64", "1000"])
        .unwrap_or_else(|| panic!("no 64 B x 1000 latency row:\n{}", pr.client.out));
    println!("{row}");
}

fn atomic_duplex(name: &str) {
    let Some(pr) = ok_pair(name) else { return };
    for (side, out) in [("server", &pr.server.out), ("client", &pr.client.out)] {
        assert!(
            out.contains("Bidirectional BW Test"),
            "{side} banner:\n{out}"
        );
        let rows = vm::bw_result_rows(out);
        assert_eq!(rows.len(), 1, "{side}: one result row:\n{out}");
        assert_eq!(rows[0].0, 8, "{side}: 8-byte atomics:\n{out}");
        assert!(rows[0].1 >= 1000, "{side}: #iterations:\n{out}");
    }
}

#[test]
fn atomic_bw_duplex_rdmaperf_both_sides() {
    atomic_duplex("ab_rr");
}

#[test]
fn atomic_bw_duplex_rdmaperf_client_stock_server() {
    atomic_duplex("ab_rs");
}

#[test]
fn atomic_bw_duplex_stock_client_rdmaperf_server() {
    atomic_duplex("ab_sr");
}

/// `--mr_per_qp -q 2 -n 500`: both ends agree on one row of 64 B x 1000
/// (perftest counts both QPs' messages).
fn mr_per_qp(name: &str) {
    let Some(r) = batch() else { return };
    let pr = r.ok_pair(name);
    for (side, out) in [("server", &pr.server.out), ("client", &pr.client.out)] {
        assert_eq!(
            vm::bw_result_rows(out),
            vec![(64, 1000)],
            "{name} {side}: one row of 64 B x 1000:\n{out}"
        );
    }
}

#[test]
fn mr_per_qp_write_bw_rdmaperf_both_sides_landing_checked() {
    mr_per_qp("m_write_rr");
    let Some(r) = batch() else { return };
    let srv = r.pair("m_write_rr").server.out;
    assert!(
        srv.contains("landing"),
        "the server ran its landing check:\n{srv}"
    );
}

#[test]
fn mr_per_qp_write_bw_rdmaperf_client_stock_server() {
    mr_per_qp("m_write_rs");
}

#[test]
fn mr_per_qp_write_bw_stock_client_rdmaperf_server() {
    mr_per_qp("m_write_sr");
}

#[test]
fn mr_per_qp_read_bw_rdmaperf_both_sides() {
    mr_per_qp("m_read_rr");
}

#[test]
fn mr_per_qp_send_bw_rdmaperf_both_sides() {
    mr_per_qp("m_send_rr");
}

#[test]
fn mr_per_qp_send_bw_rdmaperf_client_stock_server() {
    mr_per_qp("m_send_rs");
}

#[test]
fn mr_per_qp_send_bw_stock_client_rdmaperf_server() {
    mr_per_qp("m_send_sr");
}
