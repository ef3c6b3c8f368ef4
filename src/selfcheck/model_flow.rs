//! `raw::steer`'s flow rules (as `ibv_create_flow` would get them) in the
//! queue model's flow table: how the raw pair model and the raw tools'
//! model tests steer a model port's frames to its QPs.

use crate::model::{FlowRule, IpMatch, L4Match};
use crate::verbs::flow as vflow;

/// One of `raw::steer`'s rules as the model's flow table holds it (whole
/// MACs, no ethertype match), steering to raw QP `ring`; `Err` for a rule
/// the model's table cannot hold.
pub fn model_rule(r: &vflow::FlowRule, ring: usize) -> Result<FlowRule, String> {
    fn some_if<T: Copy + PartialEq + Default>(m: vflow::Masked<T>) -> Option<T> {
        (m.mask != T::default()).then_some(m.val)
    }
    let normal = matches!(r.kind, vflow::FlowKind::Normal);
    if r.ether_type.mask != 0 || (normal && r.dst_mac.mask != [0xff; 6]) {
        return Err("the model's flow table matches whole MACs and no ethertype".into());
    }
    let mut m = match r.kind {
        vflow::FlowKind::Sniffer => return Ok(FlowRule::sniffer(ring)),
        vflow::FlowKind::AllDefault => return Ok(FlowRule::promiscuous(ring)),
        _ => FlowRule::mac(ring, r.dst_mac.val),
    };
    m = match r.ip {
        Some(vflow::IpMatch::V4(ip)) => m.with_ip(IpMatch::V4 {
            src: some_if(ip.src),
            dst: some_if(ip.dst),
        }),
        Some(vflow::IpMatch::V6(ip)) => m.with_ip(IpMatch::V6 {
            src: some_if(ip.src),
            dst: some_if(ip.dst),
        }),
        None => m,
    };
    Ok(match r.l4 {
        Some(l4) => m.with_l4(L4Match {
            tcp: l4.tcp,
            src_port: some_if(l4.src_port),
            dst_port: some_if(l4.dst_port),
        }),
        None => m,
    })
}
