//! `-b` (bidirectional) write-bw / read-bw / send-bw on soft-RoCE in the VM: rdmaperf against
//! itself and against stock perftest 4.5 in both roles. Both sides run, exchange reports and
//! print the same line: the sum of the local and the remote result.
//!
//! All cases share ONE VM boot: the first test to ask boots it and runs every case, the others
//! read their results from the same batch. Every side runs under a per-case `timeout`.

mod common;
use common::vm;
use std::sync::OnceLock;

/// Seconds each side of a pair may take (a `-D 3` pair needs ~6 s under TCG).
const PAIR_TIMEOUT_S: u64 = 60;

/// Seconds a failing pair may take; it must fail well before.
const BAD_TIMEOUT_S: u64 = 30;
const TIMED_OUT: [i32; 2] = [124, 137];

const COMMON: &str = "-d rxe0 -x 0 -F";

/// How a case's rows must agree.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Expect {
    /// `-n N`: one row per size on each side, the same #iterations and the same summed numbers.
    Iters(u64),
    /// write/read `-D`: #iterations are each side's own count; the summed BW agrees.
    Duration,
    /// send `-D`: perftest exchanges no report; each side prints its own row.
    OwnRows,
}

/// (case, tool, flags, server is stock, client is stock, sizes, expectation)
type Case = (
    &'static str,
    &'static str,
    &'static str,
    bool,
    bool,
    &'static [u64],
    Expect,
);

const N64: Expect = Expect::Iters(200);
const S64: &[u64] = &[64];
const UD_ALL: &[u64] = &[2, 4, 8, 16, 32, 64, 128, 256, 512, 1024];

const CASES: [Case; 15] = [
    (
        "write_rr",
        "write",
        "-b -n 200 -s 64",
        false,
        false,
        S64,
        N64,
    ),
    (
        "write_sr",
        "write",
        "-b -n 200 -s 64",
        true,
        false,
        S64,
        N64,
    ),
    (
        "write_rs",
        "write",
        "-b -n 200 -s 64",
        false,
        true,
        S64,
        N64,
    ),
    ("read_rr", "read", "-b -n 200 -s 64", false, false, S64, N64),
    ("read_sr", "read", "-b -n 200 -s 64", true, false, S64, N64),
    ("read_rs", "read", "-b -n 200 -s 64", false, true, S64, N64),
    ("send_rr", "send", "-b -n 200 -s 64", false, false, S64, N64),
    ("send_sr", "send", "-b -n 200 -s 64", true, false, S64, N64),
    ("send_rs", "send", "-b -n 200 -s 64", false, true, S64, N64),
    (
        "write_d3_rr",
        "write",
        "-b -D 3 -s 64",
        false,
        false,
        S64,
        Expect::Duration,
    ),
    (
        "send_uc_rr",
        "send",
        "-b -c UC -n 200 -s 64",
        false,
        false,
        S64,
        N64,
    ),
    (
        "send_ud_sr",
        "send",
        "-b -c UD -n 200 -s 64",
        true,
        false,
        S64,
        N64,
    ),
    (
        "send_ud_rs",
        "send",
        "-b -c UD -n 200 -s 64",
        false,
        true,
        S64,
        N64,
    ),
    (
        "send_ud_a_sr",
        "send",
        "-b -c UD -a -n 50",
        true,
        false,
        UD_ALL,
        Expect::Iters(50),
    ),
    (
        "send_d3_rs",
        "send",
        "-b -D 3 -s 64",
        false,
        true,
        S64,
        Expect::OwnRows,
    ),
];

fn side(tool: &str, stock: bool) -> String {
    if stock {
        format!("ib_{tool}_bw")
    } else {
        format!(r#""$RDMAPERF_BIN" {tool}-bw"#)
    }
}

fn script() -> String {
    let mut s = format!("PAIR_TIMEOUT={PAIR_TIMEOUT_S}\n");
    for (name, tool, flags, ss, cs, ..) in CASES {
        s += &format!(
            "pair {name} '{} {COMMON} {flags} -p $PORT' '{} {COMMON} {flags} -p $PORT 127.0.0.1'\n",
            side(tool, ss),
            side(tool, cs)
        );
    }
    // Mismatched sizes: the 64 B receive buffers cannot take 4096 B sends.
    s += &format!(
        "PAIR_TIMEOUT={BAD_TIMEOUT_S}\npair send_bad_size '{} {COMMON} -b --cq-timeout 3 -n 200 -s 64 -p $PORT' \
         '{} {COMMON} -b --cq-timeout 3 -n 200 -s 4096 -p $PORT 127.0.0.1'\n",
        side("send", false),
        side("send", false)
    );
    s += "exit 0\n";
    s
}

fn batch() -> Option<&'static vm::BatchResult> {
    static BATCH: OnceLock<vm::BatchResult> = OnceLock::new();
    vm::shared_batch(&BATCH, env!("CARGO_BIN_EXE_rdmaperf"), 900, script)
}

/// One BW result row: #bytes, #iterations, peak, average, msg rate.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Row {
    bytes: u64,
    iters: u64,
    peak: f64,
    avg: f64,
    rate: f64,
}

fn rows(out: &str) -> Vec<Row> {
    out.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() != 5 || !f.iter().all(|x| x.parse::<f64>().is_ok()) {
                return None;
            }
            Some(Row {
                bytes: f[0].parse().ok()?,
                iters: f[1].parse().ok()?,
                peak: f[2].parse().ok()?,
                avg: f[3].parse().ok()?,
                rate: f[4].parse().ok()?,
            })
        })
        .collect()
}

#[test]
fn parses_rows() {
    let out =
        " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]\n \
               64         200              3.97               0.98   \t\t     0.016092\n\
               ---------\n";
    assert_eq!(
        rows(out),
        vec![Row {
            bytes: 64,
            iters: 200,
            peak: 3.97,
            avg: 0.98,
            rate: 0.016092
        }]
    );
    assert!(rows(" local address: LID 0000 QPN 0x0016 PSN 0x76b440\n").is_empty());
}

#[test]
fn script_has_every_case_with_b() {
    let s = script();
    for (name, ..) in CASES {
        let line = s
            .lines()
            .find(|l| l.starts_with(&format!("pair {name} ")))
            .unwrap();
        assert_eq!(line.matches(" -b ").count(), 2, "{line}");
    }
}

/// Summed numbers print with 2 (BW) and 6 (rate) decimals; both sides add the same two doubles.
fn same_sum(a: &Row, b: &Row) -> bool {
    (a.avg - b.avg).abs() <= 0.011
        && (a.peak - b.peak).abs() <= 0.011
        && (a.rate - b.rate).abs() <= 2e-6
}

fn check(name: &str) {
    let Some(r) = batch() else { return };
    let (_, _, _, _, stock_client, sizes, expect) =
        CASES.iter().find(|c| c.0 == name).copied().unwrap();
    let p = r.pair(name);
    let both = format!(
        "pair {name}: server rc {:?}, client rc {:?} (124 = killed by the {PAIR_TIMEOUT_S} s timeout)\n\
         --- server ---\n{}\n--- client ---\n{}",
        p.server.rc, p.client.rc, p.server.out, p.client.out
    );
    assert!(p.server.rc == Some(0) && p.client.rc == Some(0), "{both}");
    let (sr, cr) = (rows(&p.server.out), rows(&p.client.out));
    let sb: Vec<u64> = sr.iter().map(|r| r.bytes).collect();
    let cb: Vec<u64> = cr.iter().map(|r| r.bytes).collect();
    assert_eq!(sb, sizes, "server #bytes\n{both}");
    assert_eq!(cb, sizes, "client #bytes\n{both}");
    for (s, c) in sr.iter().zip(&cr) {
        match expect {
            Expect::Iters(n) => {
                assert_eq!((s.iters, c.iters), (n, n), "#iterations\n{both}");
                assert!(same_sum(s, c), "summed rows differ: {s:?} vs {c:?}\n{both}");
                assert!(s.avg > 0.0 && s.rate > 0.0, "empty result\n{both}");
            }
            Expect::Duration => {
                assert!(s.iters > 0 && c.iters > 0, "#iterations\n{both}");
                assert!(same_sum(s, c), "summed rows differ: {s:?} vs {c:?}\n{both}");
                assert!(s.avg > 0.0, "empty result\n{both}");
            }
            Expect::OwnRows => {
                assert!(s.iters > 0 && c.iters > 0, "#iterations\n{both}");
                assert!(s.avg > 0.0, "empty server result\n{both}");
                if stock_client && vm::stock_clock_failed(&p.client.out) {
                    println!(
                        "{name}: the stock client's clock fit failed; its figures are not checked"
                    );
                } else {
                    assert!(c.avg > 0.0, "empty client result\n{both}");
                }
            }
        }
    }
    // Both are duplex runs: the banner says so on each side.
    for out in [&p.server.out, &p.client.out] {
        assert!(out.contains("Bidirectional BW Test"), "banner\n{both}");
    }
}

macro_rules! cases {
    ($($test:ident => $name:literal;)*) => {$(
        #[test]
        fn $test() {
            check($name);
        }
    )*};
}

cases! {
    vm_duplex_write_rdmaperf_pair => "write_rr";
    vm_duplex_write_rdmaperf_client_stock_server => "write_sr";
    vm_duplex_write_stock_client_rdmaperf_server => "write_rs";
    vm_duplex_read_rdmaperf_pair => "read_rr";
    vm_duplex_read_rdmaperf_client_stock_server => "read_sr";
    vm_duplex_read_stock_client_rdmaperf_server => "read_rs";
    vm_duplex_send_rdmaperf_pair => "send_rr";
    vm_duplex_send_rdmaperf_client_stock_server => "send_sr";
    vm_duplex_send_stock_client_rdmaperf_server => "send_rs";
    vm_duplex_write_d3_rdmaperf_pair => "write_d3_rr";
    vm_duplex_send_uc_rdmaperf_pair => "send_uc_rr";
    vm_duplex_send_ud_rdmaperf_client_stock_server => "send_ud_sr";
    vm_duplex_send_ud_stock_client_rdmaperf_server => "send_ud_rs";
    vm_duplex_send_ud_all_sizes_rdmaperf_client_stock_server => "send_ud_a_sr";
    vm_duplex_send_d3_stock_client_rdmaperf_server => "send_d3_rs";
}

#[test]
fn vm_duplex_send_size_mismatch_fails_fast() {
    let Some(r) = batch() else { return };
    let p = r.pair("send_bad_size");
    for (who, side) in [("server", &p.server), ("client", &p.client)] {
        match side.rc {
            Some(0) | None => panic!("{who}: rc {:?}, want an error\n{}", side.rc, side.out),
            Some(rc) if TIMED_OUT.contains(&rc) => {
                panic!("{who}: hung (rc {rc})\n{}", side.out)
            }
            Some(_) => {}
        }
    }
    // The side whose receive failed names the cause and the fix.
    let all = format!("{}\n{}", p.server.out, p.client.out);
    assert!(
        all.contains("receive completion with error") && all.contains("-s"),
        "want a receive-side error naming -s:\n{all}"
    );
}
