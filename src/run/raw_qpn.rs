//! The direct raw SQs of several QPs on one CQ (`raw-eth-bw --client -q N
//! --post direct|direct-mpw`): each direct SQ's CQE carries that SQ's
//! packet count as its `wr_id` (`RawSq`'s progress record), the same number
//! on every QP, so the CQ poller's completions are told apart here by the
//! QPN the CQE names, and given the sender loop's `wr_id` encoding (QP
//! index above [`QP_SHIFT`], the frames retired below), as perftest tells
//! its QPs apart by the `wr_id` it put in each QP's WRs.
//!
//! Hot path: a linear search over the QPNs (a handful), no allocation.

use super::raw_bw::QP_SHIFT;
use crate::post::{Completion, CompletionQueue, PostError};

/// A CQ shared by the QPs whose numbers are `qpns` (in the loop's QP
/// order). A completion naming no QP of the list gets an index past the
/// last, which the loop takes for an error.
pub struct ByQpn<C> {
    pub cq: C,
    pub qpns: Box<[u32]>,
}

impl<C: CompletionQueue> ByQpn<C> {
    /// `cq` polled for the QPs `qpns` (control path: allocates the list).
    pub fn new(cq: C, qpns: &[u32]) -> Self {
        Self {
            cq,
            qpns: qpns.into(),
        }
    }

    /// The loop's index of QP `qpn` (`qpns.len()` when it is none of them).
    #[inline(always)]
    fn index(&self, qpn: u32) -> u64 {
        let at = self.qpns.iter().position(|&q| q == qpn);
        at.unwrap_or(self.qpns.len()) as u64
    }
}

impl<C: CompletionQueue> CompletionQueue for ByQpn<C> {
    #[inline(always)]
    fn poll(&mut self, out: &mut [Completion]) -> Result<usize, PostError> {
        let n = self.cq.poll(out)?;
        for wc in out.iter_mut().take(n) {
            let done = wc.wr_id & ((1 << QP_SHIFT) - 1);
            wc.wr_id = (self.index(wc.qp_num) << QP_SHIFT) | done;
        }
        Ok(n)
    }

    fn unknown_qpn_cqes(&self) -> u64 {
        self.cq.unknown_qpn_cqes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::post::wc::poll_queued;
    use std::collections::VecDeque;

    struct Q(VecDeque<Completion>);
    impl CompletionQueue for Q {
        fn poll(&mut self, out: &mut [Completion]) -> Result<usize, PostError> {
            Ok(poll_queued(&mut self.0, out))
        }
    }

    fn wc(qpn: u32, count: u64) -> Completion {
        Completion {
            qp_num: qpn,
            wr_id: count,
            ..Completion::default()
        }
    }

    #[test]
    fn each_completion_is_tagged_with_its_qps_index() {
        let q = Q([wc(0x101, 8), wc(0x100, 8), wc(0x103, 40), wc(0x7, 1)].into());
        let mut cq = ByQpn::new(q, &[0x100, 0x101, 0x102, 0x103]);
        let mut out = [Completion::default(); 8];
        assert_eq!(cq.poll(&mut out), Ok(4));
        let ids: Vec<(u64, u64)> = out[..4]
            .iter()
            .map(|w| (w.wr_id >> QP_SHIFT, w.wr_id & ((1 << QP_SHIFT) - 1)))
            .collect();
        // The unknown QPN's index is past the last QP: the loop's error.
        assert_eq!(ids, [(1, 8), (0, 8), (3, 40), (4, 1)]);
        assert_eq!(out[0].qp_num, 0x101, "the QPN is kept");
    }
}
