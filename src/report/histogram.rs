//! `-H`: a latency histogram over every sample. perftest's `-H` prints the
//! sorted samples one per line; rdmaperf keeps every sample anyway (`-U`,
//! `--samples-file` give them raw), so `-H` gives the distribution instead:
//! equal-width buckets of a 1-2-5 width from the minimum up to the 99th
//! percentile, then one open bucket for the tail, so the maximum is counted too.
//!
//! Bucket bounds are formatted first and the counting uses the formatted
//! values, so anyone re-counting the samples against the printed bounds gets
//! the printed counts exactly.

/// Buckets below the tail bucket, at most.
const MAX_BUCKETS: usize = 20;

/// One bucket: `from <= v < to` (`to` is `None` for the open tail bucket).
#[derive(Clone, Debug, PartialEq)]
pub struct Bucket {
    pub from: String,
    pub to: Option<String>,
    pub count: usize,
}

/// The smallest 1, 2 or 5 × 10^e at least `x` (x > 0), and the number of
/// decimals that prints it exactly.
fn nice_width(x: f64) -> (f64, usize) {
    let e = x.log10().floor() as i32;
    for e in [e - 1, e, e + 1] {
        for m in [1.0, 2.0, 5.0] {
            let w = m * 10f64.powi(e);
            if w >= x {
                return (w, (-e).max(0) as usize);
            }
        }
    }
    (10f64.powi(e + 2), 0)
}

/// Buckets over `values` (any order), or nothing for no samples.
pub fn buckets(values: &[f64]) -> Vec<Bucket> {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return Vec::new();
    }
    v.sort_by(f64::total_cmp);
    let min = v[0];
    let p99 = v[(v.len() * 99).div_ceil(100).max(1) - 1];
    let span = p99 - min;
    let raw = if span > 0.0 {
        span / MAX_BUCKETS as f64
    } else {
        (min.abs() / 100.0).max(1e-3)
    };
    let (w, decimals) = nice_width(raw);
    let parsed = |s: &str| s.parse::<f64>().unwrap_or(f64::INFINITY);
    let mut first = (min / w).floor();
    let fmt = |first: f64, k: usize| format!("{:.*}", decimals, (first + k as f64) * w);
    if parsed(&fmt(first, 0)) > min {
        // Rounding put the first bound above the minimum: start one lower.
        first -= 1.0;
    }
    let mut bounds: Vec<String> = (0..=MAX_BUCKETS).map(|k| fmt(first, k)).collect();
    // Stop after the bucket that holds the 99th percentile.
    let last = (1..bounds.len())
        .find(|&k| parsed(&bounds[k]) > p99)
        .unwrap_or(bounds.len() - 1);
    bounds.truncate(last + 1);
    let edges: Vec<f64> = bounds.iter().map(|b| parsed(b)).collect();
    let mut out: Vec<Bucket> = bounds
        .windows(2)
        .map(|b| Bucket {
            from: b[0].clone(),
            to: Some(b[1].clone()),
            count: 0,
        })
        .collect();
    let mut tail = Bucket {
        from: bounds[bounds.len() - 1].clone(),
        to: None,
        count: 0,
    };
    let mut k = 0;
    for &x in &v {
        // The first bound is at or below the minimum by construction.
        while k + 1 < edges.len() && x >= edges[k + 1] {
            k += 1;
        }
        if k + 1 < edges.len() {
            out[k].count += 1;
        } else {
            tail.count += 1;
        }
    }
    if tail.count > 0 {
        out.push(tail);
    }
    out
}

/// The printed histogram: a header naming the units, then
/// `from, to, count, cumulative %` per bucket (`to` is `inf` for the tail).
pub fn text(values: &[f64], units: &str) -> String {
    let b = buckets(values);
    let total: usize = b.iter().map(|b| b.count).sum();
    let mut o = format!("#, {units} histogram: from, to, samples, cumulative %\n");
    let mut cum = 0;
    for x in &b {
        cum += x.count;
        o += &format!(
            "{}, {}, {}, {:.2}\n",
            x.from,
            x.to.as_deref().unwrap_or("inf"),
            x.count,
            100.0 * cum as f64 / total.max(1) as f64
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn widths_are_1_2_5() {
        assert_eq!(nice_width(0.13), (0.2, 1));
        assert_eq!(nice_width(0.05), (0.05, 2));
        assert_eq!(nice_width(3.0), (5.0, 0));
        assert_eq!(nice_width(10.0), (10.0, 0));
    }

    #[test]
    fn every_sample_is_counted_once_and_in_its_bucket() {
        let v: Vec<f64> = (0..1000).map(|i| 1.0 + (i % 97) as f64 * 0.01).collect();
        let mut with_tail = v.clone();
        with_tail.push(250.0); // one outlier: the tail bucket
        let b = buckets(&with_tail);
        assert!(b.len() <= MAX_BUCKETS + 1);
        assert_eq!(b.iter().map(|b| b.count).sum::<usize>(), with_tail.len());
        let tail = b.last().unwrap();
        assert!(tail.to.is_none() && tail.count >= 1);
        for x in &b {
            let from: f64 = x.from.parse().unwrap();
            let n = with_tail
                .iter()
                .filter(|&&s| s >= from && x.to.as_ref().is_none_or(|t| s < t.parse().unwrap()))
                .count();
            assert_eq!(n, x.count, "bucket {x:?}");
        }
    }

    #[test]
    fn equal_samples_and_empty() {
        let b = buckets(&[2.5; 10]);
        assert_eq!(b.iter().map(|b| b.count).sum::<usize>(), 10);
        assert!(buckets(&[]).is_empty());
        assert!(text(&[1.0, 2.0], "usec").starts_with("#, usec histogram"));
    }
}
