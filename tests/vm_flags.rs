//! perftest flags and script-facing output on soft-RoCE in the VM (one boot):
//! `-U`/`-H`/`-C` and `--samples-file` (the printed samples and histogram recomputed from the
//! raw samples; rdmaperf against itself and against stock perftest 4.5 both ways), the
//! server's "Waiting for client to connect" banner, `--output=bandwidth|latency` captured
//! into a shell variable, and the `-a` table under a pseudo terminal (`script` from
//! util-linux) with no progress text left in its rows.

mod common;
use common::vm;
use common::vm_script::{cm_pair, cmd, pair, pairs, rr, Ends};
use std::sync::OnceLock;

const COMMON: &str = "-d rxe0 -x 0 -F";
const PAIR_TIMEOUT_S: u64 = 240;
const BANNER: &str =
    "************************************\n* Waiting for client to connect... *\n************************************\n";

/// A pair whose client's one `--output` number is captured into the shell variable `var`,
/// as a script would, then written to `$RESULTS/{name}.var`.
fn captured(name: &str, server: &str, var: &str, client: &str) -> String {
    format!(
        "pair {name} '{server} -p $PORT' \
         '{var}=$({client} -p $PORT 127.0.0.1) && printf %s \"${var}\" > $RESULTS/{name}.var'\n"
    )
}

fn script() -> String {
    let r = r#""$RDMAPERF_BIN""#;
    let mut s = format!(
        "PAIR_TIMEOUT={PAIR_TIMEOUT_S}\n\
         mountpoint -q /dev/pts || {{ mkdir -p /dev/pts; mount -t devpts devpts /dev/pts; }}\n"
    );
    // -U -H with the raw samples, rdmaperf both ends.
    let lat = format!("{COMMON} -n 200");
    let samples = |name: &str| format!("--samples-file=$RESULTS/{name}.csv");
    let uh = format!("{lat} -U -H {}", samples("lat_uh"));
    s += &pair(
        "lat_uh",
        &cmd(false, "write-lat", &lat),
        &cmd(false, "write-lat", &uh),
    );
    // -C -U against a stock 4.5 server, and an rdmaperf server with -U -H -C under a stock
    // client that asks for the same.
    let cu = format!("{lat} -C -U {}", samples("lat_c_sr"));
    s += &pairs("lat_c", &[Ends::Sr], "send-lat", &lat, &cu);
    let uhc = format!("{lat} -U -H -C {}", samples("lat_uhc_rs"));
    s += &pairs(
        "lat_uhc",
        &[Ends::Rs],
        "write-lat",
        &uhc,
        &format!("{lat} -U -C"),
    );
    // --output: the number alone, as BW=$(...) captures it.
    let out_bw = format!("write-bw {COMMON} -s 64 -n 200");
    let bandwidth = format!("{r} {out_bw} --output=bandwidth");
    s += &captured("out_bw", &bandwidth, "BW", &bandwidth);
    let rate = format!("{r} {out_bw} --output=message_rate");
    let stock = format!("ib_write_bw {COMMON} -s 64 -n 200 --output=bandwidth");
    s += &captured("out_bw_sr", &stock, "BW", &rate);
    let latency = format!("{r} write-lat {COMMON} -n 200 --output=latency");
    s += &captured("out_lat", &latency, "LAT", &latency);
    // -a on a terminal: stdout and stderr are the pty.
    s += &format!(
        "pair pty_sweep '{r} write-bw {COMMON} -a -n 5 --cq-timeout 120 -p $PORT' \
         'script -qec \"$RDMAPERF_BIN write-bw {COMMON} -a -n 5 --cq-timeout 120 -p $PORT 127.0.0.1\" /dev/null'\n"
    );
    // --tclass/--flow_label/--pkey_index: set on the QPs (read back after RTR, or the run
    // fails), rdmaperf both ends, stock 4.5 both ways (4.5 has --tclass, not --flow_label).
    let bw = format!("-s 64 -n 200 {COMMON}");
    let qos = format!("{bw} -q 2 --tclass 96 --flow_label 5,0x6 --pkey_index 0");
    s += &pairs("qos", &[Ends::Rr], "write-bw", &qos, &qos);
    let qos = format!("{bw} --tclass 96");
    s += &pairs("qos", &[Ends::Sr, Ends::Rs], "write-bw", &qos, &qos);
    let ud = format!("-c UD {bw} --tclass 32");
    s += &rr("qos_ud", "send-bw", &ud);
    s += &format!("single pkey1 '{r} write-bw {bw} --loopback --pkey_index 1 -p 19301'\n");
    // --cpu_util under -D: rdmaperf both ends, stock 4.5 both ways, and a latency tool.
    let d = format!("{COMMON} -s 64 -D 4 --cpu_util");
    s += &pairs("cpu", &[Ends::Rr, Ends::Sr], "write-bw", &d, &d);
    s += &pairs("cpu", &[Ends::Rs], "read-bw", &d, &d);
    let d = format!("{COMMON} -D 4 --cpu_util");
    s += &rr("cpu_lat", "write-lat", &d);
    // --wait_destroy and -R --retry_count: rdmaperf both ends, stock 4.5 both ways.
    let wait = format!("{bw} --wait_destroy 2");
    s += &pairs("wait", &[Ends::Rr, Ends::Sr], "write-bw", &wait, &wait);
    // (A stock -R client's lost connect runs the pair once more: vm_script::cm_pair.)
    let cm = "-d rxe0 -F -R -s 64 -n 200 --retry_count 3";
    for e in Ends::ALL {
        s += &cm_pair("retry", e, "write-bw", cm, cm);
    }
    // -W: port counter deltas after the row, rdmaperf both ends and under a stock server.
    let w = "-W hw_counters/sent_pkts,hw_counters/rcvd_pkts";
    let cnt = format!("{bw} {w}");
    s += &rr("cnt_rr", "write-bw", &cnt);
    let lat = format!("-n 200 {COMMON}");
    let (srv, cli) = (
        cmd(true, "write-lat", &lat),
        cmd(false, "write-lat", &format!("{lat} {w}")),
    );
    s += &pair("cnt_lat_sr", &srv, &cli);
    s += "exit 0\n";
    s
}

fn batch() -> Option<&'static vm::BatchResult> {
    static BATCH: OnceLock<vm::BatchResult> = OnceLock::new();
    vm::shared_batch(&BATCH, env!("CARGO_BIN_EXE_rdmaperf"), 1500, script)
}

/// `--samples-file`: (cycles, usec) per sample.
fn samples(csv: &str) -> Vec<(u64, f64)> {
    let mut l = csv.lines();
    assert_eq!(l.next(), Some("size,index,cycles,usec"));
    l.enumerate()
        .map(|(k, line)| {
            let f: Vec<&str> = line.split(',').collect();
            assert_eq!(f.len(), 4, "{line}");
            assert_eq!(f[1].parse::<usize>().unwrap(), k + 1, "{line}");
            (f[2].parse().unwrap(), f[3].parse().unwrap())
        })
        .collect()
}

/// The `-U` dump: the values after "#, <units>" up to the next non-sample line.
fn dump(out: &str, units: &str) -> Vec<f64> {
    let start = out
        .find(&format!("#, {units}\n"))
        .unwrap_or_else(|| panic!("no -U dump in:\n{out}"));
    out[start..]
        .lines()
        .skip(1)
        .map_while(|l| {
            let (i, v) = l.split_once(", ")?;
            i.parse::<usize>().ok()?;
            v.parse::<f64>().ok()
        })
        .collect()
}

/// The `-H` histogram: (from, to, count, cumulative %).
fn histogram(out: &str, units: &str) -> Vec<(f64, f64, usize, f64)> {
    let head = format!("#, {units} histogram: from, to, samples, cumulative %\n");
    let start = out
        .find(&head)
        .unwrap_or_else(|| panic!("no -H histogram in:\n{out}"));
    out[start + head.len()..]
        .lines()
        .map_while(|l| {
            let f: Vec<&str> = l.split(", ").collect();
            if f.len() != 4 {
                return None;
            }
            let to = if f[1] == "inf" {
                f64::INFINITY
            } else {
                f[1].parse().ok()?
            };
            Some((
                f[0].parse().ok()?,
                to,
                f[2].parse().ok()?,
                f[3].parse().ok()?,
            ))
        })
        .collect()
}

/// The latency result row's 9 numbers.
fn lat_row(out: &str) -> Vec<f64> {
    vm::number_rows(out, 9)
        .pop()
        .unwrap_or_else(|| panic!("no latency row in:\n{out}"))
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * b.abs().max(1e-9)
}

/// -U printed every sample of the file (perftest's %g: 6 significant digits), in order.
fn check_dump(out: &str, units: &str, values: &[f64]) {
    let d = dump(out, units);
    assert_eq!(d.len(), values.len(), "-U lines vs samples");
    for (k, (a, b)) in d.iter().zip(values).enumerate() {
        assert!(
            close(*a, *b, 1e-5),
            "sample {}: -U says {a}, the file {b}",
            k + 1
        );
    }
}

/// -H counts recomputed from the raw samples, bucket by bucket.
fn check_histogram(out: &str, units: &str, values: &[f64]) {
    let h = histogram(out, units);
    assert!(!h.is_empty() && h.len() <= 21, "{h:?}");
    let mut cum = 0;
    for &(from, to, count, pct) in &h {
        let n = values.iter().filter(|&&v| v >= from && v < to).count();
        assert_eq!(n, count, "bucket [{from}, {to})");
        cum += count;
        assert!(
            (pct - 100.0 * cum as f64 / values.len() as f64).abs() <= 0.006,
            "cumulative {pct}"
        );
    }
    assert_eq!(cum, values.len(), "every sample in one bucket");
}

/// The row's min and max are the samples' (exact statistics).
fn check_row(out: &str, values: &[f64]) {
    let row = lat_row(out);
    let min = values.iter().copied().fold(f64::INFINITY, f64::min);
    let max = values.iter().copied().fold(0.0, f64::max);
    assert!((row[2] - min).abs() <= 0.006, "t_min {} vs {min}", row[2]);
    assert!((row[3] - max).abs() <= 0.006, "t_max {} vs {max}", row[3]);
}

#[test]
fn unsorted_and_histogram_recomputed_from_the_raw_samples() {
    let Some(b) = batch() else { return };
    let p = b.ok_pair("lat_uh");
    let s = samples(b.file("lat_uh.csv").expect("lat_uh.csv"));
    // 200 posts, 199 round trips; exact statistics leave out the first (a warm-up).
    assert_eq!(s.len(), 198, "200 posts give 198 samples");
    let usec: Vec<f64> = s.iter().map(|x| x.1).collect();
    check_dump(&p.client.out, "usec", &usec);
    check_histogram(&p.client.out, "usec", &usec);
    check_row(&p.client.out, &usec);
    // perftest repeats the table header after the dump.
    assert_eq!(p.client.out.matches(" #bytes #iterations").count(), 2);
}

#[test]
fn cycles_against_stock_both_ways() {
    let Some(b) = batch() else { return };
    // rdmaperf client -C -U, stock 4.5 server: values are TSC cycles / 2 (send ping-pong).
    let p = b.ok_pair("lat_c_sr");
    let s = samples(b.file("lat_c_sr.csv").expect("lat_c_sr.csv"));
    let cyc: Vec<f64> = s.iter().map(|x| x.0 as f64 / 2.0).collect();
    check_dump(&p.client.out, "cycles", &cyc);
    check_row(&p.client.out, &cyc);
    // rdmaperf server -U -H -C under a stock client doing -U -C.
    let p = b.ok_pair("lat_uhc_rs");
    let s = samples(b.file("lat_uhc_rs.csv").expect("lat_uhc_rs.csv"));
    let cyc: Vec<f64> = s.iter().map(|x| x.0 as f64 / 2.0).collect();
    check_dump(&p.server.out, "cycles", &cyc);
    check_histogram(&p.server.out, "cycles", &cyc);
    assert!(p.client.out.contains("#, cycles"), "{}", p.client.out);
}

#[test]
fn server_prints_perftest_wait_banner() {
    let Some(b) = batch() else { return };
    let p = b.pair("lat_uh");
    assert!(
        p.server.out.starts_with(&format!("\n{BANNER}")),
        "{}",
        p.server.out
    );
    assert!(!p.client.out.contains("Waiting for client"));
}

fn number_alone(v: &str, what: &str) {
    assert!(
        !v.is_empty() && v.chars().all(|c| c.is_ascii_digit() || c == '.'),
        "{what}: the captured value is not a number alone: {v:?}"
    );
    assert!(v.parse::<f64>().unwrap() > 0.0, "{what}: {v}");
}

#[test]
fn output_captured_in_a_shell_variable_is_the_number_alone() {
    let Some(b) = batch() else { return };
    for (pair, var) in [
        ("out_bw", "out_bw.var"),
        ("out_bw_sr", "out_bw_sr.var"),
        ("out_lat", "out_lat.var"),
    ] {
        b.ok_pair(pair);
        number_alone(b.file(var).unwrap_or_else(|| panic!("{var}")), pair);
    }
    // The rdmaperf servers print the number alone too (no banner, no dashes).
    for pair in ["out_bw", "out_lat"] {
        let out = b.pair(pair).server.out;
        number_alone(out.trim_end_matches('\n'), pair);
    }
}

/// What a terminal shows for `line`: `\r` returns to column 0, `ESC [ K` erases to the end.
fn rendered(line: &str) -> String {
    let mut screen: Vec<char> = Vec::new();
    let mut col = 0;
    let mut it = line.chars().peekable();
    while let Some(c) = it.next() {
        match c {
            '\r' => col = 0,
            '\x1b' => {
                let mut seq = String::new();
                for d in it.by_ref() {
                    seq.push(d);
                    if d.is_ascii_alphabetic() {
                        break;
                    }
                }
                if seq == "[K" {
                    screen.truncate(col);
                }
            }
            _ => {
                if col < screen.len() {
                    screen[col] = c;
                } else {
                    screen.push(c);
                }
                col += 1;
            }
        }
    }
    screen.into_iter().collect()
}

#[test]
fn sweep_rows_on_a_terminal_carry_no_progress_text() {
    let Some(b) = batch() else { return };
    let p = b.ok_pair("pty_sweep");
    let raw = &p.client.out;
    assert!(
        raw.contains("[1/23]"),
        "no progress was shown on the pty:\n{raw:?}"
    );
    let lines: Vec<String> = raw.split('\n').map(rendered).collect();
    let rows: Vec<&String> = lines
        .iter()
        .filter(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            f.len() == 5 && f.iter().all(|x| x.parse::<f64>().is_ok())
        })
        .collect();
    assert_eq!(rows.len(), 23, "rows:\n{}", lines.join("\n"));
    for l in &lines {
        assert!(!l.contains("/23]"), "progress text left on screen: {l:?}");
    }
    // One post-cost summary for the sweep, not one line per size.
    assert_eq!(raw.matches(" Post cost (").count(), 1, "{raw}");
    assert!(
        raw.contains(" Post cost (2..8388608 B, 23 sizes): median "),
        "{raw}"
    );
}

#[test]
fn traffic_class_flow_label_and_pkey_reach_the_qps() {
    let Some(b) = batch() else { return };
    let p = b.ok_pair("qos_rr");
    for out in [&p.server.out, &p.client.out] {
        assert!(
            out.contains(
                " GRH             : traffic class 96, flow label 5,6 (read back from the QPs)"
            ),
            "{out}"
        );
    }
    for pair in ["qos_sr", "qos_rs", "qos_ud"] {
        let p = b.ok_pair(pair);
        assert_eq!(
            vm::bw_result_rows(&p.client.out).len(),
            1,
            "{pair}: {}",
            p.client.out
        );
    }
    let ud = b.pair("qos_ud");
    assert!(
        ud.client
            .out
            .contains(" GRH             : traffic class 32, flow label 0 (on the address handle)"),
        "{}",
        ud.client.out
    );
    // rxe 6.1 keeps any P_Key index it is given; the run reads it back from the QP.
    let s = b.single("pkey1");
    assert_eq!(s.rc, Some(0), "{}", s.out);
    assert!(
        s.out
            .contains(" P_Key index     : 1 (read back from the QPs)"),
        "{}",
        s.out
    );
}

/// The last number of every table row that has `width` numbers.
fn last_column(out: &str, width: usize) -> Vec<f64> {
    vm::number_rows(out, width)
        .iter()
        .map(|f| f[width - 1])
        .collect()
}

#[test]
fn cpu_util_column_under_duration() {
    let Some(b) = batch() else { return };
    // rdmaperf's client measures; a stock client's numbers are its own.
    for pair in ["cpu_rr", "cpu_sr"] {
        let p = b.ok_pair(pair);
        assert!(
            p.client.out.contains("MsgRate[Mpps]    CPU_Util[%]\n"),
            "{pair}: {}",
            p.client.out
        );
        assert_one_cpu_util(&p.client.out, 6, pair);
    }
    let p = b.ok_pair("cpu_rs");
    assert!(p.server.out.contains("CPU_Util[%]"), "{}", p.server.out);
    let p = b.ok_pair("cpu_lat");
    assert_one_cpu_util(&p.client.out, 5, "write-lat");
}

/// `out` has one result row of `width` columns whose last, CPU_Util, is a busy share:
/// both sides of the pair spin on this 2-CPU guest, but it is not over 100 %.
fn assert_one_cpu_util(out: &str, width: usize, what: &str) {
    let cpu = last_column(out, width);
    assert_eq!(cpu.len(), 1, "{what}: {out}");
    assert!(
        cpu[0] > 0.0 && cpu[0] <= 100.0,
        "{what}: CPU_Util {}",
        cpu[0]
    );
}

#[test]
fn wait_destroy_and_retry_count() {
    let Some(b) = batch() else { return };
    let msg = " Waiting 2 seconds before releasing resources...\n";
    let p = b.ok_pair("wait_rr");
    assert!(
        p.server.out.contains(msg) && p.client.out.contains(msg),
        "{p:?}"
    );
    assert!(p.time_s.unwrap() >= 2.0, "{:?}", p.time_s);
    let p = b.ok_pair("wait_sr");
    assert!(p.client.out.contains(msg), "{}", p.client.out);
    // The client reads its data QP's retry count back after the CM moved it to RTS.
    for pair in ["retry_rr", "retry_sr", "retry_rs"] {
        if b.file("retries").unwrap_or("").lines().any(|l| l == pair) {
            println!("{pair}: the stock client's first connect was rejected; passed on the rerun");
        }
        let p = b.ok_pair(pair);
        assert_eq!(
            vm::bw_result_rows(&p.client.out).len(),
            1,
            "{pair}: {}",
            p.client.out
        );
    }
}

/// `\t<name>=<delta>` lines of -W.
fn counter(out: &str, name: &str) -> u64 {
    out.lines()
        .find_map(|l| l.strip_prefix(&format!("\t{name}=")))
        .unwrap_or_else(|| panic!("no -W line for {name} in:\n{out}"))
        .parse()
        .unwrap()
}

#[test]
fn report_counters_after_the_row() {
    let Some(b) = batch() else { return };
    // Both ends share rxe0 in the guest: 200 WRITEs and their ACKs at least.
    let p = b.ok_pair("cnt_rr");
    assert!(
        counter(&p.client.out, "hw_counters/sent_pkts") >= 200,
        "{}",
        p.client.out
    );
    assert!(
        counter(&p.client.out, "hw_counters/rcvd_pkts") >= 200,
        "{}",
        p.client.out
    );
    // write-lat: 200 ping-pong WRITEs each way.
    let p = b.ok_pair("cnt_lat_sr");
    assert!(
        counter(&p.client.out, "hw_counters/sent_pkts") >= 200,
        "{}",
        p.client.out
    );
}
