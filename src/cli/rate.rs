//! perftest's rate limiter flags (`--rate_limit`, `--rate_units`,
//! `--rate_limit_type`, `--burst_size`, `--typical_pkt_size`) and perftest
//! master's rules for them (its `parser` and `force_dependecies`), each
//! refusal naming the fix.
//!
//! Differences on purpose: `--rate_limit_type` or `--rate_units` without
//! `--rate_limit` is refused (perftest runs unlimited, or divides by a zero
//! rate); `-b` and `--threads` with the software limiter are not implemented
//! yet and refused.

use super::args::PerfArgs;
use super::kinds::{Tool, Verb};

/// `--rate_units`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RateUnits {
    /// `M`: MiB per second (perftest's MEGA_BYTE_PS, 2^20 bytes).
    MiBps,
    /// `g`: gigabits per second (10^9 bits), perftest's default.
    Gbps,
    /// `p`: messages per second.
    Pps,
}

impl RateUnits {
    pub fn name(self) -> &'static str {
        match self {
            RateUnits::MiBps => "MiB/s",
            RateUnits::Gbps => "Gb/s",
            RateUnits::Pps => "msg/s",
        }
    }
}

/// Which limiter enforces the rate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RateKind {
    /// Software: the bw loop posts `burst` messages, then waits for the next
    /// burst's deadline (perftest `run_iter_bw`).
    Sw,
    /// Hardware: the address vector's static rate at RTR (perftest `ctx_connect`).
    Hw,
}

/// A validated rate limit.
#[derive(Clone, Debug, PartialEq)]
pub struct RateLimit {
    pub value: f64,
    pub units: RateUnits,
    pub kind: RateKind,
    /// `--rate_limit_type` was given: a QP that refuses the HW limit fails
    /// the run (without it perftest falls back to the SW limiter).
    pub kind_given: bool,
    /// Messages per burst (perftest's default: the TX depth).
    pub burst: u32,
    /// HW: the `ibv_rate` value of `--rate_limit` (perftest looks the text up
    /// among the InfiniBand rates, whatever the units).
    pub hw_rate: u8,
    /// Why the SW limiter cannot run this test (the HW fallback checks it).
    pub sw_refusal: Option<&'static str>,
}

/// perftest's table of rates a static rate can take, text → `ibv_rate`.
pub const HW_RATES: &[(&str, u8)] = &[
    ("2.5", 2),
    ("5", 5),
    ("10", 3),
    ("14", 11),
    ("20", 6),
    ("25", 15),
    ("28", 19),
    ("30", 4),
    ("40", 7),
    ("50", 20),
    ("56", 12),
    ("60", 8),
    ("80", 9),
    ("100", 16),
    ("112", 13),
    ("120", 10),
    ("168", 14),
    ("200", 17),
    ("300", 18),
    ("400", 21),
    ("600", 22),
];

impl RateLimit {
    /// Messages per second at message size `size` (perftest's conversion).
    pub fn pps(&self, size: u64) -> f64 {
        let size = size.max(1) as f64;
        match self.units {
            RateUnits::MiBps => self.value / size * 1_048_576.0,
            RateUnits::Gbps => self.value / (size * 8.0) * 1e9,
            RateUnits::Pps => self.value,
        }
    }

    /// Seconds between the starts of two bursts at message size `size`.
    pub fn burst_gap_secs(&self, size: u64) -> f64 {
        self.burst as f64 / self.pps(size)
    }

    /// The software limiter in place of a HW limit the QP refused (perftest's
    /// fallback when `--rate_limit_type` was not given).
    pub fn as_sw(&self) -> Result<RateLimit, String> {
        if let Some(why) = self.sw_refusal {
            return Err(format!(
                "--rate_limit: the device refuses the HW rate limit and {why}"
            ));
        }
        Ok(RateLimit {
            kind: RateKind::Sw,
            ..self.clone()
        })
    }

    /// The banner line ("Rate limit : 2 Gb/s, SW, burst 16").
    pub fn describe(&self) -> String {
        let k = match self.kind {
            RateKind::Sw => "SW",
            RateKind::Hw => "HW",
        };
        format!(
            "{} {}, {k}, burst {}",
            self.value,
            self.units.name(),
            self.burst
        )
    }
}

/// The rate limit of a run (None: unlimited), with perftest's rules.
/// `threads` and `tx_depth` are the resolved values.
pub fn rate_of(
    a: &PerfArgs,
    tool: Tool,
    tx_depth: u32,
    threads: u32,
    notices: &mut Vec<String>,
) -> Result<Option<RateLimit>, String> {
    let value = value_of(a)?;
    let units = units_of(a)?;
    let kind = kind_of(a)?;
    let Some(value) = value else {
        return unlimited(a).map(|()| None);
    };
    let kind_given = kind.is_some();
    let Some(kind) = kind.unwrap_or(Some(RateKind::Hw)) else {
        return Err(
            "--rate_limit_type=PP: perftest master allows packet pacing on raw Ethernet QPs only \
             (its raw_ethernet_* tools, and rdmaperf's raw-eth-bw); use --rate_limit_type=SW \
             here"
                .into(),
        );
    };
    paced_test(a, tool)?;
    let sw_refusal = sw_refusal(a, tool, threads);
    let burst = match a.burst_size {
        Some(b) if b > 0 => b,
        _ => {
            if kind == RateKind::Sw {
                notices.push(format!("Setting burst size to tx depth = {tx_depth}"));
            }
            tx_depth
        }
    };
    let hw_rate = match kind {
        RateKind::Sw => match sw_refusal {
            Some(why) => return Err(format!("--rate_limit_type=SW: {why}")),
            None => 0,
        },
        RateKind::Hw => hw_rate(a, units, kind_given)?,
    };
    Ok(Some(RateLimit {
        value,
        units,
        kind,
        kind_given,
        burst,
        hw_rate,
        sw_refusal,
    }))
}

/// `--rate_limit`'s number.
fn value_of(a: &PerfArgs) -> Result<Option<f64>, String> {
    match a.rate_limit.as_deref() {
        None => Ok(None),
        Some(t) => match t.trim().parse::<f64>() {
            Ok(v) if v > 0.0 && v.is_finite() => Ok(Some(v)),
            _ => Err(format!(
                "--rate_limit={t}: the rate must be a number above 0, in --rate_units \
                 (default g: Gb/s), e.g. --rate_limit=2.5"
            )),
        },
    }
}

/// `--rate_units` (default g).
fn units_of(a: &PerfArgs) -> Result<RateUnits, String> {
    match a.rate_units.as_deref() {
        None | Some("g") => Ok(RateUnits::Gbps),
        Some("M") => Ok(RateUnits::MiBps),
        Some("p") => Ok(RateUnits::Pps),
        Some(o) => Err(format!(
            "--rate_units={o}: use M (MiB/s), g (Gb/s) or p (messages/s)"
        )),
    }
}

/// `--rate_limit_type`: None when not given, Some(None) for PP.
fn kind_of(a: &PerfArgs) -> Result<Option<Option<RateKind>>, String> {
    match a.rate_limit_type.as_deref() {
        None => Ok(None),
        Some("SW") => Ok(Some(Some(RateKind::Sw))),
        Some("HW") => Ok(Some(Some(RateKind::Hw))),
        Some("PP") => Ok(Some(None)),
        Some(o) => Err(format!(
            "--rate_limit_type={o}: use SW, HW or PP (perftest's spellings, upper case)"
        )),
    }
}

/// Without `--rate_limit`, the flags that only shape a limit are refused.
fn unlimited(a: &PerfArgs) -> Result<(), String> {
    if a.burst_size.is_some_and(|b| b > 0) {
        return Err(
            "--burst_size: can't enable burst mode when the rate limiter is off \
                    (perftest's rule); add --rate_limit=<rate>"
                .into(),
        );
    }
    if let Some(t) = a.rate_limit_type.as_deref() {
        return Err(format!(
            "--rate_limit_type={t} needs a rate: add --rate_limit=<rate> (in --rate_units, \
             default Gb/s)"
        ));
    }
    if a.rate_units.is_some() {
        return Err(
            "--rate_units sets the units of --rate_limit; add --rate_limit=<rate> or drop it"
                .into(),
        );
    }
    Ok(())
}

/// The tests the limiter paces: bw tests, not `--run_infinitely`.
fn paced_test(a: &PerfArgs, tool: Tool) -> Result<(), String> {
    if !tool.is_bw() {
        return Err(format!(
            "--rate_limit: the rate limiter paces the bw tests (perftest lists it for them \
             only); use {} instead of {}",
            tool.name().replace("-lat", "-bw"),
            tool.name()
        ));
    }
    if a.run_infinitely {
        return Err(
            "--rate_limit with --run_infinitely: run_infinitely does not support the rate \
             limiter (perftest's rule); use -D <seconds>"
                .into(),
        );
    }
    Ok(())
}

/// Why the SW limiter cannot pace this test, if it cannot.
fn sw_refusal(a: &PerfArgs, tool: Tool, threads: u32) -> Option<&'static str> {
    if tool.verb == Verb::Atomic {
        Some(
            "the SW rate limiter can't pace atomic tests (perftest's rule); drop --rate_limit \
             or use write-bw/read-bw",
        )
    } else if tool.verb == Verb::Send && a.bidirectional {
        Some(
            "the SW rate limiter can't pace bidirectional SEND tests (perftest's rule); drop -b \
             or --rate_limit",
        )
    } else if a.bidirectional {
        Some(
            "the SW rate limiter with -b is not implemented yet in rdmaperf; drop -b (the \
             unidirectional test is paced)",
        )
    } else if threads > 1 {
        Some(
            "the SW rate limiter with --threads is not implemented yet in rdmaperf; drop \
             --threads",
        )
    } else {
        None
    }
}

/// The HW limit's `ibv_rate`, where a static rate can hold it.
fn hw_rate(a: &PerfArgs, units: RateUnits, kind_given: bool) -> Result<u8, String> {
    if a.rdma_cm {
        return Err(
            "--rate_limit with -R: the HW rate limit isn't supported with rdma_cm \
             (perftest's rule); drop -R, or add --rate_limit_type=SW"
                .into(),
        );
    }
    if kind_given
        && a.connection
            .as_deref()
            .is_some_and(|c| c.eq_ignore_ascii_case("UD"))
    {
        return Err(
            "--rate_limit_type=HW with -c UD: a UD QP has no address vector to hold a \
             static rate (perftest's read-back check fails there too); use \
             --rate_limit_type=SW"
                .into(),
        );
    }
    if units == RateUnits::Pps {
        return Err(
            "--rate_units=p: messages/s can't be a HW rate limit (perftest's rule); use \
             --rate_units=g, or --rate_limit_type=SW"
                .into(),
        );
    }
    let text = a.rate_limit.as_deref().unwrap_or("").trim();
    match HW_RATES.iter().find(|r| r.0 == text) {
        Some(r) => Ok(r.1),
        None => {
            let list: Vec<&str> = HW_RATES.iter().map(|r| r.0).collect();
            Err(format!(
                "--rate_limit={text}: a HW rate limit is one of the InfiniBand rates \
                 (Gb/s, spelled as perftest lists them): {}; or add \
                 --rate_limit_type=SW for any rate",
                list.join(", ")
            ))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::kinds::Kind;

    const WB: Tool = Tool {
        verb: Verb::Write,
        kind: Kind::Bw,
    };

    fn rate(f: impl FnOnce(&mut PerfArgs)) -> Result<Option<RateLimit>, String> {
        let mut a = PerfArgs::default();
        f(&mut a);
        rate_of(&a, WB, 128, 1, &mut Vec::new())
    }

    #[test]
    fn defaults_and_units() {
        assert_eq!(rate(|_| {}), Ok(None));
        let r = rate(|a| {
            a.rate_limit = Some("2".into());
            a.rate_limit_type = Some("SW".into());
        })
        .unwrap()
        .unwrap();
        assert_eq!(
            (r.units, r.kind, r.burst),
            (RateUnits::Gbps, RateKind::Sw, 128)
        );
        // 2 Gb/s of 64 KiB messages: 2e9 / (65536 * 8) messages per second.
        assert!((r.pps(65536) - 2e9 / 524288.0).abs() < 1e-6);
        let r = rate(|a| {
            a.rate_limit = Some("100".into());
            a.rate_units = Some("M".into());
            a.rate_limit_type = Some("SW".into());
            a.burst_size = Some(4);
        })
        .unwrap()
        .unwrap();
        assert!((r.pps(1024) - 102400.0).abs() < 1e-9);
        assert!((r.burst_gap_secs(1024) - 4.0 / 102400.0).abs() < 1e-12);
        let r = rate(|a| {
            a.rate_limit = Some("1000".into());
            a.rate_units = Some("p".into());
            a.rate_limit_type = Some("SW".into());
        })
        .unwrap()
        .unwrap();
        assert_eq!(r.pps(7), 1000.0);
    }

    #[test]
    fn hw_is_the_default_and_falls_back() {
        let r = rate(|a| a.rate_limit = Some("10".into())).unwrap().unwrap();
        assert_eq!((r.kind, r.kind_given, r.hw_rate), (RateKind::Hw, false, 3));
        assert_eq!(r.as_sw().unwrap().kind, RateKind::Sw);
        let e = rate(|a| a.rate_limit = Some("7".into())).unwrap_err();
        assert!(
            e.contains("one of the InfiniBand rates") && e.contains("2.5, 5, 10"),
            "{e}"
        );
        let e = rate(|a| {
            a.rate_limit = Some("10".into());
            a.rate_units = Some("p".into());
        })
        .unwrap_err();
        assert!(e.contains("--rate_units=g"), "{e}");
        let e = rate(|a| {
            a.rate_limit = Some("10".into());
            a.rdma_cm = true;
        })
        .unwrap_err();
        assert!(e.contains("rdma_cm"), "{e}");
        // Atomic: HW is allowed, its SW fallback is not.
        let mut a = PerfArgs {
            rate_limit: Some("10".into()),
            ..Default::default()
        };
        let at = Tool {
            verb: Verb::Atomic,
            kind: Kind::Bw,
        };
        let r = rate_of(&a, at, 128, 1, &mut Vec::new()).unwrap().unwrap();
        assert!(r.as_sw().unwrap_err().contains("atomic"));
        a.rate_limit_type = Some("SW".into());
        let e = rate_of(&a, at, 128, 1, &mut Vec::new()).unwrap_err();
        assert!(e.contains("can't pace atomic"), "{e}");
    }

    #[test]
    fn refusals_name_the_fix() {
        type Case = (fn(&mut PerfArgs), &'static str);
        let cases: &[Case] = &[
            (|a| a.rate_limit = Some("0".into()), "above 0"),
            (|a| a.rate_limit = Some("x".into()), "above 0"),
            (
                |a| {
                    a.rate_limit = Some("1".into());
                    a.rate_units = Some("G".into());
                },
                "use M (MiB/s), g (Gb/s) or p",
            ),
            (
                |a| {
                    a.rate_limit = Some("1".into());
                    a.rate_limit_type = Some("sw".into());
                },
                "use SW, HW or PP",
            ),
            (
                |a| {
                    a.rate_limit = Some("1".into());
                    a.rate_limit_type = Some("PP".into());
                },
                "raw Ethernet QPs only",
            ),
            (|a| a.burst_size = Some(8), "add --rate_limit"),
            (|a| a.rate_limit_type = Some("SW".into()), "needs a rate"),
            (|a| a.rate_units = Some("M".into()), "drop it"),
            (
                |a| {
                    a.rate_limit = Some("1".into());
                    a.rate_limit_type = Some("SW".into());
                    a.bidirectional = true;
                },
                "drop -b",
            ),
            (
                |a| {
                    a.rate_limit = Some("1".into());
                    a.run_infinitely = true;
                },
                "use -D",
            ),
        ];
        for (f, want) in cases {
            let e = rate(f).unwrap_err();
            assert!(e.contains(want), "{e} (wanted '{want}')");
        }
        let lat = Tool {
            verb: Verb::Write,
            kind: Kind::Lat,
        };
        let a = PerfArgs {
            rate_limit: Some("1".into()),
            ..Default::default()
        };
        let e = rate_of(&a, lat, 1, 1, &mut Vec::new()).unwrap_err();
        assert!(e.contains("use write-bw instead of write-lat"), "{e}");
        let mut notices = Vec::new();
        let a = PerfArgs {
            rate_limit: Some("1".into()),
            rate_limit_type: Some("SW".into()),
            ..Default::default()
        };
        rate_of(&a, WB, 64, 1, &mut notices).unwrap();
        assert_eq!(notices, ["Setting burst size to tx depth = 64"]);
        let e = rate_of(&a, WB, 64, 2, &mut notices).unwrap_err();
        assert!(e.contains("--threads"), "{e}");
    }
}
