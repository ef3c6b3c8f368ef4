//! Command-line flags, spelled as perftest spells them (short letters, long
//! names with underscores), so `ib_write_bw -d mlx5_0 -x 3 -F --report_gbits host`
//! works unchanged. Validation and perftest's dependency rules live in `params`.

use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser, Debug)]
#[command(
    name = "rdmaperf",
    version,
    about = "RDMA micro-benchmarks, perftest-compatible, with a driver-bypass mlx5 post path",
    long_about = "RDMA micro-benchmarks. Each subcommand is the perftest tool of the same name \
(write-bw = ib_write_bw) with perftest's flags, wire protocol and output. Invoked through a link named \
ib_write_bw (etc.) rdmaperf behaves as that tool.\n\nLatency statistics are computed correctly (true \
maximum, floating-point stdev, nearest-rank percentiles); --perftest-stats reproduces perftest's own \
formulas for comparison."
)]
pub struct Cli {
    #[command(subcommand)]
    pub cmd: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// RDMA WRITE bandwidth (ib_write_bw).
    #[command(name = "write-bw")]
    WriteBw(PerfArgs),
    /// RDMA READ bandwidth (ib_read_bw).
    #[command(name = "read-bw")]
    ReadBw(PerfArgs),
    /// SEND bandwidth (ib_send_bw).
    #[command(name = "send-bw")]
    SendBw(PerfArgs),
    /// Atomic bandwidth (ib_atomic_bw).
    #[command(name = "atomic-bw")]
    AtomicBw(PerfArgs),
    /// RDMA WRITE latency (ib_write_lat).
    #[command(name = "write-lat")]
    WriteLat(PerfArgs),
    /// RDMA READ latency (ib_read_lat).
    #[command(name = "read-lat")]
    ReadLat(PerfArgs),
    /// SEND latency (ib_send_lat).
    #[command(name = "send-lat")]
    SendLat(PerfArgs),
    /// Atomic latency (ib_atomic_lat).
    #[command(name = "atomic-lat")]
    AtomicLat(PerfArgs),
    /// Run a bw test under every post method the device supports, interleaved
    /// (A B C A B C …), and print them side by side: `--loopback` on this
    /// host, or between two hosts (`rdmaperf compare write-bw` serves,
    /// `rdmaperf compare write-bw ... SERVER` chooses the methods and prints).
    Compare(CompareArgs),
    /// Every NIC pair of a cluster under mpirun/srun, with a heatmap (`rdmaperf fabric --help`).
    #[command(disable_help_flag = true)]
    Fabric(OwnParser),
    /// Check this host's RDMA set-up for what caps a number: port, MTU, PCIe, NUMA, limits.
    #[command(disable_help_flag = true)]
    Doctor(OwnParser),
    /// Check every post method on a device in loopback, byte by byte.
    #[command(disable_help_flag = true)]
    Selfcheck(OwnParser),
    /// Raw Ethernet packet rate (raw_ethernet_bw; ConnectX, CAP_NET_RAW): the sender (--client) and the one-QP receiver (--server) run.
    #[command(name = "raw-eth-bw", disable_help_flag = true)]
    RawEthBw(OwnParser),
    /// Raw Ethernet ping-pong latency (raw_ethernet_lat; ConnectX, CAP_NET_RAW): both sides run.
    #[command(name = "raw-eth-lat", disable_help_flag = true)]
    RawEthLat(OwnParser),
    /// Raw Ethernet latency under bursts (raw_ethernet_burst_lat; ConnectX, CAP_NET_RAW): both sides run, without a rate limit.
    #[command(name = "raw-eth-burst-lat", disable_help_flag = true)]
    RawEthBurstLat(OwnParser),
    /// Flow-rule insertion rate (raw_ethernet_fs_rate; ConnectX, CAP_NET_RAW).
    #[command(name = "raw-eth-fs-rate", disable_help_flag = true)]
    RawEthFsRate(OwnParser),
    /// List RDMA devices, ports and GID tables.
    Devices,
}

/// The arguments of a command with its own parser (`fabric`, `doctor`,
/// `selfcheck`, the raw Ethernet tools: dispatched before clap, listed here
/// for `--help`).
#[derive(Args, Debug, Clone)]
pub struct OwnParser {
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<String>,
}

/// `rdmaperf compare <bw-test> [flags] [--loopback | SERVER]`.
#[derive(Args, Debug, Clone)]
pub struct CompareArgs {
    /// The bw test: write-bw, read-bw, atomic-bw, send-bw (or its ib_* name);
    /// send-bw adds the receiver's cost per message. raw-eth-bw (its raw flags)
    /// compares the raw sender's post methods.
    pub test: String,
    /// Repetitions of each method.
    #[arg(long = "reps", default_value_t = 3)]
    pub reps: u32,
    /// Only these post methods, in this order (comma list of direct, wr-api,
    /// post-send; default: every one the device supports).
    #[arg(long = "methods", value_delimiter = ',')]
    pub methods: Vec<String>,
    #[command(flatten)]
    pub perf: PerfArgs,
}

/// perftest's options. Unset values take perftest's per-tool defaults in `params`.
#[derive(Args, Debug, Clone, Default)]
pub struct PerfArgs {
    /// `--use_cuda` & co. (`gpu_opts`).
    #[command(flatten)]
    pub gpu: super::gpu_args::GpuArgs,
    /// Server to connect to (client mode). Without it, run as the server.
    pub server: Option<String>,

    /// Listen on / connect to this TCP port.
    #[arg(short = 'p', long = "port")]
    pub port: Option<u16>,
    /// RDMA device to use.
    #[arg(short = 'd', long = "ib-dev")]
    pub ib_dev: Option<String>,
    /// Port of the device.
    #[arg(short = 'i', long = "ib-port")]
    pub ib_port: Option<u8>,
    /// GID index.
    #[arg(short = 'x', long = "gid-index")]
    pub gid_index: Option<u32>,
    /// Message size in bytes (K/M suffixes accepted).
    #[arg(short = 's', long = "size", value_parser = parse_size)]
    pub size: Option<u64>,
    /// Run sizes 2..2^23.
    #[arg(short = 'a', long = "all")]
    pub all: bool,
    /// Iterations.
    #[arg(short = 'n', long = "iters")]
    pub iters: Option<u64>,
    /// Run for this many seconds instead of a fixed iteration count.
    #[arg(short = 'D', long = "duration")]
    pub duration: Option<u32>,
    /// Warm-up/cool-down margin in seconds for -D.
    #[arg(short = 'f', long = "margin")]
    pub margin: Option<u32>,
    /// Run until interrupted, reporting every -D seconds.
    #[arg(long = "run_infinitely")]
    pub run_infinitely: bool,
    /// Send queue depth.
    #[arg(short = 't', long = "tx-depth")]
    pub tx_depth: Option<u32>,
    /// Receive queue depth.
    #[arg(short = 'r', long = "rx-depth")]
    pub rx_depth: Option<u32>,
    /// Generate a completion every N messages.
    #[arg(short = 'Q', long = "cq-mod")]
    pub cq_mod: Option<u32>,
    /// WRs per post call (post list).
    #[arg(short = 'l', long = "post_list")]
    pub post_list: Option<u32>,
    /// Number of QPs.
    #[arg(short = 'q', long = "qp")]
    pub qps: Option<u32>,
    /// Path MTU (256..4096).
    #[arg(short = 'm', long = "mtu")]
    pub mtu: Option<u32>,
    /// QP timeout exponent (4.096us * 2^t).
    #[arg(short = 'u', long = "qp-timeout")]
    pub qp_timeout: Option<u8>,
    /// Service level.
    #[arg(short = 'S', long = "sl")]
    pub sl: Option<u8>,
    /// Max inline size.
    #[arg(short = 'I', long = "inline_size")]
    pub inline_size: Option<u32>,
    /// Connection type: RC, UC or UD.
    #[arg(short = 'c', long = "connection")]
    pub connection: Option<String>,
    /// Bidirectional (duplex) test.
    #[arg(short = 'b', long = "bidirectional")]
    pub bidirectional: bool,
    /// Wait for completions with events instead of polling.
    #[arg(short = 'e', long = "events")]
    pub events: bool,
    /// Outstanding reads/atomics.
    #[arg(short = 'o', long = "outs")]
    pub outs: Option<u32>,
    /// Atomic type: FETCH_AND_ADD or CMP_AND_SWAP.
    #[arg(short = 'A', long = "atomic_type")]
    pub atomic_type: Option<String>,
    /// One MR per QP.
    #[arg(long = "mr_per_qp")]
    pub mr_per_qp: bool,
    /// Connect QPs with rdma_cm.
    #[arg(short = 'R', long = "rdma_cm")]
    pub rdma_cm: bool,
    /// Don't warn about CPU frequency (accepted for compatibility; rdmaperf calibrates its clock).
    #[arg(short = 'F', long = "CPU-freq")]
    pub cpu_freq: bool,
    /// Report in Gb/s instead of MiB/s.
    #[arg(long = "report_gbits")]
    pub report_gbits: bool,
    /// Don't compute the peak bandwidth.
    #[arg(short = 'N', long = "noPeak")]
    pub no_peak: bool,
    /// Print a single number: bandwidth, message_rate or latency.
    #[arg(long = "output")]
    pub output: Option<String>,
    /// Fail if the average bandwidth is below this, in the report's unit: MB/sec (perftest's,
    /// 2^20 bytes/s) by default, Gb/sec with --report_gbits.
    #[arg(short = 'w', long = "limit_bw")]
    pub limit_bw: Option<f64>,
    /// Fail if the message rate (Mpps) is below this.
    #[arg(short = 'y', long = "limit_msgrate")]
    pub limit_msgrate: Option<f64>,
    /// Write results as JSON (to --out_json_file).
    #[arg(long = "out_json")]
    pub out_json: bool,
    /// JSON output file.
    #[arg(long = "out_json_file")]
    pub out_json_file: Option<PathBuf>,
    /// RDMA WRITE with immediate.
    #[arg(long = "write_with_imm")]
    pub write_with_imm: bool,
    /// SEND with immediate.
    #[arg(long = "send_with_imm")]
    pub send_with_imm: bool,
    /// Print every latency sample, in the order measured, before the result row.
    #[arg(short = 'U', long = "report-unsorted")]
    pub report_unsorted: bool,
    /// Print a histogram of the latency samples (buckets with counts and
    /// cumulative %) before the result row; perftest prints the sorted samples
    /// instead, which -U (unsorted) and --samples-file give you.
    #[arg(
        short = 'H',
        long = "report-histogram",
        visible_alias = "report-histogrm"
    )]
    pub report_histogram: bool,
    /// Report latencies in TSC cycles instead of microseconds.
    #[arg(short = 'C', long = "report-cycles")]
    pub report_cycles: bool,
    /// Report the change of these port counters after each row (comma list of
    /// files under /sys/class/infiniband/<dev>/ports/<port>/, e.g. hw_counters/sent_pkts).
    #[arg(short = 'W', long = "report-counters")]
    pub report_counters: Option<String>,
    /// Add perftest's CPU_Util column (-D runs): user / (user + idle) time of
    /// the whole host over the sample window, from /proc/stat.
    #[arg(long = "cpu_util")]
    pub cpu_util: bool,
    /// -R: the retry count rdma_cm puts in the connect request (data QPs).
    #[arg(long = "retry_count")]
    pub retry_count: Option<u8>,
    /// bw tests: wait this many seconds before destroying the QPs, CQs and MRs.
    #[arg(long = "wait_destroy")]
    pub wait_destroy: Option<u32>,
    /// Traffic class in the GRH (RoCE: the DSCP/ECN byte) of the data QPs.
    #[arg(long = "tclass")]
    pub tclass: Option<u8>,
    /// GRH flow label per QP, round-robin over the list (e.g. 1,2,3).
    #[arg(long = "flow_label")]
    pub flow_label: Option<String>,
    /// P_Key index of the data QPs.
    #[arg(long = "pkey_index")]
    pub pkey_index: Option<u16>,
    /// -R: the ToS (IP DSCP/ECN byte) the RDMA CM puts on the data QPs'
    /// path (rdma_set_option RDMA_OPTION_ID_TOS), read back from the QP.
    #[arg(short = 'T', long = "tos")]
    pub tos: Option<String>,
    /// The control channel over rdma_cm (an RC QP the CM connects), the data
    /// QPs still connected by the key messages (perftest's -z).
    #[arg(short = 'z', long = "comm_rdma_cm", alias = "com_rdma_cm")]
    pub comm_rdma_cm: bool,
    /// GID auto-selection (no -x) prefers IPv6 GIDs over IPv4-mapped ones.
    #[arg(long = "ipv6")]
    pub ipv6: bool,
    /// The TCP control connection over IPv6 (the server listens on ::, the
    /// client resolves the server name to IPv6 addresses only).
    #[arg(long = "ipv6-addr")]
    pub ipv6_addr: bool,
    /// Client: bind the TCP control socket to this source address before
    /// connecting (4.5 spells it --source_ip).
    #[arg(long = "bind_source_ip", alias = "source_ip")]
    pub bind_source_ip: Option<String>,
    /// Test buffers in huge pages (SysV shmget SHM_HUGETLB, rounded up to 2 MiB);
    /// reserve pages first in /proc/sys/vm/nr_hugepages.
    #[arg(long = "use_hugepages")]
    pub use_hugepages: bool,
    /// The test buffer is this file, mmap'd shared read-write (it must hold the
    /// whole buffer); what the peer writes lands in the file.
    #[arg(long = "mmap")]
    pub mmap: Option<PathBuf>,
    /// Byte offset of the buffer in the --mmap file (a multiple of the page size).
    #[arg(long = "mmap-offset")]
    pub mmap_offset: Option<u64>,
    /// Fill the buffers with this pattern: a text file of comma-separated DWORDs
    /// (0xaaaaaaaa,0xbbbbbbbb,...), each stored little-endian, at most -s bytes.
    #[arg(long = "payload_file_path")]
    pub payload_file_path: Option<PathBuf>,
    /// Send from a null MR (ibv_alloc_null_mr, write/read tests): no local data
    /// is read or written; the device must support it (mlx5).
    #[arg(long = "use-null-mr")]
    pub use_null_mr: bool,
    /// Register the buffers as On-Demand Paging MRs (IBV_ACCESS_ON_DEMAND); the
    /// device's odp_caps must allow this transport and verb.
    #[arg(long = "odp")]
    pub odp: bool,
    /// Register the buffers without IBV_ACCESS_RELAXED_ORDERING (perftest
    /// registers with it by default; a device without PCIe relaxed ordering
    /// ignores it).
    #[arg(long = "disable_pcie_relaxed")]
    pub disable_pcie_relaxed: bool,
    /// send tests: the receiving side's QPs share one receive queue (SRQ).
    #[arg(long = "use-srq")]
    pub use_srq: bool,
    /// Rate limiter: the most this side sends, in --rate_units (bw tests).
    /// Without --rate_limit_type perftest's HW limiter is tried first, falling
    /// back to the software one where the QP refuses it.
    #[arg(long = "rate_limit")]
    pub rate_limit: Option<String>,
    /// Units of --rate_limit: M (MiB/s), g (Gb/s) or p (messages/s).
    #[arg(long = "rate_units")]
    pub rate_units: Option<String>,
    /// SW (pace the posts), HW (the QP's static rate; InfiniBand) or PP
    /// (packet pacing; perftest allows it on raw Ethernet QPs only, refused).
    #[arg(long = "rate_limit_type")]
    pub rate_limit_type: Option<String>,
    /// Rate limiter: messages posted back to back per burst.
    #[arg(long = "burst_size")]
    pub burst_size: Option<u32>,
    /// Latency tests: busy-wait this many microseconds before each post
    /// (outside the measured interval).
    #[arg(long = "latency_gap")]
    pub latency_gap: Option<u32>,
    /// Before measuring, post one TX-depth of messages per QP and wait for them
    /// (write, read and atomic bw tests).
    #[arg(long = "perform_warm_up")]
    pub perform_warm_up: bool,
    /// Completions polled per ibv_poll_cq call in the bw loops (1..65535).
    #[arg(long = "cqe_poll")]
    pub cqe_poll: Option<u32>,
    /// send-bw: post receive WRs this many per ibv_post_recv call.
    #[arg(long = "recv_post_list")]
    pub recv_post_list: Option<u32>,
    /// With -b: after the total, print this side's and the peer's results
    /// separately ("Local results", "Remote results").
    #[arg(long = "report-both")]
    pub report_both: bool,
    /// bw tests: the server sends to the client (who listens and who connects
    /// stays; both sides give it, as perftest's SYMMETRIC flag).
    #[arg(long = "reversed")]
    pub reversed: bool,
    /// write-bw/read-bw over RC, both sides rdmaperf: after the run the side
    /// the data went to compares every byte of every message position with
    /// what the sender put there and prints VALIDATION: PASSED/FAILED.
    #[arg(long = "data_validation")]
    pub data_validation: bool,
    /// send-bw/send-lat: UD multicast - the receiver's QP joins a multicast
    /// group (ibv_attach_mcast) and the sender sends to the group (RoCE).
    #[arg(short = 'g', long = "mcg")]
    pub mcg: bool,
    /// With -g: the group's MGID, as perftest writes it (16 colon-separated
    /// bytes, e.g. 255:14:0:0:0:0:0:0:0:0:0:0:0:0:19:1) or as an IPv6 address (ff0e::1301).
    #[arg(short = 'M', long = "MGID")]
    pub mgid: Option<String>,
    /// Print perftest's version line and rdmaperf's, then exit.
    #[arg(short = 'V', long = "version")]
    pub version: bool,

    // ---- rdmaperf's own options ----
    /// Latency tools: write every raw sample to this CSV file (header `size,index,cycles,usec`:
    /// the message size, the sample's index, TSC cycles, microseconds).
    #[arg(long = "samples-file")]
    pub samples_file: Option<PathBuf>,
    /// Post method: post-send, wr-api, direct (mlx5) or auto.
    #[arg(long = "post", default_value = "auto")]
    pub post: String,
    /// perftest's alias for --post post-send.
    #[arg(long = "use_old_post_send")]
    pub use_old_post_send: bool,
    /// Run server and client in this process over 127.0.0.1 (quick look on one host).
    #[arg(long = "loopback")]
    pub loopback: bool,
    /// Reproduce perftest's latency formulas (dropped tail, integer stdev) for comparison.
    #[arg(long = "perftest-stats")]
    pub perftest_stats: bool,
    /// After the run, explain the number: this port's counter deltas over the run against the
    /// rules, the link and PCIe ceilings, and the PCIe/NUMA/MTU facts (docs/explain.md).
    #[arg(long = "explain")]
    pub explain: bool,
    /// Seconds to wait for the peer at each control step.
    #[arg(long = "timeout", default_value_t = 30)]
    pub timeout: u64,
    /// Seconds without a completion before the run is declared stuck.
    #[arg(long = "cq-timeout", default_value_t = 10)]
    pub cq_timeout: u64,
    /// Worker threads (bw tests): each owns its QPs and CQ and is pinned to a core.
    #[arg(long = "threads")]
    pub threads: Option<u32>,
    /// Cores (e.g. 0-3,8): with --threads, one worker per core from this list (default:
    /// NUMA-local to the device); without, the run itself may use only these cores
    /// (as under `taskset -c`).
    #[arg(long = "cpus")]
    pub cpus: Option<String>,
    /// Don't time each post call (the tool reports ns per post by default).
    #[arg(long = "no-cost")]
    pub no_cost: bool,
    /// Server: after the run, check that the client's data landed where perftest's
    /// buffer geometry says (write tests).
    #[arg(long = "check-landing")]
    pub check_landing: bool,
}

/// perftest's size syntax: a number with an optional K or M suffix.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mul) = match t.as_bytes().last() {
        Some(b'K' | b'k') => (&t[..t.len() - 1], 1024u64),
        Some(b'M' | b'm') => (&t[..t.len() - 1], 1024 * 1024),
        _ => (t, 1),
    };
    let v: u64 = num.parse().map_err(|_| {
        format!("'{s}' is not a size: use bytes, or a number with K or M (e.g. 64K)")
    })?;
    v.checked_mul(mul)
        .ok_or_else(|| format!("size '{s}' is too large"))
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn sizes() {
        assert_eq!(parse_size("64"), Ok(64));
        assert_eq!(parse_size("64K"), Ok(65536));
        assert_eq!(parse_size("2M"), Ok(2 << 20));
        assert!(parse_size("x").unwrap_err().contains("not a size"));
    }
}
