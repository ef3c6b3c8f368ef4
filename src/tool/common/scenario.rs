//! The control protocol's view of one invocation (`ctrl::choreography`'s
//! input) and its QP type: below every tool, so each one derives its steps the same way.

use crate::cli::params::{Conn, Kind, Params, Verb};
use crate::ctrl::{self, Role, Scenario, Tool};
use crate::verbs::QpType;

/// The control protocol's view of this invocation (which tool, side, mode,
/// QPs; `mtu_bytes` bounds UD sweeps), for `ctrl::choreography`.
pub(crate) fn scenario(p: &Params, mtu_bytes: u32) -> Scenario {
    let tool = match (p.tool.kind, p.tool.verb) {
        (Kind::Bw, Verb::Write) => Tool::WriteBw,
        (Kind::Bw, Verb::Read) => Tool::ReadBw,
        (Kind::Bw, Verb::Send) => Tool::SendBw,
        (Kind::Bw, Verb::Atomic) => Tool::AtomicBw,
        (Kind::Lat, Verb::Write) => Tool::WriteLat,
        (Kind::Lat, Verb::Read) => Tool::ReadLat,
        (Kind::Lat, Verb::Send) => Tool::SendLat,
        (Kind::Lat, Verb::Atomic) => Tool::AtomicLat,
    };
    Scenario {
        tool,
        role: if p.is_server() {
            Role::Server
        } else {
            Role::Client
        },
        duplex: p.duplex,
        mode: if p.all_sizes {
            ctrl::Mode::AllSizes
        } else if p.is_duration() {
            ctrl::Mode::Duration
        } else {
            ctrl::Mode::Iterations
        },
        num_qps: p.num_qps as usize,
        ud_mtu: (p.conn == Conn::Ud).then_some(mtu_bytes),
    }
}

pub(crate) fn qp_type(p: &Params) -> QpType {
    match p.conn {
        Conn::Rc => QpType::RC,
        Conn::Uc => QpType::UC,
        Conn::Ud => QpType::UD,
    }
}
