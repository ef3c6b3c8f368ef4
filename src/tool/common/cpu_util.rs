//! `--cpu_util`: perftest's CPU utilisation column for `-D` runs. perftest reads
//! the first line of /proc/stat when its sample window opens (after the `-f`
//! margin) and when it closes, and reports user / (user + idle) × 100 over that
//! window (system, irq and iowait time are left out, as perftest does, so the
//! numbers compare one to one). rdmaperf samples on its own thread at the same
//! moments, so the measurement loop does no extra work.

use std::sync::mpsc::{self, RecvTimeoutError};
use std::thread::JoinHandle;
use std::time::Duration;

/// (user, idle) jiffies from /proc/stat's "cpu" line.
pub fn parse_stat(text: &str) -> Option<(u64, u64)> {
    let line = text.lines().next()?;
    let mut w = line.split_whitespace();
    if w.next()? != "cpu" {
        return None;
    }
    let user = w.next()?.parse().ok()?;
    let _nice = w.next()?;
    let _system = w.next()?;
    let idle = w.next()?.parse().ok()?;
    Some((user, idle))
}

/// perftest's `calc_cpu_util`: 0 when nothing was counted.
pub fn util(start: (u64, u64), end: (u64, u64)) -> f32 {
    let u = end.0.saturating_sub(start.0);
    let i = end.1.saturating_sub(start.1);
    if u + i == 0 {
        0.0
    } else {
        (u as f32 / (u + i) as f32) * 100.0
    }
}

fn read() -> Option<(u64, u64)> {
    parse_stat(&std::fs::read_to_string("/proc/stat").ok()?)
}

/// Samples /proc/stat at `margin` and at `margin + window` seconds from start.
pub struct Sampler {
    cancel: mpsc::Sender<()>,
    thread: JoinHandle<f32>,
}

impl Sampler {
    pub fn start(margin: u32, window: u32) -> Sampler {
        let (cancel, rx) = mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let wait = |s: u32| {
                matches!(
                    rx.recv_timeout(Duration::from_secs(s as u64)),
                    Err(RecvTimeoutError::Timeout)
                )
            };
            if !wait(margin) {
                return 0.0;
            }
            let Some(a) = read() else { return 0.0 };
            if !wait(window) {
                return 0.0;
            }
            read().map_or(0.0, |b| util(a, b))
        });
        Sampler { cancel, thread }
    }

    /// The utilisation over the window (0 if the run ended before it closed).
    pub fn finish(self) -> f32 {
        let _ = self.cancel.send(());
        self.thread.join().unwrap_or(0.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn perftest_formula() {
        let s = "cpu  100 5 50 900 7 0 3 0 0 0\ncpu0 1 2 3 4\n";
        assert_eq!(parse_stat(s), Some((100, 900)));
        assert_eq!(util((100, 900), (150, 1050)), 25.0);
        assert_eq!(util((1, 1), (1, 1)), 0.0);
        assert_eq!(parse_stat("intr 1 2"), None);
    }
    #[test]
    fn reads_this_host() {
        assert!(read().is_some(), "/proc/stat has a cpu line");
    }
}
