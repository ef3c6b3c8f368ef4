//! Pure codecs for every message of perftest's TCP control protocol (no I/O).
//!
//! perftest has no framing: each message is a fixed-size blob whose size both
//! sides know from the step they are in (and from the peer's version). The
//! encoders here produce exactly the bytes stock perftest writes; the decoders
//! accept exactly what it writes and reject anything else with a [`WireError`]
//! that names the step and shows the offending bytes. Decoders never panic.

use std::fmt;

/// The version we advertise. perftest compares versions with `atof`: at
/// least 5.70 passes its compatibility check, below 6.28 keeps master's
/// `negotiate_params` blob off, so 4.5 (6.06) and master (6.29) both talk to us
/// exactly as they talk to 4.5. The "-rs" suffix (invisible to `atof`) tells
/// an rdmaperf peer from stock perftest (e.g. `--threads` then keeps one
/// control connection for all threads instead of one stock server per thread).
pub const OUR_VERSION: &str = "6.27-rs";
/// The suffix that marks an rdmaperf peer's version.
pub const RDMAPERF_MARK: &str = "-rs";
/// `char version[MAX_VERSION]`, NUL padded.
pub const VERSION_LEN: usize = 16;
/// perftest's `check_version_compatibility` refuses peers below this.
pub const MIN_PEER_VERSION: f64 = 5.70;
/// From this version on, perftest master sends a parameter-negotiation blob
/// (when the peer advertises it too), which we do not speak.
#[allow(clippy::approx_constant)] // a version number, not 2*pi
pub const NEGOTIATING_VERSION: f64 = 6.28;
/// One `htonl(int)` of `check_sys_data`.
pub const SYSDATA_LEN: usize = 4;
/// MTU message for peers >= 5.31: one ASCII digit and a NUL.
pub const MTU_LEN: usize = 2;
/// MTU message for peers < 5.31: `char[sizeof(int)]`.
pub const MTU_LEN_OLD: usize = 4;
/// Key message without GID: 58 characters and a NUL.
pub const KEY_LEN: usize = 59;
/// Key message with GID: 107 characters and a NUL.
pub const KEY_LEN_GID: usize = 108;
/// Written by perftest 4.5 after the close handshake; never read by the peer.
/// (perftest >= 23.10 no longer writes it.)
pub const DONE: &[u8; 5] = b"done\0";
/// One value of the bw report exchange (u64 or IEEE double, big-endian).
pub const REPORT_VALUE_LEN: usize = 8;
/// `iters` for peers < 5.33: `htonl(int)`.
pub const ITERS_LEN_OLD: usize = 4;

/// How many bytes of an offending message an error shows.
const SHOW_BYTES: usize = 48;

/// A message that cannot be encoded or decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireError {
    /// The protocol step, e.g. "version", "key message".
    pub step: &'static str,
    /// What is wrong and, where possible, what to do about it.
    pub problem: String,
    /// The offending bytes (empty for encoder errors).
    pub bytes: Box<[u8]>,
}

impl WireError {
    /// An error for `step` about `bytes` (empty for local values).
    pub fn new(step: &'static str, problem: impl Into<String>, bytes: &[u8]) -> Self {
        WireError {
            step,
            problem: problem.into(),
            bytes: bytes.into(),
        }
    }
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "bad {}: {}", self.step, self.problem)?;
        if !self.bytes.is_empty() {
            write!(
                f,
                "; got {} bytes: {}",
                self.bytes.len(),
                show_bytes(&self.bytes)
            )?;
        }
        Ok(())
    }
}

impl std::error::Error for WireError {}

/// `36 2e 30 36 00 .. (+3 more) "6.06\0.."` — hex, truncated, plus an escaped
/// ASCII view (most of this protocol is text).
pub fn show_bytes(b: &[u8]) -> String {
    let shown = &b[..b.len().min(SHOW_BYTES)];
    let mut s = String::new();
    for (i, x) in shown.iter().enumerate() {
        if i > 0 {
            s.push(' ');
        }
        s.push_str(&format!("{x:02x}"));
    }
    if b.len() > shown.len() {
        s.push_str(&format!(" .. (+{} more)", b.len() - shown.len()));
    }
    s.push_str(" \"");
    for &x in shown {
        match x {
            0 => s.push_str("\\0"),
            b'\r' => s.push_str("\\r"),
            b'\n' => s.push_str("\\n"),
            b'"' => s.push_str("\\\""),
            b'\\' => s.push_str("\\\\"),
            0x20..=0x7e => s.push(x as char),
            _ => s.push_str(&format!("\\x{x:02x}")),
        }
    }
    if b.len() > shown.len() {
        s.push_str("..");
    }
    s.push('"');
    s
}

fn expect_len(step: &'static str, b: &[u8], len: usize) -> Result<(), WireError> {
    if b.len() == len {
        Ok(())
    } else {
        Err(WireError::new(
            step,
            format!("expected {len} bytes, got {}", b.len()),
            b,
        ))
    }
}

// ---------------------------------------------------------------- version

/// The peer's version string and its `atof` value, which selects the optional
/// parts and sizes of the later messages.
#[derive(Debug, Clone, PartialEq)]
pub struct PeerVersion {
    /// The string up to the first NUL (lossy UTF-8).
    pub text: String,
    /// `atof(text)`.
    pub value: f64,
    /// An rdmaperf peer's parameters, carried after the string's NUL.
    pub params: Option<PeerParams>,
}

/// The parameters both sides must agree on, which perftest's messages do
/// not carry: rdmaperf puts them after the NUL of its version string, in the
/// padding stock perftest never reads (it takes the string: `atof`,
/// `strcmp`). Stock perftest sends zeros there, so it has none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerParams {
    /// Connection type: b'R' (RC), b'U' (UC), b'D' (UD).
    pub conn: u8,
    /// `-q`.
    pub num_qps: u16,
    /// `-n` (0: duration mode, or above u32).
    pub iters: u32,
    /// `--reversed` (bit 7 of the connection-type byte on the wire).
    pub reversed: bool,
    /// `--data_validation` (bit 5 of that byte).
    pub data_validation: bool,
    /// `--explain`: this side sends its explanation after the run and
    /// reads the peer's (bit 3 of that byte; see `super::after_run`).
    pub explain: bool,
    /// `rdmaperf compare` between two hosts: after each run the two sides
    /// cross one compare frame (`super::compare_ext`). Sent as
    /// [`COMPARE_MARK`] in place of [`PARAMS_MARK`], since the connection
    /// byte has no bit left that 'R', 'U' and 'D' all leave clear.
    pub compare: bool,
}

/// Marks [`PeerParams`] after the version string's NUL.
pub const PARAMS_MARK: u8 = b'!';
/// Marks [`PeerParams`] of a side run as `rdmaperf compare` (an rdmaperf
/// without compare reads no parameters behind it, as from stock perftest).
pub const COMPARE_MARK: u8 = b'%';
/// Set in [`PeerParams`]' connection-type byte under `--reversed`.
const REVERSED_BIT: u8 = 0x80;
/// Set there under `--data_validation` (clear in 'R', 'U' and 'D').
const VALIDATION_BIT: u8 = 0x20;
/// Set there under `--explain` (clear in 'R' 0x52, 'U' 0x55 and 'D' 0x44).
const EXPLAIN_BIT: u8 = 0x08;

impl PeerParams {
    /// The connection type as perftest spells it.
    pub fn conn_name(&self) -> &'static str {
        match self.conn {
            b'R' => "RC",
            b'U' => "UC",
            b'D' => "UD",
            _ => "unknown",
        }
    }
}

/// Writes `p` into the padding of a version message whose string is
/// `text_len` bytes; false (nothing written) when it does not fit.
pub fn encode_params(msg: &mut [u8; VERSION_LEN], text_len: usize, p: &PeerParams) -> bool {
    let at = text_len + 1;
    if at + 8 > VERSION_LEN {
        return false;
    }
    msg[at] = if p.compare { COMPARE_MARK } else { PARAMS_MARK };
    // The connection type is an upper-case letter: bits 7 and 5 are free.
    let flag = |on: bool, bit: u8| if on { bit } else { 0 };
    msg[at + 1] = p.conn
        | flag(p.reversed, REVERSED_BIT)
        | flag(p.data_validation, VALIDATION_BIT)
        | flag(p.explain, EXPLAIN_BIT);
    msg[at + 2..at + 4].copy_from_slice(&p.num_qps.to_le_bytes());
    msg[at + 4..at + 8].copy_from_slice(&p.iters.to_le_bytes());
    true
}

/// The parameters after the string of version message `b` (None: none there).
pub fn decode_params(b: &[u8]) -> Option<PeerParams> {
    let at = b.iter().position(|&c| c == 0)? + 1;
    let t = b.get(at..at + 8)?;
    (t[0] == PARAMS_MARK || t[0] == COMPARE_MARK).then(|| PeerParams {
        compare: t[0] == COMPARE_MARK,
        conn: t[1] & !(REVERSED_BIT | VALIDATION_BIT | EXPLAIN_BIT),
        reversed: t[1] & REVERSED_BIT != 0,
        data_validation: t[1] & VALIDATION_BIT != 0,
        explain: t[1] & EXPLAIN_BIT != 0,
        num_qps: u16::from_le_bytes([t[2], t[3]]),
        iters: u32::from_le_bytes([t[4], t[5], t[6], t[7]]),
    })
}

impl PeerVersion {
    /// Builds a version from a string (for tests and for our own side).
    pub fn from_text(text: &str) -> Option<PeerVersion> {
        atof(text.as_bytes()).map(|value| PeerVersion {
            text: text.to_owned(),
            value,
            params: None,
        })
    }
    /// The peer is rdmaperf (its version carries [`RDMAPERF_MARK`]), not stock perftest.
    pub fn is_rdmaperf(&self) -> bool {
        self.text.ends_with(RDMAPERF_MARK)
    }
    /// `check_sys_data` exchanges cycle_buffer and cache line (>= 5.32).
    pub fn has_sysdata(&self) -> bool {
        self.value >= 5.32
    }
    /// `check_mtu` exchanges the MTU (>= 5.1).
    pub fn has_mtu(&self) -> bool {
        self.value >= 5.1
    }
    /// MTU message size: 2 bytes from 5.31, 4 before.
    pub fn mtu_len(&self) -> usize {
        if self.value >= 5.31 {
            MTU_LEN
        } else {
            MTU_LEN_OLD
        }
    }
    /// `iters` in the bw report: 8 bytes from 5.33, 4 before.
    pub fn iters_len(&self) -> usize {
        if self.value >= 5.33 {
            REPORT_VALUE_LEN
        } else {
            ITERS_LEN_OLD
        }
    }
}

/// The 16-byte version message: the string, NUL padded.
pub fn encode_version(text: &str) -> Result<[u8; VERSION_LEN], WireError> {
    let b = text.as_bytes();
    if b.len() >= VERSION_LEN || b.contains(&0) {
        return Err(WireError::new(
            "version",
            format!("local version string {text:?} must be 1..15 bytes without NUL"),
            &[],
        ));
    }
    let mut out = [0u8; VERSION_LEN];
    out[..b.len()].copy_from_slice(b);
    Ok(out)
}

/// Decodes the peer's 16-byte version message and applies perftest's
/// compatibility rule (`atof(v) < 5.70` is refused).
pub fn decode_version(b: &[u8]) -> Result<PeerVersion, WireError> {
    const STEP: &str = "version";
    expect_len(STEP, b, VERSION_LEN)?;
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    let text = String::from_utf8_lossy(&b[..end]).into_owned();
    let Some(value) = atof(&b[..end]) else {
        return Err(WireError::new(
            STEP,
            "the peer's version message is not a number, so the peer is not perftest or \
             rdmaperf — check the host and -p port",
            b,
        ));
    };
    if value.is_nan() || value < MIN_PEER_VERSION {
        return Err(WireError::new(
            STEP,
            format!(
                "the peer runs perftest version {text:?}, older than 5.70; perftest itself refuses \
                 such peers — upgrade perftest on the peer (4.5-0.17 reports 6.06)"
            ),
            b,
        ));
    }
    Ok(PeerVersion {
        text,
        value,
        params: decode_params(b),
    })
}

/// C `atof` on a byte string, decimal forms only: optional leading white
/// space, sign, digits with an optional '.', optional exponent; the longest
/// such prefix is converted and the rest ignored. `None` when no digits.
/// (C also accepts hex floats, "inf" and "nan"; no perftest version uses them.)
pub fn atof(b: &[u8]) -> Option<f64> {
    let mut i = 0;
    while i < b.len() && matches!(b[i], b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
        i += 1;
    }
    let start = i;
    if i < b.len() && (b[i] == b'+' || b[i] == b'-') {
        i += 1;
    }
    let int_start = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    let mut digits = i - int_start;
    if i < b.len() && b[i] == b'.' {
        i += 1;
        let frac_start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        digits += i - frac_start;
    }
    if digits == 0 {
        return None;
    }
    let mut end = i;
    if i < b.len() && (b[i] == b'e' || b[i] == b'E') {
        let mut j = i + 1;
        if j < b.len() && (b[j] == b'+' || b[j] == b'-') {
            j += 1;
        }
        let exp_start = j;
        while j < b.len() && b[j].is_ascii_digit() {
            j += 1;
        }
        if j > exp_start {
            end = j;
        }
    }
    // The prefix is ASCII by construction; Rust's float grammar accepts it
    // ("6.", ".5", "1e5"); a huge exponent gives inf, like strtod.
    std::str::from_utf8(&b[start..end])
        .ok()?
        .parse::<f64>()
        .ok()
}

// ---------------------------------------------------------------- sysdata

/// One sysdata value (`htonl`).
pub fn encode_sysdata(v: u32) -> [u8; SYSDATA_LEN] {
    v.to_be_bytes()
}

/// One sysdata value; `what` is "cycle_buffer" or "cache_line". perftest keeps
/// these as `int`, so 0 and values >= 2^31 cannot come from it.
pub fn decode_sysdata(what: &'static str, b: &[u8]) -> Result<u32, WireError> {
    expect_len(what, b, SYSDATA_LEN)?;
    let v = u32::from_be_bytes([b[0], b[1], b[2], b[3]]);
    if v == 0 || v > i32::MAX as u32 {
        return Err(WireError::new(
            what,
            format!(
                "peer's {what} is {v}, which perftest never sends — is the peer running the \
                 same tool (both sides ib_write_bw, etc.)?"
            ),
            b,
        ));
    }
    Ok(v)
}

// ---------------------------------------------------------------- MTU

/// `enum ibv_mtu` (1..5) to bytes (256..4096).
pub fn mtu_bytes(mtu_enum: u8) -> u32 {
    128u32 << mtu_enum.min(5)
}

/// The MTU message: `sprintf("%d", enum)` in a buffer of `len` (2 or 4) bytes.
/// The 4-byte form's last two bytes are uninitialised in perftest; we send 0.
pub fn encode_mtu(mtu_enum: u8, len: usize) -> Result<Vec<u8>, WireError> {
    if !(1..=5).contains(&mtu_enum) {
        return Err(WireError::new(
            "MTU",
            format!("local MTU enum {mtu_enum} is not 1..5 (256..4096 bytes)"),
            &[],
        ));
    }
    if len != MTU_LEN && len != MTU_LEN_OLD {
        return Err(WireError::new(
            "MTU",
            format!("MTU message length {len} is neither 2 nor 4"),
            &[],
        ));
    }
    let mut out = vec![0u8; len];
    out[0] = b'0' + mtu_enum;
    Ok(out)
}

/// Decodes the peer's MTU message (`strtol(.., 10)`), which must be an
/// `ibv_mtu` enum 1..5.
pub fn decode_mtu(b: &[u8]) -> Result<u8, WireError> {
    const STEP: &str = "MTU";
    if b.len() != MTU_LEN && b.len() != MTU_LEN_OLD {
        return Err(WireError::new(
            STEP,
            format!("expected 2 or 4 bytes, got {}", b.len()),
            b,
        ));
    }
    let digits: Vec<u8> = b
        .iter()
        .copied()
        .skip_while(|c| c.is_ascii_whitespace())
        .take_while(|c| c.is_ascii_digit())
        .collect();
    let v =
        match std::str::from_utf8(&digits)
            .ok()
            .and_then(|s| s.parse::<u32>().ok())
        {
            Some(v) if (1..=5).contains(&v) => v as u8,
            _ => return Err(WireError::new(
                STEP,
                "expected an MTU enum 1..5 as ASCII digit + NUL; is the peer perftest/rdmaperf \
                 running the same test?",
                b,
            )),
        };
    Ok(v)
}

// ---------------------------------------------------------------- key message

/// `struct pingpong_dest` as exchanged by `ctx_hand_shake`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Dest {
    pub lid: u16,
    /// Max outstanding RDMA reads/atomics (1 for send/write).
    pub out_reads: u32,
    /// 24-bit QP number.
    pub qpn: u32,
    /// 24-bit initial PSN.
    pub psn: u32,
    pub rkey: u32,
    /// Start of the peer-accessible region.
    pub vaddr: u64,
    /// `Some` selects the 108-byte GID format (RoCE, or -x given).
    pub gid: Option<[u8; 16]>,
    /// XRC/DC SRQ number, else 0.
    pub srqn: u32,
}

impl Dest {
    /// Size of this dest's key message (the format is chosen locally).
    pub fn key_len(&self) -> usize {
        if self.gid.is_some() {
            KEY_LEN_GID
        } else {
            KEY_LEN
        }
    }
}

/// `%0Nx` field widths, in message order, before the GID.
const HEAD_FIELDS: [(&str, usize); 6] = [
    ("lid", 4),
    ("out_reads", 4),
    ("qpn", 6),
    ("psn", 6),
    ("rkey", 8),
    ("vaddr", 16),
];

/// Encodes `KEY_PRINT_FMT` (59 B) or `KEY_PRINT_FMT_GID` (108 B), NUL included.
/// The widths are minimums in C, so values that need more digits would change
/// the size; they are refused.
pub fn encode_key(d: &Dest) -> Result<Vec<u8>, WireError> {
    let limits: [(&str, u64, u64); 3] = [
        ("out_reads", u64::from(d.out_reads), 0xffff),
        ("qpn", u64::from(d.qpn), 0xff_ffff),
        ("psn", u64::from(d.psn), 0xff_ffff),
    ];
    for (name, v, max) in limits {
        if v > max {
            return Err(WireError::new(
                "key message",
                format!("local {name} {v:#x} does not fit the key message (max {max:#x})"),
                &[],
            ));
        }
    }
    let mut s = format!(
        "{:04x}:{:04x}:{:06x}:{:06x}:{:08x}:{:016x}:",
        d.lid, d.out_reads, d.qpn, d.psn, d.rkey, d.vaddr
    );
    match &d.gid {
        None => s.push_str(&format!("{:08x}", d.srqn)),
        Some(gid) => {
            for g in gid {
                s.push_str(&format!("{g:02x}:"));
            }
            s.push_str(&format!("{:08x}:", d.srqn));
        }
    }
    let mut out = s.into_bytes();
    out.push(0);
    debug_assert_eq!(out.len(), d.key_len());
    Ok(out)
}

/// rdma_cm (`-R`) key message: perftest sends `struct pingpong_dest` itself,
/// integers big-endian, GID raw: `{lid, out_reads, qpn, psn, rkey, pad4,
/// vaddr, gid[16], srqn, gid_index}` = 56 bytes (4.5 .. 6.28).
pub const KEY_LEN_BIN: usize = 56;
/// perftest 6.29 added `u64 tail_markers_vaddr` after vaddr: 64 bytes, GID at 40.
pub const KEY_LEN_BIN_629: usize = 64;
/// The first perftest version with the 64-byte binary key message.
pub const KEY_BIN_629_VERSION: f64 = 6.29;

/// Encodes the 56-byte binary key message (the form every stock release
/// before 6.29 reads; we advertise 6.27).
pub fn encode_key_bin(d: &Dest, gid_index: u32) -> [u8; KEY_LEN_BIN] {
    let mut b = [0u8; KEY_LEN_BIN];
    b[0..4].copy_from_slice(&u32::from(d.lid).to_be_bytes());
    b[4..8].copy_from_slice(&d.out_reads.to_be_bytes());
    b[8..12].copy_from_slice(&d.qpn.to_be_bytes());
    b[12..16].copy_from_slice(&d.psn.to_be_bytes());
    b[16..20].copy_from_slice(&d.rkey.to_be_bytes());
    b[24..32].copy_from_slice(&d.vaddr.to_be_bytes());
    b[32..48].copy_from_slice(&d.gid.unwrap_or([0; 16]));
    b[48..52].copy_from_slice(&d.srqn.to_be_bytes());
    b[52..56].copy_from_slice(&gid_index.to_be_bytes());
    b
}

/// The 64-byte binary key message of perftest 6.29 and later (`tail_markers_vaddr`,
/// 0 here, after vaddr; GID at 40), for a peer that reads that layout: it
/// receives our message into its own struct, so the 56-byte form would put
/// its GID 8 bytes off (fatal with `-z`, where the data QPs are connected
/// from that GID).
pub fn encode_key_bin_629(d: &Dest, gid_index: u32) -> [u8; KEY_LEN_BIN_629] {
    let short = encode_key_bin(d, gid_index);
    let mut b = [0u8; KEY_LEN_BIN_629];
    b[..32].copy_from_slice(&short[..32]);
    b[40..64].copy_from_slice(&short[32..56]);
    b
}

/// Decodes a binary key message of 56 bytes, or 64 from a 6.29 peer (its GID
/// sits 8 bytes later). Like perftest, srqn and gid_index are not decoded.
pub fn decode_key_bin(b: &[u8]) -> Result<Dest, WireError> {
    let gid_at = match b.len() {
        KEY_LEN_BIN => 32,
        KEY_LEN_BIN_629 => 40,
        n => {
            let hint = if n == KEY_LEN || n == KEY_LEN_GID {
                " — that is the TCP text form: the peer is not using -R; give -R on both sides"
            } else {
                " — the peer is not speaking perftest's rdma_cm key format (same tool and -R on \
                 both sides?)"
            };
            return Err(WireError::new(
                "key message (rdma_cm)",
                format!("expected {KEY_LEN_BIN} or {KEY_LEN_BIN_629} bytes, got {n}{hint}"),
                b,
            ));
        }
    };
    let u32_at = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
    let mut vaddr = [0u8; 8];
    vaddr.copy_from_slice(&b[24..32]);
    let mut gid = [0u8; 16];
    gid.copy_from_slice(&b[gid_at..gid_at + 16]);
    Ok(Dest {
        lid: u32_at(0) as u16,
        out_reads: u32_at(4),
        qpn: u32_at(8),
        psn: u32_at(12),
        rkey: u32_at(16),
        vaddr: u64::from_be_bytes(vaddr),
        gid: Some(gid),
        srqn: 0,
    })
}

/// A cursor over a key message that parses fixed-width hex fields.
struct KeyParser<'a> {
    b: &'a [u8],
    pos: usize,
}

impl KeyParser<'_> {
    fn hex(&mut self, name: &str, width: usize) -> Result<u64, String> {
        let at = self.pos;
        let field = self.b.get(at..at + width).unwrap_or(&[]);
        let ok = field.len() == width && field.iter().all(u8::is_ascii_hexdigit);
        if !ok {
            let shown = String::from_utf8_lossy(self.b.get(at..).unwrap_or(&[]));
            let shown: String = shown.chars().take(width).collect();
            return Err(format!(
                "field {name} at byte {at}: expected {width} hex digits, found {shown:?}"
            ));
        }
        self.pos += width;
        // Up to 16 hex digits of ASCII always parse as u64.
        let text = std::str::from_utf8(field).map_err(|e| e.to_string())?;
        u64::from_str_radix(text, 16).map_err(|e| e.to_string())
    }

    fn byte(&mut self, want: u8, what: &str) -> Result<(), String> {
        match self.b.get(self.pos) {
            Some(&c) if c == want => {
                self.pos += 1;
                Ok(())
            }
            other => Err(format!(
                "expected {what} at byte {}, found {}",
                self.pos,
                other.map_or("end of message".to_string(), |c| format!("{c:#04x}"))
            )),
        }
    }
}

/// Decodes a key message; its length selects the format (59 or 108 bytes).
pub fn decode_key(b: &[u8]) -> Result<Dest, WireError> {
    const STEP: &str = "key message";
    let with_gid = match b.len() {
        KEY_LEN => false,
        KEY_LEN_GID => true,
        n => {
            return Err(WireError::new(
                STEP,
                format!("expected {KEY_LEN} or {KEY_LEN_GID} bytes, got {n}"),
                b,
            ))
        }
    };
    parse_key(b, with_gid).map_err(|problem| {
        let hint = if !with_gid && looks_like_gid_key(b) {
            " — this is the start of a 108-byte key message with GID: the peer uses a GID \
             (RoCE or -x) and we do not; use the same -x setting on both sides"
        } else {
            " — the peer is not speaking perftest's key format (same tool on both sides?)"
        };
        WireError::new(STEP, format!("{problem}{hint}"), b)
    })
}

fn parse_key(b: &[u8], with_gid: bool) -> Result<Dest, String> {
    let mut p = KeyParser { b, pos: 0 };
    let mut head = [0u64; 6];
    for (slot, (name, width)) in head.iter_mut().zip(HEAD_FIELDS) {
        *slot = p.hex(name, width)?;
        p.byte(b':', "':'")?;
    }
    let gid = if with_gid {
        let mut gid = [0u8; 16];
        for (i, g) in gid.iter_mut().enumerate() {
            // Two hex digits always fit a u8.
            *g = p.hex(&format!("gid[{i}]"), 2)? as u8;
            p.byte(b':', "':'")?;
        }
        Some(gid)
    } else {
        None
    };
    let srqn = p.hex("srqn", 8)? as u32;
    if with_gid {
        p.byte(b':', "trailing ':'")?;
    }
    p.byte(0, "NUL terminator")?;
    // Widths bound every value: lid/out_reads 16 bits, qpn/psn 24, rkey 32.
    Ok(Dest {
        lid: head[0] as u16,
        out_reads: head[1] as u32,
        qpn: head[2] as u32,
        psn: head[3] as u32,
        rkey: head[4] as u32,
        vaddr: head[5],
        gid,
        srqn,
    })
}

/// True if the bytes start like a GID-format key message (head fields, then
/// "xx:" GID bytes where the 59-byte format has its srqn).
pub fn looks_like_gid_key(b: &[u8]) -> bool {
    let mut p = KeyParser { b, pos: 0 };
    for (name, width) in HEAD_FIELDS {
        if p.hex(name, width).is_err() || p.byte(b':', "':'").is_err() {
            return false;
        }
    }
    p.hex("gid[0]", 2).is_ok() && p.byte(b':', "':'").is_ok()
}

/// True if the first 59 bytes are a complete key message without GID (used
/// when we expect 108 bytes, to say why instead of waiting for 49 more).
pub fn is_plain_key(b: &[u8]) -> bool {
    b.len() >= KEY_LEN && parse_key(&b[..KEY_LEN], false).is_ok()
}

// ---------------------------------------------------------------- bw report

/// `struct bw_report_data` as exchanged by `xchg_bw_reports`. Values are in
/// the sender's report units (MB/s or Gb/s, per --report_gbits).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct BwReport {
    pub size: u64,
    pub iters: u64,
    pub bw_peak: f64,
    pub bw_avg: f64,
    pub msg_rate: f64,
    /// Exchanged only with --report-per-port (both sides must agree).
    pub per_port: Option<PerPortReport>,
}

/// The four --report-per-port values.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PerPortReport {
    pub bw_avg_p1: f64,
    pub msg_rate_p1: f64,
    pub bw_avg_p2: f64,
    pub msg_rate_p2: f64,
}

/// One lock-step exchange of `xchg_bw_reports`, in wire order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReportField {
    Size,
    Iters,
    BwPeak,
    BwAvg,
    MsgRate,
    BwAvgP1,
    MsgRateP1,
    BwAvgP2,
    MsgRateP2,
}

impl ReportField {
    const BASE: [ReportField; 5] = [
        ReportField::Size,
        ReportField::Iters,
        ReportField::BwPeak,
        ReportField::BwAvg,
        ReportField::MsgRate,
    ];
    const ALL: [ReportField; 9] = [
        ReportField::Size,
        ReportField::Iters,
        ReportField::BwPeak,
        ReportField::BwAvg,
        ReportField::MsgRate,
        ReportField::BwAvgP1,
        ReportField::MsgRateP1,
        ReportField::BwAvgP2,
        ReportField::MsgRateP2,
    ];

    /// The exchanges in order: 5, or 9 with --report-per-port.
    pub fn sequence(per_port: bool) -> &'static [ReportField] {
        if per_port {
            &Self::ALL
        } else {
            &Self::BASE
        }
    }

    /// The step name used in errors.
    pub fn name(self) -> &'static str {
        match self {
            ReportField::Size => "bw report size",
            ReportField::Iters => "bw report iters",
            ReportField::BwPeak => "bw report bw_peak",
            ReportField::BwAvg => "bw report bw_avg",
            ReportField::MsgRate => "bw report msgRate",
            ReportField::BwAvgP1 => "bw report bw_avg_p1",
            ReportField::MsgRateP1 => "bw report msgRate_p1",
            ReportField::BwAvgP2 => "bw report bw_avg_p2",
            ReportField::MsgRateP2 => "bw report msgRate_p2",
        }
    }

    /// Wire size for a peer of this version.
    pub fn len(self, peer: &PeerVersion) -> usize {
        match self {
            ReportField::Iters => peer.iters_len(),
            _ => REPORT_VALUE_LEN,
        }
    }

    fn float(self, r: &BwReport) -> f64 {
        let pp = r.per_port.unwrap_or_default();
        match self {
            ReportField::Size | ReportField::Iters => 0.0,
            ReportField::BwPeak => r.bw_peak,
            ReportField::BwAvg => r.bw_avg,
            ReportField::MsgRate => r.msg_rate,
            ReportField::BwAvgP1 => pp.bw_avg_p1,
            ReportField::MsgRateP1 => pp.msg_rate_p1,
            ReportField::BwAvgP2 => pp.bw_avg_p2,
            ReportField::MsgRateP2 => pp.msg_rate_p2,
        }
    }

    /// Encodes this field of `r`. Size and iters are big-endian integers (a
    /// 4-byte iters keeps the low 32 bits, as `htonl(int)` does); the others
    /// are big-endian IEEE-754 bit patterns.
    pub fn encode(self, r: &BwReport, peer: &PeerVersion) -> Vec<u8> {
        match self {
            ReportField::Size => r.size.to_be_bytes().to_vec(),
            ReportField::Iters if peer.iters_len() == ITERS_LEN_OLD => {
                (r.iters as u32).to_be_bytes().to_vec()
            }
            ReportField::Iters => r.iters.to_be_bytes().to_vec(),
            f => f.float(r).to_bits().to_be_bytes().to_vec(),
        }
    }

    /// Decodes this field into `r`. Every bit pattern is accepted: a perftest
    /// server that never measured sends uninitialised stack bytes here.
    pub fn decode(self, r: &mut BwReport, b: &[u8], peer: &PeerVersion) -> Result<(), WireError> {
        expect_len(self.name(), b, self.len(peer))?;
        let mut v = [0u8; 8];
        v[8 - b.len()..].copy_from_slice(b);
        let u = u64::from_be_bytes(v);
        let x = f64::from_bits(u);
        match self {
            ReportField::Size => r.size = u,
            ReportField::Iters => r.iters = u,
            ReportField::BwPeak => r.bw_peak = x,
            ReportField::BwAvg => r.bw_avg = x,
            ReportField::MsgRate => r.msg_rate = x,
            f => {
                let pp = r.per_port.get_or_insert_with(PerPortReport::default);
                match f {
                    ReportField::BwAvgP1 => pp.bw_avg_p1 = x,
                    ReportField::MsgRateP1 => pp.msg_rate_p1 = x,
                    ReportField::BwAvgP2 => pp.bw_avg_p2 = x,
                    _ => pp.msg_rate_p2 = x,
                }
            }
        }
        Ok(())
    }

    /// One of the four --report-per-port fields.
    pub fn is_per_port(self) -> bool {
        matches!(
            self,
            ReportField::BwAvgP1
                | ReportField::MsgRateP1
                | ReportField::BwAvgP2
                | ReportField::MsgRateP2
        )
    }
}

/// All exchanges of a report, concatenated in wire order (one direction).
pub fn encode_bw_report(r: &BwReport, peer: &PeerVersion) -> Vec<u8> {
    ReportField::sequence(r.per_port.is_some())
        .iter()
        .flat_map(|f| f.encode(r, peer))
        .collect()
}

#[cfg(test)]
mod tests {

    #[test]
    fn binary_key_layout_is_perftests_struct() {
        let d = Dest {
            lid: 0x12,
            out_reads: 16,
            qpn: 0x00ab_cdef,
            psn: 0x0012_3456,
            rkey: 0xdead_beef,
            vaddr: 0x0000_5555_0000_1000,
            gid: Some([0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xfe, 0, 7, 1]),
            srqn: 0,
        };
        let b = encode_key_bin(&d, 1);
        assert_eq!(b.len(), 56);
        assert_eq!(&b[0..4], &[0, 0, 0, 0x12]);
        assert_eq!(&b[8..12], &[0, 0xab, 0xcd, 0xef]);
        assert_eq!(&b[16..20], &[0xde, 0xad, 0xbe, 0xef]);
        assert_eq!(&b[20..24], &[0; 4], "padding before the u64");
        assert_eq!(&b[24..32], &[0, 0, 0x55, 0x55, 0, 0, 0x10, 0]);
        assert_eq!(b[32], 0xfe);
        assert_eq!(&b[52..56], &[0, 0, 0, 1], "gid_index");
        assert_eq!(decode_key_bin(&b).unwrap(), d);
        // A 6.29 peer: 8 more bytes (tail_markers_vaddr) before the GID.
        let mut b629 = [0u8; 64];
        b629[..32].copy_from_slice(&b[..32]);
        b629[40..56].copy_from_slice(&b[32..48]);
        assert_eq!(decode_key_bin(&b629).unwrap(), d);
        // What we send a 6.29 peer (-z against master): its layout, tail 0.
        let ours = encode_key_bin_629(&d, 1);
        assert_eq!(&ours[32..40], &[0; 8], "tail_markers_vaddr");
        assert_eq!(&ours[40..56], &d.gid.unwrap());
        assert_eq!(&ours[60..64], &[0, 0, 0, 1], "gid_index");
        assert_eq!(decode_key_bin(&ours).unwrap(), d);
        // The TCP text form is named as such.
        let e = decode_key_bin(&[b'0'; KEY_LEN_GID])
            .unwrap_err()
            .to_string();
        assert!(e.contains("not using -R"), "{e}");
    }

    use super::*;
    use proptest::prelude::*;

    fn v(s: &str) -> PeerVersion {
        PeerVersion::from_text(s).unwrap()
    }

    #[test]
    fn version_encodes_nul_padded() {
        let b = encode_version(OUR_VERSION).unwrap();
        assert_eq!(&b[..8], b"6.27-rs\0");
        let v = decode_version(&b).unwrap();
        assert!((v.value - 6.27).abs() < 1e-9, "atof must still read 6.27");
        assert!(v.is_rdmaperf());
        assert!(!PeerVersion::from_text("6.06").unwrap().is_rdmaperf());
        assert_eq!(&b[7..], &[0u8; 9]);
        assert!(encode_version("0123456789abcdef").is_err());
        // Parameters ride in the padding; the string (all stock reads) is unchanged.
        let mut m = b;
        let pp = PeerParams {
            conn: b'U',
            num_qps: 2,
            iters: 1000,
            reversed: false,
            data_validation: false,
            explain: false,
            compare: false,
        };
        assert!(encode_params(&mut m, OUR_VERSION.len(), &pp));
        let v2 = decode_version(&m).unwrap();
        assert_eq!(v2.text, OUR_VERSION);
        assert_eq!(v2.params, Some(pp));
        assert_eq!(v2.params.unwrap().conn_name(), "UC");
        // Each flag rides in the connection byte and comes back decoded.
        let mut flags_round_trip = |q: PeerParams, conn_byte: u8| {
            assert!(encode_params(&mut m, OUR_VERSION.len(), &q));
            assert_eq!(m[OUR_VERSION.len() + 2], conn_byte, "{q:?}");
            assert_eq!(decode_version(&m).unwrap().params, Some(q));
        };
        let rev = PeerParams {
            reversed: true,
            ..pp
        };
        flags_round_trip(rev, b'U' | 0x80);
        let both = PeerParams {
            data_validation: true,
            ..rev
        };
        flags_round_trip(both, b'U' | 0xa0);
        for conn in [b'R', b'U', b'D'] {
            let ex = PeerParams {
                conn,
                explain: true,
                ..both
            };
            flags_round_trip(ex, conn | 0xa8);
        }
        assert_eq!(decode_version(&b).unwrap().params, None);
        // compare: its own mark, every other byte as before.
        let cmp = PeerParams {
            compare: true,
            ..pp
        };
        assert!(encode_params(&mut m, OUR_VERSION.len(), &cmp));
        assert_eq!(m[OUR_VERSION.len() + 1], COMPARE_MARK);
        assert_eq!(decode_version(&m).unwrap().params, Some(cmp));
        m[OUR_VERSION.len() + 1] = b'?';
        assert_eq!(decode_version(&m).unwrap().params, None, "an unknown mark");
        assert!(
            !encode_params(&mut m, 9, &pp),
            "no room after a 9-byte string"
        );
        assert!(encode_version("6.2\x007").is_err());
    }

    #[test]
    fn version_decodes_perftest_4_5_and_master() {
        let mut b = [0u8; 16];
        b[..4].copy_from_slice(b"6.06");
        let p = decode_version(&b).unwrap();
        assert_eq!(p.text, "6.06");
        assert_eq!(p.value, 6.06);
        b[..4].copy_from_slice(b"6.29");
        assert_eq!(decode_version(&b).unwrap().value, 6.29);
        // Trailing garbage after the number is ignored, as atof does.
        let mut r = [0u8; 16];
        r[..7].copy_from_slice(b"6.27-rs");
        assert_eq!(decode_version(&r).unwrap().value, 6.27);
    }

    #[test]
    fn version_rejects_old_and_foreign_peers() {
        let mut b = [0u8; 16];
        b[..4].copy_from_slice(b"5.60");
        let e = decode_version(&b).unwrap_err().to_string();
        assert!(e.contains("perftest version \"5.60\""), "{e}");
        assert!(e.contains("5.70"), "{e}");
        let http = b"GET / HTTP/1.1\r\n";
        let e = decode_version(http).unwrap_err().to_string();
        assert!(e.contains("not perftest"), "{e}");
        assert!(e.contains("47 45 54 20"), "{e}");
        assert!(decode_version(&b[..15]).is_err());
    }

    #[test]
    fn atof_follows_c() {
        assert_eq!(atof(b"  6.06abc"), Some(6.06));
        assert_eq!(atof(b"6."), Some(6.0));
        assert_eq!(atof(b".5"), Some(0.5));
        assert_eq!(atof(b"-1e2x"), Some(-100.0));
        assert_eq!(atof(b"1e"), Some(1.0));
        assert_eq!(atof(b"+7"), Some(7.0));
        assert_eq!(atof(b"e5"), None);
        assert_eq!(atof(b"."), None);
        assert_eq!(atof(b""), None);
        assert_eq!(atof(b"\xff\xfe"), None);
    }

    #[test]
    fn version_gates() {
        let modern = v("6.06");
        assert!(modern.has_sysdata() && modern.has_mtu());
        assert_eq!(modern.mtu_len(), 2);
        assert_eq!(modern.iters_len(), 8);
        let old = v("5.30");
        assert!(!old.has_sysdata());
        assert_eq!(old.mtu_len(), 4);
        assert_eq!(old.iters_len(), 4);
    }

    #[test]
    fn sysdata_is_big_endian() {
        assert_eq!(encode_sysdata(4096), [0, 0, 0x10, 0]);
        assert_eq!(decode_sysdata("cache_line", &[0, 0, 0, 64]).unwrap(), 64);
        assert!(decode_sysdata("cache_line", &[0, 0, 0, 0]).is_err());
        assert!(decode_sysdata("cache_line", &[0x80, 0, 0, 0]).is_err());
        let e = decode_sysdata("cycle_buffer", &[0, 1]).unwrap_err();
        assert_eq!(e.step, "cycle_buffer");
        assert_eq!(&*e.bytes, [0, 1]);
    }

    #[test]
    fn mtu_is_ascii_digit_and_nul() {
        assert_eq!(encode_mtu(3, MTU_LEN).unwrap(), b"3\0");
        assert_eq!(encode_mtu(5, MTU_LEN_OLD).unwrap(), b"5\0\0\0");
        assert!(encode_mtu(0, 2).is_err());
        assert!(encode_mtu(6, 2).is_err());
        assert!(encode_mtu(3, 3).is_err());
        assert_eq!(decode_mtu(b"3\0").unwrap(), 3);
        assert_eq!(decode_mtu(b"1\0\x7f\x00").unwrap(), 1);
        assert!(decode_mtu(b"7\0").is_err());
        assert!(decode_mtu(b"\0\0").is_err());
        assert!(decode_mtu(b"x").is_err());
        assert_eq!(mtu_bytes(1), 256);
        assert_eq!(mtu_bytes(5), 4096);
    }

    fn dest(gid: Option<[u8; 16]>) -> Dest {
        Dest {
            lid: 0x1a,
            out_reads: 16,
            qpn: 0x11,
            psn: 0xabcdef,
            rkey: 0x1234,
            vaddr: 0x7f00_0000_1000,
            gid,
            srqn: 0,
        }
    }

    const PLAIN: &[u8] = b"001a:0010:000011:abcdef:00001234:00007f0000001000:00000000\0";
    const WITH_GID: &[u8] = b"001a:0010:000011:abcdef:00001234:00007f0000001000:\
        00:00:00:00:00:00:00:00:00:00:ff:ff:7f:00:00:01:00000000:\0";
    const V4_GID: [u8; 16] = [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, 0, 1];

    #[test]
    fn key_message_formats_match_perftest() {
        assert_eq!(PLAIN.len(), KEY_LEN);
        assert_eq!(WITH_GID.len(), KEY_LEN_GID);
        assert_eq!(encode_key(&dest(None)).unwrap(), PLAIN);
        assert_eq!(encode_key(&dest(Some(V4_GID))).unwrap(), WITH_GID);
        assert_eq!(decode_key(PLAIN).unwrap(), dest(None));
        assert_eq!(decode_key(WITH_GID).unwrap(), dest(Some(V4_GID)));
    }

    #[test]
    fn key_message_limits() {
        let mut d = dest(None);
        d.qpn = 0x100_0000;
        assert!(encode_key(&d).unwrap_err().problem.contains("qpn"));
        let mut d = dest(None);
        d.out_reads = 0x1_0000;
        assert!(encode_key(&d).is_err());
        let d = Dest {
            lid: u16::MAX,
            out_reads: 0xffff,
            qpn: 0xff_ffff,
            psn: 0xff_ffff,
            rkey: u32::MAX,
            vaddr: u64::MAX,
            gid: Some([0xff; 16]),
            srqn: u32::MAX,
        };
        assert_eq!(decode_key(&encode_key(&d).unwrap()).unwrap(), d);
    }

    #[test]
    fn key_message_decode_errors_name_the_field() {
        let mut b = PLAIN.to_vec();
        b[12] = b'z';
        let e = decode_key(&b).unwrap_err().to_string();
        assert!(e.contains("field qpn at byte 10"), "{e}");
        let mut b = PLAIN.to_vec();
        b[58] = b'0';
        assert!(decode_key(&b).unwrap_err().problem.contains("NUL"));
        let mut b = WITH_GID.to_vec();
        b[106] = b'x';
        assert!(decode_key(&b).unwrap_err().problem.contains("trailing ':'"));
        assert!(decode_key(&PLAIN[..58]).is_err());
        // Uppercase hex is accepted (sscanf does).
        let upper: Vec<u8> = PLAIN.iter().map(|c| c.to_ascii_uppercase()).collect();
        assert_eq!(decode_key(&upper).unwrap(), dest(None));
    }

    #[test]
    fn key_message_format_mismatch_is_explained() {
        // First 59 bytes of a GID message, read by a side without GID.
        assert!(looks_like_gid_key(WITH_GID));
        let e = decode_key(&WITH_GID[..KEY_LEN]).unwrap_err();
        assert!(e.problem.contains("108-byte key message with GID"), "{e}");
        assert!(is_plain_key(PLAIN));
        assert!(!is_plain_key(WITH_GID));
    }

    #[test]
    fn bw_report_fields_are_big_endian() {
        let peer = v("6.06");
        let r = BwReport {
            size: 65536,
            iters: 5000,
            bw_peak: 1.5,
            bw_avg: -2.0,
            msg_rate: 0.0,
            per_port: None,
        };
        let b = encode_bw_report(&r, &peer);
        assert_eq!(b.len(), 40);
        assert_eq!(&b[..8], &[0, 0, 0, 0, 0, 1, 0, 0]);
        assert_eq!(&b[8..16], &5000u64.to_be_bytes());
        assert_eq!(&b[16..24], &[0x3f, 0xf8, 0, 0, 0, 0, 0, 0]);
        assert_eq!(&b[24..32], &[0xc0, 0, 0, 0, 0, 0, 0, 0]);
        let mut back = BwReport::default();
        for (i, f) in ReportField::sequence(false).iter().enumerate() {
            f.decode(&mut back, &b[i * 8..i * 8 + 8], &peer).unwrap();
        }
        assert_eq!(back, r);
        // Old peers get a 4-byte iters.
        let old = v("5.32");
        assert_eq!(ReportField::Iters.encode(&r, &old), 5000u32.to_be_bytes());
        assert!(ReportField::Size.decode(&mut back, &[0; 4], &peer).is_err());
    }

    #[test]
    fn bw_report_per_port_adds_four_values() {
        let peer = v("6.06");
        let pp = PerPortReport {
            bw_avg_p1: 1.0,
            msg_rate_p1: 2.0,
            bw_avg_p2: 3.0,
            msg_rate_p2: 4.0,
        };
        let r = BwReport {
            per_port: Some(pp),
            ..BwReport::default()
        };
        let b = encode_bw_report(&r, &peer);
        assert_eq!(b.len(), 72);
        let mut back = BwReport::default();
        for (i, f) in ReportField::sequence(true).iter().enumerate() {
            f.decode(&mut back, &b[i * 8..i * 8 + 8], &peer).unwrap();
        }
        assert_eq!(back, r);
    }

    #[test]
    fn show_bytes_truncates_and_escapes() {
        let s = show_bytes(b"ab\0\n");
        assert_eq!(s, "61 62 00 0a \"ab\\0\\n\"");
        let long = show_bytes(&[b'x'; 100]);
        assert!(long.contains("(+52 more)"), "{long}");
    }

    fn arb_dest() -> impl Strategy<Value = Dest> {
        (
            any::<u16>(),
            0u32..=0xffff,
            0u32..=0xff_ffff,
            0u32..=0xff_ffff,
            any::<u32>(),
            any::<u64>(),
            proptest::option::of(any::<[u8; 16]>()),
            any::<u32>(),
        )
            .prop_map(|(lid, out_reads, qpn, psn, rkey, vaddr, gid, srqn)| Dest {
                lid,
                out_reads,
                qpn,
                psn,
                rkey,
                vaddr,
                gid,
                srqn,
            })
    }

    proptest! {
        #[test]
        fn decoders_never_panic(b in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode_version(&b);
            let _ = atof(&b);
            let _ = decode_sysdata("cycle_buffer", &b);
            let _ = decode_mtu(&b);
            let _ = decode_key(&b);
            let _ = looks_like_gid_key(&b);
            let _ = is_plain_key(&b);
            let peer = v("6.06");
            let mut r = BwReport::default();
            for f in ReportField::sequence(true) {
                let _ = f.decode(&mut r, &b, &peer);
            }
            let _ = show_bytes(&b);
        }

        #[test]
        fn decoders_never_panic_at_exact_sizes(
            b in proptest::collection::vec(any::<u8>(), 108),
            n in prop::sample::select(vec![2usize, 4, 16, 59, 108]),
        ) {
            let b = &b[..n];
            let _ = decode_version(b);
            let _ = decode_mtu(b);
            let _ = decode_key(b);
        }

        #[test]
        fn key_decoder_survives_corruption(
            d in arb_dest(),
            at in 0usize..108,
            byte in any::<u8>(),
            cut in 0usize..108,
        ) {
            let mut b = encode_key(&d).unwrap();
            let at = at % b.len();
            b[at] = byte;
            let _ = decode_key(&b);
            let _ = decode_key(&b[..cut.min(b.len())]);
        }

        #[test]
        fn key_roundtrip(d in arb_dest()) {
            let b = encode_key(&d).unwrap();
            prop_assert_eq!(b.len(), d.key_len());
            prop_assert_eq!(decode_key(&b).unwrap(), d);
        }

        #[test]
        fn report_roundtrip_keeps_bits(
            size in any::<u64>(), iters in any::<u64>(),
            bits in any::<[u64; 7]>(),
        ) {
            let peer = v("6.29");
            let r = BwReport {
                size, iters,
                bw_peak: f64::from_bits(bits[0]),
                bw_avg: f64::from_bits(bits[1]),
                msg_rate: f64::from_bits(bits[2]),
                per_port: Some(PerPortReport {
                    bw_avg_p1: f64::from_bits(bits[3]),
                    msg_rate_p1: f64::from_bits(bits[4]),
                    bw_avg_p2: f64::from_bits(bits[5]),
                    msg_rate_p2: f64::from_bits(bits[6]),
                }),
            };
            let b = encode_bw_report(&r, &peer);
            let mut back = BwReport::default();
            let mut at = 0;
            for f in ReportField::sequence(true) {
                let n = f.len(&peer);
                f.decode(&mut back, &b[at..at + n], &peer).unwrap();
                at += n;
            }
            prop_assert_eq!(encode_bw_report(&back, &peer), b);
        }

        #[test]
        fn version_roundtrip(major in 5u32..100, minor in 70u32..100) {
            let text = format!("{major}.{minor}");
            let b = encode_version(&text).unwrap();
            let p = decode_version(&b).unwrap();
            prop_assert_eq!(&p.text, &text);
            prop_assert_eq!(encode_version(&p.text).unwrap(), b);
        }
    }
}
