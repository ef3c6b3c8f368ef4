//! `--run_infinitely`: the bw loop cuts its run into fixed periods on clock
//! deadlines and publishes each finished period into a preallocated ring; a
//! printer thread outside the loop turns them into rows. The loop side
//! ([`PeriodClock::tick`], [`PeriodLog::publish`]) is a compare per pass and a
//! few relaxed stores per period: no allocation, no locks, no syscalls.

use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// One finished period: messages completed in it and its clock interval.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PeriodSample {
    /// 0-based period number.
    pub index: u64,
    pub messages: u64,
    pub t_start: u64,
    pub t_end: u64,
}

/// The loop's period accounting (perftest: `iters - last_iters` between two
/// prints, interval from the previous print to this one).
#[derive(Clone, Copy, Debug)]
pub struct PeriodClock {
    len: u64,
    next: u64,
    base_msgs: u64,
    base_t: u64,
    index: u64,
}

impl PeriodClock {
    /// Periods of `len` ticks starting at `t0` (len 0 is treated as 1).
    pub const fn new(t0: u64, len: u64) -> PeriodClock {
        let len = if len == 0 { 1 } else { len };
        PeriodClock {
            len,
            next: t0.saturating_add(len),
            base_msgs: 0,
            base_t: t0,
            index: 0,
        }
    }

    /// Called with the time and the messages completed so far; returns the
    /// period that ended at `t`, if one did. A late check (the loop was busy)
    /// makes that period longer, never two periods; the cadence then restarts
    /// from `t` so the next period is a full one.
    #[inline(always)]
    pub fn tick(&mut self, t: u64, completed: u64) -> Option<PeriodSample> {
        if t < self.next {
            return None;
        }
        let s = PeriodSample {
            index: self.index,
            messages: completed.wrapping_sub(self.base_msgs),
            t_start: self.base_t,
            t_end: t,
        };
        self.index += 1;
        self.base_msgs = completed;
        self.base_t = t;
        self.next = self.next.saturating_add(self.len);
        if self.next <= t {
            self.next = t.saturating_add(self.len);
        }
        Some(s)
    }
}

const SLOTS: usize = 64;

#[derive(Default)]
struct Slot {
    /// index + 1 once written (0 = empty); checked again after reading.
    tag: AtomicU64,
    messages: AtomicU64,
    t_start: AtomicU64,
    t_end: AtomicU64,
}

/// Single-producer (the loop), single-consumer (the printer) ring of periods.
pub struct PeriodLog {
    period_ticks: u64,
    slots: [Slot; SLOTS],
    published: AtomicU64,
    done: AtomicBool,
}

impl PeriodLog {
    pub fn new(period_ticks: u64) -> PeriodLog {
        PeriodLog {
            period_ticks,
            slots: core::array::from_fn(|_| Slot::default()),
            published: AtomicU64::new(0),
            done: AtomicBool::new(false),
        }
    }

    /// The period length in clock ticks.
    pub fn period_ticks(&self) -> u64 {
        self.period_ticks
    }

    /// Loop side: make `s` visible to the printer.
    #[inline]
    pub fn publish(&self, s: &PeriodSample) {
        let slot = &self.slots[(s.index % SLOTS as u64) as usize];
        slot.tag.store(0, Ordering::Relaxed);
        slot.messages.store(s.messages, Ordering::Relaxed);
        slot.t_start.store(s.t_start, Ordering::Relaxed);
        slot.t_end.store(s.t_end, Ordering::Relaxed);
        slot.tag.store(s.index + 1, Ordering::Release);
        self.published.store(s.index + 1, Ordering::Release);
    }

    /// Printer side: the next period after `*seen` (advancing it), or None
    /// when none is new. A period the ring overwrote before it was read is
    /// skipped (the printer fell 64 periods behind).
    pub fn next(&self, seen: &mut u64) -> Option<PeriodSample> {
        loop {
            let published = self.published.load(Ordering::Acquire);
            if *seen >= published {
                return None;
            }
            if published - *seen > SLOTS as u64 {
                *seen = published - SLOTS as u64;
            }
            let index = *seen;
            *seen += 1;
            let slot = &self.slots[(index % SLOTS as u64) as usize];
            if slot.tag.load(Ordering::Acquire) != index + 1 {
                continue;
            }
            let s = PeriodSample {
                index,
                messages: slot.messages.load(Ordering::Relaxed),
                t_start: slot.t_start.load(Ordering::Relaxed),
                t_end: slot.t_end.load(Ordering::Relaxed),
            };
            core::sync::atomic::fence(Ordering::Acquire);
            if slot.tag.load(Ordering::Relaxed) == index + 1 {
                return Some(s);
            }
        }
    }

    /// The loop has returned: the printer drains and stops.
    pub fn finish(&self) {
        self.done.store(true, Ordering::Release);
    }

    pub fn finished(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn periods_count_messages_between_boundaries() {
        let mut c = PeriodClock::new(1000, 100);
        assert_eq!(c.tick(1099, 50), None);
        let a = c.tick(1100, 60).unwrap();
        assert_eq!(
            a,
            PeriodSample {
                index: 0,
                messages: 60,
                t_start: 1000,
                t_end: 1100
            }
        );
        assert_eq!(c.tick(1150, 90), None);
        let b = c.tick(1205, 130).unwrap();
        // Only what completed since the last boundary, over the real interval.
        assert_eq!(
            (b.index, b.messages, b.t_start, b.t_end),
            (1, 70, 1100, 1205)
        );
        // Cadence is kept (next boundary at 1300, not 1305).
        assert_eq!(c.tick(1299, 131), None);
        assert!(c.tick(1300, 140).is_some());
    }

    #[test]
    fn a_late_check_makes_one_long_period_not_several() {
        let mut c = PeriodClock::new(0, 10);
        let s = c.tick(35, 7).unwrap();
        assert_eq!((s.index, s.messages, s.t_start, s.t_end), (0, 7, 0, 35));
        // Restarted from 35: nothing until 45.
        assert_eq!(c.tick(44, 8), None);
        let s = c.tick(45, 9).unwrap();
        assert_eq!((s.index, s.messages, s.t_start), (1, 2, 35));
    }

    #[test]
    fn log_hands_each_period_to_the_printer_once_in_order() {
        let log = PeriodLog::new(10);
        let mut seen = 0;
        assert_eq!(log.next(&mut seen), None);
        for i in 0..3 {
            log.publish(&PeriodSample {
                index: i,
                messages: 10 * i,
                t_start: i,
                t_end: i + 1,
            });
        }
        let got: Vec<u64> = core::iter::from_fn(|| log.next(&mut seen))
            .map(|s| s.messages)
            .collect();
        assert_eq!(got, vec![0, 10, 20]);
        assert_eq!(log.next(&mut seen), None);
        assert!(!log.finished());
        log.finish();
        assert!(log.finished());
    }

    #[test]
    fn a_printer_far_behind_skips_overwritten_periods() {
        let log = PeriodLog::new(10);
        for i in 0..(SLOTS as u64 + 5) {
            log.publish(&PeriodSample {
                index: i,
                messages: i,
                t_start: 0,
                t_end: 1,
            });
        }
        let mut seen = 0;
        let first = log.next(&mut seen).unwrap();
        assert_eq!(first.index, 5);
        let n = 1 + core::iter::from_fn(|| log.next(&mut seen)).count();
        assert_eq!(n, SLOTS);
    }
}
