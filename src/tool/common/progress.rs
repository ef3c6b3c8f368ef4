//! Progress on stderr for long runs (an `-a` sweep, a `-D` run), only when
//! stderr is a terminal, so logs and pipes stay clean. Runs on its own thread;
//! the measurement loop never sees it.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Whether to show progress at all.
pub fn enabled() -> bool {
    std::io::stderr().is_terminal()
}

/// One line for a sweep step: "[3/23] 8 B".
pub fn sweep_line(i: usize, n: usize, size: u64) -> String {
    format!("\r\x1b[K[{}/{n}] {size} B", i + 1)
}

/// One line for a timed run: "-D 30: 12/30 s".
pub fn duration_line(elapsed: u64, total: u64) -> String {
    format!("\r\x1b[K-D {total}: {}/{total} s", elapsed.min(total))
}

/// Shows the duration progress once a second until dropped.
pub struct Ticker {
    done: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Ticker {
    pub fn start(total_s: u64) -> Option<Ticker> {
        if !enabled() {
            return None;
        }
        let done = Arc::new(AtomicBool::new(false));
        let d = done.clone();
        let thread = std::thread::spawn(move || {
            let t0 = Instant::now();
            while !d.load(Ordering::Relaxed) {
                eprint!("{}", duration_line(t0.elapsed().as_secs(), total_s));
                let _ = std::io::stderr().flush();
                std::thread::sleep(Duration::from_millis(250));
            }
            eprint!("\r\x1b[K");
        });
        Some(Ticker {
            done,
            thread: Some(thread),
        })
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.done.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Print a sweep step (when enabled).
pub fn sweep(i: usize, n: usize, size: u64) {
    if n > 1 && enabled() {
        eprint!("{}", sweep_line(i, n, size));
        let _ = std::io::stderr().flush();
    }
}

/// Clear the progress line.
pub fn clear() {
    if enabled() {
        eprint!("\r\x1b[K");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn lines() {
        assert_eq!(sweep_line(2, 23, 8), "\r\x1b[K[3/23] 8 B");
        assert_eq!(duration_line(12, 30), "\r\x1b[K-D 30: 12/30 s");
        assert_eq!(duration_line(31, 30), "\r\x1b[K-D 30: 30/30 s");
    }
}
