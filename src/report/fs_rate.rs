//! raw-eth-fs-rate's report, as perftest's `print_report_fs_rate` prints
//! it (perftest_parameters.c and .h: `RESULT_FMT_FS_RATE[_DUR]`,
//! `REPORT_FMT_FS_RATE[_DUR]`), with its arithmetic: the median as
//! `get_median`, the average from the integer cycle sum divided by the
//! count, times in µs from the clock's MHz.

use super::cfmt::{sprintf, Arg};
use super::text::RESULT_LINE;

const HEADER: &str = " #flows\tfs_min_time[usec]\tfs_max_time[usec]\tfs_typical_time[usec]\tfs_avg_time[usec]\tfps[flow per sec]";
const HEADER_DUR: &str = " #flows\t\tfs_avg_time[usec]    \tfps[flow per sec]";
const ROW: &str =
    "%lu          %-7.2f        \t\t%-7.2f      \t%-7.2f  \t       \t\t%-7.2f     \t%-7.2f";
const ROW_DUR: &str = "%lu               %-7.2f\t\t%-7.2f";

/// perftest's `get_median` over sorted cycle deltas (integer halves).
pub fn median(sorted: &[u64]) -> u64 {
    let n = sorted.len();
    if n == 0 {
        return 0;
    }
    if (n - 1) % 2 == 1 {
        (sorted[n / 2] + sorted[n / 2 - 1]) / 2
    } else {
        sorted[n / 2]
    }
}

/// The iterations report: `iters` as `-n`, one cycle delta per rule
/// created (sorted here), the clock in MHz.
pub fn iterations(iters: u64, deltas: &mut [u64], mhz: f64) -> String {
    deltas.sort_unstable();
    let n = deltas.len().max(1) as u64;
    let sum: u64 = deltas.iter().sum();
    let average = (sum / n) as f64 / mhz;
    let latency = median(deltas) as f64 / mhz;
    let fps = n as f64 / (sum as f64 / (mhz * 1e6));
    let (min, max) = (
        deltas.first().copied().unwrap_or(0) as f64 / mhz,
        deltas.last().copied().unwrap_or(0) as f64 / mhz,
    );
    format!(
        "{RESULT_LINE}{HEADER}\n{}\n",
        sprintf(
            ROW,
            &[
                Arg::U(iters),
                Arg::F(min),
                Arg::F(max),
                Arg::F(latency),
                Arg::F(average),
                Arg::F(fps),
            ],
        )
    )
}

/// The duration report: `count` rules created in `cycles` of the sample.
pub fn duration(count: u64, cycles: u64, mhz: f64) -> String {
    let latency = cycles as f64 / count.max(1) as f64 / mhz;
    let fps = count as f64 / (cycles as f64 / (mhz * 1e6));
    format!(
        "{RESULT_LINE}{HEADER_DUR}\n{}\n",
        sprintf(ROW_DUR, &[Arg::U(count), Arg::F(latency), Arg::F(fps)])
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_as_perftest() {
        assert_eq!(median(&[1, 2, 3]), 2);
        assert_eq!(median(&[1, 2, 3, 6]), 2, "(2 + 3) / 2 in integer cycles");
        assert_eq!(median(&[7]), 7);
    }

    #[test]
    fn iterations_row() {
        // 1000 MHz: 1000 cycles = 1 µs.
        let mut d = [3000, 1000, 2000, 2000];
        let s = iterations(4, &mut d, 1000.0);
        assert!(s.starts_with(RESULT_LINE), "{s}");
        assert!(s.contains("fs_typical_time[usec]"), "{s}");
        let row = s.lines().last().unwrap();
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(
            cols,
            ["4", "1.00", "3.00", "2.00", "2.00", "500000.00"],
            "{row:?}"
        );
    }

    #[test]
    fn duration_row() {
        let s = duration(500, 1_000_000, 1000.0);
        let cols: Vec<String> = s
            .lines()
            .last()
            .unwrap()
            .split_whitespace()
            .map(String::from)
            .collect();
        assert_eq!(cols, ["500", "2.00", "500000.00"]);
        assert!(s.contains("fps[flow per sec]"));
    }
}
