//! The report's [`TestInfo`] from the resolved parameters and what the device gave.

use crate::cli::params::{AtomicType, Conn, Kind, Mode, OutputKind, Params, Verb as PVerb};
use crate::clock::Clock;
use crate::report::info::{
    AtomicOp, Connection, CqePoll, LinkLayer, OutputMode, Role, Support, TestInfo, TestKind,
    Transport, Verb,
};
use crate::report::stats::BwUnits;
use crate::tool::setup::method::{Chosen, Method};
use crate::tool::setup::resources::{Endpoint, Resources};
use crate::verbs::{Access, LinkLayer as VLink};

pub fn test_info(
    p: &Params,
    ep: &Endpoint,
    res: &Resources,
    mtu_bytes: u32,
    chosen: &Chosen,
    clock: &Clock,
) -> TestInfo {
    let (mut extra, json_extra) = chosen.info_extras();
    extra.push(("Clock".into(), clock.to_string()));
    if p.qos.grh_set() {
        let fl: Vec<String> = p.qos.flow_labels.iter().map(|f| f.to_string()).collect();
        let fl = if fl.is_empty() {
            "0".into()
        } else {
            fl.join(",")
        };
        let where_ = if p.conn == crate::cli::params::Conn::Ud {
            "on the address handle"
        } else {
            "read back from the QPs"
        };
        extra.push((
            "GRH".into(),
            format!(
                "traffic class {}, flow label {fl} ({where_})",
                p.qos.traffic_class
            ),
        ));
    }
    if let Some(g) = &res.gpu {
        extra.push(("GPU memory".into(), g.clone()));
    }
    let mr_access = res.mr.access();
    extra.push((
        "MR access".into(),
        mr_access_line(mr_access, res.gpu.is_some()),
    ));
    if p.qos.pkey_index != 0 {
        extra.push((
            "P_Key index".into(),
            format!("{} (read back from the QPs)", p.qos.pkey_index),
        ));
    }
    let method = chosen.method;
    TestInfo {
        cpu_util: p.cpu_util,
        device: ep.ctx.name().to_string(),
        wr_api: method == Method::WrApi,
        mtu: mtu_bytes,
        link: if ep.port.link_layer == VLink::ETHERNET {
            LinkLayer::Ethernet
        } else {
            LinkLayer::Ib
        },
        gid_index: ep.gid.map(|g| g.0 as i32),
        out_reads: res.out_reads,
        pcie_relaxed: relaxed(mr_access.contains(Access::RELAXED_ORDERING)),
        extra,
        json_extra,
        ..params_info(p)
    }
}

/// The part of [`TestInfo`] that follows from the parameters alone.
pub fn params_info(p: &Params) -> TestInfo {
    let (duration_s, margin_s) = match p.mode {
        Mode::Duration { secs, margin } => (Some(secs), Some(margin)),
        Mode::Iterations => (None, None),
    };
    TestInfo {
        perftest_stats: p.perftest_stats,
        verb: info_verb(p),
        atomic_op: match p.atomic_type {
            AtomicType::FetchAdd => AtomicOp::FetchAndAdd,
            AtomicType::CmpSwap => AtomicOp::CmpAndSwap,
        },
        kind: if p.tool.kind == Kind::Bw {
            TestKind::Bw
        } else {
            TestKind::Lat
        },
        role: if p.is_server() {
            Role::Server
        } else {
            Role::Client
        },
        duplex: p.duplex,
        use_srq: p.mem.srq,
        post_list: p.post_list,
        recv_post_list: p.recv_post_list,
        num_qps: p.num_qps,
        transport: Transport::Ib,
        connection: connection(p.conn),
        tx_depth: p.tx_depth,
        rx_depth: p.rx_depth,
        cq_mod: p.cq_mod,
        cqe_poll: CqePoll::Fixed(p.cqe_poll as u16),
        inline_size: p.inline_size,
        size: p.max_size(),
        all_sizes: p.all_sizes,
        iters: p.iters,
        duration_s,
        margin_s,
        bw_units: BwUnits::of(p.report_gbits),
        output: output_mode(p.output),
        rdma_cm_qps: p.rdma_cm,
        // -z: the control messages over rdma_cm, the data QPs by hand.
        rdma_cm_exchange: p.cm_ctrl(),
        tos: p.conn_opts.tos.map(i32::from),
        mcast: p.mcast.is_some(),
        // perftest: " Test with events. Using <dev>_comp<eq_num>", eq_num 0 without -X.
        events: p.use_event.then_some(0),
        pcie_relaxed: relaxed(!p.mem.no_relaxed_ordering),
        ..TestInfo::default()
    }
}

/// perftest's "PCIe relax order" word for MRs with (or without) the flag.
fn relaxed(on: bool) -> Support {
    if on {
        Support::On
    } else {
        Support::Off
    }
}

/// The access flags the buffers' MRs were registered with (every MR of a
/// side gets the same), and the memory they cover. RELAXED_ORDERING is an
/// optional flag: libibverbs drops it on a kernel without optional access
/// flags and a device without PCIe relaxed ordering ignores it, so this is
/// what was asked of the device.
fn mr_access_line(a: Access, gpu: bool) -> String {
    let mem = if gpu { "GPU memory" } else { "host memory" };
    let mut line = format!("{} ({mem})", a.describe());
    if a.contains(Access::RELAXED_ORDERING) {
        line.push_str("; relaxed ordering applies where the device has it");
    }
    line
}

/// The report's verb: `--write_with_imm`/`--send_with_imm` have their own.
fn info_verb(p: &Params) -> Verb {
    match (p.tool.verb, p.with_imm) {
        (PVerb::Write, false) => Verb::Write,
        (PVerb::Write, true) => Verb::WriteImm,
        (PVerb::Send, false) => Verb::Send,
        (PVerb::Send, true) => Verb::SendImm,
        (PVerb::Read, _) => Verb::Read,
        (PVerb::Atomic, _) => Verb::Atomic,
    }
}

fn connection(c: Conn) -> Connection {
    match c {
        Conn::Rc => Connection::Rc,
        Conn::Uc => Connection::Uc,
        Conn::Ud => Connection::Ud,
    }
}

/// `--output`: the one figure printed, or the full report.
fn output_mode(o: Option<OutputKind>) -> OutputMode {
    match o {
        None => OutputMode::Full,
        Some(OutputKind::Bandwidth) => OutputMode::Bandwidth,
        Some(OutputKind::MessageRate) => OutputMode::MessageRate,
        Some(OutputKind::Latency) => OutputMode::Latency,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(disable: bool) -> Params {
        let a = crate::cli::args::PerfArgs {
            post: "auto".into(),
            timeout: 30,
            cq_timeout: 10,
            disable_pcie_relaxed: disable,
            ..Default::default()
        };
        let tool = crate::cli::kinds::Tool {
            verb: PVerb::Write,
            kind: Kind::Bw,
        };
        crate::cli::params::resolve(tool, &a).unwrap()
    }

    #[test]
    fn relax_order_follows_disable_pcie_relaxed() {
        assert_eq!(params_info(&params(false)).pcie_relaxed, Support::On);
        assert_eq!(params_info(&params(true)).pcie_relaxed, Support::Off);
    }

    #[test]
    fn mr_access_line_names_the_flags_and_the_memory() {
        let ro = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::RELAXED_ORDERING;
        let l = mr_access_line(ro, true);
        assert!(
            l.starts_with("LOCAL_WRITE|REMOTE_WRITE|RELAXED_ORDERING (GPU memory);"),
            "{l}"
        );
        let l = mr_access_line(Access::LOCAL_WRITE | Access::REMOTE_READ, false);
        assert_eq!(l, "LOCAL_WRITE|REMOTE_READ (host memory)");
    }
}
