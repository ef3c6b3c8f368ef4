//! Bandwidth and latency statistics.
//!
//! Bandwidth follows perftest's `print_report_bw` exactly (including its integer
//! cycles-per-message peak), so numbers compare one to one with stock perftest.
//!
//! Latency has two modes on the same samples (cycle deltas between consecutive
//! post timestamps, one per round trip):
//!
//! | statistic | [`lat_exact`] | [`lat_perftest`] (perftest's `print_report_lat`) |
//! |---|---|---|
//! | samples used | all N | sorted, the 2 largest dropped: n = N-2 (= iters-3) |
//! | t_max | true maximum | `delta[n]`, the 3rd-largest sample (true max hidden) |
//! | t_typical | median (mean of the two middle values when N is even) | median of the first n, midpoint in integer cycles |
//! | t_avg | mean of all N | mean of the first n |
//! | t_stdev | population stdev (divide by N) in f64 | deviations truncated to whole units (C `int`) before squaring, so sub-µs jitter reads 0 |
//! | 99 % | nearest rank: sorted[ceil(0.99 N) - 1] | `delta[ceil(0.99 n)]`: one rank too high |
//! | 99.9 % | nearest rank: sorted[ceil(0.999 N) - 1] | `delta[ceil(0.999 n)]`: for n < 1000 that is `delta[n]` = t_max |
//!
//! Both divide cycles by `MHz * rtt_factor` (2 for ping-pong write/send, 1 for
//! read/atomic), or by `rtt_factor` alone in cycle units (`-C`).

use thiserror::Error;

/// Bandwidth units of the report (`--report_gbits`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum BwUnits {
    /// MiB/s (perftest "MBS": 2^20 bytes; 4.5 labels it "MB/sec").
    #[default]
    MiB,
    /// Gb/s (1e9 bits).
    Gbit,
}

impl BwUnits {
    /// `--report_gbits` given or not.
    pub fn of(gbits: bool) -> BwUnits {
        if gbits {
            BwUnits::Gbit
        } else {
            BwUnits::MiB
        }
    }
    /// Bytes per unit per second (perftest `format_factor`).
    pub const fn format_factor(self) -> u64 {
        match self {
            BwUnits::MiB => 0x10_0000,
            BwUnits::Gbit => 125_000_000,
        }
    }

    /// Label in the header and JSON ("MiB/sec" or "Gb/sec").
    pub const fn label(self) -> &'static str {
        match self {
            BwUnits::MiB => "MiB/sec",
            BwUnits::Gbit => "Gb/sec",
        }
    }
}

/// Latency units (`-C` reports raw cycles).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LatUnits {
    #[default]
    Usec,
    Cycles,
}

impl LatUnits {
    /// "usec" or "cycles" (the `-U`/`-H` dump header).
    pub const fn label(self) -> &'static str {
        match self {
            LatUnits::Usec => "usec",
            LatUnits::Cycles => "cycles",
        }
    }
}

/// Why statistics could not be computed.
#[derive(Debug, Error, Clone, PartialEq)]
pub enum StatsError {
    #[error("clock rate {0} Hz is not a positive number: calibrate the clock (Clock::calibrate) before reporting")]
    BadClock(f64),
    #[error("{which} holds {got} timestamps but {need} are needed: record one per post (tposted) and one per completion (tcompleted), or set no_peak")]
    MissingStamps {
        which: &'static str,
        need: u64,
        got: usize,
    },
    #[error("the measured interval is 0 cycles: no message completed inside the measurement window; run longer (-n or -D)")]
    ZeroInterval,
    #[error(
        "latency needs at least {need} samples but got {got}: run with more iterations (-n >= 5)"
    )]
    TooFewSamples { need: usize, got: usize },
    #[error("{0} must be at least 1: pass the post_list/cq_mod/num_qps/rtt_factor the run used")]
    ZeroParam(&'static str),
}

/// Inputs of perftest's bandwidth computation.
#[derive(Clone, Copy, Debug)]
pub struct BwInput<'a> {
    /// Message size in bytes.
    pub size: u64,
    /// Iterations: per QP in iteration mode; in duration mode the number of
    /// messages completed during the sample window, all QPs together.
    pub iters: u64,
    /// QPs (perftest halves it for duplex XRC/DC; pass what it would use).
    pub num_qps: u32,
    /// Duration mode (`-D`): implies no peak; n = iters, interval = `tcompleted[0] - tposted[0]`.
    pub duration: bool,
    /// No peak (`-N`, or forced: see [`no_peak_rule`]). Then `tcompleted[0]` must
    /// hold the end-of-run stamp.
    pub no_peak: bool,
    /// `-l`: tposted is stamped once per post_list chain (index = messages posted before it).
    pub post_list: u32,
    /// `-Q`: tcompleted is stamped per CQE at index (messages completed - 1).
    pub cq_mod: u32,
    /// Post timestamps (cycles).
    pub tposted: &'a [u64],
    /// Completion timestamps (cycles).
    pub tcompleted: &'a [u64],
    /// Counter rate (Hz).
    pub hz: f64,
    pub units: BwUnits,
    /// 2 for a duplex `--run_infinitely` RDMA (non-send) test, else 1 (perftest
    /// `run_inf_bi_factor`: multiplies the size and the message rate).
    pub inf_bidir_factor: u32,
}

/// One bandwidth result line.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BwResult {
    /// Message size in bytes.
    pub size: u64,
    /// Reported #iterations (iters x qps, or the duration count).
    pub iters: u64,
    /// Peak bandwidth (perftest: integer cycles/message; 0 without peak).
    pub bw_peak: f64,
    /// Average bandwidth.
    pub bw_avg: f64,
    /// Average message rate in Mpps.
    pub msg_rate: f64,
    /// Peak computed with fractional cycles/message (no quantisation), 0 without peak.
    /// Not printed by perftest; available for our own output.
    pub bw_peak_exact: f64,
}

impl BwResult {
    /// Duplex totals: perftest adds the remote report to the local one (peak,
    /// average and rate); size and iterations stay local.
    pub fn sum(&self, remote: &BwResult) -> BwResult {
        BwResult {
            size: self.size,
            iters: self.iters,
            bw_peak: self.bw_peak + remote.bw_peak,
            bw_avg: self.bw_avg + remote.bw_avg,
            msg_rate: self.msg_rate + remote.msg_rate,
            bw_peak_exact: self.bw_peak_exact + remote.bw_peak_exact,
        }
    }
}

/// perftest's rules for when the peak is not measured. Returns (no_peak,
/// print_warning): the warning " WARNING: BW peak won't be measured in this run."
/// is printed once, for BW tests, when the user did not pass `-N` but the run
/// forces it (duration, run_infinitely, receive-side server of a unidirectional
/// send/write_imm test, or more than 20000 iterations).
pub fn no_peak_rule(
    user_no_peak: bool,
    duration: bool,
    run_infinitely: bool,
    recv_side_server: bool,
    iters: u64,
) -> (bool, bool) {
    let forced = duration || run_infinitely || recv_side_server || iters > 20_000;
    (user_no_peak || forced, forced && !user_no_peak)
}

/// perftest's `ROUND_UP`.
fn round_up(v: u64, a: u64) -> u64 {
    if v % a == 0 {
        v
    } else {
        v + a - v % a
    }
}

fn stamp(s: &[u64], i: u64, which: &'static str, need: u64) -> Result<u64, StatsError> {
    usize::try_from(i)
        .ok()
        .and_then(|i| s.get(i).copied())
        .ok_or(StatsError::MissingStamps {
            which,
            need,
            got: s.len(),
        })
}

/// The clock and the divisors `bw_perftest` needs are usable.
fn check_bw_input(inp: &BwInput<'_>) -> Result<(), StatsError> {
    if !(inp.hz.is_finite() && inp.hz > 0.0) {
        return Err(StatsError::BadClock(inp.hz));
    }
    for (v, name) in [
        (inp.post_list, "post_list"),
        (inp.cq_mod, "cq_mod"),
        (inp.num_qps, "num_qps"),
        (inp.inf_bidir_factor, "inf_bidir_factor"),
    ] {
        if v == 0 {
            return Err(StatsError::ZeroParam(name));
        }
    }
    Ok(())
}

/// The fastest per-message time over every window perftest's peak considers
/// (each post_list start to each signaled completion), starting from
/// `first` (the first message's): (integer cycles, exact cycles).
fn best_window(inp: &BwInput<'_>, peak_n: u64, first: u64) -> Result<(u64, f64), StatsError> {
    let mut opt_delta = first;
    let mut opt_exact = f64::INFINITY;
    // Validate the whole ranges once so the loops can index directly.
    stamp(inp.tposted, peak_n - 1, "tposted", peak_n)?;
    stamp(inp.tcompleted, peak_n - 1, "tcompleted", peak_n)?;
    let tp = inp.tposted;
    let tc = inp.tcompleted;
    let cq = inp.cq_mod as u64;
    let mut consider = |i: u64, j: u64| {
        let span = tc[j as usize].wrapping_sub(tp[i as usize]);
        let msgs = j - i + 1;
        let t = span / msgs;
        if t < opt_delta {
            opt_delta = t;
        }
        let te = span as f64 / msgs as f64;
        if te < opt_exact {
            opt_exact = te;
        }
    };
    let mut i = 0u64;
    while i < peak_n {
        let mut j = round_up(i + 1, cq) - 1;
        while j < peak_n {
            consider(i, j);
            j += cq;
        }
        // The last message is signaled even when n is not a multiple of cq_mod.
        if peak_n % cq != 0 {
            consider(i, peak_n - 1);
        }
        i += inp.post_list as u64;
    }
    Ok((opt_delta, opt_exact))
}

/// perftest's bandwidth math (`print_report_bw`):
///
/// ```text
/// n      = iters * (duration ? 1 : num_qps)
/// T      = tcompleted[no_peak ? 0 : n-1] - tposted[0]               (cycles)
/// bw_avg = size * n * hz / (T * format_factor)
/// rate   = n * hz / (T * 1e6)                                       (Mpps)
/// peak   = min over i (step post_list) and completions j >= i (j = cq_mod-1 mod cq_mod,
///          plus the last message) of the INTEGER (tcompleted[j]-tposted[i]) / (j-i+1);
///          bw_peak = (size * (u64)hz) / (opt_delta * format_factor)
/// ```
///
/// The peak search is O(n^2 / cq_mod) (perftest allows it up to 20000 iterations).
/// Timestamps are subtracted with wrap-around like C's unsigned `cycles_t`.
pub fn bw_perftest(inp: &BwInput<'_>) -> Result<BwResult, StatsError> {
    check_bw_input(inp)?;
    let no_peak = inp.no_peak || inp.duration;
    let factor = inp.inf_bidir_factor as u64;
    let tsize = factor.wrapping_mul(inp.size);
    let ff = inp.units.format_factor();
    let peak_n = inp.iters.saturating_mul(inp.num_qps as u64);
    let n = if inp.duration { inp.iters } else { peak_n };

    let tp0 = stamp(inp.tposted, 0, "tposted", 1)?;
    let tc0 = stamp(inp.tcompleted, 0, "tcompleted", 1)?;
    let (opt_delta, opt_exact) = if !no_peak && peak_n > 0 {
        best_window(inp, peak_n, tc0.wrapping_sub(tp0))?
    } else {
        (tc0.wrapping_sub(tp0), f64::INFINITY)
    };

    let loc = if no_peak { 0 } else { n.saturating_sub(1) };
    let tc_end = stamp(inp.tcompleted, loc, "tcompleted", loc + 1)?;
    let cycles = tc_end.wrapping_sub(tp0);
    if cycles == 0 {
        return Err(StatsError::ZeroInterval);
    }
    let t = cycles as f64;
    // Same operation order as perftest so results match to the last bit.
    let bw_avg = (tsize as f64 * n as f64 * inp.hz) / (t * ff as f64);
    let msg_rate = (n as f64 * inp.hz * factor as f64) / (t * 1_000_000.0);
    let peak_up = (!no_peak as u64)
        .wrapping_mul(tsize)
        .wrapping_mul(inp.hz as u64);
    let peak_down = opt_delta.wrapping_mul(ff);
    let bw_peak = peak_up as f64 / peak_down as f64;
    let bw_peak_exact = if no_peak || !opt_exact.is_finite() || opt_exact <= 0.0 {
        0.0
    } else {
        tsize as f64 * inp.hz / (opt_exact * ff as f64)
    };
    Ok(BwResult {
        size: inp.size,
        iters: n,
        bw_peak,
        bw_avg,
        msg_rate,
        bw_peak_exact,
    })
}

/// One latency result (values in [`LatUnits`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LatStats {
    pub t_min: f64,
    pub t_max: f64,
    /// Median.
    pub t_typical: f64,
    pub t_avg: f64,
    pub t_stdev: f64,
    pub p99: f64,
    pub p99_9: f64,
    /// Samples the statistics were computed over.
    pub samples: usize,
}

/// Latency samples from consecutive post timestamps: `tposted[i+1] - tposted[i]`
/// (perftest: each one full round trip including software).
pub fn lat_deltas(tposted: &[u64]) -> Vec<u64> {
    tposted
        .windows(2)
        .map(|w| w[1].wrapping_sub(w[0]))
        .collect()
}

/// The divisor that turns a cycle delta into the reported unit:
/// `MHz * rtt_factor`, or `rtt_factor` for cycles.
pub fn lat_quotient(hz: f64, rtt_factor: u32, units: LatUnits) -> f64 {
    let per_unit = match units {
        LatUnits::Usec => hz / 1e6,
        LatUnits::Cycles => 1.0,
    };
    per_unit * rtt_factor as f64
}

fn check_lat(hz: f64, rtt_factor: u32, units: LatUnits) -> Result<f64, StatsError> {
    if units == LatUnits::Usec && !(hz.is_finite() && hz > 0.0) {
        return Err(StatsError::BadClock(hz));
    }
    if rtt_factor == 0 {
        return Err(StatsError::ZeroParam("rtt_factor"));
    }
    Ok(lat_quotient(hz, rtt_factor, units))
}

/// The common start of both latency statistics: the parameters checked, at
/// least `need` samples, `deltas` sorted; returns the cycle divisor.
fn sorted_lat(
    deltas: &mut [u64],
    need: usize,
    hz: f64,
    rtt_factor: u32,
    units: LatUnits,
) -> Result<f64, StatsError> {
    let q = check_lat(hz, rtt_factor, units)?;
    if deltas.len() < need {
        return Err(StatsError::TooFewSamples {
            need,
            got: deltas.len(),
        });
    }
    deltas.sort_unstable();
    Ok(q)
}

/// Converts a double to a C `int` the way x86-64 `cvttsd2si` does: truncation,
/// and INT_MIN for NaN or out-of-range values (C leaves these undefined).
fn c_int(v: f64) -> i32 {
    if v.is_nan() || v >= 2_147_483_648.0 || v <= -2_147_483_649.0 {
        i32::MIN
    } else {
        v as i32
    }
}

/// perftest's latency statistics, reproduced exactly (see the module table).
/// Sorts `deltas` in place; afterwards `deltas[..deltas.len() - 2]` is what
/// perftest's `-H` histogram prints. Needs at least 3 samples (perftest: iters >= 5).
pub fn lat_perftest(
    deltas: &mut [u64],
    hz: f64,
    rtt_factor: u32,
    units: LatUnits,
) -> Result<LatStats, StatsError> {
    let q = sorted_lat(deltas, 3, hz, rtt_factor, units)?;
    let n = deltas.len() - 2; // LAT_MEASURE_TAIL
                              // get_median(): the even case averages in integer cycles.
    let median = if (n - 1) % 2 != 0 {
        (deltas[n / 2].wrapping_add(deltas[n / 2 - 1])) / 2
    } else {
        deltas[n / 2]
    };
    let mut sum = 0.0f64;
    for &d in &deltas[..n] {
        sum += d as f64 / q;
    }
    let avg = sum / n as f64;
    let mut var_sum = 0.0f64;
    for &d in &deltas[..n] {
        let dev = c_int(avg - d as f64 / q);
        let sq = c_int((dev as f64).powi(2));
        var_sum += sq as f64;
    }
    let i99 = (n as f64 * 0.99).ceil() as usize;
    let i999 = (n as f64 * 0.999).ceil() as usize;
    Ok(LatStats {
        t_min: deltas[0] as f64 / q,
        t_max: deltas[n] as f64 / q,
        t_typical: median as f64 / q,
        t_avg: avg,
        t_stdev: (var_sum / n as f64).sqrt(),
        p99: deltas[i99] as f64 / q,
        p99_9: deltas[i999] as f64 / q,
        samples: n,
    })
}

/// Nearest-rank percentile of sorted data: the smallest value with at least
/// `permille`/1000 of the samples at or below it. Integer math, so 99 % of 1000
/// samples is exactly rank 990.
pub fn nearest_rank(sorted: &[u64], permille: u32) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let n = sorted.len() as u128;
    let rank = (n * permille as u128).div_ceil(1000).max(1);
    sorted.get(rank as usize - 1).copied()
}

/// Exact latency statistics over all samples (see the module table). Sorts
/// `deltas` in place. Needs at least 1 sample.
pub fn lat_exact(
    deltas: &mut [u64],
    hz: f64,
    rtt_factor: u32,
    units: LatUnits,
) -> Result<LatStats, StatsError> {
    let q = sorted_lat(deltas, 1, hz, rtt_factor, units)?;
    let n = deltas.len();
    let median = if n % 2 == 1 {
        deltas[n / 2] as f64
    } else {
        // Halves separately so two huge values cannot overflow.
        deltas[n / 2 - 1] as f64 / 2.0 + deltas[n / 2] as f64 / 2.0
    };
    let total: u128 = deltas.iter().map(|&d| d as u128).sum();
    let mean_cycles = total as f64 / n as f64;
    let var_cycles = deltas
        .iter()
        .map(|&d| {
            let e = d as f64 - mean_cycles;
            e * e
        })
        .sum::<f64>()
        / n as f64;
    let p = |permille| nearest_rank(deltas, permille).unwrap_or(0) as f64 / q;
    Ok(LatStats {
        t_min: deltas[0] as f64 / q,
        t_max: deltas[n - 1] as f64 / q,
        t_typical: median / q,
        t_avg: mean_cycles / q,
        t_stdev: var_cycles.sqrt() / q,
        p99: p(990),
        p99_9: p(999),
        samples: n,
    })
}

/// Duration-mode latency result (`print_report_lat_duration`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LatDuration {
    /// Mean one-way latency (µs): cycles / MHz / rtt_factor / iters.
    pub t_avg: f64,
    /// Transactions per second: iters / seconds.
    pub tps: f64,
}

/// perftest's duration latency: `cycles` is `tcompleted[0] - tposted[0]` of the
/// sample window, `iters` the round trips counted in it.
pub fn lat_duration(
    cycles: u64,
    iters: u64,
    hz: f64,
    rtt_factor: u32,
) -> Result<LatDuration, StatsError> {
    check_lat(hz, rtt_factor, LatUnits::Usec)?;
    if cycles == 0 {
        return Err(StatsError::ZeroInterval);
    }
    let mhz = hz / 1e6;
    let t = cycles as f64;
    Ok(LatDuration {
        t_avg: ((t / mhz) / rtt_factor as f64) / iters as f64,
        tps: iters as f64 / (t / (mhz * 1_000_000.0)),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bw<'a>(tp: &'a [u64], tc: &'a [u64]) -> BwInput<'a> {
        BwInput {
            size: 65536,
            iters: 8,
            num_qps: 1,
            duration: false,
            no_peak: false,
            post_list: 1,
            cq_mod: 4,
            tposted: tp,
            tcompleted: tc,
            hz: 1e9,
            units: BwUnits::MiB,
            inf_bidir_factor: 1,
        }
    }

    #[test]
    fn bw_hand_computed() {
        // 8 messages posted every 100 cycles, CQEs every 4th message.
        let tp: Vec<u64> = (0..8).map(|i| 1000 + 100 * i).collect();
        let mut tc = vec![0u64; 8];
        tc[3] = 1000 + 450; // msgs 0..=3 done at 450 cycles after start
        tc[7] = 1000 + 850;
        let r = bw_perftest(&bw(&tp, &tc)).unwrap();
        // T = 850 cycles at 1 GHz = 850 ns for 8 x 64 KiB.
        let bw_avg = 65536.0 * 8.0 * 1e9 / (850.0 * 1_048_576.0);
        assert_eq!(r.bw_avg, bw_avg);
        assert_eq!(r.msg_rate, 8.0 * 1e9 / (850.0 * 1e6));
        assert_eq!(r.iters, 8);
        // Candidates: (i,j): (0,3)=450/4=112, (0,7)=850/8=106, (1,3)=350/3=116,
        // (1,7)=750/7=107, (2,3)=250/2=125, (2,7)=650/6=108, (3,3)=150, (3,7)=550/5=110,
        // (4,7)=450/4=112, (5,7)=350/3=116, (6,7)=125, (7,7)=150; initial
        // opt_delta = tc[0]-tp[0] wraps to huge. min = 106 (integer).
        assert_eq!(
            r.bw_peak,
            (65536u64 * 1_000_000_000) as f64 / (106.0 * 1_048_576.0)
        );
        assert_eq!(r.bw_peak_exact, 65536.0 * 1e9 / (106.25 * 1_048_576.0));
    }

    #[test]
    fn bw_peak_remainder_and_post_list() {
        // n = 6 with cq_mod 4: the last message (index 5) is signaled too.
        // tc[0] stays 0, so perftest's initial opt_delta (tc[0]-tp[0]) wraps to huge.
        let tp: Vec<u64> = vec![1000, 1010, 1020, 1030, 1040, 1050];
        let mut tc = vec![0u64; 6];
        tc[3] = 1100; // i=0: 100/4 = 25
        tc[5] = 1066; // i=0,j=5: 66/6 = 11 (only reachable via the remainder rule)
        let mut inp = bw(&tp, &tc);
        inp.iters = 6;
        inp.size = 1_000_000;
        inp.units = BwUnits::Gbit;
        let r = bw_perftest(&inp).unwrap();
        // i=2,j=5: (66-20)/4 = 11; i=4: (66-40)/2 = 13; i=5: 16 -> min 11.
        assert_eq!(
            r.bw_peak,
            (1_000_000u64 * 1_000_000_000) as f64 / (11.0 * 125e6)
        );
        // post_list 4: only i = 0, 4 -> min(25, 11, 13) still 11.
        inp.post_list = 4;
        assert_eq!(bw_perftest(&inp).unwrap().bw_peak, r.bw_peak);
        // cq_mod 6 (n % cq_mod == 0): only j = 5; post_list 3: i = 0, 3 -> 11, 12.
        inp.cq_mod = 6;
        inp.post_list = 3;
        assert_eq!(bw_perftest(&inp).unwrap().bw_peak, r.bw_peak);
        let mut tc2 = tc.clone();
        tc2[5] = 1076; // now i=0: 76/6 = 12, i=3: 46/3 = 15 -> 12
        let r12 = bw_perftest(&BwInput {
            tcompleted: &tc2,
            ..inp
        })
        .unwrap();
        assert_eq!(
            r12.bw_peak,
            (1_000_000u64 * 1_000_000_000) as f64 / (12.0 * 125e6)
        );
        // T uses tcompleted[n-1] = 66.
        assert_eq!(r.bw_avg, 1e6 * 6.0 * 1e9 / (66.0 * 125e6));
    }

    #[test]
    fn bw_no_peak_and_duration() {
        let tp = [500u64];
        let tc = [500u64 + 2_000_000_000];
        let mut inp = bw(&tp, &tc);
        inp.no_peak = true;
        inp.num_qps = 2;
        inp.iters = 1000;
        let r = bw_perftest(&inp).unwrap();
        assert_eq!(r.bw_peak, 0.0);
        assert_eq!(r.iters, 2000);
        assert_eq!(r.bw_avg, 65536.0 * 2000.0 * 1e9 / (2e9 * 1_048_576.0));
        // Duration: n = iters regardless of QPs, no peak.
        inp.no_peak = false;
        inp.duration = true;
        let r = bw_perftest(&inp).unwrap();
        assert_eq!(r.iters, 1000);
        assert_eq!(r.bw_peak, 0.0);
        assert_eq!(r.msg_rate, 1000.0 * 1e9 / (2e9 * 1e6));
    }

    #[test]
    fn bw_errors() {
        let tp = [0u64; 2];
        let tc = [0u64; 2];
        let mut inp = bw(&tp, &tc);
        assert!(matches!(
            bw_perftest(&inp),
            Err(StatsError::MissingStamps { .. })
        ));
        inp.no_peak = true;
        assert_eq!(bw_perftest(&inp), Err(StatsError::ZeroInterval));
        inp.hz = 0.0;
        assert_eq!(bw_perftest(&inp), Err(StatsError::BadClock(0.0)));
        inp.hz = 1e9;
        inp.cq_mod = 0;
        assert_eq!(bw_perftest(&inp), Err(StatsError::ZeroParam("cq_mod")));
    }

    #[test]
    fn no_peak_rules() {
        assert_eq!(
            no_peak_rule(false, false, false, false, 5000),
            (false, false)
        );
        assert_eq!(
            no_peak_rule(false, false, false, false, 20_001),
            (true, true)
        );
        assert_eq!(no_peak_rule(false, true, false, false, 0), (true, true));
        assert_eq!(no_peak_rule(true, true, false, false, 0), (true, false));
        assert_eq!(no_peak_rule(false, false, false, true, 10), (true, true));
    }

    #[test]
    fn perftest_lat_hand_worked() {
        // 8 samples in cycles at 1000 MHz, rtt_factor 2 -> quotient 2000 cycles/us.
        // sorted: 2000 3000 4000 5000 6000 7000 | 50000 90000 (2 largest dropped)
        let mut d = vec![5000u64, 2000, 90000, 4000, 3000, 7000, 50000, 6000];
        let s = lat_perftest(&mut d, 1e9, 2, LatUnits::Usec).unwrap();
        // n = 6
        assert_eq!(s.samples, 6);
        assert_eq!(s.t_min, 1.0);
        assert_eq!(s.t_max, 25.0); // delta[6] = 50000: not the true max 45 us
                                   // (n-1)%2 = 1 -> (delta[3] + delta[2]) / 2 = 4500 cycles = 2.25 us
        assert_eq!(s.t_typical, 2.25);
        // avg of 1, 1.5, 2, 2.5, 3, 3.5 = 2.25
        assert_eq!(s.t_avg, 2.25);
        // deviations 1.25, .75, .25, -.25, -.75, -1.25 truncate to 1,0,0,0,0,-1
        assert_eq!(s.t_stdev, (2.0f64 / 6.0).sqrt());
        // ceil(6*0.99) = 6 -> delta[6]; ceil(6*0.999) = 6
        assert_eq!(s.p99, 25.0);
        assert_eq!(s.p99_9, 25.0);
        // Sorted in place for the -H dump.
        assert_eq!(&d[..6], &[2000, 3000, 4000, 5000, 6000, 7000]);
    }

    #[test]
    fn perftest_lat_odd_median_and_cycles() {
        // n = 5 (odd): median = delta[2]. Cycle units with rtt_factor 1.
        let mut d = vec![10u64, 11, 13, 12, 14, 99, 98];
        let s = lat_perftest(&mut d, 0.0, 1, LatUnits::Cycles).unwrap();
        assert_eq!(s.t_typical, 12.0);
        assert_eq!(s.t_max, 98.0);
        assert_eq!(s.t_stdev, (10.0f64 / 5.0).sqrt()); // devs 2,1,0,-1,-2 -> 4+1+0+1+4
        assert!(lat_perftest(&mut [1, 2], 1e9, 1, LatUnits::Usec).is_err());
    }

    #[test]
    fn exact_lat_direct_recompute() {
        let mut x: u64 = 12345;
        let raw: Vec<u64> = (0..2001)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                1000 + (x >> 50)
            })
            .collect();
        let mut d = raw.clone();
        let hz = 2.5e9;
        let s = lat_exact(&mut d, hz, 2, LatUnits::Usec).unwrap();
        let q = 2500.0 * 2.0;
        let mut sorted = raw.clone();
        sorted.sort();
        let n = raw.len() as f64;
        let mean = raw.iter().map(|&v| v as f64).sum::<f64>() / n;
        let var = raw.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n;
        assert_eq!(s.t_min, sorted[0] as f64 / q);
        assert_eq!(s.t_max, *raw.iter().max().unwrap() as f64 / q);
        assert_eq!(s.t_typical, sorted[1000] as f64 / q);
        assert!((s.t_avg - mean / q).abs() < 1e-12);
        assert!((s.t_stdev - var.sqrt() / q).abs() < 1e-9);
        // Nearest rank, checked by counting: p is the smallest value with at least
        // 99 % (99.9 %) of samples <= it.
        for (p, frac) in [(s.p99, 0.99), (s.p99_9, 0.999)] {
            let v = (p * q).round() as u64;
            let at_or_below = raw.iter().filter(|&&r| r <= v).count() as f64;
            let below = raw.iter().filter(|&&r| r < v).count() as f64;
            assert!(at_or_below >= frac * n && below < frac * n, "{p}");
        }
        assert_eq!(s.samples, 2001);
    }

    #[test]
    fn exact_even_median_and_ranks() {
        let mut d = vec![4u64, 1, 3, 2];
        let s = lat_exact(&mut d, 1e6, 1, LatUnits::Usec).unwrap();
        assert_eq!(s.t_typical, 2.5);
        assert_eq!(s.t_max, 4.0);
        assert_eq!(s.p99, 4.0);
        let v: Vec<u64> = (1..=1000).collect();
        assert_eq!(nearest_rank(&v, 990), Some(990));
        assert_eq!(nearest_rank(&v, 999), Some(999));
        assert_eq!(nearest_rank(&v[..1], 990), Some(1));
        assert_eq!(nearest_rank(&[], 990), None);
    }

    #[test]
    fn lat_deltas_and_duration() {
        assert_eq!(lat_deltas(&[10, 15, 27]), vec![5, 12]);
        // 1 s at 2 GHz, 100000 round trips, write (rtt 2):
        let r = lat_duration(2_000_000_000, 100_000, 2e9, 2).unwrap();
        assert_eq!(r.t_avg, 5.0);
        assert_eq!(r.tps, 100_000.0);
    }
}
