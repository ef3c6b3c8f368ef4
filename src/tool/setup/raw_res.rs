//! The raw Ethernet sender's resources on a device: the context, the
//! port's link check (Ethernet only, perftest's `check_link_and_mtu`), what
//! the device says for the method choice, then the PD, the CQ, the raw
//! packet QP (INIT → RTR → RTS with the state and port only) and the
//! registered buffer holding perftest's frames (`raw::slots`).

use std::sync::Arc;

use super::raw_method::{RawDevice, RawMethod};
use crate::mlx5::device::{enhanced_mpw, select_for_device, DirectRequest};
use crate::mlx5::eth_seg::ETH_L2_INLINE_HEADER_SIZE;
use crate::post::wr_api::{send_ops_flags, wr_api_probe};
use crate::post::Op;
use crate::raw::line_rate;
use crate::raw::params::RawParams;
use crate::raw::slots::{self, Slots};
use crate::tool::common::fail::Fail;
use crate::verbs::{AlignedBuf, Context, Cq, LinkLayer, Mr, Pd, Qp, QpInit, QpType};

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

/// One sender QP with its frames.
pub struct RawQp {
    pub qp: Arc<Qp>,
    pub mr: Mr,
}

/// The PD, the send CQ and the QPs, each with its buffer of frames.
pub struct RawRes {
    pub pd: Arc<Pd>,
    pub cq: Arc<Cq>,
    pub qps: Vec<RawQp>,
    pub slots: Slots,
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
        let mut qps = Vec::new();
        for i in 0..p.raw.qps {
            let init = QpInit {
                max_send_wr: depth,
                max_recv_wr: 1,
                // -I: the verbs methods send frames up to it inline.
                max_inline_data: if method.is_direct() { 0 } else { p.inline_size },
                send_ops_flags: (method == RawMethod::WrApi).then(|| send_ops_flags(&[Op::Send])),
                ..QpInit::new(QpType::RAW_PACKET)
            };
            let qp = Qp::create(&pd, &cq, &cq, &init).map_err(Fail::verbs)?;
            let mut buf = AlignedBuf::zeroed(slots.buffer_len()).map_err(Fail::verbs)?;
            slots::fill(buf.as_mut_slice(), &spec, &slots, 0x5eed ^ i as u32);
            let mr = Mr::new(&pd, buf, crate::verbs::Access::LOCAL_WRITE).map_err(Fail::verbs)?;
            qp.raw_to_rts(p.ib_port).map_err(Fail::verbs)?;
            qps.push(RawQp { qp, mr });
        }
        Ok(RawRes { pd, cq, qps, slots })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
