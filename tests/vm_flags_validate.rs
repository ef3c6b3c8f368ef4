//! `--data_validation` on soft-RoCE in the VM (one boot): between rdmaperf
//! ends the side the data went to (a write's server, a read's client) checks
//! every byte of every message position and prints perftest master's
//! `VALIDATION:` line: small and large messages, two QPs, `-D`. A server
//! whose `-s` differs from the client's so that bytes are missing where it
//! expects them fails, naming the first; one side without the flag, or a stock perftest 4.5 peer, is refused
//! before anything runs.

mod common;
use common::vm;
use common::vm_script::{cmd, pair, rr};
use std::sync::OnceLock;

const COMMON: &str = "-d rxe0 -x 0 -F";
const V: &str = "--data_validation";

fn script() -> String {
    let mut s = String::from("PAIR_TIMEOUT=120\n");
    let both =
        |name: &str, tool: &str, flags: &str| rr(name, tool, &format!("{flags} {COMMON} {V}"));
    s += &both("w_small", "write-bw", "-s 64 -n 300");
    s += &both("w_large", "write-bw", "-s 1048576 -n 20");
    s += &both("w_q2", "write-bw", "-s 256 -n 300 -q 2");
    s += &both("w_dur", "write-bw", "-s 64 -D 2");
    s += &both("r_small", "read-bw", "-s 64 -n 300");
    s += &both("r_q2", "read-bw", "-s 4096 -n 50 -q 2");
    s += &both("r_dur", "read-bw", "-s 64 -D 2");
    let plain = format!("-s 64 -n 300 {COMMON}");
    let checked = format!("{plain} {V}");
    // The server expects 64-byte messages at a 64-byte step; 100-byte ones
    // arrive at a 128-byte step, so bytes 100..128 of every step stay zero.
    let w = |args: &str| cmd(false, "write-bw", args);
    s += &pair(
        "w_misplaced",
        &w(&checked),
        &w(&format!("-s 100 -n 300 {COMMON} {V}")),
    );
    s += &pair("one_sided", &w(&checked), &w(&plain));
    s += &pair("stock_client", &w(&checked), &cmd(true, "write-bw", &plain));
    s += &pair(
        "stock_server",
        &cmd(true, "read-bw", &plain),
        &cmd(false, "read-bw", &checked),
    );
    s += "exit 0\n";
    s
}

fn batch() -> Option<&'static vm::BatchResult> {
    static BATCH: OnceLock<vm::BatchResult> = OnceLock::new();
    vm::shared_batch(&BATCH, env!("CARGO_BIN_EXE_rdmaperf"), 900, script)
}

/// The `VALIDATION: PASSED (role) - N message positions, B bytes` numbers.
fn passed(out: &str, role: &str) -> Option<(u64, u64)> {
    let rest = out
        .lines()
        .find_map(|l| l.strip_prefix(&format!("VALIDATION: PASSED ({role}) - ")))?;
    let mut n = rest
        .split(|c: char| !c.is_ascii_digit())
        .filter(|w| !w.is_empty())
        .map(|w| w.parse::<u64>().ok());
    Some((n.next()??, n.next()??))
}

/// Both sides ran; the checking side passed over `positions` x `size` bytes
/// per QP (`None`: any number of positions, as under -D).
fn check(name: &str, checker_is_server: bool, per_qp: Option<u64>, size: u64, qps: u64) {
    let Some(b) = batch() else { return };
    let p = b.ok_pair(name);
    let (side, role, other) = if checker_is_server {
        (&p.server, "server", &p.client)
    } else {
        (&p.client, "client", &p.server)
    };
    let (positions, bytes) = passed(&side.out, role)
        .unwrap_or_else(|| panic!("{name}: no VALIDATION: PASSED ({role})\n{}", side.out));
    if let Some(n) = per_qp {
        assert_eq!(positions, n * qps, "{name}: positions\n{}", side.out);
    }
    assert!(positions >= qps, "{name}: {positions} positions");
    assert_eq!(bytes, positions * size, "{name}: bytes\n{}", side.out);
    assert!(
        !other.out.contains("VALIDATION:"),
        "{name}: the sending side has nothing to check\n{}",
        other.out
    );
}

#[test]
fn write_bw_server_checks_every_position() {
    // 64 B at a 64 B step over a 4 KiB cycle buffer: 64 positions.
    check("w_small", true, Some(64), 64, 1);
    check("w_large", true, Some(1), 1 << 20, 1);
    check("w_q2", true, Some(16), 256, 2);
    check("w_dur", true, Some(64), 64, 1);
}

#[test]
fn read_bw_client_checks_what_it_read() {
    check("r_small", false, Some(64), 64, 1);
    check("r_q2", false, Some(1), 4096, 2);
    check("r_dur", false, Some(64), 64, 1);
}

#[test]
fn bytes_out_of_place_fail_the_run() {
    let Some(b) = batch() else { return };
    let p = b.pair("w_misplaced");
    p.server.assert_failed_with(&[
        "VALIDATION: FAILED (server) - ",
        "first at QP 0, Offset 100 (expected 0xa9, got 0x00)",
        "data validation failed",
    ]);
}

#[test]
fn one_side_or_a_stock_peer_is_refused() {
    let Some(b) = batch() else { return };
    let p = b.pair("one_sided");
    for (side, want) in [
        (
            &p.server,
            "we run with --data_validation, the client without",
        ),
        (
            &p.client,
            "the server runs with --data_validation, we without",
        ),
    ] {
        side.assert_failed_with(&[want]);
    }
    for (name, ours) in [("stock_client", true), ("stock_server", false)] {
        let p = b.pair(name);
        let side = if ours { &p.server } else { &p.client };
        println!("{name}");
        side.assert_failed_with(&[
            "--data_validation: the peer is stock perftest",
            "validates against rdmaperf only",
        ]);
        assert!(!side.out.contains("VALIDATION: PASSED"), "{}", side.out);
    }
}
