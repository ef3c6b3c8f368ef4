//! A raw tool's command line as perftest reads it (`parser`,
//! `set_raw_eth_parameters`, `force_dependecies`, `check_link_and_mtu`):
//! the values, the old and new address names folded into perftest's
//! server/client fields, the rules ([`super::rules::RULES`], in perftest's
//! order), then what perftest derives: duplex for the latency tools, the
//! inline size, `-s` held to 64..MTU with perftest's notes.

use super::args::RawArgs;
pub use super::ctx::{Raw, Side};
use super::frame::{self, FrameSpec, HeaderOpts, Ip, L4};
use super::rate::{self, RawRate};
use super::tools::{RawTool, Test};
use super::values::{self, Addr};
use crate::cli::defaults as def;
use crate::report::stats::no_peak_rule;
use crate::report::text::PEAK_WARNING;

/// perftest's MTU bounds for raw Ethernet and its default (`set_eth_mtu`).
pub const MIN_MTU: u64 = 64;
pub const MAX_MTU: u64 = 9600;
pub const DEF_MTU: u64 = 1518;
/// `-I`'s default in raw_ethernet_lat (SEND on a latency test).
pub const DEF_INLINE_LAT: u32 = 236;

/// The resolved parameters of one raw tool run.
#[derive(Clone, Debug)]
pub struct RawParams {
    pub raw: Raw,
    pub device: Option<String>,
    pub ib_port: u8,
    /// `-s`, CRC included, within 64..=MTU.
    pub size: u64,
    pub mtu: u64,
    pub inline_size: u32,
    pub header: HeaderOpts,
    pub flow_labels: Vec<u32>,
    pub promiscuous: bool,
    pub sniffer: bool,
    pub reply_every: u32,
    pub report_gbits: bool,
    /// No BW peak: `-N`, or perftest's rules (raw-eth-bw with `-D`, a
    /// one-way server, more than 20000 iterations; `stats::no_peak_rule`).
    pub no_peak: bool,
    /// `-U` and `-H` (latency tools): the samples unsorted, and sorted.
    pub unsorted: bool,
    pub histogram: bool,
    /// `-l`: frames per post call (perftest's post list).
    pub post_list: u32,
    /// `--post` (rdmaperf's): the sender's post method as given, None for auto.
    pub post: Option<String>,
    /// `--burst_size`, `--typical_pkt_size`, `--rate_limit`, `--rate_units`,
    /// `--rate_limit_type` as given (the tools that take no rate refuse them).
    pub pacing: Vec<(&'static str, String)>,
    /// raw-eth-bw's rate limit, read with perftest's rules (`super::rate`);
    /// None for the other tools and for an unlimited run.
    pub rate: Option<RawRate>,
    /// `--payload_file_path`: the pattern the send buffers repeat under
    /// the headers (at most `-s` bytes of it, as perftest keeps).
    pub payload: Option<Vec<u8>>,
    /// perftest's messages for what it changed (size clamped, duplex forced).
    pub notes: Vec<String>,
}

impl RawParams {
    /// What fills the send buffers under the frames' headers: the
    /// `--payload_file_path` pattern, else `perftest_rand` from `seed`.
    pub fn body(&self, seed: u32) -> super::slots::Body<'_> {
        match &self.payload {
            Some(pat) => super::slots::Body::Pattern(pat),
            None => super::slots::Body::Rand(seed),
        }
    }
}

/// `--payload_file_path`'s pattern, read with the other tools' parser
/// (`cli::mem_opts::parse_payload`: perftest's comma-separated
/// little-endian DWORDs), at most `size` bytes.
fn payload(a: &RawArgs, size: u64) -> Result<Option<Vec<u8>>, String> {
    let Some(path) = a.value("payload_file_path") else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("--payload_file_path {path}: cannot read it: {e}"))?;
    crate::cli::mem_opts::parse_payload(&text, size)
        .map(Some)
        .map_err(|e| format!("--payload_file_path {path}: {e}"))
}

fn opt<T>(
    a: &RawArgs,
    long: &str,
    f: impl FnOnce(&str) -> Result<T, String>,
) -> Result<Option<T>, String> {
    a.value(long).map(f).transpose()
}

fn n(
    a: &RawArgs,
    long: &str,
    flag: &str,
    what: &str,
    lo: u64,
    hi: u64,
    d: u64,
) -> Result<u64, String> {
    Ok(opt(a, long, |s| values::num(flag, what, s, lo, hi))?.unwrap_or(d))
}

fn port(a: &RawArgs, long: &str, flag: &str) -> Result<Option<u16>, String> {
    opt(a, long, |s| {
        values::num(flag, "a UDP/TCP port", s, 0, 65535).map(|v| v as u16)
    })
}

/// The addresses under their old (`-B -E -J -j -K -k`) or new
/// (`--local_*`, `--remote_*`) names, as perftest's server/client fields.
fn addresses(a: &RawArgs, r: &mut Raw) -> Result<(), String> {
    const OLD: [&str; 6] = [
        "source_mac",
        "dest_mac",
        "dest_ip",
        "source_ip",
        "dest_port",
        "source_port",
    ];
    const NEW: [&str; 6] = [
        "local_mac",
        "remote_mac",
        "local_ip",
        "remote_ip",
        "local_port",
        "remote_port",
    ];
    r.old_names = OLD.iter().any(|f| a.has(f));
    r.new_names = NEW.iter().any(|f| a.has(f));
    let v6 = r.raw_ipv6;
    let ip = |long: &str, flag: &str| opt(a, long, |s| values::addr(flag, s, v6));
    if !r.new_names {
        r.src_mac = opt(a, "source_mac", |s| values::mac("-B", s))?;
        r.dst_mac = opt(a, "dest_mac", |s| values::mac("-E", s))?;
        r.server_ip = ip("dest_ip", "-J")?;
        r.client_ip = ip("source_ip", "-j")?;
        r.server_port = port(a, "dest_port", "-K")?;
        r.client_port = port(a, "source_port", "-k")?;
        return Ok(());
    }
    r.src_mac = opt(a, "local_mac", |s| values::mac("--local_mac", s))?;
    r.dst_mac = opt(a, "remote_mac", |s| values::mac("--remote_mac", s))?;
    let (local_ip, remote_ip) = (
        ip("local_ip", "--local_ip")?,
        ip("remote_ip", "--remote_ip")?,
    );
    let (lp, rp) = (
        port(a, "local_port", "--local_port")?,
        port(a, "remote_port", "--remote_port")?,
    );
    // set_raw_eth_parameters: local is the server's on a server, the client's on a client.
    if r.side == Some(Side::Client) {
        (r.server_ip, r.client_ip, r.server_port, r.client_port) = (remote_ip, local_ip, rp, lp);
    } else {
        (r.server_ip, r.client_ip, r.server_port, r.client_port) = (local_ip, remote_ip, lp, rp);
    }
    Ok(())
}

fn side(a: &RawArgs) -> Option<Side> {
    // The last of -Z/-P wins, as perftest's `machine` keeps the last.
    a.given.iter().rev().find_map(|g| match g.long {
        "server" => Some(Side::Server),
        "client" => Some(Side::Client),
        _ => None,
    })
}

fn raw_of(tool: RawTool, a: &RawArgs) -> Result<Raw, String> {
    let bw = tool.test() != Test::Lat;
    let iters = n(
        a,
        "iters",
        "-n",
        "Iteration num",
        def::MIN_ITER,
        def::MAX_ITER,
        def::DEF_ITERS,
    )?;
    let tx_d = if bw { def::DEF_TX_BW } else { def::DEF_TX_LAT };
    let mut r = Raw {
        tool,
        side: side(a),
        old_names: false,
        new_names: false,
        src_mac: None,
        dst_mac: None,
        server_ip: None,
        client_ip: None,
        server_port: None,
        client_port: None,
        tcp: a.has("tcp"),
        raw_ipv6: a.has("raw_ipv6"),
        duplex: a.has("bidirectional"),
        mac_fwd: a.has("mac_fwd"),
        raw_mcast: a.has("raw_mcast"),
        flows: n(a, "flows", "--flows", "flows", 1, 65535, 1)? as u16,
        flows_burst: n(
            a,
            "flows_burst",
            "--flows_burst",
            "flows burst",
            1,
            65535,
            1,
        )? as u16,
        iters,
        duration: opt(a, "duration", |s| {
            values::num("-D", "Duration period", s, 1, u32::MAX as u64)
        })?,
        qps: n(a, "qp", "-q", "num of Qps", 1, def::MAX_QP_NUM.into(), 1)?,
        tx_depth: n(
            a,
            "tx-depth",
            "-t",
            "Tx depth",
            1,
            def::MAX_TX.into(),
            tx_d.into(),
        )?,
        rx_depth: n(
            a,
            "rx-depth",
            "-r",
            "Rx depth",
            1,
            16384,
            def::DEF_RX_SEND.into(),
        )?,
        cq_mod: n(
            a,
            "cq-mod",
            "-Q",
            "CQ moderation",
            1,
            def::MAX_CQ_MOD.into(),
            def::DEF_CQ_MOD.into(),
        )?,
    };
    addresses(a, &mut r)?;
    Ok(r)
}

/// Resolves a raw tool's command line, or the refusal that names the fix.
pub fn resolve(tool: RawTool, a: &RawArgs) -> Result<RawParams, String> {
    if let Some(w) = a.positional.first() {
        return Err(format!(
            "'{w}': raw Ethernet tools take no server name: choose the side with --server or \
             --client and address the peer with -E (its MAC)"
        ));
    }
    let mut raw = raw_of(tool, a)?;
    let mut notes = Vec::new();
    super::rules::check(&raw)?;
    if n(a, "post_list", "-l", "post list", 1, i32::MAX as u64, 1)? > 1
        && matches!(tool.test(), Test::Lat | Test::FsRate)
    {
        return Err(format!(
            "-l: post list is supported in BW tests only (perftest's rule), not in {}: drop -l",
            tool.name()
        ));
    }
    let post_list = n(a, "post_list", "-l", "post list", 1, raw.tx_depth.max(1), 1)?;
    post_list_rules(&mut raw, post_list, a.value("cq-mod").is_some(), &mut notes)?;
    derive(&mut raw, &mut notes);
    let mtu = n(a, "mtu", "-m", "MTU", MIN_MTU, MAX_MTU, DEF_MTU)?;
    let test = tool.test();
    // perftest: DEF_SIZE_BW on bw tests only (LAT_BY_BW takes the latency
    // default, raised to 64 B).
    let size_default = if matches!(test, Test::Lat | Test::LatByBw) {
        def::DEF_SIZE_LAT
    } else {
        def::DEF_SIZE_BW
    };
    let asked = opt(a, "size", values::size)?.unwrap_or(size_default);
    let size = clamp_size(asked, mtu, &mut notes);
    let vlan_pcp = vlan(a)?;
    let p = RawParams {
        device: a.value("ib-dev").map(String::from),
        ib_port: n(a, "ib-port", "-i", "IB port", 1, 254, 1)? as u8,
        size,
        mtu,
        inline_size: inline(a, test)?,
        header: HeaderOpts {
            vlan_pcp,
            ethertype: opt(a, "ethertype", values::ethertype)?,
            tos: opt(a, "tos", |s| {
                values::num("-T", "TOS", s, 0, 255).map(|v| v as u8)
            })?,
            hop_limit: n(
                a,
                "hop_limit",
                "-L",
                "Hop Limit",
                0,
                255,
                frame::DEF_HOP_LIMIT.into(),
            )? as u8,
        },
        flow_labels: opt(a, "flow_label", values::flow_labels)?.unwrap_or_default(),
        promiscuous: a.has("promiscuous"),
        sniffer: a.has("sniffer"),
        reply_every: n(
            a,
            "reply_every",
            "--reply_every",
            "reply_every",
            1,
            u32::MAX.into(),
            1,
        )? as u32,
        report_gbits: a.has("report_gbits"),
        no_peak: no_peak(a, &raw, &mut notes),
        unsorted: a.has("report-unsorted"),
        histogram: a.has("report-histogrm"),
        post_list: post_list as u32,
        post: opt(a, "post", post_word)?.filter(|w| w != "auto"),
        pacing: pacing(a),
        rate: rate::rate_of(a, &raw, &mut notes)?,
        payload: payload(a, size)?,
        notes,
        raw,
    };
    headers_fit(&p)?;
    if test == Test::Bw && (p.unsorted || p.histogram) {
        return Err(format!(
            "{}: Available only on Latency tests (perftest's rule): drop it, or run raw-eth-lat",
            if p.unsorted { "-U" } else { "-H" }
        ));
    }
    Ok(p)
}

/// perftest's peak rules for raw-eth-bw (its other raw tools are no BW
/// test: they keep no peak and say nothing), with its warning as a note
/// when a rule, not `-N`, turns the peak off.
fn no_peak(a: &RawArgs, r: &Raw, notes: &mut Vec<String>) -> bool {
    if r.tool.test() != Test::Bw {
        return true;
    }
    let one_way_server = r.side == Some(Side::Server) && !r.duplex;
    let iters = if r.duration.is_some() { 0 } else { r.iters };
    let (off, warn) = no_peak_rule(
        a.has("noPeak"),
        r.duration.is_some(),
        false,
        one_way_server,
        iters,
    );
    if warn {
        notes.push(PEAK_WARNING.trim().to_string());
    }
    off
}

/// perftest's post list rules (`force_dependecies`, before its `-v`
/// moderation clamp; the BW-tests-only one is the caller's): by
/// iterations `-n` a multiple of `-l`; `-Q` follows `-l` unless given, and
/// a given `-Q` must divide `-l` (so every list ends on a signalled frame's
/// boundary and a window of whole lists always holds one to wait for).
fn post_list_rules(
    r: &mut Raw,
    l: u64,
    q_given: bool,
    notes: &mut Vec<String>,
) -> Result<(), String> {
    if l <= 1 {
        return Ok(());
    }
    if r.duration.is_none() && r.iters % l != 0 {
        return Err(format!(
            "-n {} is not a multiple of -l {l} (perftest: Number of iterations must be a \
             multiple of post list size): make -n a multiple of -l",
            r.iters
        ));
    }
    if !q_given {
        r.cq_mod = l;
        notes.push("Post List requested - CQ moderation will be the size of the post list".into());
    } else if l % r.cq_mod != 0 {
        return Err(format!(
            "-l {l} is not a multiple of -Q {} (perftest: Post list size must be a multiple of \
             CQ moderation): make -l a multiple of -Q, or drop -Q (it then follows -l)",
            r.cq_mod
        ));
    }
    Ok(())
}

/// What perftest changes after its rules: `-v` forces duplex (with its
/// note) and CQ moderation under the RX depth; the latency tools run duplex.
fn derive(r: &mut Raw, notes: &mut Vec<String>) {
    if r.mac_fwd && !r.duplex {
        notes.push("mac_fwd should run in duplex mode only. changing to duplex mode.".into());
        r.duplex = true;
    }
    if r.mac_fwd && r.cq_mod >= r.rx_depth {
        r.cq_mod = r.rx_depth.min(r.tx_depth);
        notes.push(format!(
            "CQ moderation can't be grater than rx depth. Changing CQ moderation to min( rx depth , tx depth) = {}.",
            r.cq_mod
        ));
    }
    if matches!(r.tool.test(), Test::Lat | Test::LatByBw) {
        r.duplex = true;
    }
    // raw_ethernet_bw's multicast sender has no reply port.
    if r.raw_mcast {
        r.client_port = r.client_port.map(|_| 0);
    }
    if r.tx_depth > r.iters {
        r.tx_depth = r.iters;
    }
}

/// perftest's `check_link_and_mtu`: above the MTU becomes the MTU, below 64
/// becomes 64, each with perftest's note.
fn clamp_size(asked: u64, mtu: u64, notes: &mut Vec<String>) -> u64 {
    if asked > mtu {
        notes.push(format!(
            "Max msg size in RawEth is MTU {mtu} Changing msg size to this MTU"
        ));
        mtu
    } else if asked < frame::MIN_SIZE as u64 {
        notes.push("Min msg size for RawEth is 64B - changing msg size to 64".into());
        frame::MIN_SIZE as u64
    } else {
        asked
    }
}

/// `--post`'s word (rdmaperf's): one of the raw sender's methods or `auto`.
fn post_word(w: &str) -> Result<String, String> {
    const WORDS: [&str; 5] = ["post-send", "wr-api", "direct", "direct-mpw", "auto"];
    if WORDS.contains(&w) {
        Ok(w.to_string())
    } else {
        Err(format!(
            "--post {w}: not a raw post method: use post-send, wr-api, direct, direct-mpw or auto"
        ))
    }
}

/// `-I`: the user's, else perftest's default: 236 for raw_ethernet_lat, 0 otherwise.
fn inline(a: &RawArgs, test: Test) -> Result<u32, String> {
    let d = if test == Test::Lat { DEF_INLINE_LAT } else { 0 };
    Ok(n(
        a,
        "inline_size",
        "-I",
        "Max inline",
        0,
        def::MAX_INLINE.into(),
        d.into(),
    )? as u32)
}

/// `--vlan_en` (priority 1) or `--vlan_pcp N` (0..8, which turns the tag on).
fn vlan(a: &RawArgs) -> Result<Option<u8>, String> {
    let pcp = opt(a, "vlan_pcp", |s| {
        values::num("--vlan_pcp", "VLAN PCP", s, 0, 8)
    })?;
    Ok(match pcp {
        Some(p) => Some(p as u8),
        None if a.has("vlan_en") => Some(1),
        None => None,
    })
}

fn pacing(a: &RawArgs) -> Vec<(&'static str, String)> {
    a.given
        .iter()
        .filter(|g| {
            [
                "burst_size",
                "typical_pkt_size",
                "rate_limit",
                "rate_units",
                "rate_limit_type",
            ]
            .contains(&g.long)
        })
        .map(|g| (g.long, g.value.clone().unwrap_or_default()))
        .collect()
}

/// rdmaperf's own rule: the headers and the CRC must fit in `-s` (perftest
/// writes them past a frame too small for them).
fn headers_fit(p: &RawParams) -> Result<(), String> {
    let spec = p.frame_spec();
    let need = (spec.header_len() + frame::CRC) as u64;
    if need > p.size {
        return Err(format!(
            "-s {}: these headers and the CRC need {need} bytes: use -s {need} or more, or fewer headers",
            p.size
        ));
    }
    Ok(())
}

impl RawParams {
    /// The frame this side sends (raw_ethernet_resources.c's
    /// `send_set_up_connection`): a client from its `-j`/`-k` to the
    /// server's `-J`/`-K`, a duplex server the other way.
    pub fn frame_spec(&self) -> FrameSpec {
        let r = &self.raw;
        let client = r.side != Some(Side::Server);
        let (mine, theirs, my_port, their_port) = if client {
            (r.client_ip, r.server_ip, r.client_port, r.server_port)
        } else {
            // perftest fills the server's own address only when -j was given.
            (
                r.client_ip.and(r.server_ip),
                r.client_ip,
                r.server_port,
                r.client_port,
            )
        };
        let ip = (r.server_ip.is_some() || r.client_ip.is_some())
            .then(|| ip_pair(mine, theirs, r.raw_ipv6));
        let l4 = (r.server_port.is_some() && r.client_port.is_some()).then(|| L4 {
            tcp: r.tcp,
            src_port: my_port.unwrap_or(0),
            dst_port: their_port.unwrap_or(0),
        });
        FrameSpec {
            size: self.size as usize,
            src_mac: r.src_mac.unwrap_or_default(),
            dst_mac: self.dst_mac(),
            header: self.header,
            ip,
            l4: ip.and(l4),
        }
    }

    /// `--raw_mcast`: the group a server joins (`ibv_attach_mcast`), as
    /// raw_ethernet_bw builds it: zeros, then the multicast MAC of `-J` in
    /// bytes 10..16. None without `--raw_mcast`.
    pub fn mgid(&self) -> Option<[u8; 16]> {
        self.raw.raw_mcast.then(|| {
            let mut g = [0u8; 16];
            g[10..].copy_from_slice(&self.dst_mac());
            g
        })
    }

    /// `-E`, or with `--raw_mcast` the IPv4 multicast MAC of `-J`.
    pub fn dst_mac(&self) -> [u8; 6] {
        let r = &self.raw;
        if !r.raw_mcast {
            return r.dst_mac.unwrap_or_default();
        }
        let ip = match r.server_ip {
            Some(Addr::V4(b)) => b,
            _ => [0; 4],
        };
        [0x01, 0x00, 0x5e, ip[1] & 0x7f, ip[2], ip[3]]
    }
}

fn ip_pair(mine: Option<Addr>, theirs: Option<Addr>, v6: bool) -> Ip {
    let v4_of = |a: Option<Addr>| match a {
        Some(Addr::V4(b)) => b,
        _ => [0; 4],
    };
    let v6_of = |a: Option<Addr>| match a {
        Some(Addr::V6(b)) => b,
        _ => [0; 16],
    };
    if v6 {
        Ip::V6 {
            src: v6_of(mine),
            dst: v6_of(theirs),
        }
    } else {
        Ip::V4 {
            src: v4_of(mine),
            dst: v4_of(theirs),
        }
    }
}
