//! The parameters a report describes ([`TestInfo`]) and their perftest spellings.

use super::stats::{BwUnits, LatUnits};

/// Which perftest release's output to reproduce.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Dialect {
    /// perftest master (6.29, 2026): "MiB/sec", `Lock-free`, `CQE Poll Batch`, ...
    #[default]
    Master,
    /// perftest 4.5 (6.06, Debian 12): "MB/sec", 3 spaces before MsgRate, shorter
    /// info block. Kept so output can be compared with installed stock binaries.
    V4_5,
}

/// The operation under test (perftest's `VerbType`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Verb {
    Send,
    SendImm,
    #[default]
    Write,
    WriteImm,
    Read,
    Atomic,
}

impl Verb {
    /// perftest's `testsStr[]` spelling ("RDMA_Write", ...).
    pub const fn perftest_name(self) -> &'static str {
        match self {
            Verb::Send => "Send",
            Verb::SendImm => "Send_imm",
            Verb::Write => "RDMA_Write",
            Verb::WriteImm => "RDMA_Write_imm",
            Verb::Read => "RDMA_Read",
            Verb::Atomic => "Atomic",
        }
    }

    /// Latency samples are round trips for ping-pong tests (write, send): 2;
    /// read/atomic samples are one operation: 1.
    pub const fn rtt_factor(self) -> u32 {
        match self {
            Verb::Read | Verb::Atomic => 1,
            _ => 2,
        }
    }

    /// Whether the receiver sees completions (perftest `has_recv_comp`).
    pub const fn has_recv_comp(self) -> bool {
        matches!(self, Verb::Send | Verb::SendImm | Verb::WriteImm)
    }
}

/// Atomic operation (`-A`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum AtomicOp {
    CmpAndSwap,
    #[default]
    FetchAndAdd,
}

impl AtomicOp {
    /// perftest's `atomicTypesStr[]` spelling.
    pub const fn perftest_name(self) -> &'static str {
        match self {
            AtomicOp::CmpAndSwap => "CMP_AND_SWAP",
            AtomicOp::FetchAndAdd => "FETCH_AND_ADD",
        }
    }
}

/// Bandwidth or latency test.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TestKind {
    #[default]
    Bw,
    Lat,
}

/// Which side of the test this process is (perftest `machine`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Role {
    #[default]
    Client,
    Server,
}

/// Connection type (`-c`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Connection {
    #[default]
    Rc,
    Uc,
    Ud,
    RawEth,
    Xrc,
    Dc,
    Srd,
}

impl Connection {
    /// perftest's `connStr[]` spelling.
    pub const fn perftest_name(self) -> &'static str {
        match self {
            Connection::Rc => "RC",
            Connection::Uc => "UC",
            Connection::Ud => "UD",
            Connection::RawEth => "RawEth",
            Connection::Xrc => "XRC",
            Connection::Dc => "DC",
            Connection::Srd => "SRD",
        }
    }
}

/// Device transport (`ibv_device.transport_type`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Transport {
    #[default]
    Ib,
    Iwarp,
    Unknown,
}

impl Transport {
    /// perftest's `transport_str()` spelling.
    pub const fn perftest_name(self) -> &'static str {
        match self {
            Transport::Ib => "IB",
            Transport::Iwarp => "IW",
            Transport::Unknown => "Unknown",
        }
    }
}

/// Port link layer.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum LinkLayer {
    /// InfiniBand (also "unspecified").
    #[default]
    Ib,
    Ethernet,
    Unknown,
}

impl LinkLayer {
    /// perftest's `link_layer_str()` spelling.
    pub const fn perftest_name(self) -> &'static str {
        match self {
            LinkLayer::Ib => "IB",
            LinkLayer::Ethernet => "Ethernet",
            LinkLayer::Unknown => "Unknown",
        }
    }
}

/// A feature that is on, off, or not compiled in/supported.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Support {
    On,
    #[default]
    Off,
    Unsupported,
}

impl Support {
    /// "ON" / "OFF" / "Unsupported".
    pub const fn perftest_name(self) -> &'static str {
        match self {
            Support::On => "ON",
            Support::Off => "OFF",
            Support::Unsupported => "Unsupported",
        }
    }
}

/// CQE polling batch (`--cqe_poll`; master only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CqePoll {
    /// Adaptive batch (master default for iters >= 3000).
    Dynamic,
    /// Fixed batch size.
    Fixed(u16),
}

impl Default for CqePoll {
    fn default() -> Self {
        CqePoll::Fixed(16)
    }
}

/// `--output=`: full report, or one bare number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OutputMode {
    /// Info block, headers, rows (perftest FULL_VERBOSITY).
    #[default]
    Full,
    /// `--output=bandwidth`: only the average bandwidth.
    Bandwidth,
    /// `--output=message_rate`: only the average message rate.
    MessageRate,
    /// `--output=latency`: only the average latency.
    Latency,
}

/// Every parameter the info block, the JSON `test_info` and the result lines need.
/// Fields mirror perftest's `user_param` after its dependency fix-ups; the caller
/// fills them with the values actually used.
#[derive(Clone, Debug, PartialEq)]
pub struct TestInfo {
    /// Output dialect (master unless comparing with stock 4.5).
    pub dialect: Dialect,
    pub verb: Verb,
    /// Only printed for [`Verb::Atomic`].
    pub atomic_op: AtomicOp,
    pub kind: TestKind,
    pub role: Role,
    /// `-b`.
    pub duplex: bool,
    /// `-l` (title says "Post List" when > 1).
    pub post_list: u32,
    /// `--recv_post_list`.
    pub recv_post_list: u32,
    /// `-e`: completion vector number used ("Using mlx5_0_comp%d").
    pub events: Option<u32>,
    /// `-O`.
    pub dualport: bool,
    /// `-g`: "Multicast" in the title, " MultiCast runs on UD!", the
    /// group's address line labelled MGID.
    pub mcast: bool,
    /// Device name, e.g. "mlx5_0".
    pub device: String,
    pub num_qps: u32,
    pub transport: Transport,
    pub connection: Connection,
    pub use_srq: bool,
    /// PCIe relaxed ordering on MRs (ON unless `--disable_pcie_relaxed`).
    pub pcie_relaxed: Support,
    /// Prints perftest's two "not PCIe relaxed ordering compliant" warnings
    /// (only when `pcie_relaxed` is ON).
    pub pcie_ro_noncompliant_cpu: bool,
    /// `--no_lock` (master "Lock-free"; `Unsupported` without thread domains).
    pub lock_free: Support,
    /// New `ibv_wr_*` post API in use (OFF with `--use_old_post_send`).
    pub wr_api: bool,
    /// Master "Using Enhanced Reorder".
    pub enhanced_reorder: bool,
    pub tx_depth: u32,
    pub rx_depth: u32,
    pub cq_mod: u32,
    /// Master "CQE Poll Batch".
    pub cqe_poll: CqePoll,
    /// Path MTU in bytes (256..4096).
    pub mtu: u32,
    pub link: LinkLayer,
    /// `-x`; `None` = not set (perftest -1, no GID line).
    pub gid_index: Option<i32>,
    /// Second port's GID index (dual-port only).
    pub gid_index2: Option<i32>,
    /// Max inline data (printed for all but read/atomic).
    pub inline_size: u32,
    /// Outstanding reads (printed for read/atomic).
    pub out_reads: u32,
    /// `-R`: data QPs connected with rdma_cm ("rdma_cm QPs : ON").
    pub rdma_cm_qps: bool,
    /// Control data exchanged over rdma_cm ("Data ex. method : rdma_cm").
    pub rdma_cm_exchange: bool,
    /// `--tos` with rdma_cm.
    pub tos: Option<i32>,
    /// `--numa_node` (master).
    pub numa_node: Option<i32>,
    /// CUDA device (JSON `cuda_device` only).
    pub cuda_device: Option<i32>,

    // ---- run parameters (JSON test_info extras; not in perftest's text block) ----
    /// `-s` (bytes); for `-a` the largest size.
    pub size: u64,
    /// `-a`.
    pub all_sizes: bool,
    /// `-n` per QP (0 in duration mode).
    pub iters: u64,
    /// `-D` seconds.
    pub duration_s: Option<u32>,
    /// `-f` seconds (duration mode).
    pub margin_s: Option<u32>,
    /// `--report_gbits` or not.
    pub bw_units: BwUnits,
    /// `-C` or not.
    pub lat_units: LatUnits,
    /// `--cpu_util`: adds the CPU_Util column.
    pub cpu_util: bool,
    /// `--output=`.
    pub output: OutputMode,
    /// Our own info lines, printed after perftest's (label, value), e.g.
    /// ("Post method", "post-send"), ("Clock", clock.to_string()). Labels up to
    /// 16 characters keep the colon aligned. In JSON they become string keys with
    /// spaces replaced by '_'.
    pub extra: Vec<(String, String)>,
    /// JSON-only `test_info` keys of our own (after `extra`), e.g. why
    /// `--post auto` passed over a method.
    pub json_extra: Vec<(String, String)>,
    /// Latency statistics as perftest computes them (`--perftest-stats`)
    /// instead of the exact ones.
    pub perftest_stats: bool,
}

impl Default for TestInfo {
    fn default() -> Self {
        TestInfo {
            dialect: Dialect::Master,
            verb: Verb::Write,
            atomic_op: AtomicOp::FetchAndAdd,
            kind: TestKind::Bw,
            role: Role::Client,
            duplex: false,
            post_list: 1,
            recv_post_list: 1,
            events: None,
            dualport: false,
            mcast: false,
            device: String::new(),
            num_qps: 1,
            transport: Transport::Ib,
            connection: Connection::Rc,
            use_srq: false,
            pcie_relaxed: Support::On,
            pcie_ro_noncompliant_cpu: false,
            lock_free: Support::Off,
            wr_api: true,
            enhanced_reorder: false,
            tx_depth: 128,
            rx_depth: 512,
            cq_mod: 100,
            cqe_poll: CqePoll::Fixed(16),
            mtu: 1024,
            link: LinkLayer::Ib,
            gid_index: None,
            gid_index2: None,
            inline_size: 0,
            out_reads: 16,
            rdma_cm_qps: false,
            rdma_cm_exchange: false,
            tos: None,
            numa_node: None,
            cuda_device: None,
            size: 65536,
            all_sizes: false,
            iters: 5000,
            duration_s: None,
            margin_s: None,
            bw_units: BwUnits::MiB,
            lat_units: LatUnits::Usec,
            cpu_util: false,
            output: OutputMode::Full,
            extra: Vec::new(),
            json_extra: Vec::new(),
            perftest_stats: false,
        }
    }
}

impl TestInfo {
    /// The title words after the verb, e.g. "Bidirectional Post List BW " (each
    /// word followed by a space, as perftest prints them).
    fn title_words(&self, sep: &str) -> String {
        let mut t = String::new();
        t.push_str(self.verb.perftest_name());
        t.push_str(sep);
        if self.verb == Verb::Atomic {
            t.push_str(self.atomic_op.perftest_name());
            t.push_str(sep);
        }
        match self.kind {
            TestKind::Bw => {
                if self.duplex {
                    t.push_str("Bidirectional");
                    t.push_str(sep);
                }
                if self.post_list > 1 {
                    t.push_str("Post");
                    t.push_str(sep);
                    t.push_str("List");
                    t.push_str(sep);
                }
                t.push_str("BW");
                t.push_str(sep);
            }
            TestKind::Lat => {
                t.push_str("Latency");
                t.push_str(sep);
            }
        }
        if self.mcast {
            t.push_str("Multicast");
            t.push_str(sep);
        }
        t.push_str("Test");
        t
    }

    /// Title as in the text info block: "RDMA_Write BW Test".
    pub fn title(&self) -> String {
        self.title_words(" ")
    }

    /// Title as in the JSON `test` key: "RDMA_Write_BW_Test".
    pub fn json_title(&self) -> String {
        self.title_words("_")
    }

    /// Whether perftest prints "TX depth" (client or duplex).
    pub fn shows_tx_depth(&self) -> bool {
        self.role == Role::Client || self.duplex
    }

    /// Whether perftest prints "RX depth" (4.5: send only; master: any verb with
    /// receive completions) on a server or duplex run.
    pub fn shows_rx_depth(&self) -> bool {
        let verb_ok = match self.dialect {
            Dialect::Master => self.verb.has_recv_comp(),
            Dialect::V4_5 => self.verb == Verb::Send,
        };
        verb_ok && (self.role == Role::Server || self.duplex)
    }

    /// Read and atomic tests print "Outstand reads" instead of "Max inline data".
    pub fn shows_out_reads(&self) -> bool {
        matches!(self.verb, Verb::Read | Verb::Atomic)
    }
}

/// perftest's word for a switch in the info block and its JSON.
pub(crate) fn on_off(b: bool) -> &'static str {
    if b {
        "ON"
    } else {
        "OFF"
    }
}
