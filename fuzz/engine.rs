//! A small fuzz engine for the control-protocol decoders that runs on the
//! stable toolchain (see fuzz/README.md for why not cargo-fuzz).
//!
//! Inputs are mutated from a corpus seeded with every message of the stock
//! perftest captures (tests/data/captures) plus our own encoder output. Each
//! input goes through every decoder of `ctrl::wire` under `catch_unwind`, and
//! [`check`] asserts the decoder contracts:
//! - no panic, ever (a panic is a failure, not an error);
//! - an error names its step;
//! - a successful decode re-encodes to the same bytes where the format is
//!   canonical (sysdata, report values, key messages modulo hex case, version
//!   and MTU when the padding is zero);
//! - `atof` agrees with C's `strtod` on the decimal forms perftest uses.
//!
//! Feedback: an input that gives a decoder an outcome never seen before (ok,
//! or an error text with its numbers and quoted bytes stripped) joins the
//! corpus, so mutations climb towards the deeper error branches.

#![allow(dead_code)] // each user calls a subset

use rdmaperf::ctrl::wire::{
    self, atof, decode_key, decode_mtu, decode_sysdata, decode_version, encode_key, encode_mtu,
    encode_sysdata, encode_version, BwReport, Dest, PeerVersion, ReportField, WireError,
};
use std::collections::HashSet;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::time::{Duration, Instant};

/// splitmix64: tiny, seedable, good enough for choosing mutations.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
    /// Uniform in 0..n (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

/// Bytes the decoders branch on (hex digits, separators, NUL, sign, exponent).
const INTERESTING: &[u8] = b"\0\x01\x7f\x80\xff:0123456789abcdefgABCDEFG .-+eE\n\tx";
/// Tokens that change how text parses (C atof forms, field separators).
const TOKENS: &[&[u8]] = &[
    b"0x",
    b"inf",
    b"nan",
    b"e9999",
    b"e-9999",
    b"6.",
    b".5",
    b"5.70",
    b"6.28",
    b"ffffffff",
    b"::",
    b"\0\0",
    b"-",
    b" ",
];

/// A violated decoder contract, with the input that showed it.
#[derive(Debug)]
pub struct Finding {
    pub input: Vec<u8>,
    pub what: String,
}

/// What a run did.
#[derive(Debug, Default)]
pub struct Stats {
    pub execs: u64,
    /// The outcome classes reached, sorted.
    pub classes: Vec<String>,
    pub corpus: usize,
    pub outcomes: usize,
    pub seeds: usize,
}

/// Every message of every capture (JSON lines with a "hex" field).
pub fn capture_seeds(dir: &Path) -> Vec<Vec<u8>> {
    let mut seeds = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return seeds;
    };
    let mut files: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    files.sort();
    for f in files
        .iter()
        .filter(|f| f.extension().is_some_and(|x| x == "jsonl"))
    {
        let text = std::fs::read_to_string(f).unwrap_or_default();
        for line in text.lines() {
            let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
                continue;
            };
            if let Some(bytes) = v["hex"].as_str().and_then(unhex) {
                seeds.push(bytes);
            }
        }
    }
    seeds
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 != 0 {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Our encoders' output: every message form, including the rare ones
/// (4-byte MTU and iters of old peers, 59-byte keys) the captures lack.
pub fn encoder_seeds() -> Vec<Vec<u8>> {
    let mut s: Vec<Vec<u8>> = Vec::new();
    for v in ["6.27", "6.06", "5.70", "6.29"] {
        s.push(encode_version(v).expect("valid version").to_vec());
    }
    s.push(encode_sysdata(4096).to_vec());
    s.push(encode_sysdata(64).to_vec());
    for len in [wire::MTU_LEN, wire::MTU_LEN_OLD] {
        s.push(encode_mtu(3, len).expect("valid MTU"));
    }
    let d = Dest {
        lid: 0x1a,
        out_reads: 16,
        qpn: 0x11,
        psn: 0xabcdef,
        rkey: 0x1234,
        vaddr: 0x7f00_0000_1000,
        gid: None,
        srqn: 0,
    };
    s.push(encode_key(&d).expect("valid key"));
    let g = Dest {
        gid: Some([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xfe, 0, 7, 1]),
        ..d
    };
    let gk = encode_key(&g).expect("valid key");
    s.push(gk[..wire::KEY_LEN].to_vec());
    s.push(gk);
    let r = BwReport {
        size: 65536,
        iters: 5000,
        bw_peak: 1.5,
        bw_avg: 12345.678,
        msg_rate: 0.25,
        per_port: None,
    };
    for v in ["6.06", "5.32"] {
        let peer = PeerVersion::from_text(v).expect("valid version");
        for f in ReportField::sequence(false) {
            s.push(f.encode(&r, &peer));
        }
    }
    s
}

/// Strips what varies per input from an outcome so that the set of outcomes
/// stays small: digits, and anything after a quote or "found".
fn outcome_class(decoder: &str, r: Result<(), &WireError>) -> String {
    match r {
        Ok(()) => format!("{decoder}: ok"),
        Err(e) => {
            let p = &e.problem;
            let cut = [p.find('"'), p.find("found")]
                .into_iter()
                .flatten()
                .min()
                .unwrap_or(p.len());
            let shape: String = p[..cut].chars().filter(|c| !c.is_ascii_digit()).collect();
            format!("{decoder}: {} {}", e.step, shape)
        }
    }
}

fn zero_after(b: &[u8], at: usize) -> bool {
    b[at..].iter().all(|&x| x == 0)
}

fn expect_step(e: &WireError, step: &str) -> Result<(), String> {
    let shown = e.to_string(); // exercises show_bytes on hostile bytes
    if e.step != step || !shown.starts_with(&format!("bad {step}: ")) {
        return Err(format!("error for step {step:?} is {shown:?}"));
    }
    Ok(())
}

/// C `strtod` on `b` cut at its first NUL: the value and whether any prefix
/// parsed. `None` for the forms our `atof` deliberately leaves out (hex
/// floats, inf, nan).
fn c_strtod(b: &[u8]) -> Option<(f64, bool)> {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    let text = &b[..end];
    let mut i = 0;
    while i < text.len() && matches!(text[i], b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
        i += 1;
    }
    if i < text.len() && matches!(text[i], b'+' | b'-') {
        i += 1;
    }
    let rest = text[i..].to_ascii_lowercase();
    if rest.starts_with(b"0x") || rest.starts_with(b"inf") || rest.starts_with(b"nan") {
        return None;
    }
    let c = std::ffi::CString::new(text).expect("cut at the first NUL");
    let mut endp: *mut libc::c_char = std::ptr::null_mut();
    // SAFETY: `c` is a valid NUL-terminated string that outlives the call;
    // `endp` is a valid out-pointer. strtod only reads the string.
    let v = unsafe { libc::strtod(c.as_ptr(), &mut endp) };
    Some((v, endp.cast_const() != c.as_ptr()))
}

/// Records `decoder`'s outcome class in `seen`: a value it accepted must
/// pass `accepted`, a refusal must name `step`.
fn judge<T>(
    seen: &mut Vec<String>,
    decoder: &str,
    step: &str,
    r: Result<T, WireError>,
    accepted: impl FnOnce(T) -> Result<(), String>,
) -> Result<(), String> {
    match r {
        Ok(v) => {
            seen.push(outcome_class(decoder, Ok(())));
            accepted(v)
        }
        Err(e) => {
            seen.push(outcome_class(decoder, Err(&e)));
            expect_step(&e, step)
        }
    }
}

/// Runs every decoder on `b`, checks its contract and records the outcome
/// classes in `seen`. `Err` names the violated contract.
pub fn check(b: &[u8], seen: &mut Vec<String>) -> Result<(), String> {
    // version
    judge(seen, "version", "version", decode_version(b), |p| {
        if b.len() != wire::VERSION_LEN || p.value.is_nan() || p.value < wire::MIN_PEER_VERSION {
            return Err(format!("version accepted: {p:?}"));
        }
        let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
        if std::str::from_utf8(&b[..end]).is_ok() && end < b.len() && zero_after(b, end) {
            let again = encode_version(&p.text).map_err(|e| e.to_string())?;
            if again[..] != *b {
                return Err(format!("version re-encodes to {again:?}"));
            }
        }
        if atof(&b[..end]) != Some(p.value) {
            return Err("version value differs from atof".into());
        }
        Ok(())
    })?;
    // atof against C
    if let Some((c, parsed)) = c_strtod(b) {
        let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
        let ours = atof(&b[..end]);
        let agree = match ours {
            None => !parsed,
            Some(x) => parsed && (x.to_bits() == c.to_bits()),
        };
        if !agree {
            return Err(format!(
                "atof gives {ours:?}, C strtod {c} (parsed: {parsed})"
            ));
        }
    }
    // sysdata
    judge(
        seen,
        "sysdata",
        "cache_line",
        decode_sysdata("cache_line", b),
        |v| {
            if v == 0 || v > i32::MAX as u32 || encode_sysdata(v)[..] != *b {
                return Err(format!("sysdata {v} does not round-trip"));
            }
            Ok(())
        },
    )?;
    // MTU
    judge(seen, "mtu", "MTU", decode_mtu(b), |m| {
        if !(1..=5).contains(&m) {
            return Err(format!("MTU enum {m} accepted"));
        }
        if b[0].is_ascii_digit() && zero_after(b, 1) {
            let again = encode_mtu(m, b.len()).map_err(|e| e.to_string())?;
            if again != b {
                return Err(format!("MTU re-encodes to {again:?}"));
            }
        }
        Ok(())
    })?;
    // key message, both forms
    judge(seen, "key", "key message", decode_key(b), |d| {
        let again = encode_key(&d).map_err(|e| format!("decoded key cannot re-encode: {e}"))?;
        if again != b.to_ascii_lowercase() {
            return Err(format!(
                "key re-encodes to {:?}",
                String::from_utf8_lossy(&again)
            ));
        }
        if d.key_len() != b.len() {
            return Err("key form does not match its length".into());
        }
        if b.len() == wire::KEY_LEN_GID && !wire::looks_like_gid_key(b) {
            return Err("decoded GID key does not look like one".into());
        }
        Ok(())
    })?;
    if b.len() >= wire::KEY_LEN && wire::is_plain_key(b) != decode_key(&b[..wire::KEY_LEN]).is_ok()
    {
        return Err("is_plain_key disagrees with decode_key".into());
    }
    let _ = wire::looks_like_gid_key(b);
    // report values, for a current and an old (4-byte iters) peer
    for v in ["6.06", "5.32"] {
        let peer = PeerVersion::from_text(v).expect("valid version");
        for &f in ReportField::sequence(true) {
            let mut r = BwReport::default();
            match f.decode(&mut r, b, &peer) {
                Ok(()) => {
                    seen.push(outcome_class(f.name(), Ok(())));
                    if b.len() != f.len(&peer) || f.encode(&r, &peer) != b {
                        return Err(format!("{} does not round-trip for peer {v}", f.name()));
                    }
                    if f.is_per_port() != r.per_port.is_some() {
                        return Err(format!("{} per-port flag is wrong", f.name()));
                    }
                }
                Err(e) => {
                    seen.push(outcome_class(f.name(), Err(&e)));
                    if b.len() == f.len(&peer) {
                        return Err(format!("{} refused a right-sized value: {e}", f.name()));
                    }
                    expect_step(&e, f.name())?;
                }
            }
        }
    }
    Ok(())
}

/// [`check`] with panics turned into findings.
pub fn check_caught(b: &[u8], seen: &mut Vec<String>) -> Result<(), String> {
    caught(|| check(b, seen))
}

/// Runs `f`, turning a panic into an `Err` naming it.
pub fn caught(f: impl FnOnce() -> Result<(), String>) -> Result<(), String> {
    match catch_unwind(AssertUnwindSafe(f)) {
        Ok(r) => r,
        Err(p) => {
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-string panic".into());
            Err(format!("decoder panicked: {msg}"))
        }
    }
}

/// Applies 1..=4 random mutations to `b`, sometimes splicing in `other`.
pub fn mutate(rng: &mut Rng, b: &mut Vec<u8>, other: &[u8]) {
    for _ in 0..1 + rng.below(4) {
        let len = b.len();
        match rng.below(11) {
            0 if len > 0 => {
                let i = rng.below(len);
                b[i] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let i = rng.below(len);
                b[i] = INTERESTING[rng.below(INTERESTING.len())];
            }
            2 if len > 0 => {
                let i = rng.below(len);
                b[i] = rng.next() as u8;
            }
            3 if len < 256 => {
                let i = rng.below(len + 1);
                b.insert(i, INTERESTING[rng.below(INTERESTING.len())]);
            }
            4 if len > 0 => {
                b.remove(rng.below(len));
            }
            5 => b.truncate(rng.below(len + 1)),
            6 if len > 0 => {
                // Overwrite with a token, keeping the length (the decoders
                // mostly gate on exact sizes).
                let t = TOKENS[rng.below(TOKENS.len())];
                let at = rng.below(len);
                for (k, &x) in t.iter().enumerate() {
                    if let Some(slot) = b.get_mut(at + k) {
                        *slot = x;
                    }
                }
            }
            7 if !other.is_empty() && len > 0 => {
                // Splice: same offsets from another corpus entry.
                let at = rng.below(len);
                let n = 1 + rng.below(16);
                let end = (at + n).min(len).min(other.len());
                if at < end {
                    b[at..end].copy_from_slice(&other[at..end]);
                }
            }
            8 if len > 0 => {
                let i = rng.below(len);
                b[i] = if b[i].is_ascii_lowercase() {
                    b[i].to_ascii_uppercase()
                } else {
                    b[i].to_ascii_lowercase()
                };
            }
            9 if len > 1 => {
                let (i, j) = (rng.below(len), rng.below(len));
                b.swap(i, j);
            }
            10 if len < 256 => {
                let n = 1 + rng.below(8);
                b.extend((0..n).map(|_| rng.next() as u8));
            }
            _ => {}
        }
    }
}

/// How long to run.
#[derive(Debug, Clone, Copy)]
pub enum Budget {
    Execs(u64),
    Time(Duration),
}

/// Fuzzes from `seeds` with `seed` until the budget is spent or a contract
/// breaks. Every seed is checked first, unmutated.
pub fn run(seeds: &[Vec<u8>], seed: u64, budget: Budget) -> Result<Stats, Finding> {
    let mut corpus: Vec<Vec<u8>> = Vec::new();
    let mut outcomes: HashSet<String> = HashSet::new();
    let mut seen = Vec::new();
    for s in seeds {
        seen.clear();
        check_caught(s, &mut seen).map_err(|what| Finding {
            input: s.clone(),
            what,
        })?;
        outcomes.extend(seen.drain(..));
        corpus.push(s.clone());
    }
    if corpus.is_empty() {
        corpus.push(Vec::new());
    }
    let mut rng = Rng::new(seed);
    let started = Instant::now();
    let mut execs = 0u64;
    let mut input = Vec::with_capacity(300);
    loop {
        match budget {
            Budget::Execs(n) if execs >= n => break,
            Budget::Time(t) if execs % 256 == 0 && started.elapsed() >= t => break,
            _ => {}
        }
        input.clear();
        input.extend_from_slice(&corpus[rng.below(corpus.len())]);
        let other = corpus[rng.below(corpus.len())].clone();
        mutate(&mut rng, &mut input, &other);
        seen.clear();
        check_caught(&input, &mut seen).map_err(|what| Finding {
            input: input.clone(),
            what,
        })?;
        execs += 1;
        let mut new = false;
        for o in seen.drain(..) {
            new |= outcomes.insert(o);
        }
        if new && corpus.len() < 4096 {
            corpus.push(input.clone());
        }
    }
    let mut classes: Vec<String> = outcomes.iter().cloned().collect();
    classes.sort();
    Ok(Stats {
        execs,
        classes,
        corpus: corpus.len(),
        outcomes: outcomes.len(),
        seeds: seeds.len(),
    })
}
