//! `rdmaperf write-bw` on soft-RoCE in the VM: against itself and against stock perftest
//! 4.5 in both roles, in iteration and duration mode, plus bad-input cases that must fail
//! fast with a message naming the problem.
//!
//! All cases share ONE VM boot (~16 s): the first test to ask boots it and runs every case,
//! the others read their results from the same batch. Every side runs under a per-case
//! `timeout`, so a hang shows up as exit status 124 instead of a stuck test.

mod common;
use common::vm;
use std::sync::OnceLock;

/// Seconds each side of a working pair may take (a `-D 4` pair needs ~10 s under TCG).
const PAIR_TIMEOUT_S: u64 = 60;
/// Seconds a bad-input case may take; rdmaperf gets `--timeout 5`, so 20 is a hang.
const BAD_TIMEOUT_S: u64 = 20;
/// `timeout`'s status when it had to kill the command.
const TIMED_OUT: [i32; 2] = [124, 137];

/// The modes under test: case prefix, flags for both sides, message size, fixed iterations.
const MODES: [(&str, &str, u64, Option<u64>); 3] = [
    ("n64", "-n 200 -s 64", 64, Some(200)),
    ("d64", "-D 4 -s 64", 64, None),
    ("n64k", "-n 200", 65536, Some(200)), // perftest's default size
];

/// Which tools run the two sides.
#[derive(Clone, Copy, PartialEq)]
enum Peers {
    /// rdmaperf server, rdmaperf client.
    Both,
    /// stock `ib_write_bw` server, rdmaperf client.
    StockServer,
    /// rdmaperf server, stock `ib_write_bw` client.
    StockClient,
}

const PEERS: [(&str, Peers); 3] = [
    ("rr", Peers::Both),
    ("sr", Peers::StockServer),
    ("rs", Peers::StockClient),
];

const RDMAPERF: &str = r#""$RDMAPERF_BIN" write-bw"#;
const STOCK: &str = "ib_write_bw";
const COMMON: &str = "-d rxe0 -x 0 -F";

/// The guest script: every pair, then the bad-input cases.
fn script() -> String {
    let mut s = format!("PAIR_TIMEOUT={PAIR_TIMEOUT_S}\n");
    for (mode, flags, _, iters) in MODES {
        for (tag, peers) in PEERS {
            let (server, client) = match peers {
                Peers::Both => (RDMAPERF, RDMAPERF),
                Peers::StockServer => (STOCK, RDMAPERF),
                Peers::StockClient => (RDMAPERF, STOCK),
            };
            // The landing check needs a fixed number of writes to count.
            let check = if server == RDMAPERF && iters.is_some() {
                " --check-landing"
            } else {
                ""
            };
            s += &format!(
                "pair {mode}_{tag} '{server} {COMMON} {flags}{check} -p $PORT' \
                 '{client} {COMMON} {flags} -p $PORT 127.0.0.1'\n"
            );
        }
    }
    s += &format!("PAIR_TIMEOUT={BAD_TIMEOUT_S}\n");
    s += BAD_CASES;
    s += "exit 0\n"; // the batch status then says only whether the VM itself worked
    s
}

/// Bad input. Ports 19xxx: the pairs above count up from 18515.
const BAD_CASES: &str = r#"
single no_server '"$RDMAPERF_BIN" write-bw -d rxe0 -x 0 -F --timeout 5 -p 19001 127.0.0.1'
single unknown_device '"$RDMAPERF_BIN" write-bw -d nosuch0 -x 0 -F --timeout 5 -p 19002'
single bad_gid '"$RDMAPERF_BIN" write-bw -d rxe0 -x 99 -F --timeout 5 -p 19003'

# Peers that speak another protocol on the control port.
cat > /tmp/wrong_peer.py <<'EOF'
# A peer on the control port (argv[1]) that speaks another protocol, as argv[2] says:
# "http_server" accepts, answers whatever comes with an HTTP error and reads until the
# client hangs up; "silent_server" accepts and never says a word; "http_client" sends
# an HTTP request to the server under test and reads until it hangs up.
import socket, sys, time
port, role = int(sys.argv[1]), sys.argv[2]
if role == "http_client":
    c = socket.create_connection(("127.0.0.1", port), timeout=15)
    c.sendall(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
else:
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(1)
    c, _ = s.accept()
    if role == "silent_server":
        time.sleep(15)
        sys.exit(0)
    c.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    c.settimeout(15)
try:
    while c.recv(4096):
        pass
except OSError:
    pass
EOF
pair http_server 'python3 /tmp/wrong_peer.py $PORT http_server' '"$RDMAPERF_BIN" write-bw -d rxe0 -x 0 -F --timeout 5 -p $PORT 127.0.0.1'
pair silent_server 'python3 /tmp/wrong_peer.py $PORT silent_server' '"$RDMAPERF_BIN" write-bw -d rxe0 -x 0 -F --timeout 3 -p $PORT 127.0.0.1'
pair http_client '"$RDMAPERF_BIN" write-bw -d rxe0 -x 0 -F --timeout 5 -p $PORT' 'python3 /tmp/wrong_peer.py $PORT http_client'
"#;

/// The shared batch, or `None` (after printing SKIPPED) when the VM cannot run here.
fn batch() -> Option<&'static vm::BatchResult> {
    static BATCH: OnceLock<vm::BatchResult> = OnceLock::new();
    vm::shared_batch(&BATCH, env!("CARGO_BIN_EXE_rdmaperf"), 1200, script)
}

// ---- output parsing ------------------------------------------------------------------------

/// The `(#bytes, #iterations)` of every perftest BW result row: a line of at least 5 numbers,
/// e.g. ` 64         100              2.07               0.80   \t\t   0.013045`.
use vm::bw_result_rows as result_rows;

/// The `landing check:` line: whether it says `ok`, and its `key=value` numbers.
#[derive(Debug, PartialEq)]
struct Landing {
    ok: bool,
    slots: u64,
    written: u64,
    pattern: u64,
    stray: u64,
}

fn landing(out: &str) -> Option<Landing> {
    let line = out
        .lines()
        .find_map(|l| l.trim().strip_prefix("landing check:"))?;
    let mut words = line.split_whitespace();
    let ok = words.next()? == "ok";
    let num = |key: &str| -> Option<u64> {
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(key)?.strip_prefix('=')?.parse().ok())
    };
    Some(Landing {
        ok,
        slots: num("slots")?,
        written: num("written")?,
        pattern: num("pattern")?,
        stray: num("stray")?,
    })
}

#[test]
fn parses_result_rows() {
    let out = " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n \
               64         85200            0.00               2.60   \t\t   0.042581\n\
               landing check: ok qp=0 slots=64 written=64 pattern=64 stray=0\n";
    assert_eq!(result_rows(out), vec![(64, 85200)]);
    assert_eq!(
        result_rows(" Couldn't connect to 127.0.0.1:18515\n"),
        vec![]
    );
}

#[test]
fn parses_landing_line() {
    assert_eq!(
        landing("x\nlanding check: ok qp=0 slots=128 written=128 pattern=0 stray=0\n"),
        Some(Landing {
            ok: true,
            slots: 128,
            written: 128,
            pattern: 0,
            stray: 0
        })
    );
    let failed = landing("landing check: FAILED qp=0 slots=2 written=1 pattern=1 stray=3").unwrap();
    assert!(!failed.ok);
    assert_eq!(failed.stray, 3);
    assert_eq!(landing("no check here\n"), None);
}

#[test]
fn script_has_every_case() {
    let s = script();
    for (mode, ..) in MODES {
        for (tag, _) in PEERS {
            assert!(s.contains(&format!("pair {mode}_{tag} ")), "{mode}_{tag}");
        }
    }
    // The landing check only where an rdmaperf server counts a fixed number of writes.
    assert_eq!(s.matches("--check-landing").count(), 4);
    assert!(!s.contains("-D 4 -s 64 --check-landing"));
}

// ---- the working pairs ---------------------------------------------------------------------

fn check_pair(mode: &str, tag: &str) {
    let Some(r) = batch() else { return };
    let (_, _, bytes, iters) = MODES.iter().find(|m| m.0 == mode).copied().unwrap();
    let peers = PEERS.iter().find(|p| p.0 == tag).unwrap().1;
    let p = r.pair(&format!("{mode}_{tag}"));
    let both = format!(
        "pair {}: server rc {:?}, client rc {:?} (124 = killed by the {PAIR_TIMEOUT_S} s per-side timeout)\n\
         --- server ---\n{}\n--- client ---\n{}",
        p.name, p.server.rc, p.client.rc, p.server.out, p.client.out
    );
    assert!(p.server.rc == Some(0) && p.client.rc == Some(0), "{both}");

    let server_rows = result_rows(&p.server.out);
    let client_rows = result_rows(&p.client.out);
    assert_eq!(server_rows.len(), 1, "server: want one result row\n{both}");
    assert_eq!(client_rows.len(), 1, "client: want one result row\n{both}");
    // perftest's server prints the client's numbers (sent over the report exchange).
    assert_eq!(
        server_rows[0], client_rows[0],
        "server and client rows differ in #bytes/#iterations\n{both}"
    );
    let (b, n) = client_rows[0];
    assert_eq!(b, bytes, "#bytes\n{both}");
    match iters {
        Some(want) => assert_eq!(n, want, "#iterations\n{both}"),
        None => assert!(n > 0, "-D run reports 0 iterations\n{both}"),
    }

    let rdmaperf_server = peers != Peers::StockServer;
    if rdmaperf_server && iters.is_some() {
        let l = landing(&p.server.out)
            .unwrap_or_else(|| panic!("no `landing check:` line from the server\n{both}"));
        assert!(l.ok, "landing check failed: {l:?}\n{both}");
        assert!(l.slots > 0, "landing check saw no slots: {l:?}\n{both}");
        assert_eq!(l.written, l.slots, "unwritten slots: {l:?}\n{both}");
        assert_eq!(l.stray, 0, "bytes outside the slots changed: {l:?}\n{both}");
        if peers == Peers::Both {
            assert_eq!(
                l.pattern, l.slots,
                "rdmaperf's pattern missing: {l:?}\n{both}"
            );
        } else {
            // perftest fills its buffer at random: nothing may look like rdmaperf's pattern.
            assert_eq!(
                l.pattern, 0,
                "stock client data matched rdmaperf's pattern: {l:?}\n{both}"
            );
        }
    }
}

macro_rules! pair_tests {
    ($($name:ident => $mode:literal, $tag:literal;)*) => {$(
        #[test]
        fn $name() {
            check_pair($mode, $tag);
        }
    )*};
}

pair_tests! {
    vm_write_bw_n64_rdmaperf_pair => "n64", "rr";
    vm_write_bw_n64_rdmaperf_client_stock_server => "n64", "sr";
    vm_write_bw_n64_stock_client_rdmaperf_server => "n64", "rs";
    vm_write_bw_d64_rdmaperf_pair => "d64", "rr";
    vm_write_bw_d64_rdmaperf_client_stock_server => "d64", "sr";
    vm_write_bw_d64_stock_client_rdmaperf_server => "d64", "rs";
    vm_write_bw_n64k_rdmaperf_pair => "n64k", "rr";
    vm_write_bw_n64k_rdmaperf_client_stock_server => "n64k", "sr";
    vm_write_bw_n64k_stock_client_rdmaperf_server => "n64k", "rs";
}

// ---- bad input -----------------------------------------------------------------------------

/// Asserts `side` failed on its own (not by the per-case timeout) and returns its output.
fn failed_fast(what: &str, side: &vm::Side) -> String {
    match side.rc {
        Some(0) => panic!("{what}: exited 0, want an error\n{}", side.out),
        Some(rc) if TIMED_OUT.contains(&rc) => panic!(
            "{what}: hung and was killed after {BAD_TIMEOUT_S} s (rc {rc})\n{}",
            side.out
        ),
        None => panic!("{what}: no exit status recorded\n{}", side.out),
        Some(_) => side.out.clone(),
    }
}

#[test]
fn vm_write_bw_no_server() {
    let Some(r) = batch() else { return };
    let out = failed_fast("client with no server", &r.single("no_server"));
    let lower = out.to_lowercase();
    assert!(
        lower.contains("no") && lower.contains("server") && out.contains("19001"),
        "want a message saying no server listens on port 19001:\n{out}"
    );
}

#[test]
fn vm_write_bw_unknown_device() {
    let Some(r) = batch() else { return };
    let out = failed_fast("-d nosuch0", &r.single("unknown_device"));
    assert!(
        out.contains("nosuch0") && out.contains("rxe0"),
        "want the bad name and the devices there are (rxe0):\n{out}"
    );
}

#[test]
fn vm_write_bw_bad_gid_index() {
    let Some(r) = batch() else { return };
    let out = failed_fast("-x 99", &r.single("bad_gid"));
    // rxe0's GID table: 0 = fe80::ff:fe00:701, 1 = ::ffff:169.254.7.1 (any spelling).
    let lower = out.to_lowercase();
    let lists_table = lower.contains("fe80")
        || lower.contains("fe00:701")
        || lower.contains("fe00:0701")
        || out.contains("169.254.7.1");
    assert!(
        out.contains("99") && lists_table,
        "want the bad index and rxe0's GID table:\n{out}"
    );
}

/// The message of a client/server that met a peer speaking another protocol.
fn check_wrong_peer(case: &str, rdmaperf_is_server: bool) {
    let Some(r) = batch() else { return };
    let p = r.pair(case);
    let side = if rdmaperf_is_server {
        &p.server
    } else {
        &p.client
    };
    let out = failed_fast(case, side);
    // The first step of perftest's protocol is the 16-byte version exchange.
    assert!(
        out.to_lowercase().contains("version"),
        "want an error naming the failed step (version exchange):\n{out}"
    );
}

#[test]
fn vm_write_bw_http_server_peer() {
    check_wrong_peer("http_server", false);
}

#[test]
fn vm_write_bw_silent_server_peer() {
    check_wrong_peer("silent_server", false);
}

#[test]
fn vm_write_bw_http_client_peer() {
    check_wrong_peer("http_client", true);
}

// ---- loopback ------------------------------------------------------------------------------

#[test]
fn vm_write_bw_loopback() {
    let Some(r) = vm::Batch::rdmaperf().timeout_s(600).run_or_skip(&format!(
        "PAIR_TIMEOUT={PAIR_TIMEOUT_S}\n\
             single loopback '\"$RDMAPERF_BIN\" write-bw --loopback -d rxe0 -x 0 -n 100 -s 64'\n\
             exit 0\n"
    )) else {
        return;
    };
    assert_eq!(r.status, 0, "VM batch failed:\n{}", r.console);
    let s = r.single("loopback");
    assert_eq!(s.rc, Some(0), "--loopback failed (124 = hung):\n{}", s.out);
    let rows = result_rows(&s.out);
    assert!(
        rows.contains(&(64, 100)),
        "want a result row `64 100 ...`:\n{}",
        s.out
    );
}
