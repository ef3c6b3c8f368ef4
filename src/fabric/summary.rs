//! The fabric summary (ClusterKit-style evaluation): min / median / max over
//! the measured pairs, the worst pairs, outliers beyond `--tolerance`, and the
//! pairs that miss an `--expect-*` threshold. Pure math, no I/O.

use super::pattern::Pair;

/// Which way a metric improves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Better {
    /// Bandwidth, message rate.
    Higher,
    /// Latency.
    Lower,
}

impl Better {
    /// Whether `a` is worse than `b`.
    fn worse(self, a: f64, b: f64) -> bool {
        match self {
            Better::Higher => a < b,
            Better::Lower => a > b,
        }
    }
}

/// One pair's value of the matrix metric.
pub type Value = (Pair, f64);

#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    pub count: usize,
    pub min: Value,
    pub median: f64,
    pub max: Value,
    /// Up to `worst_n` pairs, worst first.
    pub worst: Vec<Value>,
    /// Pairs beyond the tolerance, worst first.
    pub outliers: Vec<Value>,
    pub tolerance_pct: f64,
}

/// The median (mean of the two middle values for an even count).
pub fn median(vals: &mut [f64]) -> Option<f64> {
    if vals.is_empty() {
        return None;
    }
    vals.sort_by(f64::total_cmp);
    let m = vals.len() / 2;
    Some(if vals.len() % 2 == 1 {
        vals[m]
    } else {
        (vals[m - 1] + vals[m]) / 2.0
    })
}

/// Whether `v` is an outlier against `median` at `tol` percent: for a
/// higher-is-better metric, below tol% of the median; for latency, above
/// median * 100/tol (the same ratio, the other way).
pub fn is_outlier(v: f64, median: f64, tol: f64, better: Better) -> bool {
    let f = tol / 100.0;
    match better {
        Better::Higher => v < median * f,
        Better::Lower => f > 0.0 && v > median / f,
    }
}

/// The summary of `vals` (None when no pair was measured).
pub fn summarize(vals: &[Value], better: Better, tol: f64, worst_n: usize) -> Option<Summary> {
    let first = *vals.first()?;
    let mut min = first;
    let mut max = first;
    for &v in vals {
        if v.1 < min.1 {
            min = v;
        }
        if v.1 > max.1 {
            max = v;
        }
    }
    let mut raw: Vec<f64> = vals.iter().map(|v| v.1).collect();
    let med = median(&mut raw)?;
    let mut sorted = vals.to_vec();
    // Worst first; ties by pair so the order is stable.
    sorted.sort_by(|a, b| {
        let c = a.1.total_cmp(&b.1);
        let c = if better == Better::Lower {
            c.reverse()
        } else {
            c
        };
        c.then(a.0.cmp(&b.0))
    });
    let outliers = sorted
        .iter()
        .copied()
        .filter(|v| is_outlier(v.1, med, tol, better))
        .collect();
    sorted.truncate(worst_n);
    Some(Summary {
        count: vals.len(),
        min,
        median: med,
        max,
        worst: sorted,
        outliers,
        tolerance_pct: tol,
    })
}

/// The pairs that miss `expect` (below it for bw/msgrate, above it for latency).
pub fn failures(vals: &[Value], expect: f64, better: Better) -> Vec<Value> {
    vals.iter()
        .copied()
        .filter(|v| better.worse(v.1, expect))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vals(xs: &[f64]) -> Vec<Value> {
        xs.iter()
            .enumerate()
            .map(|(i, &x)| (Pair::new(i, i + 1), x))
            .collect()
    }

    #[test]
    fn median_odd_even_empty() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&mut []), None);
    }

    #[test]
    fn bandwidth_summary_and_outliers() {
        let v = vals(&[100.0, 98.0, 50.0, 101.0, 89.0]);
        let s = summarize(&v, Better::Higher, 90.0, 2).unwrap();
        assert_eq!(s.count, 5);
        assert_eq!(s.median, 98.0);
        assert_eq!(s.min, (Pair::new(2, 3), 50.0));
        assert_eq!(s.max, (Pair::new(3, 4), 101.0));
        assert_eq!(
            s.worst,
            vec![(Pair::new(2, 3), 50.0), (Pair::new(4, 5), 89.0)]
        );
        // 90% of 98 = 88.2: 89 is inside, 50 is out.
        assert_eq!(s.outliers, vec![(Pair::new(2, 3), 50.0)]);
        assert!(summarize(&[], Better::Higher, 90.0, 3).is_none());
    }

    #[test]
    fn latency_summary_and_outliers() {
        let v = vals(&[2.0, 2.1, 5.0, 2.2]);
        let s = summarize(&v, Better::Lower, 90.0, 1).unwrap();
        assert!((s.median - 2.15).abs() < 1e-12);
        assert_eq!(s.worst, vec![(Pair::new(2, 3), 5.0)]);
        // 2.15 / 0.9 = 2.389: only 5.0 is beyond.
        assert_eq!(s.outliers, vec![(Pair::new(2, 3), 5.0)]);
        assert!(!is_outlier(2.38, 2.15, 90.0, Better::Lower));
        assert!(is_outlier(2.39, 2.15, 90.0, Better::Lower));
    }

    #[test]
    fn thresholds() {
        let v = vals(&[10.0, 20.0, 30.0]);
        assert_eq!(
            failures(&v, 15.0, Better::Higher),
            vec![(Pair::new(0, 1), 10.0)]
        );
        assert_eq!(
            failures(&v, 25.0, Better::Lower),
            vec![(Pair::new(2, 3), 30.0)]
        );
        assert!(failures(&v, 5.0, Better::Higher).is_empty());
    }
}
