//! `rdmaperf send-bw` on soft-RoCE in the VM: RC, UC, UD and multi-QP post lists against
//! itself and against stock `ib_send_bw` 4.5 in both roles, plus duration mode, both post
//! methods and `-a` sweeps (RC, and UD stopping at the MTU, also against stock perftest: the
//! per-size barriers must pair up).
//!
//! All cases share ONE VM boot. Every side runs under a per-case `timeout`, so a hang shows
//! up as exit status 124 instead of a stuck test. In send_bw each side prints its own row
//! (the server's is its RX view), so the rows of both sides must agree on #bytes and
//! #iterations, and the client's must be the expected ones.

mod common;
use common::vm;
use common::vm_script::{cmd, pair, pairs, Ends, RDMAPERF};
use std::sync::OnceLock;

/// Seconds each side of a pair may take.
const PAIR_TIMEOUT_S: u64 = 90;
/// The RC `-a` sweep moves ~320 MiB through rxe under TCG.
const SWEEP_TIMEOUT_S: u64 = 300;

const COMMON: &str = "-d rxe0 -x 0 -F";

const ALL_PEERS: &[Ends] = &Ends::ALL;
const SELF_ONLY: &[Ends] = &[Ends::Rr];

/// What the client's rows must be.
#[derive(Clone, Copy, Debug)]
enum Want {
    /// One row: #bytes, #iterations.
    Row(u64, u64),
    /// One row of this size, any positive count (duration mode).
    Duration(u64),
    /// One row per power of two 2..=max, each with this many iterations.
    Sweep(u64, u64),
}

struct Case {
    name: &'static str,
    flags: &'static str,
    peers: &'static [Ends],
    want: Want,
    timeout_s: u64,
}

const CASES: &[Case] = &[
    Case {
        name: "rc",
        flags: "-n 200 -s 64",
        peers: ALL_PEERS,
        want: Want::Row(64, 200),
        timeout_s: PAIR_TIMEOUT_S,
    },
    Case {
        name: "uc",
        flags: "-c UC -n 200 -s 64",
        peers: ALL_PEERS,
        want: Want::Row(64, 200),
        timeout_s: PAIR_TIMEOUT_S,
    },
    Case {
        name: "ud",
        flags: "-c UD -n 200 -s 512",
        peers: ALL_PEERS,
        want: Want::Row(512, 200),
        timeout_s: PAIR_TIMEOUT_S,
    },
    // perftest's default size (64 KiB), 2 QPs, post lists of 4 signaled every 2nd WR.
    Case {
        name: "q2l4",
        flags: "-q 2 -l 4 -Q 2 -n 200",
        peers: ALL_PEERS,
        want: Want::Row(65536, 400),
        timeout_s: PAIR_TIMEOUT_S,
    },
    Case {
        name: "d3",
        flags: "-D 3 -s 64",
        peers: SELF_ONLY,
        want: Want::Duration(64),
        timeout_s: PAIR_TIMEOUT_S,
    },
    Case {
        name: "post_send",
        flags: "-n 200 -s 64 --post post-send",
        peers: SELF_ONLY,
        want: Want::Row(64, 200),
        timeout_s: PAIR_TIMEOUT_S,
    },
    Case {
        name: "wr_api",
        flags: "-n 200 -s 64 --post wr-api",
        peers: SELF_ONLY,
        want: Want::Row(64, 200),
        timeout_s: PAIR_TIMEOUT_S,
    },
    Case {
        name: "imm",
        flags: "-n 200 -s 64 --send_with_imm",
        peers: SELF_ONLY,
        want: Want::Row(64, 200),
        timeout_s: PAIR_TIMEOUT_S,
    },
    // -a keeps cq_mod (clamped to 20 = every 20th message signaled): 20 x 8 MiB through
    // rxe under TCG take longer than the default 10 s without a completion.
    Case {
        name: "sweep",
        flags: "-a -n 20 --cq-timeout 120",
        peers: SELF_ONLY,
        want: Want::Sweep(1 << 23, 20),
        timeout_s: SWEEP_TIMEOUT_S,
    },
    // rxe0's MTU in the VM is 1024: UD sweeps stop there on both tools.
    Case {
        name: "sweep_ud",
        flags: "-c UD -a -n 20",
        peers: ALL_PEERS,
        want: Want::Sweep(1024, 20),
        timeout_s: PAIR_TIMEOUT_S,
    },
];

fn pair_name(c: &Case, p: Ends) -> String {
    format!("{}_{}", c.name, p.suffix())
}

/// The guest script: every pair, and one run that must be refused.
fn script() -> String {
    let mut s = String::new();
    for c in CASES {
        s += &format!("PAIR_TIMEOUT={}\n", c.timeout_s);
        let args = format!("{COMMON} {}", c.flags);
        s += &pairs(c.name, c.peers, "send-bw", &args, &args);
    }
    s += "PAIR_TIMEOUT=20\n";
    // The client sends 128 B into 64 B receives: both sides must stop and say why.
    let size = |s: u64| {
        cmd(
            false,
            "send-bw",
            &format!("{COMMON} -n 200 -s {s} --timeout 5"),
        )
    };
    s += &pair("size_mismatch", &size(64), &size(128));
    // Not wired for send-bw: refused before any connection, naming the flag.
    s += &format!(
        "single threads_refused '{RDMAPERF} send-bw {COMMON} --threads 2 --timeout 5 -p 19001 127.0.0.1'\n"
    );
    s += "exit 0\n";
    s
}

/// The shared batch, or `None` (after printing SKIPPED) when the VM cannot run here.
fn batch() -> Option<&'static vm::BatchResult> {
    static BATCH: OnceLock<vm::BatchResult> = OnceLock::new();
    vm::shared_batch(&BATCH, env!("CARGO_BIN_EXE_rdmaperf"), 1500, script)
}

use vm::bw_result_rows as result_rows;

#[test]
fn parses_result_rows() {
    let out = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n \
               512        200              0.00               3.34   \t\t   0.006836\n\
               landing check: ok qp=0\n";
    assert_eq!(result_rows(out), vec![(512, 200)]);
    assert_eq!(
        result_rows(" Couldn't connect to 127.0.0.1:18515\n"),
        vec![]
    );
}

#[test]
fn script_has_every_case() {
    let s = script();
    let mut n = 0;
    for c in CASES {
        for &p in c.peers {
            assert!(s.contains(&format!("pair {} ", pair_name(c, p))));
            n += 1;
        }
    }
    assert_eq!(s.matches("\npair ").count(), n + 1);
}

fn check(name: &str) {
    let Some(r) = batch() else { return };
    let c = CASES.iter().find(|c| c.name == name).unwrap();
    for &peers in c.peers {
        let p = r.pair(&pair_name(c, peers));
        let both = p.describe(c.timeout_s);
        assert!(p.server.rc == Some(0) && p.client.rc == Some(0), "{both}");
        let server = result_rows(&p.server.out);
        let client = result_rows(&p.client.out);
        match c.want {
            Want::Row(bytes, iters) => {
                assert_eq!(client, [(bytes, iters)], "client rows\n{both}");
                assert_eq!(server, client, "server (RX view) rows\n{both}");
            }
            Want::Duration(bytes) => {
                for (side, rows) in [("client", &client), ("server", &server)] {
                    assert_eq!(rows.len(), 1, "{side}: want one row\n{both}");
                    assert_eq!(rows[0].0, bytes, "{side} #bytes\n{both}");
                    assert!(rows[0].1 > 0, "{side}: no messages in the sample\n{both}");
                }
            }
            Want::Sweep(max, iters) => {
                let want: Vec<(u64, u64)> = (1..=max.ilog2()).map(|i| (1u64 << i, iters)).collect();
                assert_eq!(client, want, "client rows\n{both}");
                assert_eq!(server, want, "server (RX view) rows\n{both}");
            }
        }
        // rdmaperf says which post method ran.
        let ours = if peers.stock_client() {
            &p.server.out
        } else {
            &p.client.out
        };
        assert!(ours.contains(" Post method     : "), "{both}");
        if c.flags.contains("--post post-send") {
            assert!(ours.contains(" Post method     : post-send"), "{both}");
        }
        if c.flags.contains("--post wr-api") {
            assert!(ours.contains(" Post method     : wr-api"), "{both}");
        }
    }
}

#[test]
fn rc() {
    check("rc");
}

#[test]
fn uc() {
    check("uc");
}

#[test]
fn ud() {
    check("ud");
}

#[test]
fn two_qps_post_lists() {
    check("q2l4");
}

#[test]
fn duration() {
    check("d3");
}

#[test]
fn post_send_method() {
    check("post_send");
}

#[test]
fn wr_api_method() {
    check("wr_api");
}

#[test]
fn send_with_imm() {
    check("imm");
}

#[test]
fn all_sizes_sweep() {
    check("sweep");
}

#[test]
fn ud_sweep_stops_at_the_mtu() {
    check("sweep_ud");
}

#[test]
fn threads_are_refused_with_a_reason() {
    let Some(r) = batch() else { return };
    let s = r.single("threads_refused");
    s.assert_failed_with(&["--threads", "-q"]);
    // Refused before any run: status 2 (docs/output.md, Exit statuses).
    assert_eq!(s.rc, Some(2), "{}", s.out);
}

#[test]
fn larger_messages_than_the_receives_fail_on_both_sides() {
    let Some(r) = batch() else { return };
    let p = r.pair("size_mismatch");
    let both = p.describe(20);
    assert_eq!((p.server.rc, p.client.rc), (Some(1), Some(1)), "{both}");
    assert!(
        p.server.out.contains("receive completion with error"),
        "{both}"
    );
    assert!(p.server.out.contains("64 byte receive buffers"), "{both}");
    assert!(
        p.client
            .out
            .contains("receive buffers are smaller than 128 B"),
        "{both}"
    );
}
