//! The round-robin schedule of the `pairs` pattern: a 1-factorisation of the
//! complete graph on N ranks (the circle method). Every unordered pair of
//! ranks meets in exactly one step and no rank is in two pairs of a step.
//! Even N: N-1 steps of N/2 pairs. Odd N: N steps of (N-1)/2 pairs, one rank
//! idle per step (it would meet the phantom rank N).

/// One unordered pair of ranks, lower rank first.
pub type RankPair = (usize, usize);

/// The steps of the round-robin schedule for `n` ranks (none for n < 2).
///
/// Circle method over m = n rounded up to even: rank m-1 stays put, the
/// others rotate; in round r, m-1 meets r and (r+k) meets (r-k) mod (m-1).
/// A pair that involves the phantom rank (odd n) is left out: that rank idles.
pub fn round_robin(n: usize) -> Vec<Vec<RankPair>> {
    (0..steps(n)).map(|r| step(n, r)).collect()
}

/// Number of steps for `n` ranks.
pub fn steps(n: usize) -> usize {
    if n < 2 {
        0
    } else {
        n + n % 2 - 1
    }
}

/// Step `r` alone (O(n), so no rank holds the whole O(n²) schedule).
pub fn step(n: usize, r: usize) -> Vec<RankPair> {
    let m = n + n % 2;
    let ring = m - 1;
    let mut step = Vec::with_capacity(m / 2);
    let mut push = |a: usize, b: usize| {
        if a < n && b < n {
            step.push((a.min(b), a.max(b)));
        }
    };
    push(m - 1, r);
    for k in 1..m / 2 {
        push((r + k) % ring, (r + ring - k) % ring);
    }
    step.sort_unstable();
    step
}

/// Rank `me`'s partner in step `r` (None: idle), in O(1).
pub fn partner(n: usize, r: usize, me: usize) -> Option<usize> {
    let m = n + n % 2;
    let ring = m - 1;
    let other = if me == m - 1 {
        r
    } else if me == r {
        m - 1
    } else {
        // me = r + k  =>  partner = r - k (mod ring)
        (2 * r + 2 * ring - me) % ring
    };
    (other < n && other != me).then_some(other)
}

/// The rank idle in a step (odd n: exactly one; even n: none).
pub fn idle_ranks(n: usize, step: &[RankPair]) -> Vec<usize> {
    let mut busy = vec![false; n];
    for &(a, b) in step {
        busy[a] = true;
        busy[b] = true;
    }
    (0..n).filter(|&r| !busy[r]).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Checks the 1-factorisation properties the issue asks for.
    fn check(n: usize) {
        let steps = round_robin(n);
        let want_steps = if n % 2 == 0 { n - 1 } else { n };
        assert_eq!(steps.len(), want_steps, "n={n}: number of steps");
        let mut met = vec![0u32; n * n];
        for (i, step) in steps.iter().enumerate() {
            assert_eq!(step.len(), n / 2, "n={n} step {i}: pairs per step");
            let mut seen = vec![false; n];
            for &(a, b) in step {
                assert!(
                    a < b && b < n,
                    "n={n} step {i}: pair ({a},{b}) out of order or range"
                );
                assert!(
                    !seen[a] && !seen[b],
                    "n={n} step {i}: a rank twice in a step"
                );
                seen[a] = true;
                seen[b] = true;
                met[a * n + b] += 1;
            }
            let idle = idle_ranks(n, step);
            assert_eq!(idle.len(), n % 2, "n={n} step {i}: idle ranks {idle:?}");
        }
        for a in 0..n {
            for b in a + 1..n {
                assert_eq!(
                    met[a * n + b],
                    1,
                    "n={n}: pair ({a},{b}) met {} times",
                    met[a * n + b]
                );
            }
        }
    }

    #[test]
    fn one_factorisation_for_2_to_64() {
        for n in 2..=64 {
            check(n);
        }
    }

    #[test]
    fn odd_n_idles_every_rank_once() {
        for n in (3..=63).step_by(2) {
            let mut idled = vec![0; n];
            for s in round_robin(n) {
                for r in idle_ranks(n, &s) {
                    idled[r] += 1;
                }
            }
            assert!(idled.iter().all(|&c| c == 1), "n={n}: {idled:?}");
        }
    }

    #[test]
    fn partner_matches_step() {
        for n in 2..=33 {
            for r in 0..steps(n) {
                let s = step(n, r);
                for me in 0..n {
                    let want = s
                        .iter()
                        .find_map(|&(a, b)| (a == me).then_some(b).or((b == me).then_some(a)));
                    assert_eq!(partner(n, r, me), want, "n={n} step {r} rank {me}");
                }
            }
        }
    }

    #[test]
    fn tiny() {
        assert!(round_robin(0).is_empty());
        assert!(round_robin(1).is_empty());
        assert_eq!(round_robin(2), vec![vec![(0, 1)]]);
    }
}
