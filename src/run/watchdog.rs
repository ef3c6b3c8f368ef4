//! When a run loop that waits for completions gives up. Two reasons only:
//! the peer exited (its control connection closed, see [`super::peer`]),
//! or nothing completed for longer than `--cq-timeout` *plus* the time the
//! work in flight needs at a floor rate. The second part matters for big
//! messages: with `-s 8M -Q 100` one completion covers 800 MiB, which a
//! slow (emulated) link takes a minute to move; a fixed 10 s would call a
//! working link stuck.
//!
//! The tool sets the clock-dependent constants once ([`configure`]); until
//! then (unit tests, models) the allowance is `stall_ticks` alone.

use super::peer;
use core::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The floor rate for work in flight: 256 KiB/s, ~15x below the slowest
/// link this runs on (soft-RoCE under QEMU TCG moved 4 MiB WRITEs at
/// 3.8-4.7 MiB/s). A vanished peer is caught by [`super::peer`] instead, so
/// a generous allowance costs nothing when the peer dies.
pub const FLOOR_BYTES_PER_S: u64 = 256 << 10;

static TICKS_PER_BYTE: AtomicU64 = AtomicU64::new(0);
static GRACE_TICKS: AtomicU64 = AtomicU64::new(0);

/// Set the floor rate and the peer-exit grace in clock ticks.
pub fn configure(clock: &crate::clock::Clock) {
    let per_s = clock.cycles_for(Duration::from_secs(1));
    TICKS_PER_BYTE.store(per_s.div_ceil(FLOOR_BYTES_PER_S), Ordering::Relaxed);
    GRACE_TICKS.store(clock.cycles_for(peer::GRACE), Ordering::Relaxed);
}

/// Why a waiting loop should stop now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expiry {
    No,
    /// The peer's control connection closed and nothing completed since.
    PeerExited,
    /// The peer sent its next control message (its run is over) and nothing
    /// arrived since: the two sides expected different amounts of work.
    PeerFinished,
    /// Longer than the allowance without a completion.
    Stalled,
}

/// The verdict after `idle` ticks without progress, with `in_flight_bytes`
/// posted and not yet completed (or expected and not yet received). Cheap
/// (four relaxed loads): called only when a poll found nothing.
#[inline(always)]
pub fn check(idle: u64, stall_ticks: u64, in_flight_bytes: u64) -> Expiry {
    if idle > GRACE_TICKS.load(Ordering::Relaxed) {
        if peer::gone() {
            return Expiry::PeerExited;
        }
        if peer::finished() {
            return Expiry::PeerFinished;
        }
    }
    let floor = in_flight_bytes.saturating_mul(TICKS_PER_BYTE.load(Ordering::Relaxed));
    if idle > stall_ticks.saturating_add(floor) {
        Expiry::Stalled
    } else {
        Expiry::No
    }
}

/// The allowance for `in_flight_bytes` in seconds (for messages).
pub fn allowance_s(cq_timeout_s: u64, in_flight_bytes: u64) -> u64 {
    cq_timeout_s + in_flight_bytes.div_ceil(FLOOR_BYTES_PER_S)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unconfigured_it_is_the_plain_timeout() {
        // Not configured in unit tests: bytes in flight add nothing.
        assert_eq!(check(10, 10, 1 << 30), Expiry::No);
        assert_eq!(check(11, 10, 1 << 30), Expiry::Stalled);
        assert_eq!(allowance_s(10, 800 << 20), 3210);
    }
}
