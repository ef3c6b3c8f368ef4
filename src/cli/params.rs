//! Validated test parameters: perftest's per-tool defaults (`defaults`)
//! and its dependency rules (`force_dependecies` and friends, the table in
//! `rules`), each rejection naming the rule and the fix. [`resolve`] runs
//! the rules over the parsed flags, then builds [`Params`].

use super::args::PerfArgs;
pub use super::defaults::*;
pub use super::kinds::{AtomicType, Conn, ConnOpts, Kind, PostChoice, Tool, Verb};
pub use super::rate::RateLimit;
use super::rules::{self, Ctx};
pub use super::values::{Limits, Mode, OutputKind, Qos, SampleReport};
use crate::post::Op;
use std::path::PathBuf;
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
    pub limits: Limits,
    pub json_file: Option<PathBuf>,
    pub with_imm: bool,
    pub post: PostChoice,
    pub loopback: bool,
    pub perftest_stats: bool,
    /// `--explain`: counters and facts bracket the run; the verdict follows the result.
    pub explain: bool,
    /// A side of `rdmaperf compare` between two hosts (set by `tool::compare`,
    /// never by a flag): its version message says so and each run's close
    /// carries a compare note (`ctrl::compare_ext`).
    pub compare: bool,
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

/// Apply defaults and perftest's dependency rules.
pub fn resolve(tool: Tool, a: &PerfArgs) -> Result<Params, String> {
    let c = Ctx::of(tool, a);
    rules::check(&c)?;
    let mut p = build(c)?;
    // GPU memory's rules need the resolved inline size and memory options (`cli::gpu_opts`).
    let sizes = super::gpu_opts::RunSizes {
        min: p.sizes.iter().copied().min().unwrap_or(0),
        all: p.all_sizes,
    };
    let inline = (p.inline_given, &mut p.inline_size);
    p.gpu = super::gpu_opts::apply(&a.gpu, tool, inline, sizes, &p.mem, &mut p.notices)?;
    Ok(p)
}

/// `Params` from a context every rule passed (its parsed values are all Ok).
fn build(c: Ctx) -> Result<Params, String> {
    let a = c.a;
    let mcast = c.mcast?;
    let (rate, notices) = c.rate?;
    let no_peak = a.no_peak || c.is_dur || c.iters * c.num_qps as u64 > PEAK_MAX_ITERS;
    Ok(Params {
        gpu: None,
        size_given: a.size.is_some(),
        inline_given: a.inline_size.is_some(),
        notices: notices_of(a, c.bw, c.post_list, mcast, notices),
        tool: c.tool,
        server: a.server.clone(),
        port: a.port.unwrap_or(DEF_PORT),
        ib_dev: a.ib_dev.clone(),
        ib_port: a.ib_port.unwrap_or(1),
        // perftest: multicast without -x uses GID index 0.
        gid_index: a.gid_index.or(mcast.map(|_| 0)),
        sizes: c.sizes,
        all_sizes: a.all,
        iters: c.iters,
        mode: c.mode,
        run_infinitely: a.run_infinitely,
        tx_depth: c.tx_depth,
        rx_depth: c.rx_depth,
        cq_mod: c.cq_mod,
        post_list: c.post_list,
        num_qps: c.num_qps,
        mtu: c.mtu?,
        qp_timeout: a.qp_timeout.unwrap_or(DEF_QP_TIME),
        sl: a.sl.unwrap_or(0),
        inline_size: c.inline_size,
        conn: c.conn,
        duplex: a.bidirectional,
        use_event: a.events,
        outs: a.outs,
        atomic_type: c.atomic_type?,
        mr_per_qp: a.mr_per_qp,
        rdma_cm: a.rdma_cm,
        report_gbits: a.report_gbits,
        no_peak,
        output: c.output?,
        limits: Limits {
            bw: a.limit_bw,
            msgrate: a.limit_msgrate,
        },
        json_file: json_file(a),
        with_imm: a.write_with_imm || a.send_with_imm,
        post: c.post,
        loopback: a.loopback,
        perftest_stats: a.perftest_stats,
        explain: a.explain,
        compare: false,
        ctrl_timeout_s: a.timeout,
        cq_timeout_s: a.cq_timeout,
        check_landing: a.check_landing,
        no_cost: a.no_cost,
        threads: c.threads,
        cpus: c.cpus?,
        samples: SampleReport::of(a),
        qos: Qos {
            flow_labels: c.flow_labels?,
            ..Qos::of(a)
        },
        cpu_util: a.cpu_util,
        wait_destroy: a.wait_destroy.unwrap_or(0),
        counters: c.counters?,
        conn_opts: c.conn_opts?,
        mem: c.mem?,
        rate,
        latency_gap_us: a.latency_gap.unwrap_or(0),
        warm_up: a.perform_warm_up,
        cqe_poll: a.cqe_poll.unwrap_or(DEF_CQE_POLL),
        report_both: a.report_both,
        reversed: a.reversed,
        data_validation: a.data_validation,
        recv_post_list: a.recv_post_list.unwrap_or(1),
        mcast,
    })
}

/// `--out_json`/`--out_json_file` (perftest's default file name).
fn json_file(a: &PerfArgs) -> Option<PathBuf> {
    (a.out_json || a.out_json_file.is_some()).then(|| {
        a.out_json_file
            .clone()
            .unwrap_or_else(|| PathBuf::from(DEF_JSON_FILE))
    })
}

impl SampleReport {
    fn of(a: &PerfArgs) -> SampleReport {
        SampleReport {
            unsorted: a.report_unsorted,
            histogram: a.report_histogram,
            cycles: a.report_cycles,
            file: a.samples_file.clone(),
        }
    }
}

impl Qos {
    /// `--tclass` and `--pkey_index` (the flow labels are parsed by the rules).
    fn of(a: &PerfArgs) -> Qos {
        Qos {
            traffic_class: a.tclass.unwrap_or(0),
            flow_labels: Vec::new(),
            pkey_index: a.pkey_index.unwrap_or(0),
        }
    }
}

/// perftest's notices about what it changed: the rate limiter's, then
/// multicast's connection type, then the post list's CQ moderation.
fn notices_of(
    a: &PerfArgs,
    bw: bool,
    post_list: u32,
    mcast: Option<super::mcast_rules::Mcast>,
    mut notices: Vec<String>,
) -> Vec<String> {
    match (mcast, a.connection.as_deref()) {
        (Some(_), Some(c)) if !c.eq_ignore_ascii_case("UD") => notices.push(format!(
            "MultiCast runs on UD: -c {c} is replaced by UD, as in perftest"
        )),
        _ => {}
    }
    if bw && post_list > 1 && a.cq_mod.is_none() {
        notices
            .push("Post List requested - CQ moderation will be the size of the post list".into());
    }
    notices
}

#[cfg(test)]
#[path = "params_tests.rs"]
mod tests;
