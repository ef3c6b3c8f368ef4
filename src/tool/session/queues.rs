//! The verbs send queues of a test's QPs for the bw loops: one queue per
//! QP, each with the UD destination paired with it (None on a connected
//! QP; the pairing stops at the shorter of the two lists).

use crate::post::post_send::PostSendQueue;
use crate::post::wr_api::WrApiQueue;
use crate::tool::common::fail::Fail;
use crate::verbs::{Qp, UdDest};
use std::sync::Arc;

/// `ibv_post_send` queues posting up to `post_list` WRs at once.
pub fn post_send(
    qps: &[Arc<Qp>],
    post_list: u32,
    uds: impl Iterator<Item = Option<UdDest>>,
) -> Result<Vec<PostSendQueue>, Fail> {
    qps.iter()
        .zip(uds)
        .map(|(qp, ud)| PostSendQueue::new(qp, post_list as usize, ud))
        .collect::<Result<Vec<_>, _>>()
        .map_err(Fail::verbs)
}

/// `ibv_wr_*` queues.
pub fn wr_api(
    qps: &[Arc<Qp>],
    uds: impl Iterator<Item = Option<UdDest>>,
) -> Result<Vec<WrApiQueue>, Fail> {
    qps.iter()
        .zip(uds)
        .map(|(qp, ud)| WrApiQueue::new(qp, ud))
        .collect::<Result<Vec<_>, _>>()
        .map_err(Fail::verbs)
}

/// The UD destinations of connected QPs: none.
pub fn connected() -> impl Iterator<Item = Option<UdDest>> {
    std::iter::repeat(None)
}
