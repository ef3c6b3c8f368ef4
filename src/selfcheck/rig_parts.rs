//! What the two device rigs (`verbs_rig`, `direct_rig`) share: the sizes and
//! access rights, the requester's and the peer's registered buffers, and the
//! peer's receive side (its RQ and CQ, both through verbs in either rig).

use std::sync::Arc;

use super::exec::BufRef;
use crate::post::verbs_cq::{VerbsCq, VerbsRecv};
use crate::post::{Completion, CompletionQueue, RecvQueue};
use crate::verbs::{Access, AlignedBuf, Cq, Mr, Pd, Qp};

/// Bytes in each rig buffer.
pub(super) const BUF: usize = 64 * 1024;
/// Work requests each queue is sized for.
pub(super) const DEPTH: u32 = 128;
/// A UD receive's GRH, ahead of the payload.
pub(super) const UD_GRH: u32 = 40;
pub(super) const ALL: Access = Access(
    Access::LOCAL_WRITE.0
        | Access::REMOTE_WRITE.0
        | Access::REMOTE_READ.0
        | Access::REMOTE_ATOMIC.0,
);

/// The [`Rig`](super::exec::Rig) methods the two device rigs answer alike,
/// from their fields `tr`, `max_inline`, `bufs` (both buffers), `cq` (the
/// requester's CQ) and `peer_rx`. Used inside each rig's `impl Rig`.
macro_rules! device_rig_parts {
    () => {
        fn tr(&self) -> Tr {
            self.tr
        }
        fn max_inline(&self) -> u32 {
            self.max_inline
        }
        fn local(&self) -> BufRef {
            self.bufs.local_ref()
        }
        fn remote(&self) -> BufRef {
            self.bufs.remote_ref()
        }
        fn local_bytes(&mut self) -> &mut [u8] {
            self.bufs.local_bytes()
        }
        fn remote_bytes(&mut self) -> &mut [u8] {
            self.bufs.remote_bytes()
        }
        fn poll(&mut self, out: &mut [Completion]) -> Result<usize, PostError> {
            self.cq.poll(out)
        }
        fn post_recv(&mut self, wr_id: u64, addr: u64, len: u32) -> Result<(), String> {
            let lkey = self.bufs.remote.lkey();
            self.peer_rx.post(wr_id, addr, lkey, len)
        }
        fn poll_recv(&mut self, out: &mut Vec<Completion>) -> Result<(), String> {
            self.peer_rx.poll_into(out)
        }
        fn grh(&self) -> u32 {
            UD_GRH
        }
    };
}
pub(super) use device_rig_parts;

pub(super) fn e2s(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// The requester's source (`local`) and the peer's target (`remote`).
pub(super) struct Bufs {
    pub local: Mr,
    pub remote: Mr,
}

impl Bufs {
    pub fn new(pd: &Arc<Pd>) -> Result<Bufs, String> {
        let mr = || Mr::new(pd, AlignedBuf::zeroed(BUF).map_err(e2s)?, ALL).map_err(e2s);
        Ok(Bufs {
            local: mr()?,
            remote: mr()?,
        })
    }

    pub fn local_ref(&self) -> BufRef {
        BufRef {
            addr: self.local.addr(),
            key: self.local.lkey(),
            len: self.local.len(),
        }
    }

    pub fn remote_ref(&self) -> BufRef {
        BufRef {
            addr: self.remote.addr(),
            key: self.remote.rkey(),
            len: self.remote.len(),
        }
    }

    pub fn local_bytes(&mut self) -> &mut [u8] {
        bytes(&mut self.local)
    }

    pub fn remote_bytes(&mut self) -> &mut [u8] {
        bytes(&mut self.remote)
    }
}

fn bytes(m: &mut Mr) -> &mut [u8] {
    m.buf_mut().map(|b| b.as_mut_slice()).unwrap_or_default()
}

/// The peer QP's receive queue and its CQ.
pub(super) struct PeerRecv {
    pub rq: VerbsRecv,
    pub cq: VerbsCq,
}

impl PeerRecv {
    pub fn new(qp: &Arc<Qp>, cq: &Arc<Cq>) -> Result<PeerRecv, String> {
        Ok(PeerRecv {
            rq: VerbsRecv::new(qp).map_err(e2s)?,
            cq: VerbsCq::new(cq, 16).map_err(e2s)?,
        })
    }

    /// One receive into `addr..addr+len` of the memory `lkey` names.
    pub fn post(&mut self, wr_id: u64, addr: u64, lkey: u32, len: u32) -> Result<(), String> {
        self.rq
            .post_recv(wr_id, addr, lkey, len)
            .map_err(|e| format!("ibv_post_recv at the peer: {e:?}"))
    }

    /// Appends what the peer's CQ has now (up to 16) to `out`.
    pub fn poll_into(&mut self, out: &mut Vec<Completion>) -> Result<(), String> {
        let mut buf = [Completion::default(); 16];
        let n = self
            .cq
            .poll(&mut buf)
            .map_err(|e| format!("peer poll: {e:?}"))?;
        out.extend_from_slice(&buf[..n]);
        Ok(())
    }
}
