//! The software rate limiter of the bw loop (perftest `run_iter_bw`'s SW
//! limiter): a burst of `burst` messages may start once its deadline has
//! passed; each burst moves the deadline on by one gap, so the average rate
//! is `burst / gap` whatever the post and poll costs in between.
//!
//! The loop is generic over [`Pace`] and the choice is made once, outside it:
//! with [`Unpaced`] every call is a constant the compiler folds away, so the
//! unlimited loop costs nothing extra.

/// How the bw loop paces its posts.
pub trait Pace {
    /// Whether QP posting may go on at time `t` (ticks): a burst is under way,
    /// or the next one's deadline has passed (then it starts).
    fn may_post(&mut self, t: u64) -> bool;
    /// Whether `may_post` needs a fresh clock reading every pass (the loop
    /// reads none otherwise while it waits).
    fn paced(&self) -> bool;
    /// Whether the current burst has room for more posts.
    fn in_burst(&self) -> bool;
    /// `n` messages were posted in the current burst.
    fn posted(&mut self, n: u64);
}

/// No limit.
#[derive(Clone, Copy, Debug, Default)]
pub struct Unpaced;

impl Pace for Unpaced {
    #[inline(always)]
    fn may_post(&mut self, _t: u64) -> bool {
        true
    }
    #[inline(always)]
    fn paced(&self) -> bool {
        false
    }
    #[inline(always)]
    fn in_burst(&self) -> bool {
        true
    }
    #[inline(always)]
    fn posted(&mut self, _n: u64) {}
}

/// `burst` messages every `gap` ticks, from `start`.
#[derive(Clone, Copy, Debug)]
pub struct SwPace {
    gap: u64,
    burst: u64,
    deadline: u64,
    sent: u64,
    open: bool,
}

impl SwPace {
    pub fn new(gap_ticks: u64, burst: u32, start: u64) -> Self {
        SwPace {
            gap: gap_ticks,
            burst: burst.max(1) as u64,
            deadline: start,
            sent: 0,
            open: false,
        }
    }
}

impl Pace for SwPace {
    #[inline(always)]
    fn may_post(&mut self, t: u64) -> bool {
        if self.open {
            return true;
        }
        if self.deadline > t {
            return false;
        }
        self.deadline += self.gap;
        self.open = true;
        self.sent = 0;
        true
    }
    #[inline(always)]
    fn paced(&self) -> bool {
        true
    }
    #[inline(always)]
    fn in_burst(&self) -> bool {
        self.open
    }
    #[inline(always)]
    fn posted(&mut self, n: u64) {
        self.sent += n;
        if self.sent >= self.burst {
            self.open = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bursts_start_one_gap_apart() {
        let mut p = SwPace::new(100, 4, 1000);
        assert!(!p.may_post(999));
        assert!(p.may_post(1000));
        for _ in 0..4 {
            assert!(p.in_burst());
            p.posted(1);
        }
        assert!(!p.in_burst());
        // The next burst waits for 1100, even if asked at once.
        assert!(!p.may_post(1001));
        assert!(!p.may_post(1099));
        assert!(p.may_post(1100));
        // A post list larger than what is left closes the burst.
        p.posted(8);
        assert!(!p.in_burst());
        // Late: the deadline advances by one gap per burst (perftest keeps
        // the schedule, so a late burst is followed by earlier ones).
        assert!(p.may_post(5000));
    }
}
