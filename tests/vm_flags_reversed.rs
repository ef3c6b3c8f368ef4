//! `--reversed` on soft-RoCE in the VM (one boot): the side that listens sends
//! and the side that connects receives, for write-bw, send-bw, read-bw and
//! atomic-bw (and with -b), rdmaperf against itself and against stock perftest
//! 4.5 both ways (4.5 has the flag).
//!
//! The direction is proven, not assumed: a receiving rdmaperf that connects
//! runs `--check-landing` on its buffer (rdmaperf's pattern from an rdmaperf
//! sender, stock's random bytes from a stock one); against stock, whose role
//! under --reversed is fixed by its own code, a wrong role on our side either
//! leaves both sides waiting or, for SEND, has no receive posted (RNR).
//! One side without the flag is refused on both sides.

mod common;
use common::vm;
use common::vm_script::{cmd, pair, pairs, rr, Ends};
use std::sync::OnceLock;

const COMMON: &str = "-d rxe0 -x 0 -F --reversed";
const ITERS: u64 = 300;
const SIZE: u64 = 4096;

fn script() -> String {
    let mut s = String::from("PAIR_TIMEOUT=120\n");
    let args = format!("-s {SIZE} -n {ITERS} {COMMON}");
    for tool in ["write-bw", "send-bw", "read-bw"] {
        let t = &tool[..1];
        // A connecting rdmaperf receives: it checks where a write landed.
        let check = if tool == "write-bw" {
            " --check-landing"
        } else {
            ""
        };
        s += &pairs(
            t,
            &[Ends::Rr, Ends::Sr],
            tool,
            &args,
            &format!("{args}{check}"),
        );
        s += &pairs(t, &[Ends::Rs], tool, &args, &args);
    }
    s += &rr("a_rr", "atomic-bw", &format!("-n {ITERS} {COMMON}"));
    s += &rr("b_rr", "write-bw", &format!("-b {args}"));
    // The connecting side forgot the flag.
    let plain = format!("-s {SIZE} -n {ITERS} -d rxe0 -x 0 -F");
    s += &pair(
        "mismatch",
        &cmd(false, "write-bw", &args),
        &cmd(false, "write-bw", &plain),
    );
    s += "exit 0\n";
    s
}

fn batch() -> Option<&'static vm::BatchResult> {
    static BATCH: OnceLock<vm::BatchResult> = OnceLock::new();
    vm::shared_batch(&BATCH, env!("CARGO_BIN_EXE_rdmaperf"), 900, script)
}

/// Both sides ran and print one `SIZE ITERS ...` row (perftest's receiving
/// side prints the sender's numbers from the report exchange).
fn ok_rows(name: &str) -> Option<vm::Pair> {
    let p = batch()?.pair(name);
    p.assert_ok();
    for (who, side) in [("listener", &p.server), ("connector", &p.client)] {
        let rows = vm::bw_result_rows(&side.out);
        assert_eq!(
            rows,
            vec![(SIZE, ITERS)],
            "{name}: the {who}'s rows\n{}",
            side.out
        );
    }
    Some(p)
}

/// The connector's `landing check: ok ...` line: every position written and
/// nothing between them. Returns (positions, positions holding rdmaperf's pattern).
fn landed(name: &str, out: &str) -> (u64, u64) {
    let line = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("landing check: ok "))
        .unwrap_or_else(|| panic!("{name}: no passing landing check on the connector\n{out}"));
    let num = |k: &str| -> u64 {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(k)?.strip_prefix('='))
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("{name}: no {k}= in '{line}'"))
    };
    let (slots, written, stray) = (num("slots"), num("written"), num("stray"));
    assert!(slots > 0 && written == slots && stray == 0, "{name}\n{out}");
    (slots, num("pattern"))
}

#[test]
fn write_bw_the_listener_writes_into_the_connector() {
    let Some(p) = ok_rows("w_rr") else { return };
    let (slots, pattern) = landed("w_rr", &p.client.out);
    assert_eq!(
        pattern, slots,
        "rdmaperf's pattern from the listener\n{}",
        p.client.out
    );
}

#[test]
fn write_bw_against_a_stock_listener() {
    let Some(p) = ok_rows("w_sr") else { return };
    // Stock fills its buffer at random: its bytes, not ours, landed here.
    assert_eq!(landed("w_sr", &p.client.out).1, 0, "{}", p.client.out);
}

#[test]
fn write_bw_against_a_stock_connector() {
    ok_rows("w_rs");
}

#[test]
fn send_bw_reversed_every_way() {
    for name in ["s_rr", "s_sr", "s_rs"] {
        if ok_rows(name).is_none() {
            return;
        }
    }
}

#[test]
fn read_bw_reversed_every_way() {
    for name in ["r_rr", "r_sr", "r_rs"] {
        if ok_rows(name).is_none() {
            return;
        }
    }
}

#[test]
fn atomic_and_bidirectional_reversed() {
    let Some(b) = batch() else { return };
    let a = b.ok_pair("a_rr");
    for side in [&a.server, &a.client] {
        let rows = vm::bw_result_rows(&side.out);
        assert!(
            rows.len() == 1 && rows[0].1 == ITERS,
            "atomic: {rows:?}\n{}",
            side.out
        );
    }
    let d = b.ok_pair("b_rr");
    assert!(
        !vm::bw_result_rows(&d.client.out).is_empty(),
        "{}",
        d.client.out
    );
}

#[test]
fn one_side_without_the_flag_is_refused_on_both() {
    let Some(b) = batch() else { return };
    let p = b.pair("mismatch");
    for (side, who) in [
        (&p.server, "we run with --reversed, the client without"),
        (&p.client, "the server runs with --reversed, we without"),
    ] {
        side.assert_failed_with(&["traffic direction differs", who]);
    }
}
