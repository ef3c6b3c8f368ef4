//! raw-eth-bw's rate limit (and the latency tools' packet pacing,
//! [`lat_limit`]): perftest master's rate flags (`--rate_limit`,
//! `--rate_units`, `--rate_limit_type`, `--burst_size`, `--typical_pkt_size`)
//! read with its rules as they fall on a raw packet QP (`force_dependecies`,
//! `ctx_connect`):
//! - no `--rate_limit_type`: perftest asks for the HW limit, the QP on an
//!   Ethernet port cannot hold a static rate, and perftest falls back to the
//!   SW limiter with a notice; rdmaperf takes the SW limiter at once and
//!   prints the same notice;
//! - `HW` given: perftest fails at connect ("The QP failed to accept HW rate
//!   limit"); rdmaperf refuses it before opening anything;
//! - `SW`: `burst` frames per burst (default: the TX depth), the bursts
//!   spaced so the average is the rate (`run::pace::SwPace`);
//! - `PP` (packet pacing, the NIC spaces the frames): MiB/s only, turned into
//!   the QP's rate limit in kbit/s as perftest does (`value * 8 * 1024`);
//!   `--typical_pkt_size` (PP only) and `--burst_size` go to the NIC too
//!   (`ibv_modify_qp_rate_limit`; perftest parses them and drops them).

use super::args::RawArgs;
use super::ctx::{Raw, Side};
use super::tools::RawTool;
use crate::cli::rate::{RateKind, RateLimit, RateUnits};

/// How a raw-eth-bw sender is limited.
#[derive(Clone, Debug, PartialEq)]
pub enum RawRate {
    /// The software limiter in the send loop.
    Sw(RateLimit),
    /// Packet pacing on the QP.
    Pp(PacketPacing),
}

/// `ibv_qp_rate_limit_attr`'s values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PacketPacing {
    /// The rate, kbit/s (perftest: MiB/s × 8 × 1024).
    pub kbps: u32,
    /// `--burst_size`, bytes the NIC may send back to back (0: its default).
    pub max_burst: u32,
    /// `--typical_pkt_size`, bytes (0: not given).
    pub typical_pkt: u16,
}

/// perftest's notice when the QP refuses the HW limit it tried first.
pub const SW_FALLBACK: &str = "The QP failed to accept HW rate limit, providing SW rate limit";

/// A rate limit as read (None: unlimited), or the refusal naming the fix.
pub type RateResult = Result<Option<RawRate>, String>;

/// The rate limit of a raw-eth-bw run, with perftest's rules and its
/// notices added to `notes`; the latency tools' packet pacing
/// ([`lat_limit`]); None for raw-eth-fs-rate. A raw-eth-bw server sends
/// nothing: it only notes it.
pub fn rate_of(a: &RawArgs, raw: &Raw, notes: &mut Vec<String>) -> RateResult {
    match raw.tool {
        RawTool::Bw => {}
        RawTool::Lat | RawTool::BurstLat => return lat_limit(a, raw.tool),
        RawTool::FsRate => return Ok(None),
    }
    let depth = raw.tx_depth.min(u32::MAX as u64) as u32;
    let rate = limit(a, depth, raw.duplex, notes)?;
    if rate.is_some() && raw.side == Some(Side::Server) && !raw.duplex {
        notes.push("the rate limit paces the sender: this server sends nothing".into());
    }
    Ok(rate)
}

/// [`rate_of`]'s rules for a sender with TX depth `tx_depth`.
fn limit(a: &RawArgs, tx_depth: u32, duplex: bool, notes: &mut Vec<String>) -> RateResult {
    let burst = burst_size(a)?;
    let typical = typical_size(a)?;
    let Some(value) = value(a)? else {
        return unlimited(a, burst).map(|()| None);
    };
    let units = units(a)?;
    match a.value("rate_limit_type") {
        None | Some("SW") if duplex => Err(
            "--rate_limit with -b: SW Rate limiter can't be executed on bidirectional SEND \
             tests (perftest's rule); drop -b, or use --rate_limit_type=PP"
                .into(),
        ),
        None | Some("SW") if typical.is_some() => Err(
            "--typical_pkt_size: Typical packet size only supports PP rate limiter \
             (perftest's rule); add --rate_limit_type=PP or drop it"
                .into(),
        ),
        None => {
            notes.push(SW_FALLBACK.into());
            Ok(Some(sw(value, units, burst, tx_depth, notes)))
        }
        Some("SW") => Ok(Some(sw(value, units, burst, tx_depth, notes))),
        Some("HW") => Err(
            "--rate_limit_type=HW: a raw packet QP on an Ethernet port cannot hold a static \
             rate (perftest fails at connect: \"The QP failed to accept HW rate limit\"); use \
             --rate_limit_type=PP (the NIC paces) or SW"
                .into(),
        ),
        Some("PP") => pp(value, units, burst, typical).map(Some),
        Some(o) => Err(format!(
            "--rate_limit_type={o}: use SW, HW or PP (perftest's spellings, upper case)"
        )),
    }
}

/// raw-eth-lat's and raw-eth-burst-lat's rate: packet pacing only (the
/// QP's attribute, perftest master allows it there); its SW limiter is
/// refused on a latency test, and HW (the type by default) is a static
/// rate a raw packet QP cannot hold. raw-eth-burst-lat's `--burst_size` is
/// its burst's frame count, not the NIC's (its bursts may go unlimited).
fn lat_limit(a: &RawArgs, tool: RawTool) -> RateResult {
    let burst = match tool {
        RawTool::BurstLat => None,
        _ => burst_size(a)?,
    };
    let typical = typical_size(a)?;
    if a.value("rate_limit_type") == Some("SW") {
        return Err(
            "--rate_limit_type=SW: SW Rate limiter cann't be executed on non-BW, ATOMIC or \
             bidirectional SEND tests (perftest's rule): use --rate_limit_type=PP (the NIC \
             paces the QP), or drop the rate flags"
                .into(),
        );
    }
    let Some(value) = value(a)? else {
        return unlimited(a, burst).map(|()| None);
    };
    match a.value("rate_limit_type") {
        Some("PP") => pp(value, units(a)?, burst, typical).map(Some),
        None | Some("HW") => Err(
            "--rate_limit: on a latency tool only packet pacing limits a raw packet QP (the \
             default type, HW, is a static rate it cannot hold, and perftest's SW fallback \
             does not run on latency tests): add --rate_limit_type=PP --rate_units=M"
                .into(),
        ),
        Some(o) => Err(format!(
            "--rate_limit_type={o}: use PP on a latency tool (perftest's spellings, upper case)"
        )),
    }
}

fn sw(
    value: f64,
    units: RateUnits,
    burst: Option<u32>,
    tx_depth: u32,
    notes: &mut Vec<String>,
) -> RawRate {
    let burst = burst.unwrap_or_else(|| {
        notes.push(format!("Setting burst size to tx depth = {tx_depth}"));
        tx_depth
    });
    RawRate::Sw(RateLimit {
        value,
        units,
        kind: RateKind::Sw,
        kind_given: true,
        burst,
        hw_rate: 0,
        sw_refusal: None,
    })
}

fn pp(
    value: f64,
    units: RateUnits,
    burst: Option<u32>,
    typical: Option<u16>,
) -> Result<RawRate, String> {
    if units != RateUnits::MiBps {
        return Err(
            "--rate_limit_type=PP: Packet Pacing only supports MEGA_BYTE_PS (perftest's \
             rule); add --rate_units=M and give the rate in MiB/s"
                .into(),
        );
    }
    let kbps = value * 8.0 * 1024.0;
    if kbps < 1.0 || kbps > u32::MAX as f64 {
        return Err(format!(
            "--rate_limit={value}: packet pacing takes 1 kbit/s to {} MiB/s; give a rate in \
             that range",
            u32::MAX / 8192
        ));
    }
    Ok(RawRate::Pp(PacketPacing {
        kbps: kbps as u32,
        max_burst: burst.unwrap_or(0),
        typical_pkt: typical.unwrap_or(0),
    }))
}

/// `--rate_limit`'s number, above 0.
fn value(a: &RawArgs) -> Result<Option<f64>, String> {
    let Some(t) = a.value("rate_limit") else {
        return Ok(None);
    };
    match t.trim().parse::<f64>() {
        Ok(v) if v > 0.0 && v.is_finite() => Ok(Some(v)),
        _ => Err(format!(
            "--rate_limit={t}: Rate limit must be non-negative (perftest's rule): give a \
             number above 0 in --rate_units (g: Gb/s by default)"
        )),
    }
}

/// `--rate_units` (perftest's default: Gb/s).
fn units(a: &RawArgs) -> Result<RateUnits, String> {
    match a.value("rate_units") {
        None | Some("g") => Ok(RateUnits::Gbps),
        Some("M") => Ok(RateUnits::MiBps),
        Some("p") => Ok(RateUnits::Pps),
        Some(o) => Err(format!(
            "--rate_units={o}: use M (MiB/s), g (Gb/s) or p (frames/s)"
        )),
    }
}

/// `--burst_size` when given above 0.
fn burst_size(a: &RawArgs) -> Result<Option<u32>, String> {
    let Some(t) = a.value("burst_size") else {
        return Ok(None);
    };
    match t.trim().parse::<u32>() {
        Ok(0) => Ok(None),
        Ok(b) if b <= i32::MAX as u32 => Ok(Some(b)),
        _ => Err(format!(
            "--burst_size={t}: Burst size must be non-negative (perftest's rule): give a \
             whole number of frames"
        )),
    }
}

/// `--typical_pkt_size` when given above 0 (perftest: 0..=0xFFFF).
fn typical_size(a: &RawArgs) -> Result<Option<u16>, String> {
    let Some(t) = a.value("typical_pkt_size") else {
        return Ok(None);
    };
    match t.trim().parse::<u16>() {
        Ok(0) => Ok(None),
        Ok(v) => Ok(Some(v)),
        Err(_) => Err(format!(
            "--typical_pkt_size={t}: Typical pkt size must be between 0 and 65535 \
             (perftest's rule)"
        )),
    }
}

/// Without `--rate_limit`: a burst needs a limiter, and the type and units
/// shape nothing (perftest would run unlimited; rdmaperf says so instead).
fn unlimited(a: &RawArgs, burst: Option<u32>) -> Result<(), String> {
    if burst.is_some() {
        return Err(
            "--burst_size: Can't enable burst mode when rate limiter is off (perftest's \
             rule); add --rate_limit=<rate>"
                .into(),
        );
    }
    for flag in ["rate_limit_type", "rate_units", "typical_pkt_size"] {
        if a.has(flag) {
            return Err(format!(
                "--{flag} shapes a rate limit, and none was given: add --rate_limit=<rate> \
                 or drop --{flag}"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "rate_tests.rs"]
mod tests;
