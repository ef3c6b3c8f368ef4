//! Pacing and reporting flags on soft-RoCE in the VM (one boot): the software rate
//! limiter (`--rate_limit`, `--rate_units`, `--rate_limit_type`, `--burst_size`) holds the
//! rate it is given (the limit is a quarter of what the same run measured unlimited just
//! before, so no figure about rxe's speed is written here), the HW limit is refused on RoCE
//! with the device's answer and falls back to SW when its type was not given,
//! `--latency_gap` waits between posts but stays out of rdmaperf's samples (stock 4.5's
//! include it), `--perform_warm_up` sends one TX depth more (the port's packet counter),
//! `--cqe_poll` reaches the banner, `--report-both` prints each side's row under `-b`, and
//! send-bw runs with `--recv_post_list` on its receiver.
//! rdmaperf against itself and against stock perftest 4.5 both ways where 4.5 has the flag
//! (it lacks `--cqe_poll`).

mod common;
use common::vm;
use common::vm_script::{cmd, pair, pairs, rr, Ends};
use std::sync::OnceLock;

const COMMON: &str = "-d rxe0 -x 0 -F";
const PAIR_TIMEOUT_S: u64 = 120;
const SENT: &str = "/sys/class/infiniband/rxe0/ports/1/hw_counters/sent_pkts";
/// The limit is the unlimited rate divided by this.
const SLOWER: f64 = 4.0;

fn script() -> String {
    let r = r#""$RDMAPERF_BIN""#;
    let mut s = format!(
        "PAIR_TIMEOUT={PAIR_TIMEOUT_S}\n\
         row_field() {{ awk -v f=$2 '$1 ~ /^[0-9]+$/ && NF >= 5 {{ v = $f }} END {{ print v }}' \"$1\"; }}\n"
    );
    // The unlimited rate, then a quarter of it as the limit (MiB/s and messages/s).
    let free = format!("-s 4096 -n 2000 {COMMON}");
    let ours = |args: &str| cmd(false, "write-bw", args);
    s += &rr("rate_free", "write-bw", &free);
    s += &format!(
        "export LIM=$(row_field $RESULTS/rate_free.client.out 4 | awk '{{ printf \"%.3f\", $1 / {SLOWER} }}')\n\
         export PPS=$(row_field $RESULTS/rate_free.client.out 5 | awk '{{ printf \"%.0f\", $1 * 1e6 / {SLOWER} }}')\n\
         printf '%s %s' \"$LIM\" \"$PPS\" > $RESULTS/limits.var\n"
    );
    let sw = "--rate_limit=$LIM --rate_units=M --rate_limit_type=SW --burst_size=16";
    s += &pairs(
        "rate",
        &Ends::ALL,
        "write-bw",
        &free,
        &format!("{free} {sw}"),
    );
    let pps = "--rate_limit=$PPS --rate_units=p --rate_limit_type=SW --burst_size=16";
    s += &pair("rate_pps", &ours(&free), &ours(&format!("{free} {pps}")));
    // HW on RoCE: refused when asked for, SW (with perftest's notice) when not.
    let lb = "write-bw -s 64 -n 200 -d rxe0 -x 0 -F --loopback";
    s += &format!("single hw_refused '{r} {lb} --rate_limit=10 --rate_limit_type=HW -p 19411'\n");
    s += &format!("single hw_fallback '{r} {lb} --rate_limit=10 -p 19412'\n");
    // --latency_gap=5000 us on the client: read-lat without and with it; stock both ways.
    let rl = format!("-n 100 {COMMON}");
    let gap = format!("{rl} --latency_gap=5000");
    s += &rr("gap_plain", "read-lat", &rl);
    s += &pairs("gap", &Ends::ALL, "read-lat", &rl, &gap);
    // --perform_warm_up: the packets the port sent around the client's run.
    let counted = |cmd: &str| {
        format!(
            "A=$(cat {SENT}); {cmd}; rc=$?; B=$(cat {SENT}); echo sent_pkts_delta=$((B - A)); exit $rc"
        )
    };
    let w = "write-bw -s 64 -n 200";
    for (name, server, client) in [
        ("warm_plain", format!("{r} {w}"), format!("{r} {w}")),
        (
            "warm_rr",
            format!("{r} {w}"),
            format!("{r} {w} --perform_warm_up"),
        ),
        (
            "warm_sr",
            "ib_write_bw -s 64 -n 200".to_string(),
            format!("{r} {w} --perform_warm_up"),
        ),
        // -Q 1: 4.5's warm-up waits for completions of WRs it does not
        // signal (master signals them), so with CQ moderation it hangs.
        (
            "warm_rs",
            format!("{r} {w} -Q 1"),
            "ib_write_bw -s 64 -n 200 -Q 1 --perform_warm_up".to_string(),
        ),
    ] {
        let c = counted(&format!("{client} {COMMON} -p $PORT 127.0.0.1"));
        s += &format!("pair {name} '{server} {COMMON} -p $PORT' '{c}'\n");
    }
    // --cqe_poll (4.5 lacks it): both ends rdmaperf.
    let cqe = format!("-s 64 -n 200 {COMMON} --cqe_poll=1");
    s += &rr("cqe", "write-bw", &cqe);
    // --report-both with -b: rdmaperf both ends, stock both ways.
    let both = format!("-b -s 64 -n 200 --report-both {COMMON}");
    s += &pairs("both", &Ends::ALL, "write-bw", &both, &both);
    // --recv_post_list on the receiving server: rdmaperf both ends, stock both ways.
    let rpl = format!("-s 64 -n 200 {COMMON} --recv_post_list=4");
    s += &pairs("rpl", &Ends::ALL, "send-bw", &rpl, &rpl);
    s += "exit 0\n";
    s
}

fn batch() -> Option<&'static vm::BatchResult> {
    static BATCH: OnceLock<vm::BatchResult> = OnceLock::new();
    vm::shared_batch(&BATCH, env!("CARGO_BIN_EXE_rdmaperf"), 900, script)
}

/// The last bw result row's numbers (#bytes #iterations peak avg msgrate).
fn bw_row(out: &str) -> Vec<f64> {
    vm::number_rows(out, 5)
        .pop()
        .unwrap_or_else(|| panic!("no bw row in:\n{out}"))
}

fn limits(b: &vm::BatchResult) -> (f64, f64) {
    let v = b.file("limits.var").expect("limits.var");
    let mut it = v.split_whitespace().map(|x| x.parse::<f64>().ok());
    match (it.next().flatten(), it.next().flatten()) {
        (Some(l), Some(p)) if l > 0.0 && p > 0.0 => (l, p),
        _ => panic!(
            "no limits from the unlimited run ('{v}'):\n{}",
            b.pair("rate_free").client.out
        ),
    }
}

/// The paced run's measured value sits at or below the limit (5% for the first
/// burst, which starts at once) and not far under it; the unlimited run is faster.
fn check_paced(what: &str, measured: f64, limit: f64, free: f64) {
    assert!(
        measured <= limit * 1.05,
        "{what}: measured {measured} above the limit {limit}"
    );
    assert!(
        measured >= limit * 0.5,
        "{what}: measured {measured}, far below the limit {limit}"
    );
    assert!(
        free >= 2.0 * measured,
        "{what}: unlimited {free} vs paced {measured}"
    );
}

#[test]
fn sw_rate_limit_holds_the_rate() {
    let Some(b) = batch() else { return };
    let free = b.ok_pair("rate_free");
    let (lim, pps) = limits(b);
    let free_row = bw_row(&free.client.out);
    for name in ["rate_rr", "rate_sr"] {
        let p = b.ok_pair(name);
        let row = bw_row(&p.client.out);
        assert_eq!(row[1], 2000.0, "{name}: iterations");
        check_paced(name, row[3], lim, free_row[3]);
        println!(
            "{name}: unlimited {:.2} MiB/s, limit {lim:.3}, paced {:.2} MiB/s",
            free_row[3], row[3]
        );
    }
    // Stock 4.5's SW limiter under an rdmaperf server: the server reports the
    // client's numbers (what is ours to check).
    let p = b.ok_pair("rate_rs");
    let (ours, theirs) = (bw_row(&p.server.out)[3], bw_row(&p.client.out)[3]);
    assert!(
        (ours - theirs).abs() <= 0.01 * theirs.max(0.01),
        "rate_rs: the rdmaperf server reports {ours} MiB/s, the stock client measured {theirs}"
    );
    // Whether 4.5's limiter held is its own affair: it undershoots (rate and gap
    // truncated to integers), and in one CI run it did not pace at all (33.4 MiB/s,
    // faster than the unlimited run, under a 7.77 limit). Said, not judged.
    if theirs <= lim * 1.05 && free_row[3] >= 2.0 * theirs {
        println!("rate_rs: stock client paced to {theirs:.2} MiB/s (limit {lim:.3})");
    } else {
        println!(
            "NOTE rate_rs: stock perftest 4.5's SW limiter did not hold this run: \
             {theirs:.2} MiB/s under a {lim:.3} limit (unlimited {:.2})",
            free_row[3]
        );
    }
    // Messages per second.
    let p = b.ok_pair("rate_pps");
    let mpps = bw_row(&p.client.out)[4];
    check_paced("rate_pps", mpps * 1e6, pps, free_row[4] * 1e6);
    println!(
        "rate_pps: unlimited {:.6} Mpps, limit {pps} msg/s, paced {mpps:.6} Mpps",
        free_row[4]
    );
}

#[test]
fn hw_rate_limit_is_refused_on_roce_and_falls_back_without_a_type() {
    let Some(b) = batch() else { return };
    b.single("hw_refused").assert_failed_with(&[
        "failed to accept the HW rate limit",
        "rxe0 port 1 is Ethernet (RoCE)",
        "use --rate_limit_type=SW",
    ]);
    let s = b.single("hw_fallback");
    assert_eq!(s.rc, Some(0), "{}", s.out);
    assert!(
        s.out
            .contains("The QP failed to accept HW rate limit, providing SW rate limit"),
        "{}",
        s.out
    );
    assert!(!vm::number_rows(&s.out, 5).is_empty(), "{}", s.out);
}

#[test]
fn latency_gap_waits_but_is_not_in_the_samples() {
    let Some(b) = batch() else { return };
    const GAP_US: f64 = 5000.0;
    let plain = b.ok_pair("gap_plain");
    let typical = |out: &str| {
        vm::number_rows(out, 9)
            .pop()
            .unwrap_or_else(|| panic!("no latency row in:\n{out}"))[4]
    };
    let t0 = typical(&plain.client.out);
    for name in ["gap_rr", "gap_sr"] {
        let p = b.ok_pair(name);
        let t = typical(&p.client.out);
        // 100 posts with a 5 ms wait before each: at least 0.5 s of waiting.
        assert!(p.time_s.unwrap_or(0.0) >= 0.5, "{name}: {:?} s", p.time_s);
        assert!(
            t < GAP_US / 2.0,
            "{name}: typical {t} us holds the gap (plain {t0})"
        );
        println!("{name}: typical {t} us with the gap, {t0} us without");
    }
    // Stock 4.5's samples span the gap (its stamps are consecutive posts).
    let p = b.ok_pair("gap_rs");
    let t = typical(&p.client.out);
    assert!(t >= GAP_US, "stock client: typical {t} us");
}

#[test]
fn warm_up_sends_one_tx_depth_more() {
    let Some(b) = batch() else { return };
    let delta = |name: &str| {
        let p = b.ok_pair(name);
        p.client
            .out
            .lines()
            .find_map(|l| l.strip_prefix("sent_pkts_delta="))
            .and_then(|v| v.trim().parse::<i64>().ok())
            .unwrap_or_else(|| panic!("{name}: no counter delta in:\n{}", p.client.out))
    };
    let plain = delta("warm_plain");
    // -n 200 -s 64: TX depth 128, so the warm-up writes 128 more packets.
    for name in ["warm_rr", "warm_sr", "warm_rs"] {
        let d = delta(name);
        assert!(
            d >= plain + 128,
            "{name}: {d} packets vs {plain} without warm-up"
        );
        println!("{name}: {d} packets sent around the run, {plain} without warm-up");
    }
    assert_eq!(bw_row(&b.pair("warm_rr").client.out)[1], 200.0);
}

#[test]
fn cqe_poll_reaches_the_banner() {
    let Some(b) = batch() else { return };
    let p = b.ok_pair("cqe");
    for out in [&p.client.out, &p.server.out] {
        assert!(out.contains(" CQE Poll Batch  : 1\n"), "{out}");
    }
    assert_eq!(bw_row(&p.client.out)[1], 200.0);
}

#[test]
fn report_both_prints_each_side() {
    let Some(b) = batch() else { return };
    for (name, sides) in [
        ("both_rr", vec![true, false]),
        ("both_sr", vec![true]),
        ("both_rs", vec![false]),
    ] {
        let p = b.ok_pair(name);
        for client in sides {
            let out = if client { &p.client.out } else { &p.server.out };
            let l = out
                .find(" Local results: ")
                .unwrap_or_else(|| panic!("{name}:\n{out}"));
            let r = out
                .find(" Remote results: ")
                .unwrap_or_else(|| panic!("{name}:\n{out}"));
            assert!(l < r, "{name}: order");
            let sum = bw_row(&out[..l]);
            let local = bw_row(&out[l..r]);
            let remote = bw_row(&out[r..]);
            // The summed row is the two sides' rows added (2-decimal rounding).
            assert!(
                (sum[3] - local[3] - remote[3]).abs() <= 0.021,
                "{name}: {sum:?} vs {local:?} + {remote:?}"
            );
            assert_eq!((local[1], remote[1]), (200.0, 200.0), "{name}");
        }
    }
}

#[test]
fn recv_post_list_runs_against_both() {
    let Some(b) = batch() else { return };
    for name in ["rpl_rr", "rpl_sr", "rpl_rs"] {
        let p = b.ok_pair(name);
        for out in [&p.client.out, &p.server.out] {
            assert_eq!(bw_row(out)[1], 200.0, "{name}:\n{out}");
        }
    }
    // perftest's banner line on the rdmaperf receivers.
    for name in ["rpl_rr", "rpl_rs"] {
        let out = &b.pair(name).server.out;
        assert!(out.contains(" Recv Post List  : 4\n"), "{name}:\n{out}");
    }
}
