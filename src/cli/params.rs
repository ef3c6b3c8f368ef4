//! Validated test parameters: perftest's per-tool defaults and its dependency
//! rules (`force_dependecies` and friends), each rejection naming the rule and
//! the fix.

use super::args::PerfArgs;
pub use super::kinds::{AtomicType, Conn, ConnOpts, Kind, PostChoice, Tool, Verb};
pub use super::rate::RateLimit;
use crate::post::Op;
use std::path::PathBuf;

pub const DEF_PORT: u16 = 18515;
pub const DEF_SIZE_BW: u64 = 65536;
pub const DEF_SIZE_LAT: u64 = 2;
pub const DEF_SIZE_ATOMIC: u64 = 8;
pub const DEF_ITERS: u64 = 1000;
pub const DEF_ITERS_WB: u64 = 5000;
pub const DEF_TX_BW: u32 = 128;
pub const DEF_TX_LAT: u32 = 1;
pub const DEF_RX_SEND: u32 = 512;
pub const DEF_CQ_MOD: u32 = 100;
pub const DEF_QP_TIME: u8 = 14;
pub const DEF_RETRY_COUNT: u8 = 7;
pub const MAX_SIZE: u64 = 8 * 1024 * 1024;
pub const MIN_ITER: u64 = 5;
/// perftest master's MAX_ITER (4.5: 100000000).
pub const MAX_ITER: u64 = 1 << 32;
pub const MAX_TX: u32 = 15000;
pub const MAX_QP_NUM: u32 = 16384;
pub const MAX_CQ_MOD: u32 = 1024;
pub const MSG_SIZE_CQ_MOD_LIMIT: u64 = 8192;
pub const UC_MAX_RX: u64 = 16000;
/// perftest computes the peak only up to this many iterations.
pub const PEAK_MAX_ITERS: u64 = 20000;
pub const DEF_JSON_FILE: &str = "perftest_out.json";
/// perftest's CTX_POLL_BATCH: completions per poll call in the bw loops.
pub const DEF_CQE_POLL: u32 = 16;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum OutputKind {
    Bandwidth,
    MessageRate,
    Latency,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Mode {
    Iterations,
    Duration { secs: u32, margin: u32 },
}

/// Everything a test needs, with perftest's defaults applied.
#[derive(Clone, Debug)]
pub struct Params {
    pub tool: Tool,
    pub server: Option<String>,
    pub port: u16,
    pub ib_dev: Option<String>,
    pub ib_port: u8,
    pub gid_index: Option<u32>,
    /// Sizes to run (one unless -a).
    pub sizes: Vec<u64>,
    pub all_sizes: bool,
    /// Iterations per QP (0 in duration mode).
    pub iters: u64,
    pub mode: Mode,
    pub run_infinitely: bool,
    pub tx_depth: u32,
    pub rx_depth: u32,
    pub cq_mod: u32,
    pub post_list: u32,
    pub num_qps: u32,
    pub mtu: Option<u32>,
    pub qp_timeout: u8,
    pub sl: u8,
    pub inline_size: u32,
    pub conn: Conn,
    pub duplex: bool,
    pub use_event: bool,
    pub outs: Option<u32>,
    pub atomic_type: AtomicType,
    pub mr_per_qp: bool,
    pub rdma_cm: bool,
    pub report_gbits: bool,
    pub no_peak: bool,
    pub output: Option<OutputKind>,
    pub limit_bw: Option<f64>,
    pub limit_msgrate: Option<f64>,
    pub json_file: Option<PathBuf>,
    pub with_imm: bool,
    pub post: PostChoice,
    pub loopback: bool,
    pub perftest_stats: bool,
    /// `--explain`: counters and facts bracket the run; the verdict follows the result.
    pub explain: bool,
    pub ctrl_timeout_s: u64,
    pub cq_timeout_s: u64,
    pub check_landing: bool,
    pub no_cost: bool,
    pub threads: u32,
    pub cpus: Option<Vec<usize>>,
    /// Latency sample reports (`-U`, `-H`, `--samples-file`) and units (`-C`).
    pub samples: SampleReport,
    /// GRH of the data QPs (`--tclass`, `--flow_label`) and `--pkey_index`.
    pub qos: Qos,
    /// `--cpu_util` (duration mode).
    pub cpu_util: bool,
    /// `-I` was given (perftest's notice when the device turns inline off).
    pub inline_given: bool,
    /// `-s` was given (perftest's `req_size`: UD refuses, not clamps, a size above the MTU).
    pub size_given: bool,
    /// perftest's notices about parameters it changed, printed at the start.
    pub notices: Vec<String>,
    /// `--retry_count` (-R data QPs; perftest's default 7).
    pub retry_count: u8,
    /// `--wait_destroy` seconds (0: none).
    pub wait_destroy: u32,
    /// `-W`: port counters to report after each row.
    pub counters: Vec<String>,
    /// `--rate_limit` & co. (None: unlimited).
    pub rate: Option<RateLimit>,
    /// `--latency_gap`: microseconds of busy-wait before each latency post.
    pub latency_gap_us: u32,
    /// `--perform_warm_up`.
    pub warm_up: bool,
    /// `--cqe_poll`: completions per poll call in the bw loops.
    pub cqe_poll: u32,
    /// `--report-both` (with -b).
    pub report_both: bool,
    /// `--reversed`: the listening side sends (see [`Params::is_server`]).
    pub reversed: bool,
    /// `--data_validation` (see `tool::validate`).
    pub data_validation: bool,
    /// `--recv_post_list`: receive WRs per ibv_post_recv (1: one at a time).
    pub recv_post_list: u32,
    /// Test-buffer options (`--use_hugepages`, `--mmap`, `--payload_file_path`,
    /// `--use-null-mr`, `--odp`, `--use-srq`).
    pub mem: super::mem_opts::MemOpts,
    /// `--use_cuda` & co.: the test buffers are GPU memory (`cli::gpu_opts`).
    pub gpu: Option<super::gpu_opts::GpuOpts>,
    /// Connection flags: `-T`, `-z`, `--ipv6`, `--ipv6-addr`, `--bind_source_ip`.
    pub conn_opts: ConnOpts,
    /// `-g` (with `-M`'s group): UD multicast, send tests.
    pub mcast: Option<super::mcast_rules::Mcast>,
}

/// `--reversed`: where rdmaperf (or perftest) cannot swap the traffic's direction.
fn reversed_rules(a: &PerfArgs, tool: Tool) -> Result<(), String> {
    if !a.reversed {
        return Ok(());
    }
    if !tool.is_bw() {
        return Err(rule(
            "--reversed: perftest reverses the bandwidth tests only (its help lists it there); \
             a latency test's two sides play the same ping-pong - drop it",
        ));
    }
    if a.rdma_cm || a.comm_rdma_cm {
        return Err(rule(
            "--reversed with -R/-z: the rdma_cm connect would follow the traffic, and the \
             sending side then has no address to resolve (perftest's too); drop -R/-z or --reversed",
        ));
    }
    if a.threads.is_some_and(|t| t > 1) {
        return Err(rule(
            "--reversed with --threads: not implemented yet in rdmaperf (the threaded sender \
             is the side that connects); swap which host runs the server instead",
        ));
    }
    Ok(())
}

/// `--data_validation`: perftest master's rules where rdmaperf's check needs
/// them too (one size, fixed data, RC), and what rdmaperf does not check yet.
fn validation_rules(a: &PerfArgs, tool: Tool) -> Result<(), String> {
    if !a.data_validation {
        return Ok(());
    }
    let refuse = |why: &str| Err(format!("--data_validation {why}"));
    if !tool.is_bw() {
        return refuse("is only supported in bandwidth tests (perftest's rule)");
    }
    if !matches!(tool.verb, Verb::Write | Verb::Read) || a.write_with_imm {
        return refuse(
            "is only supported with WRITE or READ verb (perftest's rule); use write-bw or read-bw",
        );
    }
    if a.connection
        .as_deref()
        .is_some_and(|c| !c.eq_ignore_ascii_case("RC"))
    {
        return refuse("requires RC connection type (perftest's rule); drop -c");
    }
    if a.all {
        return refuse("is incompatible with -a (run all sizes), as in perftest; give -s");
    }
    if a.run_infinitely {
        return refuse("is incompatible with --run_infinitely, as in perftest; use -D");
    }
    if a.payload_file_path.is_some() || a.use_null_mr {
        return refuse("checks rdmaperf's own pattern: drop --payload_file_path/--use-null-mr (perftest refuses them too)");
    }
    if a.mr_per_qp {
        return refuse("is incompatible with --mr_per_qp, as in perftest; drop --mr_per_qp");
    }
    if a.bidirectional || a.threads.is_some_and(|t| t > 1) {
        return refuse("with -b or --threads: not implemented yet in rdmaperf; drop -b/--threads");
    }
    Ok(())
}

/// `--tclass`, `--flow_label`, `--pkey_index`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Qos {
    pub traffic_class: u8,
    /// Flow label of QP i is `flow_labels[i % len]` (empty: 0).
    pub flow_labels: Vec<u32>,
    pub pkey_index: u16,
}

impl Qos {
    /// The flow label of QP `i`.
    pub fn flow_label(&self, i: usize) -> u32 {
        if self.flow_labels.is_empty() {
            0
        } else {
            self.flow_labels[i % self.flow_labels.len()]
        }
    }
    /// Whether `--tclass` or `--flow_label` asks for a non-default GRH.
    pub fn grh_set(&self) -> bool {
        self.traffic_class != 0 || self.flow_labels.iter().any(|&f| f != 0)
    }
}

/// What the latency tools print or write besides the result row.
#[derive(Clone, Debug, Default)]
pub struct SampleReport {
    /// `-U`: every sample in the order measured.
    pub unsorted: bool,
    /// `-H`: a bucketed histogram.
    pub histogram: bool,
    /// `-C`: TSC cycles instead of microseconds.
    pub cycles: bool,
    /// `--samples-file`: the raw samples as CSV.
    pub file: Option<PathBuf>,
}

impl Params {
    /// This side is perftest's SERVER machine: it receives (the passive side
    /// of a write/read/atomic test). Without `--reversed` that is the side
    /// that listens; with it, the side that connects.
    pub fn is_server(&self) -> bool {
        self.listens() != self.reversed
    }
    /// This side listens for the control connection (no host name given).
    pub fn listens(&self) -> bool {
        self.server.is_none()
    }
    /// The control channel runs over rdma_cm (`-R` or `-z`).
    pub fn cm_ctrl(&self) -> bool {
        self.rdma_cm || self.conn_opts.comm_rdma_cm
    }
    /// The send opcode of this test.
    pub fn op(&self) -> Op {
        match (self.tool.verb, self.with_imm, self.atomic_type) {
            (Verb::Write, false, _) => Op::Write,
            (Verb::Write, true, _) => Op::WriteImm,
            (Verb::Send, false, _) => Op::Send,
            (Verb::Send, true, _) => Op::SendImm,
            (Verb::Read, _, _) => Op::Read,
            (Verb::Atomic, _, AtomicType::FetchAdd) => Op::FetchAdd,
            (Verb::Atomic, _, AtomicType::CmpSwap) => Op::CmpSwap,
        }
    }
    pub fn is_duration(&self) -> bool {
        matches!(self.mode, Mode::Duration { .. })
    }
    /// Largest message size of the run (buffers are sized for it).
    pub fn max_size(&self) -> u64 {
        self.sizes.iter().copied().max().unwrap_or(0)
    }
}

fn rule(msg: &str) -> String {
    msg.to_string()
}

/// Apply defaults and perftest's dependency rules.
pub fn resolve(tool: Tool, a: &PerfArgs) -> Result<Params, String> {
    let bw = tool.is_bw();
    let verb = tool.verb;
    let conn = match a
        .connection
        .as_deref()
        .map(str::to_ascii_uppercase)
        .as_deref()
    {
        None | Some("RC") => Conn::Rc,
        Some("UC") => Conn::Uc,
        Some("UD") => Conn::Ud,
        Some(o @ ("XRC" | "DC" | "SRD")) => {
            return Err(format!(
                "-c {o}: {o} QPs are not supported by rdmaperf; use -c RC, UC or UD"
            ))
        }
        Some(o) => return Err(format!("-c {o}: unknown connection type; use RC, UC or UD")),
    };
    // -g: perftest runs multicast on UD whatever -c says.
    let mcast = super::mcast_rules::mcast(a, verb)?;
    let mcast_notice = match (&mcast, a.connection.as_deref()) {
        (Some(_), Some(c)) if !c.eq_ignore_ascii_case("UD") => Some(format!(
            "MultiCast runs on UD: -c {c} is replaced by UD, as in perftest"
        )),
        _ => None,
    };
    let conn = if mcast.is_some() { Conn::Ud } else { conn };
    if conn == Conn::Uc && matches!(verb, Verb::Read | Verb::Atomic) {
        return Err(rule(
            "-c UC: UC connection not possible in READ/ATOMIC verbs; use -c RC",
        ));
    }
    if conn == Conn::Ud && verb != Verb::Send {
        return Err(rule(
            "-c UD: UD connection only possible in SEND verb; use send-bw/send-lat or -c RC",
        ));
    }
    if !bw {
        if a.qps.is_some_and(|q| q > 1) {
            return Err(rule(
                "-q: multiple QPs only available on bw tests; drop -q or use a *-bw tool",
            ));
        }
        if a.post_list.is_some_and(|l| l > 1) {
            return Err(rule("-l: post list is supported in BW tests only; drop -l"));
        }
        if a.bidirectional {
            return Err(rule(
                "-b: bidirectional is only available in BW tests; drop -b",
            ));
        }
        if a.run_infinitely {
            return Err(rule(
                "--run_infinitely is only available in BW tests; use -D for latency",
            ));
        }
    }
    if a.events && verb == Verb::Write {
        return Err(rule(
            "-e: events feature not available on WRITE verb; drop -e",
        ));
    }
    if a.events && (a.duration.is_some() || a.run_infinitely) {
        return Err(rule(
            "-e: duration mode doesn't work with events; use -n instead of -D",
        ));
    }
    if a.duration.is_some() && a.all {
        return Err(rule("-D and -a can't be combined: a size sweep runs a fixed number of iterations; use -n with -a"));
    }
    if a.duration.is_some() && a.iters.is_some() {
        return Err(rule(
            "-D and -n can't be combined: choose a duration or an iteration count",
        ));
    }
    if a.inline_size.is_some() && matches!(verb, Verb::Read | Verb::Atomic) {
        return Err(rule(
            "-I: inline feature not available on READ/Atomic verbs; drop -I",
        ));
    }
    if a.write_with_imm && verb != Verb::Write {
        return Err(rule("--write_with_imm applies to write tests only"));
    }
    if a.send_with_imm && verb != Verb::Send {
        return Err(rule("--send_with_imm applies to send tests only"));
    }
    sample_rules(a, bw)?;
    let qos = qos_of(a)?;
    let conn_opts = super::conn_rules::conn_opts(a, conn)?;
    if a.retry_count.is_some() && !a.rdma_cm {
        return Err(rule(
            "--retry_count sets rdma_cm's connect retry count; add -R (without it the QPs' retry \
             count is perftest's 7)",
        ));
    }
    if a.retry_count.is_some_and(|r| r > 7) {
        return Err(rule(
            "--retry_count: the retry count is a 3-bit field; give 0..7",
        ));
    }
    if a.wait_destroy.is_some() && !bw {
        return Err(rule(
            "--wait_destroy applies to bw tests (as in perftest); drop it",
        ));
    }
    let counters = match a.report_counters.as_deref() {
        Some(l) => super::lists::parse_list(l)?,
        None => Vec::new(),
    };
    if !counters.is_empty()
        && (a.bidirectional || (verb == Verb::Send && bw) || a.threads.is_some_and(|t| t > 1))
    {
        return Err(rule(
            "-W: not implemented yet in rdmaperf for -b, --threads and send-bw; it runs with \
             write-bw, read-bw, atomic-bw and the latency tools",
        ));
    }
    if a.cpu_util && a.duration.is_none() {
        return Err(rule(
            "--cpu_util: CPU utilisation is measured in duration mode only (as in perftest); add -D",
        ));
    }
    if a.cpu_util && (a.run_infinitely || a.bidirectional || (verb == Verb::Send && bw)) {
        return Err(rule(
            "--cpu_util: not implemented yet in rdmaperf for --run_infinitely, -b or send-bw; \
             it runs with write-bw, read-bw, atomic-bw and the latency tools under -D",
        ));
    }
    if a.atomic_type.is_some() && verb != Verb::Atomic {
        return Err(rule("-A applies to atomic tests only"));
    }
    if verb == Verb::Atomic && (a.size.is_some_and(|s| s != 8) || a.all) {
        return Err(rule(
            "message size cannot be changed for atomic tests (always 8 bytes); drop -s/-a",
        ));
    }
    let atomic_type = match a.atomic_type.as_deref() {
        None | Some("FETCH_AND_ADD") => AtomicType::FetchAdd,
        Some("CMP_AND_SWAP") => AtomicType::CmpSwap,
        Some(o) => {
            return Err(format!(
                "-A {o}: unknown atomic type; use FETCH_AND_ADD or CMP_AND_SWAP"
            ))
        }
    };

    let def_size = match (verb, bw) {
        (Verb::Atomic, _) => DEF_SIZE_ATOMIC,
        (_, true) => DEF_SIZE_BW,
        (_, false) => DEF_SIZE_LAT,
    };
    let size = a.size.unwrap_or(def_size);
    if size == 0 || size > u32::MAX as u64 / 2 {
        return Err(format!(
            "-s {size}: size must be between 1 and {}",
            u32::MAX / 2
        ));
    }
    if size > MAX_SIZE && !a.all {
        // perftest allows large sizes; rxe/mlx5 max message is typically 1-2 GiB.
    }
    let sizes: Vec<u64> = if a.all {
        (1..=23).map(|i| 1u64 << i).collect()
    } else {
        vec![size]
    };
    let mem =
        super::mem_opts::mem_opts(tool, a, conn, sizes.iter().copied().max().unwrap_or(size))?;

    let duration = a.duration.or(if a.run_infinitely { Some(5) } else { None });
    let mode = match duration {
        Some(0) => return Err(rule("-D 0: the duration must be at least 1 second")),
        Some(d) => {
            let margin = a.margin.unwrap_or(d / 4);
            if d <= 2 * margin {
                return Err(format!(
                    "-D {d} -f {margin}: the duration must exceed twice the margin (D > 2*f); \
                     lengthen -D or shorten -f"
                ));
            }
            Mode::Duration { secs: d, margin }
        }
        None => {
            if a.margin.is_some() {
                return Err(rule("-f (margin) applies to duration mode only; add -D"));
            }
            Mode::Iterations
        }
    };
    let is_dur = matches!(mode, Mode::Duration { .. });
    let def_iters = if verb == Verb::Write && bw {
        DEF_ITERS_WB
    } else {
        DEF_ITERS
    };
    let iters = if is_dur {
        0
    } else {
        a.iters.unwrap_or(def_iters)
    };
    if !is_dur && iters < MIN_ITER {
        return Err(format!(
            "-n {iters}: at least {MIN_ITER} iterations are needed"
        ));
    }
    if iters > MAX_ITER {
        return Err(format!(
            "-n {iters}: at most {MAX_ITER} iterations (perftest's limit); use -D for longer runs"
        ));
    }

    let threads = a.threads.unwrap_or(1);
    if threads == 0 {
        return Err(rule("--threads 0: at least one thread is needed"));
    }
    if threads > 1 && !bw {
        return Err(rule("--threads applies to bw tests only; drop --threads"));
    }
    let cpus = match a.cpus.as_deref() {
        Some(s) => Some(super::lists::parse_cpu_list(s).map_err(|e| format!("--cpus: {e}"))?),
        None => None,
    };
    // Each thread owns at least one QP: with --threads and no -q, one QP per thread.
    let num_qps = a.qps.unwrap_or(threads);
    if num_qps == 0 || num_qps > MAX_QP_NUM {
        return Err(format!(
            "-q {num_qps}: the number of QPs must be 1..{MAX_QP_NUM}"
        ));
    }
    if num_qps < threads {
        return Err(format!(
            "--threads {threads} -q {num_qps}: every thread needs its own QP; use -q {threads} or more"
        ));
    }
    if num_qps == 0 || num_qps > MAX_QP_NUM {
        return Err(format!(
            "-q {num_qps}: the number of QPs must be 1..{MAX_QP_NUM}"
        ));
    }
    let post_list = a.post_list.unwrap_or(1);
    if post_list == 0 {
        return Err(rule("-l 0: the post list must hold at least one WR"));
    }
    if !is_dur && iters % post_list as u64 != 0 {
        return Err(format!(
            "-n {iters} -l {post_list}: the iteration count must be a multiple of the post list; \
             use -n {}",
            (iters / post_list as u64 + 1) * post_list as u64
        ));
    }
    let mut tx_depth = a
        .tx_depth
        .unwrap_or(if bw { DEF_TX_BW } else { DEF_TX_LAT });
    if tx_depth == 0 || tx_depth > MAX_TX {
        return Err(format!("-t {tx_depth}: TX depth must be 1..{MAX_TX}"));
    }
    if !is_dur && tx_depth as u64 > iters {
        tx_depth = iters as u32;
    }
    if tx_depth < post_list {
        return Err(format!(
            "-t {tx_depth} -l {post_list}: the TX depth must hold a whole post list; raise -t"
        ));
    }
    // cq_mod: defaults to post_list when -l is given; 1 for big messages unless -Q.
    let mut cq_mod = match a.cq_mod {
        Some(q) => {
            if q == 0 || q > MAX_CQ_MOD {
                return Err(format!("-Q {q}: CQ moderation must be 1..{MAX_CQ_MOD}"));
            }
            q
        }
        None if post_list > 1 => post_list,
        None if size > MSG_SIZE_CQ_MOD_LIMIT && conn != Conn::Ud && !a.all && !a.events => 1,
        None => DEF_CQ_MOD,
    };
    if !bw {
        cq_mod = 1;
    }
    if cq_mod > tx_depth {
        cq_mod = tx_depth;
    }
    if post_list > 1 && post_list % cq_mod != 0 {
        return Err(format!(
            "-l {post_list} -Q {cq_mod}: the post list must be a multiple of the CQ moderation; \
             use -Q {post_list} or a divisor of it"
        ));
    }
    let def_rx = match (verb, conn) {
        (Verb::Send, Conn::Ud | Conn::Uc) if !is_dur => (iters.min(UC_MAX_RX)) as u32,
        (Verb::Send, _) => DEF_RX_SEND,
        _ => 1,
    };
    let mut rx_depth = if verb == Verb::Write {
        1
    } else {
        a.rx_depth.unwrap_or(def_rx)
    };
    if verb == Verb::Send && !is_dur && rx_depth as u64 > iters {
        rx_depth = iters as u32;
    }
    let inline_default = match (bw, verb, conn) {
        (true, _, _) => 0,
        (false, Verb::Write, _) => 220,
        (false, Verb::Send, Conn::Ud) => 188,
        (false, Verb::Send, _) => 236,
        _ => 0,
    };
    let inline_size = a.inline_size.unwrap_or(inline_default);
    if inline_size > 1024 {
        return Err(format!(
            "-I {inline_size}: inline size must be at most 1024"
        ));
    }
    let mtu = match a.mtu {
        None => None,
        Some(m @ (256 | 512 | 1024 | 2048 | 4096)) => Some(m),
        Some(m) => {
            return Err(format!(
                "-m {m}: MTU must be one of 256, 512, 1024, 2048, 4096"
            ))
        }
    };
    let output = match a.output.as_deref() {
        None => None,
        Some("bandwidth") => Some(OutputKind::Bandwidth),
        Some("message_rate") => Some(OutputKind::MessageRate),
        Some("latency") => Some(OutputKind::Latency),
        Some(o) => {
            return Err(format!(
                "--output={o}: use bandwidth, message_rate or latency"
            ))
        }
    };
    if output == Some(OutputKind::Latency) && bw {
        return Err(rule(
            "--output=latency applies to latency tests; use bandwidth or message_rate",
        ));
    }
    if matches!(
        output,
        Some(OutputKind::Bandwidth | OutputKind::MessageRate)
    ) && !bw
    {
        return Err(rule(
            "--output=bandwidth/message_rate apply to bw tests; use --output=latency",
        ));
    }
    let mut post = PostChoice::parse(&a.post)?;
    if a.use_old_post_send {
        if !matches!(post, PostChoice::Auto | PostChoice::PostSend) {
            return Err(format!(
                "--use_old_post_send contradicts --post {}; give one of them",
                post.name()
            ));
        }
        post = PostChoice::PostSend;
    }
    if a.rdma_cm && conn == Conn::Uc {
        return Err(rule(
            "-R: UC is not supported in librdmacm; use -c RC with -R, or drop -R for UC",
        ));
    }
    if a.rdma_cm && post == PostChoice::Direct {
        return Err(rule(
            "-R with --post direct: the direct path's mlx5dv QPs are connected by key messages \
             only; use --post wr-api or post-send with -R",
        ));
    }
    if a.loopback && a.server.is_some() {
        return Err(rule(
            "--loopback runs both ends itself; drop the server name",
        ));
    }
    let json_file = if a.out_json || a.out_json_file.is_some() {
        Some(
            a.out_json_file
                .clone()
                .unwrap_or_else(|| PathBuf::from(DEF_JSON_FILE)),
        )
    } else {
        None
    };
    let no_peak = a.no_peak || is_dur || iters * num_qps as u64 > PEAK_MAX_ITERS;
    let mut notices = Vec::new();
    let rate = super::rate::rate_of(a, tool, tx_depth, threads, &mut notices)?;
    pace_rules(a, tool)?;
    reversed_rules(a, tool)?;
    validation_rules(a, tool)?;
    recv_list_rules(a, tool, iters, rx_depth, is_dur)?;
    notices.extend(mcast_notice);
    if bw && post_list > 1 && a.cq_mod.is_none() {
        notices
            .push("Post List requested - CQ moderation will be the size of the post list".into());
    }
    let mut p = Params {
        gpu: None,
        size_given: a.size.is_some(),
        inline_given: a.inline_size.is_some(),
        notices,
        tool,
        server: a.server.clone(),
        port: a.port.unwrap_or(DEF_PORT),
        ib_dev: a.ib_dev.clone(),
        ib_port: a.ib_port.unwrap_or(1),
        // perftest: multicast without -x uses GID index 0.
        gid_index: a.gid_index.or(mcast.map(|_| 0)),
        sizes,
        all_sizes: a.all,
        iters,
        mode,
        run_infinitely: a.run_infinitely,
        tx_depth,
        rx_depth,
        cq_mod,
        post_list,
        num_qps,
        mtu,
        qp_timeout: a.qp_timeout.unwrap_or(DEF_QP_TIME),
        sl: a.sl.unwrap_or(0),
        inline_size,
        conn,
        duplex: a.bidirectional,
        use_event: a.events,
        outs: a.outs,
        atomic_type,
        mr_per_qp: a.mr_per_qp,
        rdma_cm: a.rdma_cm,
        report_gbits: a.report_gbits,
        no_peak,
        output,
        limit_bw: a.limit_bw,
        limit_msgrate: a.limit_msgrate,
        json_file,
        with_imm: a.write_with_imm || a.send_with_imm,
        post,
        loopback: a.loopback,
        perftest_stats: a.perftest_stats,
        explain: a.explain,
        ctrl_timeout_s: a.timeout,
        cq_timeout_s: a.cq_timeout,
        check_landing: a.check_landing,
        no_cost: a.no_cost,
        threads,
        cpus,
        samples: SampleReport {
            unsorted: a.report_unsorted,
            histogram: a.report_histogram,
            cycles: a.report_cycles,
            file: a.samples_file.clone(),
        },
        qos,
        cpu_util: a.cpu_util,
        retry_count: a.retry_count.unwrap_or(DEF_RETRY_COUNT),
        wait_destroy: a.wait_destroy.unwrap_or(0),
        counters,
        conn_opts,
        mem,
        rate,
        latency_gap_us: a.latency_gap.unwrap_or(0),
        warm_up: a.perform_warm_up,
        cqe_poll: a.cqe_poll.unwrap_or(DEF_CQE_POLL),
        report_both: a.report_both,
        reversed: a.reversed,
        data_validation: a.data_validation,
        recv_post_list: a.recv_post_list.unwrap_or(1),
        mcast,
    };
    srq_rules(&p)?;
    let inline = (p.inline_given, &mut p.inline_size);
    p.gpu = super::gpu_opts::apply(&a.gpu, tool, inline, &p.mem, &mut p.notices)?;
    Ok(p)
}

/// `--recv_post_list` (perftest's rules, then rdmaperf's reach).
/// `--use-srq`'s rules that need the resolved depths and post method.
fn srq_rules(p: &Params) -> Result<(), String> {
    if !p.mem.srq {
        return Ok(());
    }
    if p.num_qps > p.rx_depth {
        return Err(format!(
            "--use-srq -q {} -r {}: the SRQ depth must be at least the number of QPs (perftest: \
             \"Using SRQ depth should be greater than number of QPs\"); raise -r to {} or more",
            p.num_qps, p.rx_depth, p.num_qps
        ));
    }
    if p.post == PostChoice::Direct {
        return Err(
            "--use-srq with --post direct: the direct path's QPs are created through mlx5dv \
             without an SRQ; use --post wr-api or post-send"
                .into(),
        );
    }
    if p.recv_post_list > 1 {
        return Err(
            "--use-srq with --recv_post_list: not implemented yet in rdmaperf (the SRQ's per-QP \
             share need not hold whole receive lists); drop one of them"
                .into(),
        );
    }
    if p.rdma_cm {
        return Err(
            "--use-srq with -R: not implemented yet in rdmaperf (the CM-created data QPs get no \
             SRQ); drop -R or --use-srq"
                .into(),
        );
    }
    Ok(())
}

fn recv_list_rules(
    a: &PerfArgs,
    tool: Tool,
    iters: u64,
    rx_depth: u32,
    is_dur: bool,
) -> Result<(), String> {
    let Some(n) = a.recv_post_list else {
        return Ok(());
    };
    if n == 0 {
        return Err(rule(
            "--recv_post_list=0: the receive post list must hold at least one WR",
        ));
    }
    if n == 1 {
        return Ok(());
    }
    if !tool.is_bw() {
        return Err(rule(
            "--recv_post_list: receive post list is supported in BW tests only (perftest's \
             rule); drop it",
        ));
    }
    if !is_dur && iters % n as u64 != 0 {
        return Err(format!(
            "-n {iters} --recv_post_list={n}: the number of iterations must be a multiple of \
             the receive post list size (perftest's rule); use -n {}",
            (iters / n as u64 + 1) * n as u64
        ));
    }
    if tool.verb != Verb::Send || a.bidirectional {
        return Err(rule(
            "--recv_post_list: not implemented yet in rdmaperf beyond unidirectional send-bw \
             (write/read/atomic-bw post no receives; -b and --write_with_imm not yet); drop it",
        ));
    }
    if rx_depth < n {
        return Err(format!(
            "-r {rx_depth} --recv_post_list={n}: the receive queue must hold one whole list \
             (perftest posts rx_depth / recv_post_list lists); raise -r or lower the list"
        ));
    }
    Ok(())
}

/// `--latency_gap`, `--perform_warm_up`, `--cqe_poll`, `--report-both`.
fn pace_rules(a: &PerfArgs, tool: Tool) -> Result<(), String> {
    let bw = tool.is_bw();
    if a.latency_gap.is_some_and(|g| g > 0) && bw {
        return Err(rule(
            "--latency_gap: the latency gap is only for latency tests (perftest's rule); use --rate_limit to pace a bw test",
        ));
    }
    if a.perform_warm_up {
        if !bw || tool.verb == Verb::Send {
            return Err(rule(
                "--perform_warm_up: perftest warms up the write, read and atomic bw tests only; drop it (or use write-bw, read-bw, atomic-bw)",
            ));
        }
        if a.write_with_imm {
            return Err(rule(
                "--perform_warm_up: warm up is not supported for the WRITE_IMM verb (perftest skips it); drop --write_with_imm or --perform_warm_up",
            ));
        }
        if a.bidirectional || a.threads.is_some_and(|t| t > 1) || a.run_infinitely {
            return Err(rule(
                "--perform_warm_up with -b, --threads or --run_infinitely is not implemented yet in rdmaperf; drop one of them",
            ));
        }
    }
    if let Some(c) = a.cqe_poll {
        if !(1..=65535).contains(&c) {
            return Err(format!(
                "--cqe_poll={c}: the CQE poll batch must be 1..65535 (perftest's range)"
            ));
        }
        if !bw {
            return Err(rule(
                "--cqe_poll: latency tests poll one completion at a time (perftest's loops too); drop it",
            ));
        }
    }
    if a.report_both {
        if !bw {
            return Err(rule(
                "--report-both applies to bidirectional bw tests; use a *-bw tool with -b",
            ));
        }
        if !a.bidirectional {
            return Err(rule(
                "--report-both reports RX and TX separately on bidirectional tests; add -b",
            ));
        }
        if a.all {
            return Err(rule(
                "--report-both with -a: perftest reports each side separately for a single \
                 size only; drop -a (give -s)",
            ));
        }
    }
    Ok(())
}

/// `--tclass`, `--flow_label` (perftest: a comma list, C `strtol` base 0 each),
/// `--pkey_index`.
fn qos_of(a: &PerfArgs) -> Result<Qos, String> {
    let flow_labels = match a.flow_label.as_deref() {
        None => Vec::new(),
        Some(list) => list
            .split(',')
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
            .collect::<Result<_, _>>()?,
    };
    let qos = Qos {
        traffic_class: a.tclass.unwrap_or(0),
        flow_labels,
        pkey_index: a.pkey_index.unwrap_or(0),
    };
    if a.rdma_cm && (a.tclass.is_some() || a.flow_label.is_some()) {
        return Err(
            "--tclass/--flow_label with -R: the RDMA CM builds the data QPs' GRH itself \
             (perftest ignores them there); drop -R, or drop --tclass/--flow_label"
                .to_string(),
        );
    }
    Ok(qos)
}

/// `-U`, `-H`, `-C` and `--samples-file`: latency tests, iteration mode.
fn sample_rules(a: &PerfArgs, bw: bool) -> Result<(), String> {
    let named = [
        (a.report_unsorted, "-U"),
        (a.report_histogram, "-H"),
        (a.report_cycles, "-C"),
        (a.samples_file.is_some(), "--samples-file"),
    ];
    let Some((_, flag)) = named.iter().find(|f| f.0) else {
        return Ok(());
    };
    if bw {
        return Err(format!(
            "{flag}: available only on latency tests; use write-lat, read-lat, send-lat or atomic-lat"
        ));
    }
    if a.duration.is_some() {
        return Err(format!(
            "{flag} with -D: duration-mode latency counts round trips without keeping each sample; \
             use -n for per-sample reports"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const WRITE_BW: Tool = Tool {
        verb: Verb::Write,
        kind: Kind::Bw,
    };
    const READ_LAT: Tool = Tool {
        verb: Verb::Read,
        kind: Kind::Lat,
    };

    fn args() -> PerfArgs {
        PerfArgs {
            post: "auto".into(),
            timeout: 30,
            cq_timeout: 10,
            ..Default::default()
        }
    }

    #[test]
    fn write_bw_defaults() {
        let p = resolve(WRITE_BW, &args()).unwrap();
        assert_eq!(p.sizes, vec![65536]);
        assert_eq!(p.iters, 5000);
        assert_eq!(p.tx_depth, 128);
        // 64 KiB > 8 KiB: perftest signals every message unless -Q is given.
        assert_eq!(p.cq_mod, 1);
        assert_eq!(p.port, 18515);
        assert!(p.is_server());
    }

    #[test]
    fn data_validation_rules() {
        let try_it = |tool: Tool, f: fn(&mut PerfArgs)| {
            let mut a = PerfArgs {
                data_validation: true,
                ..args()
            };
            f(&mut a);
            resolve(tool, &a)
        };
        let read_bw = Tool {
            verb: Verb::Read,
            kind: Kind::Bw,
        };
        let send_bw = Tool {
            verb: Verb::Send,
            kind: Kind::Bw,
        };
        assert!(try_it(WRITE_BW, |_| {}).unwrap().data_validation);
        assert!(try_it(read_bw, |a| a.duration = Some(2)).is_ok());
        for (tool, f, want) in [
            (
                READ_LAT,
                (|_| {}) as fn(&mut PerfArgs),
                "only supported in bandwidth tests",
            ),
            (send_bw, |_| {}, "only supported with WRITE or READ"),
            (
                WRITE_BW,
                |a| a.write_with_imm = true,
                "only supported with WRITE or READ",
            ),
            (
                WRITE_BW,
                |a| a.connection = Some("UC".into()),
                "requires RC",
            ),
            (WRITE_BW, |a| a.all = true, "incompatible with -a"),
            (
                WRITE_BW,
                |a| a.mr_per_qp = true,
                "incompatible with --mr_per_qp",
            ),
            (WRITE_BW, |a| a.use_null_mr = true, "own pattern"),
            (WRITE_BW, |a| a.bidirectional = true, "not implemented yet"),
            (WRITE_BW, |a| a.threads = Some(2), "not implemented yet"),
        ] {
            let e = try_it(tool, f).unwrap_err();
            assert!(e.contains("--data_validation") && e.contains(want), "{e}");
        }
    }

    #[test]
    fn reversed_swaps_the_traffic_role_not_the_connection() {
        let rev = |server: Option<&str>| {
            let a = PerfArgs {
                reversed: true,
                server: server.map(Into::into),
                ..args()
            };
            resolve(WRITE_BW, &a).unwrap()
        };
        let listener = rev(None);
        assert!(listener.listens() && !listener.is_server());
        let connector = rev(Some("host"));
        assert!(!connector.listens() && connector.is_server());
        let refused = |tool: Tool, f: fn(&mut PerfArgs)| {
            let mut a = PerfArgs {
                reversed: true,
                ..args()
            };
            f(&mut a);
            resolve(tool, &a).unwrap_err()
        };
        let e = refused(READ_LAT, |_| {});
        assert!(e.contains("bandwidth tests only"), "{e}");
        let e = refused(WRITE_BW, |a| a.rdma_cm = true);
        assert!(e.contains("--reversed with -R/-z"), "{e}");
        let e = refused(WRITE_BW, |a| a.comm_rdma_cm = true);
        assert!(e.contains("--reversed with -R/-z"), "{e}");
        let e = refused(WRITE_BW, |a| a.threads = Some(2));
        assert!(e.contains("--reversed with --threads"), "{e}");
    }

    #[test]
    fn rdma_cm_rules() {
        let with = |conn: &str, post: &str| {
            resolve(
                WRITE_BW,
                &PerfArgs {
                    rdma_cm: true,
                    connection: Some(conn.into()),
                    post: post.into(),
                    ..args()
                },
            )
        };
        assert!(with("RC", "auto").unwrap().rdma_cm);
        let e = with("UC", "auto").unwrap_err();
        assert!(e.contains("UC is not supported in librdmacm"), "{e}");
        let e = with("RC", "direct").unwrap_err();
        assert!(e.contains("-R with --post direct"), "{e}");
    }

    #[test]
    fn small_messages_keep_cq_mod() {
        let p = resolve(
            WRITE_BW,
            &PerfArgs {
                size: Some(64),
                ..args()
            },
        )
        .unwrap();
        assert_eq!(p.cq_mod, 100);
    }

    #[test]
    fn post_list_sets_cq_mod_and_checks_iters() {
        let p = resolve(
            WRITE_BW,
            &PerfArgs {
                post_list: Some(4),
                iters: Some(100),
                ..args()
            },
        )
        .unwrap();
        assert_eq!(p.cq_mod, 4);
        let e = resolve(
            WRITE_BW,
            &PerfArgs {
                post_list: Some(3),
                iters: Some(100),
                ..args()
            },
        )
        .unwrap_err();
        assert!(e.contains("multiple of the post list"), "{e}");
    }

    #[test]
    fn duration_rules() {
        let p = resolve(
            WRITE_BW,
            &PerfArgs {
                duration: Some(8),
                ..args()
            },
        )
        .unwrap();
        assert_eq!(p.mode, Mode::Duration { secs: 8, margin: 2 });
        assert_eq!(p.iters, 0);
        assert!(p.no_peak);
        let e = resolve(
            WRITE_BW,
            &PerfArgs {
                duration: Some(4),
                margin: Some(2),
                ..args()
            },
        )
        .unwrap_err();
        assert!(e.contains("twice the margin"), "{e}");
        let e = resolve(
            WRITE_BW,
            &PerfArgs {
                duration: Some(4),
                all: true,
                ..args()
            },
        )
        .unwrap_err();
        assert!(e.contains("-D and -a"), "{e}");
    }

    #[test]
    fn tool_rules() {
        let e = resolve(
            READ_LAT,
            &PerfArgs {
                qps: Some(2),
                ..args()
            },
        )
        .unwrap_err();
        assert!(e.contains("bw tests"), "{e}");
        let e = resolve(
            READ_LAT,
            &PerfArgs {
                connection: Some("UC".into()),
                ..args()
            },
        )
        .unwrap_err();
        assert!(e.contains("UC connection not possible"), "{e}");
        let e = resolve(
            WRITE_BW,
            &PerfArgs {
                events: true,
                ..args()
            },
        )
        .unwrap_err();
        assert!(e.contains("WRITE verb"), "{e}");
        let e = resolve(
            WRITE_BW,
            &PerfArgs {
                connection: Some("UD".into()),
                ..args()
            },
        )
        .unwrap_err();
        assert!(e.contains("SEND verb"), "{e}");
        let e = resolve(
            WRITE_BW,
            &PerfArgs {
                post: "fast".into(),
                ..args()
            },
        )
        .unwrap_err();
        assert!(e.contains("post-send, wr-api, direct, auto"), "{e}");
    }

    #[test]
    fn old_post_send_alias() {
        let p = resolve(
            WRITE_BW,
            &PerfArgs {
                use_old_post_send: true,
                ..args()
            },
        )
        .unwrap();
        assert_eq!(p.post, PostChoice::PostSend);
        let e = resolve(
            WRITE_BW,
            &PerfArgs {
                use_old_post_send: true,
                post: "wr-api".into(),
                ..args()
            },
        )
        .unwrap_err();
        assert!(e.contains("contradicts"), "{e}");
    }

    #[test]
    fn threads_rules() {
        let p = resolve(
            WRITE_BW,
            &PerfArgs {
                threads: Some(2),
                ..args()
            },
        )
        .unwrap();
        assert_eq!((p.threads, p.num_qps), (2, 2));
        let e = resolve(
            WRITE_BW,
            &PerfArgs {
                threads: Some(4),
                qps: Some(2),
                ..args()
            },
        )
        .unwrap_err();
        assert!(e.contains("every thread needs its own QP"), "{e}");
        let e = resolve(
            READ_LAT,
            &PerfArgs {
                threads: Some(2),
                ..args()
            },
        )
        .unwrap_err();
        assert!(e.contains("bw tests only"), "{e}");
        let p = resolve(
            WRITE_BW,
            &PerfArgs {
                cpus: Some("0-1".into()),
                ..args()
            },
        )
        .unwrap();
        assert_eq!(p.cpus, Some(vec![0, 1]));
        assert!(resolve(
            WRITE_BW,
            &PerfArgs {
                cpus: Some("a".into()),
                ..args()
            }
        )
        .unwrap_err()
        .starts_with("--cpus"));
    }

    #[test]
    fn perftest_limits_and_notices() {
        // -q 0 names -q, not a --threads that was never given.
        let e = resolve(
            WRITE_BW,
            &PerfArgs {
                qps: Some(0),
                ..args()
            },
        )
        .unwrap_err();
        assert!(e.starts_with("-q 0: the number of QPs must be 1.."), "{e}");
        // -n above perftest master's MAX_ITER.
        let e = resolve(
            WRITE_BW,
            &PerfArgs {
                iters: Some(MAX_ITER + 1),
                ..args()
            },
        )
        .unwrap_err();
        assert!(e.contains("at most 4294967296 iterations"), "{e}");
        assert!(resolve(
            WRITE_BW,
            &PerfArgs {
                iters: Some(MAX_ITER),
                ..args()
            },
        )
        .is_ok());
        // -l without -Q: perftest's notice; with -Q none.
        let p = resolve(
            WRITE_BW,
            &PerfArgs {
                post_list: Some(4),
                iters: Some(100),
                ..args()
            },
        )
        .unwrap();
        assert_eq!(
            p.notices,
            ["Post List requested - CQ moderation will be the size of the post list"]
        );
        let p = resolve(
            WRITE_BW,
            &PerfArgs {
                post_list: Some(4),
                cq_mod: Some(2),
                iters: Some(100),
                ..args()
            },
        )
        .unwrap();
        assert!(p.notices.is_empty());
    }

    #[test]
    fn pace_flag_rules() {
        let send_bw = Tool {
            verb: Verb::Send,
            kind: Kind::Bw,
        };
        type Case = (Tool, fn(&mut PerfArgs), &'static str);
        let cases: &[Case] = &[
            (
                WRITE_BW,
                |a| a.latency_gap = Some(5),
                "only for latency tests",
            ),
            (
                send_bw,
                |a| a.perform_warm_up = true,
                "write, read and atomic bw",
            ),
            (
                READ_LAT,
                |a| a.perform_warm_up = true,
                "write, read and atomic bw",
            ),
            (
                WRITE_BW,
                |a| {
                    a.perform_warm_up = true;
                    a.write_with_imm = true;
                },
                "WRITE_IMM",
            ),
            (
                WRITE_BW,
                |a| {
                    a.perform_warm_up = true;
                    a.bidirectional = true;
                },
                "not implemented yet",
            ),
            (WRITE_BW, |a| a.cqe_poll = Some(0), "1..65535"),
            (WRITE_BW, |a| a.cqe_poll = Some(65536), "1..65535"),
            (
                READ_LAT,
                |a| a.cqe_poll = Some(4),
                "one completion at a time",
            ),
            (WRITE_BW, |a| a.report_both = true, "add -b"),
            (READ_LAT, |a| a.report_both = true, "-bw tool with -b"),
            (
                WRITE_BW,
                |a| {
                    a.report_both = true;
                    a.bidirectional = true;
                    a.all = true;
                },
                "drop -a",
            ),
        ];
        for (t, f, want) in cases {
            let mut a = args();
            f(&mut a);
            let e = resolve(*t, &a).unwrap_err();
            assert!(e.contains(want), "{e} (wanted '{want}')");
        }
        let p = resolve(
            READ_LAT,
            &PerfArgs {
                latency_gap: Some(7),
                ..args()
            },
        )
        .unwrap();
        assert_eq!(p.latency_gap_us, 7);
        let p = resolve(
            WRITE_BW,
            &PerfArgs {
                perform_warm_up: true,
                cqe_poll: Some(64),
                ..args()
            },
        )
        .unwrap();
        assert!(p.warm_up);
        assert_eq!(
            (p.cqe_poll, resolve(WRITE_BW, &args()).unwrap().cqe_poll),
            (64, 16)
        );
        let p = resolve(
            WRITE_BW,
            &PerfArgs {
                rate_limit: Some("2".into()),
                rate_limit_type: Some("SW".into()),
                tx_depth: Some(32),
                ..args()
            },
        )
        .unwrap();
        assert_eq!(p.rate.as_ref().map(|r| r.burst), Some(32));
        assert_eq!(p.notices, ["Setting burst size to tx depth = 32"]);
    }

    #[test]
    fn recv_post_list_rules() {
        let send_bw = Tool {
            verb: Verb::Send,
            kind: Kind::Bw,
        };
        let with = |t: Tool, f: fn(&mut PerfArgs)| {
            let mut a = args();
            f(&mut a);
            resolve(t, &a)
        };
        let p = with(send_bw, |a| a.recv_post_list = Some(4)).unwrap();
        assert_eq!(
            (
                p.recv_post_list,
                resolve(send_bw, &args()).unwrap().recv_post_list
            ),
            (4, 1)
        );
        type Case = (Tool, fn(&mut PerfArgs), &'static str);
        let cases: &[Case] = &[
            (send_bw, |a| a.recv_post_list = Some(0), "at least one WR"),
            (READ_LAT, |a| a.recv_post_list = Some(2), "BW tests only"),
            (
                send_bw,
                |a| {
                    a.recv_post_list = Some(3);
                    a.iters = Some(100);
                },
                "use -n 102",
            ),
            (
                WRITE_BW,
                |a| a.recv_post_list = Some(2),
                "not implemented yet",
            ),
            (
                send_bw,
                |a| {
                    a.recv_post_list = Some(8);
                    a.rx_depth = Some(4);
                },
                "raise -r",
            ),
        ];
        for (t, f, want) in cases {
            let e = with(*t, *f).unwrap_err();
            assert!(e.contains(want), "{e} (wanted '{want}')");
        }
    }

    #[test]
    fn tx_depth_clamped_to_iters() {
        let p = resolve(
            WRITE_BW,
            &PerfArgs {
                iters: Some(10),
                size: Some(64),
                ..args()
            },
        )
        .unwrap();
        assert_eq!(p.tx_depth, 10);
        assert_eq!(p.cq_mod, 10);
    }
}
