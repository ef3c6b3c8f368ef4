//! No start-up outlier against stock perftest (issue 12, part 3): 5 runs each
//! of send-lat and write-lat, rdmaperf against stock 4.5 both ways, and
//! stock against stock as the yardstick (one VM boot). Stock perftest
//! calibrates its clock (get_cpu_mhz, ~0.1-0.2 s) at the start of its loop,
//! after the last handshake, so an rdmaperf initiator's first round trip
//! absorbed that time (99-222 ms measured, in every run), and a responder's
//! first one the stock initiator's first-iteration cost (1-2 ms, 20-40 x
//! t_typical): exact statistics now leave the first round trip out.
//!
//! Checked: (1) on rdmaperf's side of every run the first sample counted is
//! below 50 ms (it read 99-222 ms before); (2) per tool and direction, the
//! median t_max of the 5 runs is at most `T_MAX_RATIO` x the median t_max of
//! the 5 stock <-> stock runs of the same tool in the same boot (before the
//! fix the initiator side's median was the calibration, >= 99 ms). The
//! issue's absolute t_max < 20 x t_typical is printed, not asserted: under
//! TCG on a loaded host every pair, stock against stock included, has
//! scheduling spikes of several ms (QEMU translating the loop, the host's
//! other load) with t_typical 11-25 us, so that rule fails for stock perftest
//! against itself as well; the ratio to stock <-> stock is the honest test.

mod common;
use common::vm;
use common::vm_script::{pair, Ends};

const RUNS: usize = 5;
const COMMON: &str = "-d rxe0 -x 0 -F -s 2 -n 300";
/// rdmaperf's median t_max may be this many times stock <-> stock's. Seen
/// with the host's load average at 8.7 (2 cores): 0.43-3.40 x, stock <->
/// stock's own medians 2.8-9.8 ms. Before the fix the initiator side's
/// median was the peer's clock calibration, 99-222 ms: >= 10 x.
const T_MAX_RATIO: f64 = 5.0;

/// (name, tool, who runs the two ends), interleaved: every kind once per round. Stock
/// both ends is the yardstick.
fn cases() -> Vec<(String, &'static str, Ends)> {
    let mut v = Vec::new();
    for i in 0..RUNS {
        for (tool, short) in [("send-lat", "send"), ("write-lat", "write")] {
            for e in [Ends::Sr, Ends::Rs, Ends::Ss] {
                v.push((format!("{short}_{}{i}", e.suffix()), tool, e));
            }
        }
    }
    v
}

fn script() -> String {
    let mut s = String::from("PAIR_TIMEOUT=120\n");
    for (name, tool, e) in cases() {
        // rdmaperf's ends write their samples.
        let args = |stock: bool| {
            if stock {
                COMMON.to_string()
            } else {
                format!("{COMMON} --samples-file=$RESULTS/{name}.csv")
            }
        };
        let srv = e.server(tool, &args(e.stock_server()));
        s += &pair(&name, &srv, &e.client(tool, &args(e.stock_client())));
    }
    s
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// t_max and t_typical of the 2-byte row.
fn row(out: &str) -> Option<(f64, f64)> {
    out.lines().find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.len() >= 7 && f[0] == "2" && f[1] == "300" {
            Some((f[3].parse().ok()?, f[4].parse().ok()?))
        } else {
            None
        }
    })
}

/// (index, µs) of every sample in a `--samples-file` CSV, in order.
fn samples(csv: &str) -> Vec<(u64, f64)> {
    csv.lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(',').collect();
            Some((f.get(1)?.parse().ok()?, f.get(3)?.parse().ok()?))
        })
        .collect()
}

#[test]
fn no_start_up_outlier_against_stock_peers() {
    let Some(r) = vm::Batch::rdmaperf().timeout_s(900).run_or_skip(&script()) else {
        return;
    };
    let mut failures = Vec::new();
    let mut within = 0;
    // t_max per (tool, pair kind).
    let mut t_max_of: std::collections::BTreeMap<(&str, &str), Vec<f64>> = Default::default();
    for (name, tool, e) in cases() {
        let p = r.ok_pair(&name);
        // The side that reports for the pair: rdmaperf's, or (stock both) the client.
        let out = if e == Ends::Rs {
            &p.server.out
        } else {
            &p.client.out
        };
        let Some((t_max, t_typ)) = row(out) else {
            failures.push(format!("{name}: no result row:\n{out}"));
            continue;
        };
        t_max_of.entry((tool, e.suffix())).or_default().push(t_max);
        within += usize::from(t_max < 20.0 * t_typ);
        if e == Ends::Ss {
            println!("{name}: t_max {t_max} us, t_typical {t_typ} us (stock <-> stock)");
            continue;
        }
        let s = samples(r.file(&format!("{name}.csv")).unwrap_or(""));
        let big = s.iter().copied().max_by(|a, b| a.1.total_cmp(&b.1));
        let first = s.first().copied();
        println!(
            "{name}: t_max {t_max} us, t_typical {t_typ} us, first sample {first:?}, largest {big:?}"
        );
        match first {
            Some((_, f)) if f < 50_000.0 => {}
            _ => failures.push(format!(
                "{name}: first sample {first:?} (the peer's start-up) not below 50 ms"
            )),
        }
    }
    for tool in ["send-lat", "write-lat"] {
        let stock = median(t_max_of.get(&(tool, "ss")).cloned().unwrap_or_default());
        for kind in ["sr", "rs"] {
            let ours = median(t_max_of.get(&(tool, kind)).cloned().unwrap_or_default());
            let ratio = ours / stock;
            println!(
                "{tool} {kind}: median t_max {ours} us vs stock <-> stock {stock} us: {ratio:.2}x"
            );
            // NaN (a group without runs) fails too.
            if ratio.is_nan() || ratio > T_MAX_RATIO {
                failures.push(format!(
                    "{tool} {kind}: median t_max {ours} us is {ratio:.2} x stock <-> stock's \
                     {stock} us (at most {T_MAX_RATIO} x)"
                ));
            }
        }
    }
    println!(
        "{within} of {} runs have t_max < 20 x t_typical",
        cases().len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
