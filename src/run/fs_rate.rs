//! raw-eth-fs-rate's loop (perftest's `run_iter_fs`): steering rules
//! created one after another on each QP and timed. Iterations (`-n`): each
//! creation is stamped before and after. Duration (`-D`): creations are
//! counted inside the sample window of the same [`Deadlines`] the bw loops
//! use, and the loop stops at its end or when the rules run out. The flows
//! created are handed back to be destroyed after the timing (perftest's
//! `cleaning`). Each step is a syscall by design: the loop keeps its own
//! work to arithmetic and the stamp stores, into memory handed in.

use super::bw::Deadlines;
use super::stop;

/// Creating one prepared rule on one QP.
pub trait FlowMaker {
    type Flow;
    type Error;
    /// Creates rule `rule` (of the QP's list) on QP `qp`.
    fn create(&mut self, qp: usize, rule: usize) -> Result<Self::Flow, Self::Error>;
}

/// What the loop measured.
#[derive(Debug)]
pub struct FsOutcome<E> {
    /// Rules created inside the measured window (all of them with `-n`).
    pub measured: u64,
    /// The sample window's stamps (duration mode).
    pub t_start: u64,
    pub t_end: u64,
    pub error: Option<E>,
    pub interrupted: bool,
}

/// Creates `per_qp` rules on each of `qps` QPs into `flows` (capacity
/// `qps * per_qp` reserved by the caller). With `-n` (`deadlines` None),
/// `tposted[i]`/`tcompleted[i]` get the stamps around creation `i`.
#[allow(clippy::too_many_arguments)]
pub fn run_fs<M: FlowMaker>(
    m: &mut M,
    qps: usize,
    per_qp: usize,
    deadlines: Option<Deadlines>,
    now: impl Fn() -> u64,
    tposted: &mut [u64],
    tcompleted: &mut [u64],
    flows: &mut Vec<M::Flow>,
) -> FsOutcome<M::Error> {
    let mut o = FsOutcome {
        measured: 0,
        t_start: 0,
        t_end: 0,
        error: None,
        interrupted: false,
    };
    let (mut sampling, mut ended) = (deadlines.is_none(), false);
    'all: for q in 0..qps {
        for r in 0..per_qp {
            if stop::requested() {
                o.interrupted = true;
                break 'all;
            }
            let t0 = now();
            if let Some(d) = deadlines {
                if !sampling && !ended && t0 >= d.sample_start {
                    (sampling, o.t_start, o.measured) = (true, t0, 0);
                }
                if sampling && t0 >= d.sample_stop {
                    (sampling, ended, o.t_end) = (false, true, t0);
                }
                if t0 >= d.end {
                    break 'all;
                }
            }
            let made = m.create(q, r);
            let t1 = now();
            match made {
                Ok(f) => flows.push(f),
                Err(e) => {
                    o.error = Some(e);
                    break 'all;
                }
            }
            if deadlines.is_none() {
                let i = flows.len() - 1;
                if let (Some(p), Some(c)) = (tposted.get_mut(i), tcompleted.get_mut(i)) {
                    (*p, *c) = (t0, t1);
                }
            }
            if sampling {
                o.measured += 1;
            }
        }
    }
    if deadlines.is_some() && sampling {
        // The rules ran out inside the sample window.
        o.t_end = now();
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    struct Count {
        made: Vec<(usize, usize)>,
        fail_at: Option<usize>,
    }
    /// A flow maker that fails its creation number `fail_at` (from 0).
    fn maker(fail_at: Option<usize>) -> Count {
        Count {
            made: vec![],
            fail_at,
        }
    }
    /// A clock that moves `step` ticks at each read.
    fn ticking(t: &Cell<u64>, step: u64) -> impl Fn() -> u64 + '_ {
        move || {
            t.set(t.get() + step);
            t.get()
        }
    }
    impl FlowMaker for Count {
        type Flow = (usize, usize);
        type Error = &'static str;
        fn create(&mut self, qp: usize, rule: usize) -> Result<(usize, usize), &'static str> {
            if Some(self.made.len()) == self.fail_at {
                return Err("full");
            }
            self.made.push((qp, rule));
            Ok((qp, rule))
        }
    }

    #[test]
    fn iterations_stamp_each_creation() {
        let t = Cell::new(0u64);
        let now = ticking(&t, 10);
        let mut m = maker(None);
        let (mut tp, mut tc) = (vec![0; 6], vec![0; 6]);
        let mut flows = Vec::with_capacity(6);
        let o = run_fs(&mut m, 2, 3, None, now, &mut tp, &mut tc, &mut flows);
        assert!(o.error.is_none());
        assert_eq!(o.measured, 6);
        assert_eq!(flows, [(0, 0), (0, 1), (0, 2), (1, 0), (1, 1), (1, 2)]);
        assert!(
            tp.iter().zip(&tc).all(|(p, c)| c - p == 10),
            "{tp:?} {tc:?}"
        );
    }

    #[test]
    fn a_failed_creation_stops_and_keeps_what_was_made() {
        let mut m = maker(Some(2));
        let mut flows = Vec::new();
        let o = run_fs(
            &mut m,
            1,
            5,
            None,
            || 0,
            &mut [0; 5],
            &mut [0; 5],
            &mut flows,
        );
        assert_eq!(o.error, Some("full"));
        assert_eq!(flows.len(), 2, "made flows are handed back for destruction");
    }

    #[test]
    fn duration_counts_the_sample_window() {
        let t = Cell::new(0u64);
        let now = ticking(&t, 1);
        let d = Deadlines {
            sample_start: 20,
            sample_stop: 60,
            end: 80,
        };
        let mut m = maker(None);
        let mut flows = Vec::new();
        let o = run_fs(&mut m, 1, 1000, Some(d), now, &mut [], &mut [], &mut flows);
        assert!(o.t_start >= 20 && o.t_end >= 60 && o.t_end < 62, "{o:?}");
        // Two clock reads per creation: about 40 / 2 creations in the sample.
        assert!((19..=21).contains(&o.measured), "{o:?}");
        assert!(flows.len() < 1000 && flows.len() as u64 > o.measured);
    }
}
