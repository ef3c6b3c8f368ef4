//! The raw Ethernet sender's resources on a device: the context, the
//! port's link check (Ethernet only, perftest's `check_link_and_mtu`), what
//! the device says for the method choice, then the PD, the CQ, the raw
//! packet QP (INIT → RTR → RTS with the state and port only) and the
//! registered buffer holding perftest's frames (`raw::slots`).

use std::sync::Arc;

use super::raw_method::{self, RawDevice, RawMethod};
use super::raw_recv_method::{decide_recv, RawRecvMethod};
use crate::mlx5::device::{enhanced_mpw, select_for_device, DirectRequest};
use crate::mlx5::eth_seg::ETH_L2_INLINE_HEADER_SIZE;
use crate::post::wr_api::{send_ops_flags, wr_api_probe};
use crate::post::Op;
use crate::raw::line_rate;
use crate::raw::params::RawParams;
use crate::raw::rate::RawRate;
use crate::raw::slots::{self, Slots};
use crate::raw::steer;
use crate::run::raw_recv::RawRecvCfg;
use crate::tool::common::fail::Fail;
use crate::verbs::flow::Flow;
use crate::verbs::qp::McastMember;
use crate::verbs::{Access, AlignedBuf, Context, Cq, LinkLayer, Mr, Pd, Qp, QpInit, QpType};

/// perftest's words when the port is not Ethernet (its spelling kept).
pub const NOT_ETHERNET: &str = "Raw Etherent test can only run on Ethernet link";

/// The refusal for a port whose link layer is `link`.
pub fn link_refusal(tool: &str, dev: &str, port: u8, link: LinkLayer) -> Option<String> {
    (!link.is_ethernet()).then(|| {
        format!(
            "rdmaperf {tool}: {NOT_ETHERNET}: port {port} of {dev} is {}: pick an Ethernet \
             port with -d/-i",
            link.name()
        )
    })
}

/// The refusal for `--rate_limit_type=PP` at `kbps` on a device pacing
/// `range` (kbit/s; None: it does not pace raw packet QPs).
pub fn pacing_refusal(
    tool: &str,
    dev: &str,
    kbps: u32,
    range: Option<(u32, u32)>,
) -> Option<String> {
    match range {
        None => Some(format!(
            "rdmaperf {tool}: --rate_limit_type=PP: Packet Pacing isn't supported by {dev}              (its packet_pacing_caps list no raw packet QPs); use --rate_limit_type=SW"
        )),
        Some((min, max)) if kbps < min || kbps > max => Some(format!(
            "rdmaperf {tool}: --rate_limit_type=PP: {dev} paces {min}..={max} kbit/s and              --rate_limit asks {kbps} kbit/s (MiB/s × 8192): give a rate between {:.3} and              {:.3} MiB/s",
            min as f64 / 8192.0,
            max as f64 / 8192.0
        )),
        Some(_) => None,
    }
}

/// Packet pacing (`--rate_limit_type=PP`) set on a QP in RTS, when asked:
/// the NIC spaces its frames (`ibv_modify_qp_rate_limit`). Every raw tool
/// that takes a rate sets it here.
pub fn pace_qp(qp: &Qp, p: &RawParams) -> Result<(), Fail> {
    match &p.rate {
        Some(RawRate::Pp(pp)) => qp
            .set_rate_limit(pp.kbps, pp.max_burst, pp.typical_pkt)
            .map_err(Fail::verbs),
        _ => Ok(()),
    }
}

/// An open device and port, checked.
pub struct RawPort {
    pub ctx: Arc<Context>,
    pub dev: RawDevice,
    /// The port's speed (sysfs `rate`, else `active_speed` × width).
    pub gbps: Option<f64>,
}

impl RawPort {
    pub fn open(p: &RawParams) -> Result<RawPort, Fail> {
        let tool = p.raw.tool.name();
        let ctx = Context::open(p.device.as_deref()).map_err(Fail::verbs)?;
        let port = ctx.query_port(p.ib_port).map_err(Fail::verbs)?;
        if let Some(e) = link_refusal(tool, ctx.name(), p.ib_port, port.link_layer) {
            return Err(Fail::refused(e));
        }
        // SAFETY: the device pointer comes from the open context and stays
        // valid while it lives; the calls read the device's ops and caps.
        let (mlx5, empw) = unsafe {
            let mlx5 = select_for_device(DirectRequest::Auto, (*ctx.raw()).device).unwrap_or(false);
            (mlx5, mlx5 && enhanced_mpw(ctx.raw()))
        };
        if let Some(RawRate::Pp(pp)) = &p.rate {
            pacing_refusal(tool, ctx.name(), pp.kbps, ctx.raw_pacing_kbps())
                .map_or(Ok(()), |e| Err(Fail::refused(e)))?;
        }
        let wr_api = wr_api_probe(&ctx, QpType::RAW_PACKET, send_ops_flags(&[Op::Send])).is_ok();
        let rate = format!("{}/ports/{}/rate", ctx.info().ibdev_path, p.ib_port);
        let gbps = std::fs::read_to_string(rate)
            .ok()
            .and_then(|s| line_rate::sysfs_gbps(&s))
            .or_else(|| line_rate::attr_gbps(port.active_speed, port.active_width));
        Ok(RawPort {
            dev: RawDevice {
                mlx5,
                enhanced_mpw: empw,
                // libmlx5 keeps the kernel's minimum inline to itself: none
                // where the device has enhanced MPW (ConnectX-5 on, as DPDK
                // assumes), the L2 header otherwise, which any device takes.
                min_inline: if empw { 0 } else { ETH_L2_INLINE_HEADER_SIZE },
                wr_api,
            },
            gbps,
            ctx,
        })
    }
}

/// One receive slot's stride: the frame rounded up to a cache line.
pub fn slot_stride(size: u64) -> u32 {
    (size as u32).next_multiple_of(64)
}

/// One sender QP with its frames.
pub struct RawQp {
    pub qp: Arc<Qp>,
    pub mr: Mr,
}

/// The PD, the send CQ and the QPs, each with its buffer of frames.
pub struct RawRes {
    /// `-b`: each QP's receive side, in QP order (none one way). Dropped
    /// first: the rules go before their QP.
    pub rx: Vec<RawRx>,
    pub pd: Arc<Pd>,
    pub cq: Arc<Cq>,
    pub qps: Vec<RawQp>,
    pub slots: Slots,
}

/// The receive side of a duplex QP (`-b`).
pub struct RawRx {
    /// `raw::steer`'s rules for this side; first, so they go before the QP.
    pub flows: Vec<Flow>,
    /// `--raw_mcast`: the QP's membership of the group, in place of rules.
    pub mcast: Option<McastMember>,
    /// Receives complete here, not on the send CQ (the send loop's drain
    /// takes a receive completion for an error).
    pub cq: Arc<Cq>,
    /// `slots` receive slots (`-r`) of `stride` bytes, a `-s` frame each.
    pub mr: Mr,
    pub slots: u32,
    pub stride: u32,
    /// The device checks receive checksums (`IBV_RAW_PACKET_CAP_IP_CSUM`),
    /// read when the QP was made.
    pub csum_reported: bool,
}

impl RawRes {
    /// perftest's `ctx_init` for the raw sender, then the QPs to RTS.
    pub fn create(port: &RawPort, p: &RawParams, method: RawMethod) -> Result<RawRes, Fail> {
        let ctx = &port.ctx;
        let pd = Pd::new(ctx).map_err(Fail::verbs)?;
        let depth = (p.raw.tx_depth as u32).max(p.post_list);
        let cq = Cq::new(ctx, depth * p.raw.qps as u32, false).map_err(Fail::verbs)?;
        let slots = Slots::new(
            p.size,
            p.raw.flows,
            p.raw.flows_burst,
            p.post_list,
            crate::verbs::mr::page_size() as u64,
        );
        let spec = p.frame_spec();
        // -b: each QP receiving on a CQ of its own (as the server's QPs).
        let rx_slots = if p.raw.duplex {
            p.raw.rx_depth.max(1) as u32
        } else {
            0
        };
        let mut qps = Vec::new();
        let mut rx = Vec::new();
        for i in 0..p.raw.qps {
            let rcq = match rx_slots {
                0 => cq.clone(),
                n => Cq::new(ctx, n, false).map_err(Fail::verbs)?,
            };
            let init = QpInit {
                max_send_wr: depth,
                max_recv_wr: rx_slots.max(1),
                // -I: the verbs methods send frames up to it inline.
                max_inline_data: if method.is_direct() { 0 } else { p.inline_size },
                send_ops_flags: (method == RawMethod::WrApi).then(|| send_ops_flags(&[Op::Send])),
                ..QpInit::new(QpType::RAW_PACKET)
            };
            let qp = Qp::create(&pd, &cq, &rcq, &init).map_err(Fail::verbs)?;
            let mut buf = AlignedBuf::zeroed(slots.buffer_len()).map_err(Fail::verbs)?;
            slots::fill_body(buf.as_mut_slice(), &spec, &slots, p.body(0x5eed ^ i as u32));
            let mr = Mr::new(&pd, buf, Access::LOCAL_WRITE).map_err(Fail::verbs)?;
            qp.raw_to_rts(p.ib_port).map_err(Fail::verbs)?;
            pace_qp(&qp, p)?;
            if rx_slots > 0 {
                rx.push(RawRx::create(port, p, (&pd, &qp), rcq, rx_slots)?);
            }
            qps.push(RawQp { qp, mr });
        }
        Ok(RawRes {
            rx,
            pd,
            cq,
            qps,
            slots,
        })
    }
}

impl RawRx {
    /// The receive buffer registered, then `raw::steer`'s rules on `qp`
    /// (the server's, or a duplex side's), whose receives complete on `cq`.
    pub fn create(
        port: &RawPort,
        p: &RawParams,
        (pd, qp): (&Arc<Pd>, &Arc<Qp>),
        cq: Arc<Cq>,
        slots: u32,
    ) -> Result<RawRx, Fail> {
        let stride = slot_stride(p.size);
        let buf = AlignedBuf::zeroed(slots as usize * stride as usize).map_err(Fail::verbs)?;
        let mr = Mr::new(pd, buf, Access::LOCAL_WRITE).map_err(Fail::verbs)?;
        // With --raw_mcast the group steers (`steer::rules` gives none).
        let mcast = match p.mgid() {
            Some(g) => Some(qp.join_mcast(g, 0).map_err(Fail::verbs)?),
            None => None,
        };
        Ok(RawRx {
            flows: attach_rules(qp, p)?,
            mcast,
            cq,
            mr,
            slots,
            stride,
            csum_reported: port.ctx.raw_rx_csum(),
        })
    }

    /// The receive loop's view of the buffer: each slot posted whole.
    ///
    /// # Safety
    /// `self` must outlive every loop over the result (it keeps a raw
    /// pointer into the MR); only the NIC may write the buffer meanwhile.
    pub unsafe fn recv_cfg(&self) -> RawRecvCfg {
        let (base, lkey) = (self.mr.addr() as *const u8, self.mr.lkey());
        // SAFETY: the MR holds `slots × stride` bytes registered under its
        // lkey (`create`); the caller keeps it alive past the loops.
        let mut cfg = unsafe { RawRecvCfg::new(base, self.stride, self.stride, self.slots, lkey) };
        cfg.csum_reported = self.csum_reported;
        cfg
    }
}

/// `raw::steer`'s rules for `p` attached to `qp` (perftest creates them on
/// a server or a duplex side), each destroyed when dropped.
pub fn attach_rules(qp: &Arc<Qp>, p: &RawParams) -> Result<Vec<Flow>, Fail> {
    steer::rules(p)
        .iter()
        .map(|rule| {
            Flow::create(qp, rule).map_err(|e| {
                Fail::new(format!(
                    "rdmaperf {}: attaching a steering rule failed: {e} (a ConnectX port in \
                     Ethernet mode, root or CAP_NET_RAW, and --sniffer/--promiscuous only \
                     where the device allows them)",
                    p.raw.tool.name()
                ))
            })
        })
        .collect()
}

/// A side with a receive side (`-b`, `-v`) opened: the port, the send
/// method and the receive path picked once with the banner's reasons, the
/// resources and each QP's receive side (taken out of them, in QP order).
pub struct DuplexSide {
    pub port: RawPort,
    pub method: (RawMethod, String),
    pub recv: (RawRecvMethod, String),
    pub res: RawRes,
    pub rx: Vec<RawRx>,
}

impl DuplexSide {
    /// Opens `p`'s side for `tool` (the refusals name it, exit 2).
    pub fn open(p: &RawParams, tool: &str) -> Result<DuplexSide, Fail> {
        let asked = raw_method::parse(p.post.as_deref()).map_err(Fail::refused)?;
        let port = RawPort::open(p)?;
        let method = raw_method::decide(asked, &port.dev)
            .map_err(|e| Fail::refused(format!("{tool}: {e}")))?;
        let recv =
            decide_recv(asked, &port.dev).map_err(|e| Fail::refused(format!("{tool}: {e}")))?;
        let mut res = RawRes::create(&port, p, method.0)?;
        let rx = std::mem::take(&mut res.rx);
        if rx.len() != res.qps.len() {
            return Err(Fail::new(format!("{tool}: no receive side was created")));
        }
        Ok(DuplexSide {
            port,
            method,
            recv,
            res,
            rx,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_hold_a_frame_on_cache_lines() {
        assert_eq!(slot_stride(64), 64);
        assert_eq!(slot_stride(65), 128);
        assert_eq!(slot_stride(1518), 1536);
    }

    #[test]
    fn packet_pacing_needs_the_devices_range() {
        let e = pacing_refusal("raw-eth-bw", "mlx5_0", 8192, None).unwrap();
        assert!(
            e.contains("isn't supported by mlx5_0") && e.contains("=SW"),
            "{e}"
        );
        let e = pacing_refusal("raw-eth-bw", "mlx5_0", 100, Some((1000, 100_000_000))).unwrap();
        assert!(
            e.contains("1000..=100000000 kbit/s") && e.contains("asks 100"),
            "{e}"
        );
        assert_eq!(
            pacing_refusal("raw-eth-bw", "mlx5_0", 8192, Some((1000, 100_000))),
            None
        );
    }

    #[test]
    fn only_ethernet_ports_run() {
        assert_eq!(
            link_refusal("raw-eth-bw", "mlx5_0", 1, LinkLayer::ETHERNET),
            None
        );
        let e = link_refusal("raw-eth-bw", "mlx5_0", 1, LinkLayer::INFINIBAND).unwrap();
        for want in [
            "Raw Etherent test can only run on Ethernet link",
            "port 1 of mlx5_0 is IB",
            "-d/-i",
        ] {
            assert!(e.contains(want), "{want:?} missing: {e}");
        }
    }
}
