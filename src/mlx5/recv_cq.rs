//! The receive side's CQ: a [`DirectCq`] with the SRQ it completes from,
//! so that an SRQ receive the NIC dropped on an ODP page fault is posted
//! again right after the poll that found it, as libmlx5 does inside
//! `ibv_poll_cq` (`mlx5_complete_odp_fault`: the WQE reposted, the CQE
//! hidden). The receive loops then never see the fault: the WR stays
//! posted and its message arrives once the page is in.
//!
//! Why here and not in the poller: posting moves the SRQ's producer state,
//! which its ports own on their thread ([`SrqPort`] is not `Send`); the
//! poller is `Send` and only frees the WQE and keeps the WR
//! ([`DirectCq::reposts`]). This type, holding a port, is not `Send`
//! either, so the repost runs on the ports' thread.

use super::cq::DirectCq;
use super::mmio::{HwMmio, Mmio};
use super::srq::SrqPort;
use crate::post::{Completion, CompletionQueue, PostError, RecvQueue};

/// A receive CQ poller and, with `--use-srq`, a port on the SRQ its
/// faulted receives are posted again to.
pub struct RecvCq<M: Mmio = HwMmio> {
    cq: DirectCq,
    srq: Option<SrqPort<M>>,
}

impl<M: Mmio> RecvCq<M> {
    /// `srq`: a port on the SRQ attached to `cq` (none for RQs: libmlx5
    /// reposts only SRQ receives; an RQ's fault stays an error CQE).
    pub fn new(cq: DirectCq, srq: Option<SrqPort<M>>) -> Self {
        Self { cq, srq }
    }
    /// The poller (arming, counters).
    pub fn direct(&mut self) -> &mut DirectCq {
        &mut self.cq
    }

    /// Posts the faulted receives again, oldest first; one that does not
    /// fit (it always does: its WQE was freed first) waits for the next
    /// poll.
    #[cold]
    fn repost(&mut self) {
        let Some(port) = self.srq.as_mut() else {
            return;
        };
        let mut n = 0;
        for rp in self.cq.reposts() {
            if port.post_recv(rp.wr_id, rp.addr, rp.lkey, rp.len).is_err() {
                break;
            }
            n += 1;
        }
        self.cq.reposted(n);
    }
}

impl<M: Mmio> CompletionQueue for RecvCq<M> {
    #[inline]
    fn poll(&mut self, out: &mut [Completion]) -> Result<usize, PostError> {
        let res = self.cq.poll(out);
        if !self.cq.reposts().is_empty() {
            self.repost();
        }
        res
    }

    fn unknown_qpn_cqes(&self) -> u64 {
        self.cq.unknown_qpn_cqes()
    }
}
