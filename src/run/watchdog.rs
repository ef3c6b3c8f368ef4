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

/// Empty polls between two clock readings while a loop waits. Reading the
/// clock on every empty poll costs nothing on hardware, but under QEMU TCG
/// (the soft-RoCE test VM) every `rdtsc` takes a lock shared by all vCPUs,
/// so a waiting loop that reads it in its spin slows the peer and the
/// kernel's soft-RoCE work on the other vCPU (send-bw: ~8% of the message
/// rate, the same with an rdmaperf process on either side). perftest's
/// loops read no clock while they wait; these read it once per this many
/// empty polls (~10 µs on hardware, well under 1 ms under TCG), which is
/// all the watchdog (seconds) and the duration deadlines need.
pub const SPINS_PER_CLOCK: u64 = 256;

/// A waiting loop's idle stretch: counts empty polls since the last
/// progress and reads the clock every [`SPINS_PER_CLOCK`]-th one. The idle
/// time is measured from the first reading of the stretch, so it is short
/// by at most `SPINS_PER_CLOCK` polls.
#[derive(Clone, Copy, Debug, Default)]
pub struct Idle {
    spins: u64,
    since: u64,
}

impl Idle {
    /// Something completed (or was posted): the idle stretch ends.
    #[inline(always)]
    pub fn progress(&mut self) {
        self.spins = 0;
    }

    /// A poll found nothing. Every [`SPINS_PER_CLOCK`]-th call reads the
    /// clock and returns it with the ticks idle since the stretch's first
    /// reading; the others return `None` without touching the clock.
    #[inline(always)]
    pub fn empty<F: Fn() -> u64>(&mut self, now: &F) -> Option<(u64, u64)> {
        self.spins += 1;
        if self.spins % SPINS_PER_CLOCK != 0 {
            return None;
        }
        let t = now();
        if self.spins == SPINS_PER_CLOCK {
            self.since = t;
        }
        Some((t, t.wrapping_sub(self.since)))
    }

    /// When progress was last seen, as well as the clock readings know it
    /// (the stretch's first reading, or now when the stretch is short).
    #[inline]
    pub fn last_progress<F: Fn() -> u64>(&self, now: &F) -> u64 {
        if self.spins >= SPINS_PER_CLOCK {
            self.since
        } else {
            now()
        }
    }
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

    #[test]
    fn idle_reads_the_clock_once_per_stretch_of_spins() {
        let reads = std::cell::Cell::new(0u64);
        let now = || {
            reads.set(reads.get() + 1);
            1000 + 10 * reads.get()
        };
        let mut idle = Idle::default();
        let mut seen = Vec::new();
        for _ in 0..3 * SPINS_PER_CLOCK {
            if let Some(r) = idle.empty(&now) {
                seen.push(r);
            }
        }
        // Three readings; the idle time counts from the first.
        assert_eq!(reads.get(), 3);
        assert_eq!(seen, [(1010, 0), (1020, 10), (1030, 20)]);
        assert_eq!(idle.last_progress(&now), 1010);
        idle.progress();
        assert_eq!(idle.empty(&now), None);
        assert_eq!(reads.get(), 3, "no reading right after progress");
    }
}
