//! Result rows vs perftest master's format strings rendered by libc's snprintf.
//! The C strings below are the REPORT_FMT* macros of perftest master with PRIu64
//! spelled "lu" (x86-64 / aarch64 Linux), followed by REPORT_EXT ("\n").

use std::ffi::CString;

use rdmaperf::report::info::{TestInfo, TestKind};
use rdmaperf::report::stats::{BwResult, BwUnits, LatDuration, LatStats};
use rdmaperf::report::text::{bw_row, lat_duration_row, lat_row};

const REPORT_FMT: &str = " %-7lu    %-10lu       %-7.2lf            %-7.2lf\t\t     %-7.6lf\n";
const REPORT_FMT_EXT: &str =
    " %-7lu    %lu           %-7.6lf            %-7.6lf            %-7.6lf\n";
const REPORT_FMT_LAT: &str = " %-7lu %lu          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f \t\t%-7.2f\n";
const REPORT_FMT_LAT_DUR: &str = " %-7lu       %lu            %-7.2f        %-7.2f\n";

/// `fmt` rendered by libc's snprintf with two unsigned longs and up to seven
/// doubles (the REPORT_FMT* macros take at most that many).
fn c_fmt(fmt: &str, size: u64, iters: u64, v: &[f64]) -> String {
    let f = CString::new(fmt).unwrap();
    let mut d = [0.0f64; 7];
    d[..v.len()].copy_from_slice(v);
    let mut buf = vec![0u8; 1024];
    // SAFETY: buf has 1024 writable bytes; every format here takes two
    // unsigned longs and at most seven doubles. C ignores variadic arguments
    // past the ones the format reads, so passing all seven is defined.
    let n = unsafe {
        libc::snprintf(
            buf.as_mut_ptr().cast(),
            buf.len(),
            f.as_ptr(),
            size as libc::c_ulong,
            iters as libc::c_ulong,
            d[0],
            d[1],
            d[2],
            d[3],
            d[4],
            d[5],
            d[6],
        )
    };
    buf.truncate(n as usize);
    String::from_utf8(buf).unwrap()
}

/// Deterministic pseudo-random values spanning the interesting ranges.
fn values() -> Vec<f64> {
    let mut v = vec![
        0.0,
        0.005,
        0.0999949,
        0.099995,
        0.0999951,
        0.1,
        0.1000001,
        0.125,
        2.675,
        9.995,
        99.995,
        11716.84,
        97656.25,
        1e6,
        123456789.125,
        0.000581,
        5e-7,
    ];
    let mut x: u64 = 0xC0FFEE;
    for _ in 0..300 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let e = ((x >> 32) % 12) as i32 - 6;
        v.push((x % 1_000_000) as f64 * 10f64.powi(e) / 1000.0);
    }
    v
}

#[test]
fn bw_rows_match_c_format_including_ext_switch() {
    let vals = values();
    let sizes = [2u64, 64, 65536, 8388608, 4294967296];
    for units in [BwUnits::MiB, BwUnits::Gbit] {
        let info = TestInfo {
            bw_units: units,
            ..TestInfo::default()
        };
        for (k, &avg) in vals.iter().enumerate() {
            let peak = vals[(k * 7 + 3) % vals.len()];
            let rate = vals[(k * 13 + 5) % vals.len()];
            let size = sizes[k % sizes.len()];
            let iters = (k as u64 + 1) * 997;
            let r = BwResult {
                size,
                iters,
                bw_peak: peak,
                bw_avg: avg,
                msg_rate: rate,
                bw_peak_exact: 0.0,
            };
            // perftest: inc_accuracy = bw_avg < 0.1 && report_fmt == GBS.
            let fmt = if avg < 0.1 && units == BwUnits::Gbit {
                REPORT_FMT_EXT
            } else {
                REPORT_FMT
            };
            assert_eq!(
                bw_row(&r, &info, 0.0),
                c_fmt(fmt, size, iters, &[peak, avg, rate]),
                "units {units:?} avg {avg:e}"
            );
        }
    }
}

#[test]
fn lat_rows_match_c_format() {
    let vals = values();
    let info = TestInfo {
        kind: TestKind::Lat,
        ..TestInfo::default()
    };
    for k in 0..vals.len() {
        let p = |m: usize| vals[(k * m + m) % vals.len()];
        let s = LatStats {
            t_min: p(1),
            t_max: p(2),
            t_typical: p(3),
            t_avg: p(5),
            t_stdev: p(7),
            p99: p(11),
            p99_9: p(13),
            samples: 0,
        };
        let size = 1u64 << (k % 24);
        let iters = 1000 + k as u64;
        let want = c_fmt(
            REPORT_FMT_LAT,
            size,
            iters,
            &[
                s.t_min,
                s.t_max,
                s.t_typical,
                s.t_avg,
                s.t_stdev,
                s.p99,
                s.p99_9,
            ],
        );
        assert_eq!(lat_row(size, iters, &s, &info, 0.0), want);
        let d = LatDuration {
            t_avg: p(17),
            tps: p(19),
        };
        assert_eq!(
            lat_duration_row(size, iters, &d, &info, 0.0),
            c_fmt(REPORT_FMT_LAT_DUR, size, iters, &[d.t_avg, d.tps])
        );
    }
}

/// perftest master's REPORT_FMT_FS_RATE and _DUR (PRIu64 as "lu"), then REPORT_EXT.
const REPORT_FMT_FS_RATE: &str =
    "%lu          %-7.2f        \t\t%-7.2f      \t%-7.2f  \t       \t\t%-7.2f     \t%-7.2f\n";
const REPORT_FMT_FS_RATE_DUR: &str = "%lu               %-7.2f\t\t%-7.2f\n";

/// `fmt` rendered by libc's snprintf with one unsigned long and five doubles.
fn c_fmt_fs(fmt: &str, n: u64, d: [f64; 5]) -> String {
    let f = CString::new(fmt).unwrap();
    let mut buf = vec![0u8; 512];
    // SAFETY: buf has 512 writable bytes; both formats read one unsigned
    // long and at most five doubles, and C ignores the ones not read.
    let k = unsafe {
        libc::snprintf(
            buf.as_mut_ptr().cast(),
            buf.len(),
            f.as_ptr(),
            n as libc::c_ulong,
            d[0],
            d[1],
            d[2],
            d[3],
            d[4],
        )
    };
    buf.truncate(k as usize);
    String::from_utf8(buf).unwrap()
}

#[test]
fn fs_rate_rows_match_snprintf() {
    use rdmaperf::report::fs_rate;
    // 2400 MHz; deltas chosen so min/max/median/average/fps differ.
    let mhz = 2400.0;
    let mut deltas = vec![24_000u64, 12_345, 99_999, 7, 250_000];
    let s = fs_rate::iterations(5, &mut deltas, mhz);
    deltas.sort_unstable();
    let sum: u64 = deltas.iter().sum();
    let want = c_fmt_fs(
        REPORT_FMT_FS_RATE,
        5,
        [
            7.0 / mhz,
            250_000.0 / mhz,
            24_000.0 / mhz,
            (sum / 5) as f64 / mhz,
            5.0 / (sum as f64 / (mhz * 1e6)),
        ],
    );
    assert_eq!(s.lines().last().unwrap(), want.trim_end_matches('\n'));
    let s = fs_rate::duration(777, 123_456_789, mhz);
    let want = c_fmt_fs(
        REPORT_FMT_FS_RATE_DUR,
        777,
        [
            123_456_789.0 / 777.0 / mhz,
            777.0 / (123_456_789.0 / (mhz * 1e6)),
            0.0,
            0.0,
            0.0,
        ],
    );
    assert_eq!(s.lines().last().unwrap(), want.trim_end_matches('\n'));
}
