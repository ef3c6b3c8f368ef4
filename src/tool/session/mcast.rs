//! `-g`: UD multicast for send-bw and send-lat, as perftest's send tools do
//! it (`send_set_up_connection`): the receiving side attaches its UD QP to a
//! multicast group and puts the group in its key message (GID = the MGID,
//! LID = the group's LID, QPN = 0xFFFFFF); the sender builds its address
//! handle from that message as for any UD peer, so its SENDs go to the group.
//! send-bw: the server receives; send-lat: both sides receive, each on its
//! own group (perftest's default groups differ in the last byte).
//!
//! On RoCE the group needs no subnet manager (the kernel maps the MGID to a
//! multicast MAC); on InfiniBand perftest registers the group with the SM
//! over libibumad, which rdmaperf does not do, so `-g` is refused there.

use crate::cli::params::{Kind, Params};
use crate::ctrl::Dest;
use crate::tool::common::fail::Fail;
use crate::tool::setup::resources::{Endpoint, Resources};
use crate::verbs::qp::McastMember;
use crate::verbs::LinkLayer;

/// perftest's `QPNUM_MCAST`: the QPN a UD send to a multicast group names.
pub const QPN_MCAST: u32 = 0xff_ffff;

/// The QP's membership; a verbs QP's is detached on drop (before the QP can
/// go: it holds it); a direct QP's goes with the QP (destroying a QP
/// detaches it).
pub struct Joined {
    _member: Option<McastMember>,
    pub mgid: [u8; 16],
}

/// Whether this side receives on a group (send-bw: the server; send-lat: both).
pub fn receives(p: &Params) -> bool {
    p.mcast.is_some() && (p.tool.kind == Kind::Lat || p.is_server())
}

/// Attaches this side's QP to its group and rewrites its key message
/// (no-op unless [`receives`]).
pub fn join(
    ep: &Endpoint,
    p: &Params,
    res: &Resources,
    my: &mut [Dest],
) -> Result<Option<Joined>, Fail> {
    let Some(m) = p.mcast.filter(|_| receives(p)) else {
        return Ok(None);
    };
    if ep.port.link_layer != LinkLayer::ETHERNET {
        return Err(Fail::new(
            "-g/--mcg on InfiniBand: perftest registers the group with the subnet manager \
             (libibumad), which rdmaperf does not do; run multicast on RoCE, or use stock \
             ib_send_bw -g",
        ));
    }
    let Some(d) = my.first_mut() else {
        return Err(Fail::new("internal: -g without a key message"));
    };
    let mgid = m.own_group(!p.is_server());
    let member = match (res.qps.first(), res.direct_qps.first()) {
        (Some(qp), _) => Some(qp.join_mcast(mgid, 0).map_err(Fail::verbs)?),
        (None, Some(h)) => {
            h.attach_mcast(mgid, 0).map_err(Fail::verbs)?;
            None
        }
        (None, None) => return Err(Fail::new("internal: -g without a QP")),
    };
    d.gid = Some(mgid);
    d.lid = 0;
    d.qpn = QPN_MCAST;
    Ok(Some(Joined {
        _member: member,
        mgid,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{self, Parsed};

    fn params(argv: &[&str]) -> Params {
        let argv: Vec<String> = ["rdmaperf"]
            .iter()
            .chain(argv)
            .map(|s| s.to_string())
            .collect();
        match cli::parse(argv) {
            Parsed::Tool(t, a) => crate::cli::params::resolve(t, &a).unwrap(),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn who_receives() {
        assert!(receives(&params(&["send-bw", "-g"])));
        assert!(!receives(&params(&["send-bw", "-g", "host"])));
        assert!(receives(&params(&["send-lat", "-g", "host"])));
        assert!(!receives(&params(&["send-bw"])));
        let p = params(&["send-bw", "-g", "-c", "RC"]);
        assert_eq!(p.conn, crate::cli::params::Conn::Ud);
        assert_eq!(p.gid_index, Some(0));
        assert!(
            p.notices.iter().any(|n| n.contains("MultiCast runs on UD")),
            "{:?}",
            p.notices
        );
    }
}
