//! Ctrl-C / SIGTERM: the first signal asks the loops to stop (they poll a flag,
//! no syscall), a second one at least [`REPEAT_NS`] later exits at once.

use core::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);
static SIGNAL: AtomicI32 = AtomicI32::new(0);
/// CLOCK_MONOTONIC time of the first signal, in ns.
static FIRST_NS: AtomicU64 = AtomicU64::new(0);

/// A signal closer than this to the first is the same request delivered twice,
/// not the user pressing Ctrl-C again: GNU `timeout` (and mpirun-style
/// wrappers) forward a signal to the child *and* to its process group, so the
/// child often gets two SIGINTs microseconds apart. Exiting on that second
/// copy would throw away the partial result the first one asked for.
pub const REPEAT_NS: u64 = 500_000_000;

/// Whether a signal at `now_ns` after a first one at `first_ns` means "exit now".
#[inline]
pub const fn is_repeat(first_ns: u64, now_ns: u64) -> bool {
    now_ns.saturating_sub(first_ns) >= REPEAT_NS
}

fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime is async-signal-safe and writes only `ts`, a valid local.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
/// Control sockets to shut down on the first signal (two: a loopback run has
/// a server and a client session in one process). -1 = empty.
static SOCKETS: [AtomicI32; 2] = [AtomicI32::new(-1), AtomicI32::new(-1)];

/// Shut `fd` down when a stop is requested by a signal, so a side blocked in a
/// control-channel read, write or accept wakes up at once instead of waiting
/// for its timeout. Returns a guard that forgets the fd when dropped.
pub fn watch_socket(fd: i32) -> SocketWatch {
    for (i, slot) in SOCKETS.iter().enumerate() {
        if slot
            .compare_exchange(-1, fd, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            if requested() {
                // Raced with a signal: act as the handler would have.
                // SAFETY: shutdown on a socket fd we own; no memory involved.
                unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
            }
            return SocketWatch(Some(i));
        }
    }
    SocketWatch(None)
}

/// Forgets a watched socket when dropped (before the socket is closed).
pub struct SocketWatch(Option<usize>);

impl Drop for SocketWatch {
    fn drop(&mut self) {
        if let Some(i) = self.0 {
            SOCKETS[i].store(-1, Ordering::Release);
        }
    }
}

/// True once a stop was requested. One relaxed load: cheap enough for the hot loop.
#[inline(always)]
pub fn requested() -> bool {
    STOP.load(Ordering::Relaxed)
}

/// The signal that asked us to stop (0 if none).
pub fn signal() -> i32 {
    SIGNAL.load(Ordering::Relaxed)
}

/// Request a stop from code (tests, peer failure).
pub fn request() {
    STOP.store(true, Ordering::Relaxed);
}

/// Forgets a stop (the request, the signal and its time): for a process
/// that runs loops again after an interrupted one, as the tests of each
/// loop's Ctrl-C do one after another (the flag is process-wide).
pub fn clear() {
    STOP.store(false, Ordering::Relaxed);
    SIGNAL.store(0, Ordering::Relaxed);
    FIRST_NS.store(0, Ordering::Relaxed);
}

extern "C" fn on_signal(sig: libc::c_int) {
    // Async-signal-safe: atomics, clock_gettime, shutdown and _exit only.
    let now = monotonic_ns();
    if STOP.swap(true, Ordering::Relaxed) {
        if is_repeat(FIRST_NS.load(Ordering::Relaxed), now) {
            // SAFETY: _exit is async-signal-safe; a repeated signal means "now".
            unsafe { libc::_exit(128 + sig) };
        }
        // A duplicate delivery of the first request: already being handled.
        return;
    }
    FIRST_NS.store(now, Ordering::Relaxed);
    SIGNAL.store(sig, Ordering::Relaxed);
    for slot in &SOCKETS {
        let fd = slot.load(Ordering::Acquire);
        if fd >= 0 {
            // SAFETY: shutdown(2) is async-signal-safe; the fd is a socket
            // registered by watch_socket and unregistered before it is closed.
            unsafe { libc::shutdown(fd, libc::SHUT_RDWR) };
        }
    }
}

/// Install the SIGINT/SIGTERM handlers.
pub fn install() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: a zeroed sigaction is a valid "no flags, empty mask" value;
        // the handler only touches atomics and _exit (async-signal-safe).
        unsafe {
            let mut sa: libc::sigaction = core::mem::zeroed();
            sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
            libc::sigemptyset(&mut sa.sa_mask);
            libc::sigaction(sig, &sa, core::ptr::null_mut());
        }
    }
}

/// Exit status for a run stopped by `sig` (130 for SIGINT, 143 for SIGTERM).
pub fn exit_status() -> Option<i32> {
    match signal() {
        0 => None,
        s => Some(128 + s),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_signal_exits_only_when_it_is_a_new_request() {
        let t0 = 1_000_000_000_000;
        // timeout(1) delivering the same SIGINT to the child and its group.
        assert!(!is_repeat(t0, t0 + 20_000));
        assert!(!is_repeat(t0, t0 + REPEAT_NS - 1));
        // The user pressing Ctrl-C again.
        assert!(is_repeat(t0, t0 + REPEAT_NS));
        assert!(is_repeat(t0, t0 + 3_000_000_000));
        // A stop requested by code (first_ns 0), then a signal: exit.
        assert!(is_repeat(0, t0));
    }
}
