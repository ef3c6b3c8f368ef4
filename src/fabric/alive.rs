//! Which ranks are alive, for rank 0's per-step bound on a silent rank
//! (feature `mpi` uses it; the tracker itself is pure and unit-tested).
//!
//! While a step runs, every other rank tells rank 0 it is alive every
//! `--timeout`/4, from a thread of its own (never from a pair's measured
//! loop). Rank 0 names a rank it has not heard from for `--timeout` —
//! results or a beat — as stopped answering, at once and whatever its own
//! pairs are doing, and tells the others; every pair link to a rank named
//! gone gives up ([`is_gone`]), so no pair waits out its own bounds on it.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The ranks named gone in this run (rank 0 names them; the others learn it
/// from rank 0).
static GONE: Mutex<Vec<usize>> = Mutex::new(Vec::new());

fn gone_list() -> std::sync::MutexGuard<'static, Vec<usize>> {
    // A poisoned lock only means a thread panicked holding it; the list is intact.
    GONE.lock().unwrap_or_else(|p| p.into_inner())
}

/// Records that rank `r` stopped answering.
pub fn mark_gone(r: usize) {
    let mut g = gone_list();
    if !g.contains(&r) {
        g.push(r);
    }
}

/// Whether rank `r` was named gone (a pair link to it then gives up).
pub fn is_gone(r: usize) -> bool {
    gone_list().contains(&r)
}

/// How often a rank beats while a step runs: a quarter of `--timeout`, so
/// a late beat or two (a busy host) never looks like silence.
pub fn beat_period(timeout: Duration) -> Duration {
    (timeout / 4).max(Duration::from_millis(50))
}

/// Runs `f`, and `late` from another thread if `f` has not returned within
/// `bound` (`late` ends the process: a call that waits for every rank, such
/// as MPI_Finalize, must not outlive a rank lost for good). `late` never
/// runs once `f` returned.
pub fn within<T>(
    bound: Duration,
    f: impl FnOnce() -> T,
    late: impl FnOnce() + Send + 'static,
) -> T {
    let (tx, rx) = std::sync::mpsc::channel::<()>();
    let watch = std::thread::spawn(move || {
        if let Err(std::sync::mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(bound) {
            late();
        }
    });
    let out = f();
    drop(tx);
    // When `late` ran (it exits the process in use), this join waits for it.
    let _ = watch.join();
    out
}

/// How long a rank last heard from at `last` has been silent at `now`,
/// once that is past `timeout` (it is then gone), else None. The other
/// ranks' view of rank 0, from its go and its beats.
pub fn past(last: Instant, now: Instant, timeout: Duration) -> Option<Duration> {
    let quiet = now.saturating_duration_since(last);
    (quiet > timeout).then_some(quiet)
}

/// Rank 0's view of one step: when it last heard from each rank it waits for.
#[derive(Debug)]
pub struct Silence {
    timeout: Duration,
    last: Vec<(usize, Instant)>,
}

impl Silence {
    /// Waiting for `ranks` from `start` (the moment the step's go was sent:
    /// from then on each of them owes rank 0 a beat or its results).
    pub fn new(ranks: &[usize], start: Instant, timeout: Duration) -> Silence {
        Silence {
            timeout,
            last: ranks.iter().map(|&r| (r, start)).collect(),
        }
    }

    /// A sign of life from `r` at `t`.
    pub fn heard(&mut self, r: usize, t: Instant) {
        if let Some(e) = self.last.iter_mut().find(|e| e.0 == r) {
            e.1 = e.1.max(t);
        }
    }

    /// `r` answered for good (its results came): no longer watched.
    pub fn done(&mut self, r: usize) {
        self.last.retain(|e| e.0 != r);
    }

    /// The ranks silent for more than the timeout at `now` (each once: they
    /// are no longer watched after this), with how long each was silent.
    pub fn silent(&mut self, now: Instant) -> Vec<(usize, Duration)> {
        let t = self.timeout;
        let out: Vec<(usize, Duration)> = self
            .last
            .iter()
            .map(|&(r, l)| (r, now.saturating_duration_since(l)))
            .filter(|&(_, d)| d > t)
            .collect();
        self.last.retain(|e| !out.iter().any(|o| o.0 == e.0));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rank_is_silent_after_the_timeout_from_its_last_sign() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let mut w = Silence::new(&[1, 2, 3], t0, s(6));
        w.heard(1, t0 + s(5));
        w.heard(2, t0 + s(1));
        w.done(3);
        // Rank 2, heard at 1 s, is silent for more than 6 s only after 7 s.
        assert!(w.silent(t0 + s(6)).is_empty());
        let got = w.silent(t0 + s(7) + Duration::from_millis(1));
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].0, 2);
        assert!(got[0].1 > s(6));
        // Named once; rank 1 (heard at 5 s) goes silent after 11 s.
        assert!(w.silent(t0 + s(10)).is_empty());
        assert_eq!(w.silent(t0 + s(12))[0].0, 1);
        // A beat from a rank not watched changes nothing.
        w.heard(9, t0);
        assert!(w.silent(t0 + s(100)).is_empty());
    }

    /// A call that outlives its bound runs `late` (once it returns, the
    /// call's own value still comes back); one that returns in time never
    /// does, however long the process goes on after.
    #[test]
    fn a_call_past_its_bound_runs_late_and_one_in_time_never() {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        let fired = Arc::new(AtomicBool::new(false));
        let f = Arc::clone(&fired);
        let v = within(
            Duration::from_millis(20),
            || {
                std::thread::sleep(Duration::from_millis(300));
                7
            },
            move || f.store(true, Ordering::SeqCst),
        );
        assert_eq!(v, 7);
        assert!(fired.load(Ordering::SeqCst), "late did not run");
        let quiet = Arc::new(AtomicBool::new(false));
        let q = Arc::clone(&quiet);
        let v = within(
            Duration::from_millis(50),
            || 8,
            move || q.store(true, Ordering::SeqCst),
        );
        std::thread::sleep(Duration::from_millis(150));
        assert_eq!(v, 8);
        assert!(
            !quiet.load(Ordering::SeqCst),
            "late ran after the call returned"
        );
    }

    /// Rank 0 is gone for the others only past the timeout from its last
    /// sign, and stays gone (every look says so, not only the first).
    #[test]
    fn rank_0_is_gone_past_the_timeout_from_its_last_sign() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        assert_eq!(past(t0, t0 + s(10), s(10)), None);
        assert_eq!(past(t0 + s(5), t0 + s(12), s(10)), None);
        assert_eq!(past(t0, t0 + s(11), s(10)), Some(s(11)));
        assert_eq!(past(t0, t0 + s(12), s(10)), Some(s(12)));
        // A clock read before the sign (another thread's) is no silence.
        assert_eq!(past(t0 + s(1), t0, s(10)), None);
    }

    #[test]
    fn gone_ranks_are_remembered() {
        assert!(!is_gone(70_001));
        mark_gone(70_001);
        mark_gone(70_001);
        assert!(is_gone(70_001));
        assert_eq!(gone_list().iter().filter(|&&r| r == 70_001).count(), 1);
    }

    #[test]
    fn beats_are_a_quarter_of_the_timeout() {
        assert_eq!(
            beat_period(Duration::from_secs(6)),
            Duration::from_millis(1500)
        );
        assert_eq!(
            beat_period(Duration::from_millis(100)),
            Duration::from_millis(50)
        );
    }
}
