//! Cycle counter and its calibration.
//!
//! [`now`] reads the cheapest monotonic counter the CPU offers, like perftest's
//! `get_cycles()`: `rdtsc` on x86-64 (no fence, no syscall), `isb; mrs cntvct_el0`
//! on aarch64, `CLOCK_MONOTONIC_RAW` nanoseconds elsewhere. Its rate is measured
//! against `CLOCK_MONOTONIC_RAW` by [`Clock::calibrate`] instead of trusting
//! `/proc/cpuinfo` "cpu MHz" (perftest accepts that value when it lies within 2 %
//! of a 0.2 s regression, so its reports carry up to ~2 % systematic error).
//! For the best accuracy take a [`Stamp`] at the start and at the end of a run
//! and use [`Clock::from_stamps`]: the error of the two readings is spread over
//! the whole run instead of a 50 ms calibration window.

use std::fmt;
use std::time::Duration;

/// Reads the cycle counter. Inline, no syscall on x86-64 and aarch64.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
pub fn now() -> u64 {
    // SAFETY: rdtsc has no memory effects and is available on every x86-64 CPU
    // (CR4.TSD is never set for user space by Linux).
    unsafe { core::arch::x86_64::_rdtsc() }
}

/// Reads the cycle counter. Inline, no syscall on x86-64 and aarch64.
#[cfg(target_arch = "aarch64")]
#[inline(always)]
pub fn now() -> u64 {
    let v: u64;
    // SAFETY: reading CNTVCT_EL0 is allowed at EL0 on Linux (the kernel sets
    // CNTKCTL_EL1.EL0VCTEN); `isb` keeps the read from being hoisted, as perftest does.
    unsafe {
        core::arch::asm!("isb", "mrs {v}, cntvct_el0", v = out(reg) v,
            options(nomem, nostack, preserves_flags));
    }
    v
}

/// Reads the cycle counter (here: `CLOCK_MONOTONIC_RAW` in nanoseconds).
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
#[inline(always)]
pub fn now() -> u64 {
    mono_raw_ns()
}

/// `CLOCK_MONOTONIC_RAW` in nanoseconds (vDSO, no real syscall on common arches).
pub fn mono_raw_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC_RAW, &mut ts) };
    if rc != 0 {
        return 0; // cannot happen for this clock id on Linux
    }
    (ts.tv_sec as u64)
        .wrapping_mul(1_000_000_000)
        .wrapping_add(ts.tv_nsec as u64)
}

/// Which counter [`now`] reads on this build.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// x86-64 time stamp counter.
    Tsc,
    /// aarch64 generic timer virtual count.
    CntVct,
    /// `CLOCK_MONOTONIC_RAW` nanoseconds (no usable cycle counter).
    MonotonicRaw,
}

impl Source {
    /// The counter this build's [`now`] reads.
    pub const fn current() -> Source {
        if cfg!(target_arch = "x86_64") {
            Source::Tsc
        } else if cfg!(target_arch = "aarch64") {
            Source::CntVct
        } else {
            Source::MonotonicRaw
        }
    }

    /// Short name used in the info block.
    pub const fn name(self) -> &'static str {
        match self {
            Source::Tsc => "TSC",
            Source::CntVct => "CNTVCT_EL0",
            Source::MonotonicRaw => "CLOCK_MONOTONIC_RAW",
        }
    }
}

/// A counter reading paired with a `CLOCK_MONOTONIC_RAW` reading taken at (nearly)
/// the same instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stamp {
    /// [`now`] value.
    pub cycles: u64,
    /// `CLOCK_MONOTONIC_RAW` nanoseconds.
    pub ns: u64,
}

impl Stamp {
    /// Takes a paired reading: the counter is read between two clock reads and the
    /// tightest of a few brackets is kept (midpoint), so the pairing error is about
    /// one `clock_gettime` call (tens of ns).
    pub fn take() -> Stamp {
        let mut best = Stamp { cycles: 0, ns: 0 };
        let mut best_width = u64::MAX;
        for _ in 0..7 {
            let a = mono_raw_ns();
            let c = now();
            let b = mono_raw_ns();
            let width = b.wrapping_sub(a);
            if width < best_width {
                best_width = width;
                best = Stamp {
                    cycles: c,
                    ns: a + width / 2,
                };
            }
        }
        best
    }
}

/// A calibrated counter: converts [`now`] differences into time.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Clock {
    source: Source,
    hz: f64,
    /// The rate the hardware claims (aarch64 CNTFRQ_EL0), if any.
    nominal_hz: Option<f64>,
    /// Nanoseconds of `CLOCK_MONOTONIC_RAW` the calibration spanned.
    span_ns: u64,
}

/// Default calibration window: 50 ms keeps start-up short while the pairing error
/// (~50 ns per stamp) stays around 2 ppm.
pub const DEFAULT_CALIBRATION: Duration = Duration::from_millis(50);

impl Clock {
    /// Measures the counter rate against `CLOCK_MONOTONIC_RAW` over
    /// [`DEFAULT_CALIBRATION`].
    pub fn calibrate() -> Clock {
        Clock::calibrate_for(DEFAULT_CALIBRATION)
    }

    /// Measures the counter rate over `window` (sleeps, does not spin).
    pub fn calibrate_for(window: Duration) -> Clock {
        let window = window.max(Duration::from_millis(1));
        if Source::current() == Source::MonotonicRaw {
            return Clock::fixed(1e9);
        }
        let a = Stamp::take();
        std::thread::sleep(window);
        let b = Stamp::take();
        Clock::from_stamps(a, b).unwrap_or_else(|| Clock::fallback(b.ns.saturating_sub(a.ns)))
    }

    /// The rate seen between two stamps, e.g. the first and the last of a run.
    /// `None` when the span is under 1 ms or the counter did not advance.
    pub fn from_stamps(start: Stamp, end: Stamp) -> Option<Clock> {
        let hz = hz_between(start, end)?;
        Some(Clock {
            source: Source::current(),
            hz,
            nominal_hz: nominal_hz(),
            span_ns: end.ns - start.ns,
        })
    }

    /// A clock with a known rate (tests, replays, `CLOCK_MONOTONIC_RAW` builds).
    pub fn fixed(hz: f64) -> Clock {
        Clock {
            source: Source::current(),
            hz,
            nominal_hz: None,
            span_ns: 0,
        }
    }

    fn fallback(span_ns: u64) -> Clock {
        // Only reached if the counter stood still: report the nominal rate if the
        // hardware has one, else 1 GHz, rather than dividing by zero later.
        Clock {
            source: Source::current(),
            hz: nominal_hz().unwrap_or(1e9),
            nominal_hz: nominal_hz(),
            span_ns,
        }
    }

    /// Counter ticks per second.
    pub fn hz(&self) -> f64 {
        self.hz
    }

    /// Counter ticks per microsecond (perftest's "cycles_to_units" for latency).
    pub fn mhz(&self) -> f64 {
        self.hz / 1e6
    }

    /// The counter's short name ("TSC", "CNTVCT_EL0", "CLOCK_MONOTONIC_RAW").
    pub fn name(&self) -> &'static str {
        self.source.name()
    }

    /// Which counter this is.
    pub fn source(&self) -> Source {
        self.source
    }

    /// The hardware-advertised rate, if any (aarch64 CNTFRQ_EL0).
    pub fn nominal_hz(&self) -> Option<f64> {
        self.nominal_hz
    }

    /// How long the calibration window was (0 for [`Clock::fixed`]).
    pub fn span(&self) -> Duration {
        Duration::from_nanos(self.span_ns)
    }

    /// Converts a counter difference to seconds.
    pub fn seconds(&self, cycles: u64) -> f64 {
        cycles as f64 / self.hz
    }

    /// Converts a counter difference to nanoseconds.
    pub fn nanos(&self, cycles: u64) -> f64 {
        cycles as f64 * 1e9 / self.hz
    }

    /// Converts a duration into counter ticks (for busy-wait deadlines).
    pub fn cycles_for(&self, d: Duration) -> u64 {
        (d.as_secs_f64() * self.hz) as u64
    }

    /// A warning to print when the counter is unsuitable, e.g. a TSC without
    /// `constant_tsc`/`nonstop_tsc` (its rate follows the core clock).
    pub fn warning(&self) -> Option<String> {
        if self.source != Source::Tsc {
            return None;
        }
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").ok()?;
        let flags = cpuinfo.lines().find(|l| l.starts_with("flags"))?;
        let has = |f: &str| flags.split_whitespace().any(|w| w == f);
        if has("constant_tsc") && has("nonstop_tsc") {
            None
        } else {
            Some(
                "the TSC lacks constant_tsc/nonstop_tsc, so its rate can change with CPU \
                 frequency: pin the CPU frequency (cpupower frequency-set -g performance) \
                 or treat results as approximate"
                    .to_string(),
            )
        }
    }
}

/// "TSC calibrated against CLOCK_MONOTONIC_RAW: 2893.4 MHz" (the info-block line).
impl fmt::Display for Clock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.source {
            Source::MonotonicRaw => write!(f, "CLOCK_MONOTONIC_RAW: 1000.0 MHz (ns)"),
            _ if self.span_ns == 0 => write!(f, "{}: {:.1} MHz (given)", self.name(), self.mhz()),
            _ => {
                write!(
                    f,
                    "{} calibrated against CLOCK_MONOTONIC_RAW: {:.1} MHz",
                    self.name(),
                    self.mhz()
                )?;
                if let Some(n) = self.nominal_hz {
                    write!(f, " (CNTFRQ_EL0 {:.1} MHz)", n / 1e6)?;
                }
                Ok(())
            }
        }
    }
}

/// Counter rate between two stamps; `None` if the span is under 1 ms or the
/// counter did not advance.
pub fn hz_between(start: Stamp, end: Stamp) -> Option<f64> {
    let dns = end.ns.checked_sub(start.ns)?;
    let dc = end.cycles.checked_sub(start.cycles)?;
    if dns < 1_000_000 || dc == 0 {
        return None;
    }
    Some(dc as f64 * 1e9 / dns as f64)
}

#[cfg(target_arch = "aarch64")]
fn nominal_hz() -> Option<f64> {
    let v: u64;
    // SAFETY: CNTFRQ_EL0 is readable at EL0 on Linux; the read has no side effects.
    unsafe {
        core::arch::asm!("mrs {v}, cntfrq_el0", v = out(reg) v,
            options(nomem, nostack, preserves_flags));
    }
    (v != 0).then_some(v as f64)
}

#[cfg(not(target_arch = "aarch64"))]
fn nominal_hz() -> Option<f64> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counter_is_monotonic() {
        let a = now();
        let b = now();
        assert!(b >= a);
    }

    /// Many back-to-back reads never go backwards (on aarch64 the `isb`
    /// keeps each `mrs` in program order; under qemu-user this is what
    /// emulation can show).
    #[test]
    fn counter_never_goes_back_over_many_reads() {
        let mut last = now();
        for _ in 0..100_000 {
            let v = now();
            assert!(v >= last, "counter went back: {last} -> {v}");
            last = v;
        }
    }

    /// aarch64: the build reads CNTVCT_EL0, CNTFRQ_EL0 gives a plausible
    /// rate, and the rate measured against CLOCK_MONOTONIC_RAW agrees with
    /// it (loose: shared machines, emulation).
    #[cfg(target_arch = "aarch64")]
    #[test]
    fn cntvct_frequency_read_and_agrees_with_calibration() {
        assert_eq!(Source::current(), Source::CntVct);
        let nominal = nominal_hz().expect("CNTFRQ_EL0 read 0");
        assert!((1e6..=1e10).contains(&nominal), "CNTFRQ_EL0 {nominal}");
        let c = Clock::calibrate_for(Duration::from_millis(50));
        assert_eq!(c.nominal_hz(), Some(nominal));
        let off = (c.hz() - nominal).abs() / nominal;
        assert!(
            off < 0.1,
            "calibrated {} Hz vs CNTFRQ_EL0 {nominal} Hz",
            c.hz()
        );
        assert!(c.to_string().starts_with("CNTVCT_EL0 calibrated"));
        assert!(c.to_string().contains("(CNTFRQ_EL0 "));
    }

    #[test]
    fn hz_between_math() {
        let a = Stamp {
            cycles: 1_000,
            ns: 5_000_000,
        };
        let b = Stamp {
            cycles: 1_000 + 30_000_000,
            ns: 15_000_000,
        };
        assert_eq!(hz_between(a, b), Some(3e9));
        // Too short, and backwards.
        let c = Stamp {
            cycles: 9,
            ns: 5_500_000,
        };
        assert_eq!(hz_between(a, c), None);
        assert_eq!(hz_between(b, a), None);
    }

    #[test]
    fn calibrate_agrees_with_monotonic_raw() {
        let clock = Clock::calibrate_for(Duration::from_millis(20));
        assert!(clock.hz() > 1e6, "implausible rate {}", clock.hz());
        // Convert a second measured interval with the calibrated rate and compare
        // with CLOCK_MONOTONIC_RAW; loose bound (shared CI machines, VMs).
        let a = Stamp::take();
        std::thread::sleep(Duration::from_millis(20));
        let b = Stamp::take();
        let ns = clock.nanos(b.cycles - a.cycles);
        let real = (b.ns - a.ns) as f64;
        assert!((ns - real).abs() / real < 0.05, "{ns} vs {real}");
    }

    #[test]
    fn display_line() {
        let c = Clock {
            source: Source::Tsc,
            hz: 2_893_412_345.0,
            nominal_hz: None,
            span_ns: 50_000_000,
        };
        assert_eq!(
            c.to_string(),
            "TSC calibrated against CLOCK_MONOTONIC_RAW: 2893.4 MHz"
        );
        assert_eq!(c.seconds(2_893_412_345), 1.0);
        if Source::current() == Source::Tsc {
            assert_eq!(Clock::fixed(2.5e9).to_string(), "TSC: 2500.0 MHz (given)");
        }
    }
}
