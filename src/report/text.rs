//! perftest's text output, byte for byte (master by default, 4.5 on request).
//!
//! The format strings below state perftest's output format (field widths, tabs,
//! spacing), which scrapers depend on; they are rendered by [`super::cfmt`].
//! Lines of our own ([`TestInfo::extra`]) come after all of perftest's info lines,
//! just before the closing dashes, so line-based scrapers keep working.
//!
//! Not reproduced: raw-Ethernet/multicast/mac-forwarding lines, DCS/AES-XTS lines,
//! ROCm/MUSA memory lines, QoS (`--sl` per line) and `--report-per-port` layouts.

use super::cfmt::{sprintf, Arg};
use super::info::{
    on_off, Connection, CqePoll, Dialect, OutputMode, Role, Support, TestInfo, TestKind, Verb,
};
use super::stats::{BwResult, BwUnits, LatDuration, LatStats, LatUnits};

/// 87 dashes and a newline.
pub const RESULT_LINE: &str =
    "---------------------------------------------------------------------------------------\n";

/// Printed (once, perftest master only; 4.5 is silent) when the peak will not be
/// measured, see [`super::stats::no_peak_rule`].
pub const PEAK_WARNING: &str = " WARNING: BW peak won't be measured in this run.\n";

/// A server prints this (stdout) before waiting for the client's TCP connection.
pub const SERVER_WAIT_BANNER: &str =
    "\n************************************\n* Waiting for client to connect... *\n************************************\n";

/// When the device is not known to support inline data and the test's default
/// inline size is not 0, perftest prints [`RESULT_LINE`] on stdout and this line
/// on stderr, then disables inline.
pub const INLINE_UNSUPPORTED: &str =
    "Device not recognized to implement inline feature. Disabling it\n";

const BW_HEADER_MIB: &str =
    " #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]";
const BW_HEADER_MB_4_5: &str =
    " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]";
const BW_HEADER_GBIT: &str =
    " #bytes     #iterations    BW peak[Gb/sec]    BW average[Gb/sec]   MsgRate[Mpps]";
const HEADER_END: &str = "\n";
const HEADER_END_CPU: &str = "    CPU_Util[%]\n";

/// perftest master REPORT_FMT (5 spaces after the two tabs).
const BW_ROW: &str = " %-7lu    %-10lu       %-7.2lf            %-7.2lf\t\t     %-7.6lf";
/// perftest 4.5 REPORT_FMT (3 spaces after the two tabs).
const BW_ROW_4_5: &str = " %-7lu    %-10lu       %-7.2lf            %-7.2lf\t\t   %-7.6lf";
/// REPORT_FMT_EXT: Gb/s results under 0.1 get 6 decimals.
const BW_ROW_EXT: &str = " %-7lu    %lu           %-7.6lf            %-7.6lf            %-7.6lf";
const ROW_END_CPU: &str = "\t    %-3.2f\n";

const LAT_HEADER: &str = " #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] ";
const LAT_DUR_HEADER: &str = " #bytes        #iterations       t_avg[usec]    tps average";
const LAT_ROW: &str = " %-7lu %lu          %-7.2f        %-7.2f      %-7.2f  \t       %-7.2f     \t%-7.2f\t\t%-7.2f \t\t%-7.2f";
const LAT_DUR_ROW: &str = " %-7lu       %lu            %-7.2f        %-7.2f";

/// The info block (`ctx_print_test_info`): dashes, title, parameters, our
/// extra lines, dashes.
/// Empty unless `i.output` is full (perftest prints nothing else then).
pub fn info_block(i: &TestInfo) -> String {
    if i.output != OutputMode::Full {
        return String::new();
    }
    let mut o = String::with_capacity(1024);
    o.push_str(RESULT_LINE);
    title_lines(&mut o, i);
    pcie_and_api_lines(&mut o, i);
    depth_lines(&mut o, i);
    link_lines(&mut o, i);
    exchange_lines(&mut o, i);
    if let (Dialect::Master, Some(n)) = (i.dialect, i.numa_node) {
        o += &sprintf(" NUMA node       : %d\n", &[Arg::I(n as i64)]);
    }
    for (k, v) in &i.extra {
        o += &sprintf(" %-16s: %s\n", &[Arg::S(k), Arg::S(v)]);
    }
    o.push_str(RESULT_LINE);
    o
}

/// The title, the events and multicast notes, ports, QPs, transport, connection, SRQ.
fn title_lines(o: &mut String, i: &TestInfo) {
    o.push_str("                    ");
    o.push_str(&i.title());
    o.push('\n');
    if let Some(eq) = i.events {
        *o += &sprintf(
            " Test with events. Using %s_comp%d\n",
            &[Arg::S(&i.device), Arg::U(eq as u64)],
        );
    }
    if i.mcast {
        o.push_str(" MultiCast runs on UD!\n");
    }
    *o += &sprintf(
        " Dual-port       : %s\t\tDevice         : %s\n",
        &[Arg::S(on_off(i.dualport)), Arg::S(&i.device)],
    );
    *o += &sprintf(
        " Number of qps   : %d\t\tTransport type : %s\n",
        &[
            Arg::U(i.num_qps as u64),
            Arg::S(i.transport.perftest_name()),
        ],
    );
    *o += &sprintf(
        " Connection type : %s\t\tUsing SRQ      : %s\n",
        &[
            Arg::S(i.connection.perftest_name()),
            Arg::S(on_off(i.use_srq)),
        ],
    );
}

/// PCIe relaxed ordering (and master's lock-free), its CPU warning, the WR API line.
fn pcie_and_api_lines(o: &mut String, i: &TestInfo) {
    let master = i.dialect == Dialect::Master;
    let ro = i.pcie_relaxed.perftest_name();
    let ro_supported = i.pcie_relaxed != Support::Unsupported;
    if master {
        let lf = i.lock_free.perftest_name();
        if !ro_supported && i.lock_free == Support::Unsupported {
            o.push_str(" PCIe relax order: Unsupported\t\tLock-free\t: Unsupported\n");
        } else {
            *o += &sprintf(
                " PCIe relax order: %s\t\tLock-free      : %s\n",
                &[Arg::S(ro), Arg::S(lf)],
            );
        }
    } else {
        *o += &sprintf(" PCIe relax order: %s\n", &[Arg::S(ro)]);
    }
    if ro_supported && i.pcie_ro_noncompliant_cpu && i.pcie_relaxed == Support::On {
        o.push_str(" WARNING: CPU is not PCIe relaxed ordering compliant.\n");
        o.push_str(" WARNING: You should disable PCIe RO with `--disable_pcie_relaxed` for both server and client.\n");
    }
    if master {
        *o += &sprintf(
            " ibv_wr* API     : %s\t\tUsing Enhanced Reorder      : %s\n",
            &[Arg::S(on_off(i.wr_api)), Arg::S(on_off(i.enhanced_reorder))],
        );
    } else {
        *o += &sprintf(" ibv_wr* API     : %s\n", &[Arg::S(on_off(i.wr_api))]);
    }
}

/// Queue depths, post lists, CQ moderation and master's poll batch.
fn depth_lines(o: &mut String, i: &TestInfo) {
    if i.shows_tx_depth() {
        *o += &sprintf(" TX depth        : %d\n", &[Arg::U(i.tx_depth as u64)]);
    }
    if i.post_list > 1 {
        *o += &sprintf(" Post List       : %d\n", &[Arg::U(i.post_list as u64)]);
    }
    if i.recv_post_list > 1 {
        *o += &sprintf(
            " Recv Post List  : %d\n",
            &[Arg::U(i.recv_post_list as u64)],
        );
    }
    if i.shows_rx_depth() {
        *o += &sprintf(" RX depth        : %d\n", &[Arg::U(i.rx_depth as u64)]);
    }
    if i.kind == TestKind::Bw {
        *o += &sprintf(" CQ Moderation   : %d\n", &[Arg::U(i.cq_mod as u64)]);
        if i.dialect == Dialect::Master {
            match i.cqe_poll {
                CqePoll::Dynamic => o.push_str(" CQE Poll Batch  : Dynamic\n"),
                CqePoll::Fixed(n) => {
                    *o += &sprintf(" CQE Poll Batch  : %hu\n", &[Arg::U(n as u64)]);
                }
            }
        }
    }
}

/// MTU, link type, GID indexes, and outstanding reads or the inline size.
fn link_lines(o: &mut String, i: &TestInfo) {
    *o += &sprintf(" Mtu             : %lu[B]\n", &[Arg::U(i.mtu as u64)]);
    *o += &sprintf(" Link type       : %s\n", &[Arg::S(i.link.perftest_name())]);
    if let Some(g) = i.gid_index {
        *o += &sprintf(" GID index       : %d\n", &[Arg::I(g as i64)]);
    }
    if let (true, Some(g)) = (i.dualport, i.gid_index2) {
        *o += &sprintf(" GID index2      : %d\n", &[Arg::I(g as i64)]);
    }
    if i.shows_out_reads() {
        *o += &sprintf(" Outstand reads  : %d\n", &[Arg::U(i.out_reads as u64)]);
    } else {
        *o += &sprintf(
            " Max inline data : %d[B]\n",
            &[Arg::U(i.inline_size as u64)],
        );
    }
}

/// rdma_cm QPs, the data exchange method (and the rdma_cm server's wait text).
fn exchange_lines(o: &mut String, i: &TestInfo) {
    *o += &sprintf(" rdma_cm QPs\t : %s\n", &[Arg::S(on_off(i.rdma_cm_qps))]);
    let method = if i.rdma_cm_exchange {
        "rdma_cm"
    } else {
        "Ethernet"
    };
    *o += &sprintf(" Data ex. method : %s", &[Arg::S(method)]);
    if i.rdma_cm_qps {
        if let Some(tos) = i.tos {
            *o += &sprintf(" \tTOS    : %d", &[Arg::I(tos as i64)]);
        }
        if i.role == Role::Server {
            o.push('\n');
            o.push_str(RESULT_LINE);
            o.push_str(" Waiting for client rdma_cm QP to connect\n");
            o.push_str(" Please run the same command with the IB/RoCE interface IP");
        }
    }
    o.push('\n');
}

/// Which end an address line describes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Local,
    Remote,
}

/// One QP's connection data as exchanged (perftest `pingpong_dest`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Dest {
    /// LID (for the remote line perftest prints `--dlid` instead when given).
    pub lid: u16,
    pub qpn: u32,
    pub psn: u32,
    pub out_reads: u32,
    pub rkey: u32,
    pub vaddr: u64,
    /// XRC/DC SRQ number.
    pub srqn: u32,
    pub gid: [u8; 16],
}

/// " local address: LID 0x01 QPN ..." plus the GID line when a GID index is set
/// (`ctx_print_pingpong_data`). Read prints OUT, RKey and VAddr; write prints
/// RKey and VAddr; other verbs the basic fields only. GID bytes are printed in
/// decimal (`%02d`), as perftest does.
/// Empty unless `i.output` is full.
pub fn address_line(side: Side, d: &Dest, i: &TestInfo) -> String {
    if i.output != OutputMode::Full {
        return String::new();
    }
    let side = match side {
        Side::Local => "local",
        Side::Remote => "remote",
    };
    let mut o = sprintf(
        " %s address: LID %#04x QPN %#06x PSN %#06x",
        &[
            Arg::S(side),
            Arg::U(d.lid as u64),
            Arg::U(d.qpn as u64),
            Arg::U(d.psn as u64),
        ],
    );
    if i.verb == Verb::Read {
        o += &sprintf(" OUT %#04x", &[Arg::U(d.out_reads as u64)]);
    }
    if matches!(i.verb, Verb::Read | Verb::Write) {
        o += &sprintf(
            " RKey %#08x VAddr %#016llx",
            &[Arg::U(d.rkey as u64), Arg::U(d.vaddr)],
        );
    }
    if matches!(i.connection, Connection::Xrc | Connection::Dc) {
        o += &sprintf(" SRQn %#08x", &[Arg::U(d.srqn as u64)]);
    }
    o.push('\n');
    if i.gid_index.is_some() && i.connection != Connection::RawEth {
        // perftest labels the group's address (the receiver's key message) MGID.
        let group = i.mcast && (i.duplex || (side == "local") == (i.role == Role::Server));
        let mut args = vec![Arg::S(if group { "MGID" } else { "GID" })];
        args.extend(d.gid.iter().map(|&b| Arg::U(b as u64)));
        o += &sprintf(
            " %s: %02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d:%02d\n",
            &args,
        );
    }
    o
}

/// Dashes plus the BW column header (MiB/sec or Gb/sec; 4.5 says "MB/sec"),
/// with the CPU_Util column when `i.cpu_util`. Empty unless `i.output` is full.
pub fn bw_header(i: &TestInfo) -> String {
    if i.output != OutputMode::Full {
        return String::new();
    }
    let h = match (i.bw_units, i.dialect) {
        (BwUnits::MiB, Dialect::Master) => BW_HEADER_MIB,
        (BwUnits::MiB, Dialect::V4_5) => BW_HEADER_MB_4_5,
        (BwUnits::Gbit, _) => BW_HEADER_GBIT,
    };
    let end = if i.cpu_util {
        HEADER_END_CPU
    } else {
        HEADER_END
    };
    format!("{RESULT_LINE}{h}{end}")
}

/// The `--report-both` section banner of duplex runs: dashes, " Local results: "
/// or " Remote results: ", then [`bw_header`].
pub fn report_both_banner(side: Side, i: &TestInfo) -> String {
    let what = match side {
        Side::Local => "Local",
        Side::Remote => "Remote",
    };
    format!("{RESULT_LINE}\n {what} results: \n{}", bw_header(i))
}

/// Whether perftest prints this BW result with 6 decimals (REPORT_FMT_EXT):
/// Gb/s and an average under 0.1.
pub fn bw_inc_accuracy(r: &BwResult, units: BwUnits) -> bool {
    r.bw_avg < 0.1 && units == BwUnits::Gbit
}

/// A result row: `fmt` over `args`, then the CPU column when `i.cpu_util`
/// (`cpu_util` is ignored otherwise) or a plain line end.
fn row(fmt: &str, args: &[Arg<'_>], i: &TestInfo, cpu_util: f32) -> String {
    let mut o = sprintf(fmt, args);
    if i.cpu_util {
        o += &sprintf(ROW_END_CPU, &[Arg::F(cpu_util as f64)]);
    } else {
        o.push('\n');
    }
    o
}

/// One BW result line: REPORT_FMT (REPORT_FMT_EXT for Gb/s under 0.1), plus the
/// CPU column when `i.cpu_util` (`cpu_util` is ignored otherwise); or the bare
/// `%lf` average bandwidth / message rate for `--output=bandwidth|message_rate`.
pub fn bw_row(r: &BwResult, i: &TestInfo, cpu_util: f32) -> String {
    match i.output {
        OutputMode::Bandwidth => return output_value(r.bw_avg),
        OutputMode::MessageRate => return output_value(r.msg_rate),
        _ => {}
    }
    let fmt = if bw_inc_accuracy(r, i.bw_units) {
        BW_ROW_EXT
    } else if i.dialect == Dialect::V4_5 {
        BW_ROW_4_5
    } else {
        BW_ROW
    };
    row(
        fmt,
        &[
            Arg::U(r.size),
            Arg::U(r.iters),
            Arg::F(r.bw_peak),
            Arg::F(r.bw_avg),
            Arg::F(r.msg_rate),
        ],
        i,
        cpu_util,
    )
}

/// `--output=bandwidth|message_rate|latency`: the bare value as `%lf\n`.
pub fn output_value(v: f64) -> String {
    sprintf("%lf\n", &[Arg::F(v)])
}

/// Dashes plus the latency header (duration variant when `i.duration_s` is set).
/// Empty unless `i.output` is full.
pub fn lat_header(i: &TestInfo) -> String {
    if i.output != OutputMode::Full {
        return String::new();
    }
    let h = if i.duration_s.is_some() {
        LAT_DUR_HEADER
    } else {
        LAT_HEADER
    };
    let end = if i.cpu_util {
        HEADER_END_CPU
    } else {
        HEADER_END
    };
    format!("{RESULT_LINE}{h}{end}")
}

/// One latency row (REPORT_FMT_LAT), or the bare `%lf` t_avg for
/// `--output=latency`.
pub fn lat_row(size: u64, iters: u64, s: &LatStats, i: &TestInfo, cpu_util: f32) -> String {
    if i.output == OutputMode::Latency {
        return output_value(s.t_avg);
    }
    row(
        LAT_ROW,
        &[
            Arg::U(size),
            Arg::U(iters),
            Arg::F(s.t_min),
            Arg::F(s.t_max),
            Arg::F(s.t_typical),
            Arg::F(s.t_avg),
            Arg::F(s.t_stdev),
            Arg::F(s.p99),
            Arg::F(s.p99_9),
        ],
        i,
        cpu_util,
    )
}

/// One duration-mode latency row (REPORT_FMT_LAT_DUR), or the bare `%lf` t_avg
/// for `--output=latency`.
pub fn lat_duration_row(
    size: u64,
    iters: u64,
    r: &LatDuration,
    i: &TestInfo,
    cpu_util: f32,
) -> String {
    if i.output == OutputMode::Latency {
        return output_value(r.t_avg);
    }
    row(
        LAT_DUR_ROW,
        &[Arg::U(size), Arg::U(iters), Arg::F(r.t_avg), Arg::F(r.tps)],
        i,
        cpu_util,
    )
}

/// The `-U` (unsorted) / `-H` (sorted histogram) sample dump: "#, usec" then
/// "index, value" lines with `%g`. `quotient` is
/// [`super::stats::lat_quotient`]; for `-H` pass the sorted samples without the
/// two largest (see [`super::stats::lat_perftest`]).
pub fn lat_dump(units: LatUnits, deltas: &[u64], quotient: f64) -> String {
    let mut o = format!("#, {}\n", units.label());
    for (k, &d) in deltas.iter().enumerate() {
        o += &sprintf(
            "%d, %g\n",
            &[Arg::U(k as u64 + 1), Arg::F(d as f64 / quotient)],
        );
    }
    o
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::info::{LinkLayer, Transport};

    fn write_bw_client() -> TestInfo {
        TestInfo {
            device: "mlx5_0".into(),
            mtu: 4096,
            gid_index: Some(3),
            link: LinkLayer::Ethernet,
            cqe_poll: CqePoll::Dynamic,
            ..TestInfo::default()
        }
    }

    #[test]
    fn info_block_master_write_bw() {
        let mut i = write_bw_client();
        i.extra = vec![
            ("Post method".into(), "post-send".into()),
            (
                "Clock".into(),
                "TSC calibrated against CLOCK_MONOTONIC_RAW: 2893.4 MHz".into(),
            ),
        ];
        let want = format!(
            "{RESULT_LINE}                    RDMA_Write BW Test
 Dual-port       : OFF\t\tDevice         : mlx5_0
 Number of qps   : 1\t\tTransport type : IB
 Connection type : RC\t\tUsing SRQ      : OFF
 PCIe relax order: ON\t\tLock-free      : OFF
 ibv_wr* API     : ON\t\tUsing Enhanced Reorder      : OFF
 TX depth        : 128
 CQ Moderation   : 100
 CQE Poll Batch  : Dynamic
 Mtu             : 4096[B]
 Link type       : Ethernet
 GID index       : 3
 Max inline data : 0[B]
 rdma_cm QPs\t : OFF
 Data ex. method : Ethernet
 Post method     : post-send
 Clock           : TSC calibrated against CLOCK_MONOTONIC_RAW: 2893.4 MHz
{RESULT_LINE}"
        );
        assert_eq!(info_block(&i), want);
    }

    #[test]
    fn info_block_variants() {
        // Read latency server, 4.5 dialect: no TX depth, Outstand reads, no CQ lines.
        let i = TestInfo {
            dialect: Dialect::V4_5,
            verb: Verb::Read,
            kind: TestKind::Lat,
            role: Role::Server,
            device: "rxe0".into(),
            transport: Transport::Ib,
            ..TestInfo::default()
        };
        let s = info_block(&i);
        assert!(s.contains("\n                    RDMA_Read Latency Test\n"));
        assert!(s.contains("\n PCIe relax order: ON\n ibv_wr* API     : ON\n Mtu "));
        assert!(s.contains(" Outstand reads  : 16\n"));
        assert!(!s.contains("TX depth") && !s.contains("CQ Moderation"));
        // Atomic, duplex, post list, send server with RX depth, rdma_cm server wait.
        let i = TestInfo {
            verb: Verb::Atomic,
            atomic_op: crate::report::info::AtomicOp::CmpAndSwap,
            duplex: true,
            post_list: 4,
            ..TestInfo::default()
        };
        assert!(info_block(&i)
            .contains("                    Atomic CMP_AND_SWAP Bidirectional Post List BW Test\n"));
        assert!(info_block(&i).contains(" Post List       : 4\n"));
        let i = TestInfo {
            verb: Verb::Send,
            role: Role::Server,
            rdma_cm_qps: true,
            rdma_cm_exchange: true,
            tos: Some(96),
            pcie_relaxed: Support::Unsupported,
            lock_free: Support::Unsupported,
            numa_node: Some(1),
            ..TestInfo::default()
        };
        let s = info_block(&i);
        assert!(s.contains(" PCIe relax order: Unsupported\t\tLock-free\t: Unsupported\n"));
        assert!(s.contains(" RX depth        : 512\n"));
        assert!(!s.contains("TX depth"));
        assert!(s.ends_with(&format!(
            " Data ex. method : rdma_cm \tTOS    : 96\n{RESULT_LINE} Waiting for client rdma_cm QP to connect\n Please run the same command with the IB/RoCE interface IP\n NUMA node       : 1\n{RESULT_LINE}"
        )));
    }

    #[test]
    fn address_lines() {
        let mut i = write_bw_client();
        let d = Dest {
            lid: 0,
            qpn: 0x11,
            psn: 0xab12cd,
            out_reads: 16,
            rkey: 0x1fff,
            vaddr: 0x7f00_1234_5000,
            srqn: 0,
            gid: [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 255, 255, 192, 168, 1, 10],
        };
        assert_eq!(
            address_line(Side::Local, &d, &i),
            " local address: LID 0000 QPN 0x0011 PSN 0xab12cd RKey 0x001fff VAddr 0x007f0012345000\n \
             GID: 00:00:00:00:00:00:00:00:00:00:255:255:192:168:01:10\n"
        );
        i.verb = Verb::Read;
        i.gid_index = None;
        assert_eq!(
            address_line(Side::Remote, &Dest { lid: 1, ..d }, &i),
            " remote address: LID 0x01 QPN 0x0011 PSN 0xab12cd OUT 0x10 RKey 0x001fff VAddr 0x007f0012345000\n"
        );
        i.verb = Verb::Send;
        i.connection = Connection::Xrc;
        assert_eq!(
            address_line(Side::Remote, &Dest { srqn: 0x42, ..d }, &i),
            " remote address: LID 0000 QPN 0x0011 PSN 0xab12cd SRQn 0x000042\n"
        );
    }

    fn res(bw_avg: f64) -> BwResult {
        BwResult {
            size: 65536,
            iters: 5000,
            bw_peak: 11716.84,
            bw_avg,
            msg_rate: 0.187456,
            bw_peak_exact: 0.0,
        }
    }

    #[test]
    fn bw_lines() {
        let mut i = TestInfo::default();
        assert_eq!(
            bw_header(&i),
            format!("{RESULT_LINE} #bytes     #iterations    BW peak[MiB/sec]    BW average[MiB/sec]   MsgRate[Mpps]\n")
        );
        assert_eq!(
            bw_row(&res(11715.97), &i, 0.0),
            " 65536      5000             11716.84            11715.97\t\t     0.187456\n"
        );
        i.dialect = Dialect::V4_5;
        i.cpu_util = true;
        assert!(bw_header(&i).ends_with("BW average[MB/sec]   MsgRate[Mpps]    CPU_Util[%]\n"));
        assert_eq!(
            bw_row(&res(11715.97), &i, 12.5),
            " 65536      5000             11716.84            11715.97\t\t   0.187456\t    12.50\n"
        );
        // Gb/s under 0.1 switches to 6 decimals and drops the %-10 width.
        let mut i = TestInfo {
            bw_units: BwUnits::Gbit,
            ..TestInfo::default()
        };
        let mut r = res(0.099_999_9);
        r.bw_peak = 0.12;
        assert_eq!(
            bw_row(&r, &i, 0.0),
            " 65536      5000           0.120000            0.100000            0.187456\n"
        );
        // The same value in MiB/s stays on REPORT_FMT (rounds to 0.10).
        i.bw_units = BwUnits::MiB;
        assert_eq!(
            bw_row(&r, &i, 0.0),
            " 65536      5000             0.12               0.10   \t\t     0.187456\n"
        );
        r.bw_avg = 0.1;
        assert!(!bw_inc_accuracy(&r, BwUnits::Gbit));
        i.output = OutputMode::Bandwidth;
        assert_eq!(bw_row(&res(11715.97), &i, 0.0), "11715.970000\n");
        assert_eq!(bw_header(&i), "");
        assert_eq!(info_block(&i), "");
        i.output = OutputMode::MessageRate;
        assert_eq!(bw_row(&res(1.0), &i, 0.0), "0.187456\n");
        i.output = OutputMode::Full;
        i.bw_units = BwUnits::Gbit;
        assert!(report_both_banner(Side::Remote, &i).starts_with(&format!(
            "{RESULT_LINE}\n Remote results: \n{RESULT_LINE} #bytes"
        )));
    }

    #[test]
    fn lat_lines() {
        let s = LatStats {
            t_min: 1.5,
            t_max: 25.0,
            t_typical: 2.25,
            t_avg: 2.254,
            t_stdev: 0.5773,
            p99: 9.999,
            p99_9: 25.0,
            samples: 997,
        };
        let mut i = TestInfo {
            kind: TestKind::Lat,
            ..TestInfo::default()
        };
        assert_eq!(
            lat_row(2, 1000, &s, &i, 0.0),
            " 2       1000          1.50           25.00        2.25     \t       2.25        \t0.58   \t\t10.00   \t\t25.00  \n"
        );
        assert_eq!(
            lat_header(&i),
            format!("{RESULT_LINE} #bytes #iterations    t_min[usec]    t_max[usec]  t_typical[usec]    t_avg[usec]    t_stdev[usec]   99% percentile[usec]   99.9% percentile[usec] \n")
        );
        i.duration_s = Some(5);
        i.cpu_util = true;
        assert_eq!(
            lat_header(&i),
            format!("{RESULT_LINE} #bytes        #iterations       t_avg[usec]    tps average    CPU_Util[%]\n")
        );
        i.cpu_util = false;
        let d = LatDuration {
            t_avg: 1.234,
            tps: 405_123.456,
        };
        assert_eq!(
            lat_duration_row(2, 810246, &d, &i, 0.0),
            " 2             810246            1.23           405123.46\n"
        );
        i.output = OutputMode::Latency;
        assert_eq!(lat_duration_row(2, 810246, &d, &i, 0.0), "1.234000\n");
        assert_eq!(lat_row(2, 1000, &s, &i, 0.0), "2.254000\n");
        assert_eq!(
            lat_dump(LatUnits::Usec, &[3000, 4500, 123_456_789], 2000.0),
            "#, usec\n1, 1.5\n2, 2.25\n3, 61728.4\n"
        );
    }
}
