//! Statistics vs direct recomputation from raw samples (property tests).

use proptest::prelude::*;
use rdmaperf::report::stats::{bw_perftest, lat_exact, lat_perftest, BwInput, BwUnits, LatUnits};

/// Brute force over every (first post, signaled completion) pair, the way
/// perftest's report describes it: a chain may start at any post_list boundary,
/// a completion stamp exists at every cq_mod-th message and at the last one.
fn brute_peak_delta(tp: &[u64], tc: &[u64], n: usize, post_list: usize, cq_mod: usize) -> u64 {
    let mut best = tc[0].wrapping_sub(tp[0]);
    for i in (0..n).step_by(post_list) {
        for (j, &done) in tc.iter().enumerate().take(n).skip(i) {
            if (j + 1) % cq_mod == 0 || j == n - 1 {
                let t = done.wrapping_sub(tp[i]) / (j - i + 1) as u64;
                best = best.min(t);
            }
        }
    }
    best
}

proptest! {
    #[test]
    fn bw_matches_brute_force(
        n in 1usize..200,
        post_list in 1usize..8,
        cq_mod in 1usize..16,
        gaps in proptest::collection::vec(1u64..5000, 200),
        lag in proptest::collection::vec(100u64..100_000, 200),
        size in 1u64..(1 << 23),
        gbit in any::<bool>(),
        hz in 1e8f64..5e9,
    ) {
        // Posts strictly increasing; a message completes after its post, and
        // completions are monotonic (one CQ, in order).
        let mut tp = vec![0u64; n];
        let mut t = 1_000_000u64;
        for k in 0..n {
            t += gaps[k];
            tp[k] = t;
        }
        let mut tc = vec![0u64; n];
        let mut last = 0;
        for k in 0..n {
            last = (tp[k] + lag[k]).max(last + 1);
            // perftest only stamps signaled completions; others keep stale zeros.
            if (k + 1) % cq_mod == 0 || k == n - 1 {
                tc[k] = last;
            }
        }
        let units = if gbit { BwUnits::Gbit } else { BwUnits::MiB };
        let r = bw_perftest(&BwInput {
            size,
            iters: n as u64,
            num_qps: 1,
            duration: false,
            no_peak: false,
            post_list: post_list as u32,
            cq_mod: cq_mod as u32,
            tposted: &tp,
            tcompleted: &tc,
            hz,
            units,
            inf_bidir_factor: 1,
        }).unwrap();
        let ff = units.format_factor() as f64;
        let delta = brute_peak_delta(&tp, &tc, n, post_list, cq_mod);
        let peak = (size * hz as u64) as f64 / (delta * units.format_factor()) as f64;
        prop_assert_eq!(r.bw_peak, peak);
        let cycles = (tc[n - 1] - tp[0]) as f64;
        let avg = size as f64 * n as f64 * hz / (cycles * ff);
        prop_assert!((r.bw_avg - avg).abs() <= avg * 1e-12);
        let rate = n as f64 * hz / (cycles * 1e6);
        prop_assert!((r.msg_rate - rate).abs() <= rate * 1e-12);
        prop_assert_eq!(r.iters, n as u64);
        // Integer cycles/message can only make the perftest peak larger or equal
        // (up to perftest truncating hz to an integer: < 1e-8 relative here).
        prop_assert!(r.bw_peak >= r.bw_peak_exact * (1.0 - 1e-7));
    }

    #[test]
    fn exact_latency_matches_definitions(
        raw in proptest::collection::vec(1u64..10_000_000, 1..600),
        hz in 1e8f64..5e9,
        rtt in 1u32..3,
    ) {
        let mut d = raw.clone();
        let s = lat_exact(&mut d, hz, rtt, LatUnits::Usec).unwrap();
        let q = hz / 1e6 * rtt as f64;
        let n = raw.len();
        let mut sorted = raw.clone();
        sorted.sort_unstable();
        prop_assert_eq!(s.t_min, sorted[0] as f64 / q);
        prop_assert_eq!(s.t_max, sorted[n - 1] as f64 / q);
        let median = if n % 2 == 1 {
            sorted[n / 2] as f64
        } else {
            (sorted[n / 2 - 1] as f64 + sorted[n / 2] as f64) / 2.0
        };
        prop_assert!((s.t_typical - median / q).abs() <= 1e-9 * (median / q));
        let mean = raw.iter().map(|&v| v as f64).sum::<f64>() / n as f64;
        prop_assert!((s.t_avg - mean / q).abs() <= 1e-9 * (mean / q));
        let var = raw.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n as f64;
        prop_assert!((s.t_stdev - var.sqrt() / q).abs() <= 1e-6 * (mean / q));
        // Nearest rank by counting: the smallest sample with >= p of all at or below.
        for (got, num, den) in [(s.p99, 99usize, 100usize), (s.p99_9, 999, 1000)] {
            let want = sorted
                .iter()
                .copied()
                .find(|&v| sorted.iter().filter(|&&x| x <= v).count() * den >= num * n)
                .unwrap();
            prop_assert_eq!(got, want as f64 / q);
        }
    }

    #[test]
    fn perftest_latency_matches_restated_algorithm(
        raw in proptest::collection::vec(1u64..2_000_000, 3..600),
        mhz in 100u32..5000,
    ) {
        let hz = mhz as f64 * 1e6;
        let mut d = raw.clone();
        let s = lat_perftest(&mut d, hz, 2, LatUnits::Usec).unwrap();
        let q = mhz as f64 * 2.0;
        let mut sorted = raw.clone();
        sorted.sort_unstable();
        let n = raw.len() - 2;
        let kept = &sorted[..n];
        prop_assert_eq!(s.samples, n);
        prop_assert_eq!(s.t_min, sorted[0] as f64 / q);
        // t_max is the largest kept-plus-one sample, never the true max.
        prop_assert_eq!(s.t_max, sorted[n] as f64 / q);
        let med = if n % 2 == 0 { (kept[n / 2] + kept[n / 2 - 1]) / 2 } else { kept[n / 2] };
        prop_assert_eq!(s.t_typical, med as f64 / q);
        let avg = kept.iter().map(|&v| v as f64 / q).sum::<f64>() / n as f64;
        prop_assert!((s.t_avg - avg).abs() <= 1e-9 * avg);
        let trunc_var = kept
            .iter()
            .map(|&v| {
                let dev = (avg - v as f64 / q).trunc();
                dev * dev
            })
            .sum::<f64>()
            / n as f64;
        prop_assert!((s.t_stdev - trunc_var.sqrt()).abs() <= 1e-9 * (1.0 + trunc_var.sqrt()));
        let i99 = (n as f64 * 0.99).ceil() as usize;
        let i999 = (n as f64 * 0.999).ceil() as usize;
        prop_assert_eq!(s.p99, sorted[i99] as f64 / q);
        prop_assert_eq!(s.p99_9, sorted[i999] as f64 / q);
    }
}
