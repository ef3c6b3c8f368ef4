//! Ctrl-C / SIGTERM: the first signal asks the loops to stop (they poll a flag,
//! no syscall), the second exits at once.

use core::sync::atomic::{AtomicBool, AtomicI32, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);
static SIGNAL: AtomicI32 = AtomicI32::new(0);

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

extern "C" fn on_signal(sig: libc::c_int) {
    // Async-signal-safe: atomics and _exit only.
    if STOP.swap(true, Ordering::Relaxed) {
        // SAFETY: _exit is async-signal-safe; a second signal means "now".
        unsafe { libc::_exit(128 + sig) };
    }
    SIGNAL.store(sig, Ordering::Relaxed);
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
