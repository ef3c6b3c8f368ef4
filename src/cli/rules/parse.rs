//! The flags whose text becomes a value (perftest's `parser`): each parser
//! answers the value or the refusal with the spellings that work.

use crate::cli::args::PerfArgs;
use crate::cli::kinds::{AtomicType, Conn, Verb};
use crate::cli::values::OutputKind;

/// The connection types `verb`'s tools take here, as a refusal suggests
/// them (perftest's rules: UC has no READ or atomics, UD only SENDs).
fn conns_for(verb: Verb) -> &'static str {
    match verb {
        Verb::Send => "-c RC, UC or UD",
        Verb::Write => "-c RC or UC",
        Verb::Read | Verb::Atomic => "-c RC",
    }
}

/// `-c`: RC, UC or UD (perftest's XRC, DC and SRD are refused by name); a
/// refusal suggests only the types `verb`'s tools take.
pub fn conn(a: &PerfArgs, verb: Verb) -> Result<Conn, String> {
    let ok = conns_for(verb);
    match a
        .connection
        .as_deref()
        .map(str::to_ascii_uppercase)
        .as_deref()
    {
        None | Some("RC") => Ok(Conn::Rc),
        Some("UC") => Ok(Conn::Uc),
        Some("UD") => Ok(Conn::Ud),
        Some(o @ ("XRC" | "DC" | "SRD")) => Err(format!(
            "-c {o}: {o} QPs are not supported by rdmaperf; use {ok}"
        )),
        Some(o) => Err(format!("-c {o}: unknown connection type; use {ok}")),
    }
}

/// `-A`: FETCH_AND_ADD (perftest's default) or CMP_AND_SWAP.
pub fn atomic_type(a: &PerfArgs) -> Result<AtomicType, String> {
    match a.atomic_type.as_deref() {
        None | Some("FETCH_AND_ADD") => Ok(AtomicType::FetchAdd),
        Some("CMP_AND_SWAP") => Ok(AtomicType::CmpSwap),
        Some(o) => Err(format!(
            "-A {o}: unknown atomic type; use FETCH_AND_ADD or CMP_AND_SWAP"
        )),
    }
}

/// `-m`: one of the IB MTUs (None: the port's active MTU).
pub fn mtu(a: &PerfArgs) -> Result<Option<u32>, String> {
    match a.mtu {
        None => Ok(None),
        Some(m @ (256 | 512 | 1024 | 2048 | 4096)) => Ok(Some(m)),
        Some(m) => Err(format!(
            "-m {m}: MTU must be one of 256, 512, 1024, 2048, 4096"
        )),
    }
}

/// `--output`.
pub fn output(a: &PerfArgs) -> Result<Option<OutputKind>, String> {
    match a.output.as_deref() {
        None => Ok(None),
        Some("bandwidth") => Ok(Some(OutputKind::Bandwidth)),
        Some("message_rate") => Ok(Some(OutputKind::MessageRate)),
        Some("latency") => Ok(Some(OutputKind::Latency)),
        Some(o) => Err(format!(
            "--output={o}: use bandwidth, message_rate or latency"
        )),
    }
}

/// `--flow_label` (perftest: a comma list, C `strtol` base 0 each).
pub fn flow_labels(a: &PerfArgs) -> Result<Vec<u32>, String> {
    let Some(list) = a.flow_label.as_deref() else {
        return Ok(Vec::new());
    };
    list.split(',')
        .map(|w| {
            let w = w.trim();
            let v = match w.strip_prefix("0x").or_else(|| w.strip_prefix("0X")) {
                Some(h) => u32::from_str_radix(h, 16),
                None => w.parse(),
            };
            v.ok().filter(|&v| v < 1 << 20).ok_or_else(|| {
                format!(
                    "--flow_label {list}: '{w}' is not a flow label; give numbers 0..1048575 \
                     separated by commas (QP i takes the i-th, round-robin)"
                )
            })
        })
        .collect()
}

/// `-W`'s counter names.
pub fn counters(a: &PerfArgs) -> Result<Vec<String>, String> {
    match a.report_counters.as_deref() {
        Some(l) => crate::cli::lists::parse_list(l),
        None => Ok(Vec::new()),
    }
}

/// `--cpus`.
pub fn cpus(a: &PerfArgs) -> Result<Option<Vec<usize>>, String> {
    a.cpus
        .as_deref()
        .map(|s| crate::cli::lists::parse_cpu_list(s).map_err(|e| format!("--cpus: {e}")))
        .transpose()
}
