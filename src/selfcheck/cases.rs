//! The cases `selfcheck` runs for each post method: every op on every
//! transport that allows it, as a single WR, post lists of 4/16/64, inline
//! sizes up to the device's maximum, enough posts to wrap the send ring
//! twice; SENDs of the sizes around the scatter-to-CQE limits; and (RC) a
//! SEND that meets RNR until its receive is posted, and a deliberate bad
//! rkey followed by recovery.

use crate::post::Op;
use std::fmt;

/// The transports checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tr {
    Rc,
    Uc,
    Ud,
}

impl Tr {
    pub const ALL: [Tr; 3] = [Tr::Rc, Tr::Uc, Tr::Ud];
    pub fn name(self) -> &'static str {
        match self {
            Tr::Rc => "RC",
            Tr::Uc => "UC",
            Tr::Ud => "UD",
        }
    }
    /// The ops the transport allows (IB spec: UC has no READ/atomics, UD
    /// only SENDs).
    pub fn ops(self) -> &'static [Op] {
        match self {
            Tr::Rc => &[
                Op::Write,
                Op::WriteImm,
                Op::Read,
                Op::Send,
                Op::SendImm,
                Op::FetchAdd,
                Op::CmpSwap,
            ],
            Tr::Uc => &[Op::Write, Op::WriteImm, Op::Send, Op::SendImm],
            Tr::Ud => &[Op::Send, Op::SendImm],
        }
    }
}

pub fn op_name(op: Op) -> &'static str {
    match op {
        Op::Write => "write",
        Op::WriteImm => "write_imm",
        Op::Read => "read",
        Op::Send => "send",
        Op::SendImm => "send_imm",
        Op::FetchAdd => "fetch-add",
        Op::CmpSwap => "cmp-swap",
    }
}

/// Whether the op can carry inline data (a payload the CPU copies).
pub fn inline_ok(op: Op) -> bool {
    matches!(op, Op::Write | Op::WriteImm | Op::Send | Op::SendImm)
}

/// What one case posts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// One WR of 64 bytes (8 for atomics).
    Single,
    /// One post call with this many WRs.
    List(u32),
    /// One WR with this many bytes inline.
    Inline(u32),
    /// Two laps of the send ring in post lists, a signaled WR per list.
    Wrap,
    /// A WRITE to a wrong rkey (RC): the error status, then the QP reset to
    /// RTS and a WRITE that must succeed.
    BadRkey,
    /// A SEND of this many bytes: the sizes around scatter-to-CQE's limits
    /// (32 B in a 64-byte CQE, 64 B in a 128-byte one), where the payload
    /// is in the receive CQE and must be copied out, not found in the buffer.
    RecvSize(u32),
    /// A SEND with no receive posted (RC): the peer answers RNR until the
    /// receive comes, then the SEND completes and lands (rnr_retry 7, as
    /// the tools set it).
    LateRecv,
}

/// The SEND sizes checked on both sides of the scatter-to-CQE limits.
pub const RECV_SIZES: [u32; 8] = [0, 1, 31, 32, 33, 63, 64, 65];

impl fmt::Display for Shape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Shape::Single => write!(f, "single"),
            Shape::List(n) => write!(f, "list {n}"),
            Shape::Inline(n) => write!(f, "inline {n}"),
            Shape::Wrap => write!(f, "ring wrap x2"),
            Shape::BadRkey => write!(f, "bad rkey + recovery"),
            Shape::RecvSize(n) => write!(f, "receive {n} B"),
            Shape::LateRecv => write!(f, "RNR until the receive is posted"),
        }
    }
}

/// One case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Case {
    pub tr: Tr,
    pub op: Op,
    pub shape: Shape,
}

impl fmt::Display for Case {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {} {}", self.tr.name(), op_name(self.op), self.shape)
    }
}

/// Inline sizes checked up to `max_inline` (the device's maximum for the
/// QP): 1, 16, 60, then `max_inline` itself.
pub fn inline_sizes(max_inline: u32) -> Vec<u32> {
    let mut v: Vec<u32> = [1, 16, 60]
        .into_iter()
        .filter(|&n| n <= max_inline)
        .collect();
    if max_inline > 0 && !v.contains(&max_inline) {
        v.push(max_inline);
    }
    v
}

/// Every case of a transport, in the order they run.
pub fn cases(tr: Tr, max_inline: u32) -> Vec<Case> {
    let mut v = Vec::new();
    for &op in tr.ops() {
        let mut shapes = vec![
            Shape::Single,
            Shape::List(4),
            Shape::List(16),
            Shape::List(64),
        ];
        if inline_ok(op) {
            shapes.extend(inline_sizes(max_inline).into_iter().map(Shape::Inline));
        }
        shapes.push(Shape::Wrap);
        if matches!(op, Op::Send | Op::SendImm) {
            shapes.extend(RECV_SIZES.map(Shape::RecvSize));
        }
        v.extend(shapes.into_iter().map(|shape| Case { tr, op, shape }));
    }
    if tr == Tr::Rc {
        v.push(Case {
            tr,
            op: Op::Send,
            shape: Shape::LateRecv,
        });
        v.push(Case {
            tr,
            op: Op::Write,
            shape: Shape::BadRkey,
        });
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_op_shape_and_the_bad_rkey() {
        let rc = cases(Tr::Rc, 64);
        // 7 ops x (single, 3 lists, wrap) + 4 inline ops x 4 sizes + 2 SEND
        // ops x 8 receive sizes + the late receive + bad rkey.
        assert_eq!(rc.len(), 7 * 5 + 4 * 4 + 2 * 8 + 2);
        assert!(rc.iter().any(|c| c.shape == Shape::RecvSize(0)));
        assert!(rc.iter().any(|c| c.shape == Shape::LateRecv));
        assert_eq!(
            cases(Tr::Ud, 0)
                .iter()
                .filter(|c| matches!(c.shape, Shape::RecvSize(_)))
                .count(),
            16,
            "UD receives (with their GRH) at every size"
        );
        assert!(rc.iter().any(|c| c.shape == Shape::Inline(64)));
        assert_eq!(rc.last().unwrap().shape, Shape::BadRkey);
        assert!(cases(Tr::Ud, 0)
            .iter()
            .all(|c| matches!(c.op, Op::Send | Op::SendImm)));
        assert!(!cases(Tr::Uc, 0).iter().any(|c| c.shape == Shape::BadRkey));
        assert_eq!(inline_sizes(220), vec![1, 16, 60, 220]);
        assert_eq!(inline_sizes(16), vec![1, 16]);
    }
}
