//! Per-tool help and version: each tool's `--help` lists only the flags that
//! tool accepts (as perftest's `usage()` does per tool), with perftest's
//! default for that tool; `-V` prints perftest's version line and rdmaperf's.

use super::args::Cli;
use super::params::{self, Kind, Tool, Verb};
use clap::CommandFactory;

/// Whether the flag with clap id `id` applies to `t` (perftest master's
/// `usage()` conditions, plus rdmaperf's own flags). Unknown ids apply.
pub fn applies(t: Tool, id: &str) -> bool {
    let bw = t.kind == Kind::Bw;
    let v = t.verb;
    match id {
        "all" | "size" => v != Verb::Atomic,
        "atomic_type" => v == Verb::Atomic,
        "events" => v != Verb::Write,
        "inline_size" => !matches!(v, Verb::Read | Verb::Atomic),
        "outs" => matches!(v, Verb::Read | Verb::Atomic),
        "rx_depth" => v == Verb::Send,
        "write_with_imm" | "check_landing" => v == Verb::Write,
        "send_with_imm" | "use_srq" | "mcg" | "mgid" => v == Verb::Send,
        "use_null_mr" => v == Verb::Read || (bw && v == Verb::Write),
        "payload_file_path" => v != Verb::Write || bw,
        "report_cycles" | "report_histogram" | "report_unsorted" | "samples_file"
        | "perftest_stats" => !bw,
        "bidirectional" | "post_list" | "no_peak" | "qps" | "cq_mod" | "tx_depth" | "limit_bw"
        | "limit_msgrate" | "mr_per_qp" | "report_gbits" | "run_infinitely" | "threads"
        | "no_cost" | "wait_destroy" | "rate_limit" | "rate_units" | "rate_limit_type"
        | "burst_size" | "cqe_poll" | "report_both" | "reversed" => bw,
        "latency_gap" => !bw,
        "data_validation" => bw && matches!(v, Verb::Write | Verb::Read),
        "recv_post_list" => bw && v == Verb::Send,
        "perform_warm_up" => bw && v != Verb::Send,
        _ => true,
    }
}

/// perftest's default for flag `id` in tool `t`, as help text.
pub fn default_of(t: Tool, id: &str) -> Option<String> {
    let bw = t.kind == Kind::Bw;
    let s = |x: &str| Some(x.to_string());
    match id {
        "port" => Some(params::DEF_PORT.to_string()),
        "ib_dev" => s("first device found"),
        "ib_port" => s("1"),
        "gid_index" => s("auto-selected on RoCE, none on InfiniBand"),
        "size" => Some(
            if bw {
                params::DEF_SIZE_BW
            } else {
                params::DEF_SIZE_LAT
            }
            .to_string(),
        ),
        "iters" => Some(
            if bw && t.verb == Verb::Write {
                params::DEF_ITERS_WB
            } else {
                params::DEF_ITERS
            }
            .to_string(),
        ),
        "duration" if bw => s("off; 5 with --run_infinitely"),
        "duration" => s("off"),
        "margin" => s("D/4 (perftest's help says 2 s; its code uses D/4)"),
        "tx_depth" => Some(params::DEF_TX_BW.to_string()),
        "rx_depth" => s("512; min(iters, 16000) with -c UC/UD"),
        "cq_mod" => s("100; 1 for messages over 8 KiB"),
        "post_list" | "qps" => s("1"),
        "mtu" => s("the port's active MTU"),
        "qp_timeout" => Some(params::DEF_QP_TIME.to_string()),
        "sl" => s("0"),
        "inline_size" => match (bw, t.verb) {
            (true, _) => s("0"),
            (false, Verb::Write) => s("220"),
            _ => s("236; 188 with -c UD"),
        },
        "connection" => s("RC"),
        "outs" => s("the device's max_qp_rd_atom"),
        "atomic_type" => s("FETCH_AND_ADD"),
        "out_json_file" => Some(params::DEF_JSON_FILE.to_string()),
        "output" => s("the full report"),
        "tclass" | "pkey_index" | "wait_destroy" => s("0"),
        "retry_count" => Some(params::DEF_RETRY_COUNT.to_string()),
        "flow_label" => s("0 for every QP"),
        "tos" => s("off: the RDMA CM's default ToS"),
        "bind_source_ip" => s("chosen by the routing table"),
        "mmap_offset" => s("0"),
        "rate_limit" => s("off"),
        "rate_units" => s("g"),
        "rate_limit_type" => s("HW, falling back to SW where the QP refuses it"),
        "burst_size" => s("the TX depth"),
        "latency_gap" => s("0"),
        "recv_post_list" => s("1"),
        "cqe_poll" => Some(params::DEF_CQE_POLL.to_string()),
        "mgid" => s("255:1:0:0:0:2:201:133:0:0:0:0:0:0:0:0; the latency client's ends in 1"),
        _ => None,
    }
}

const LAT_AFTER: &str =
    "rdmaperf keeps every latency sample: -U prints them in the order measured \
(perftest's format), -H a histogram with counts and cumulative %, --samples-file writes them raw \
(CSV with the header size,index,cycles,usec: message size, sample index, TSC cycles, \
microseconds). Statistics are exact (true maximum, floating-point stdev, \
nearest-rank percentiles); --perftest-stats reproduces perftest's formulas.";

const ALL_AFTER: &str = "perftest flags rdmaperf does not implement are refused with the reason \
(accelerator memory without a backend here, DC, crypto offload, raw Ethernet, dual port, and those \
not implemented yet); docs/flags.md \
in the source tree lists every flag and what differs from perftest.";

/// What `--help` cannot say fits in the source tree's docs/ pages, one a topic.
const DOCS: &str = "More in the source tree's docs/: flags.md (every flag, what differs from \
perftest), direct-path.md (the driver-bypass path, first run on a ConnectX), benchmarks.md, \
fabric.md, gpu.md (--use_cuda), output.md (reading the results, what to send with a bug \
report), explain.md (--explain, doctor), aarch64.md, rdma-core.md (rdma-core releases, \
--version), architecture.md, tests.md.";

/// The exit statuses, the same for every command (docs/output.md).
pub const EXIT_STATUS: &str = "Exit status: 0 done; 1 a run that failed (or a check that found \
a problem); 2 refused before any run (a flag, a value, a combination or a device that cannot do \
it, with the fix).";

/// `fabric`'s line in the command list: what it does, or that this build lacks it.
const FABRIC_ABOUT: &str = if cfg!(feature = "mpi") {
    "Every NIC pair of a cluster under mpirun/srun, with a heatmap (`rdmaperf fabric --help`)"
} else {
    "Every NIC pair of a cluster under mpirun/srun; this build has no MPI (`rdmaperf fabric \
     --help` says how to get one)"
};

/// The clap command with every tool's help narrowed and annotated.
pub fn command() -> clap::Command {
    let mut cmd = Cli::command();
    for &(name, _, t) in Tool::ALL.iter() {
        cmd = cmd.mut_subcommand(name, |sc| tool_command(sc, t));
    }
    cmd = cmd.mut_subcommand("fabric", |sc| sc.about(FABRIC_ABOUT));
    cmd.after_help(format!(
        "`rdmaperf help <command>` or `rdmaperf <command> --help`: that command's flags; \
         perftest's names work as commands too (`rdmaperf ib_write_bw`).\n\n{EXIT_STATUS}\n\n{DOCS}"
    ))
    .long_version(super::version::long())
}

fn tool_command(mut sc: clap::Command, t: Tool) -> clap::Command {
    let ids: Vec<String> = sc.get_arguments().map(|a| a.get_id().to_string()).collect();
    let conn = match t.verb {
        Verb::Send => "Connection type: RC, UC or UD (XRC, DC and SRD are refused)",
        Verb::Write => "Connection type: RC or UC (XRC, DC and SRD are refused)",
        _ => "Connection type: RC (XRC and DC are refused)",
    };
    sc = sc.mut_arg("connection", |a| a.help(conn));
    for id in ids {
        if !applies(t, &id) {
            sc = sc.mut_arg(&id, |a| a.hide(true));
        } else if let Some(d) = default_of(t, &id) {
            sc = sc.mut_arg(&id, |a| {
                let h = a.get_help().map(|h| h.to_string()).unwrap_or_default();
                a.help(format!("{h} [perftest default: {d}]"))
            });
        }
    }
    let after = if t.kind == Kind::Lat {
        format!("{LAT_AFTER}\n\n{ALL_AFTER}")
    } else {
        ALL_AFTER.to_string()
    };
    sc.after_help(after)
}

/// `-V`: perftest's version line (the version rdmaperf announces to peers),
/// then rdmaperf's own.
pub fn version_text(t: Tool) -> String {
    format!(
        "Version: {}\nrdmaperf {} ({}: perftest-compatible; wire protocol of perftest {}, flags of perftest master 6.29)\n",
        crate::ctrl::wire::OUR_VERSION,
        env!("CARGO_PKG_VERSION"),
        t.perftest_name(),
        crate::ctrl::wire::OUR_VERSION.trim_end_matches("-rs"),
    )
}
