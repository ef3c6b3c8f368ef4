//! The direct mlx5 post path: WQEs built in the SQ ring of an mlx5 QP, the
//! doorbell rung from user space, CQEs polled straight from the CQ buffer.
//!
//! Layers (ring access isolated in `wqe.rs`, stores to device-visible memory
//! behind the [`Mmio`] seam):
//! - [`prm`], [`be`], [`seg`]: PRM constants and segment layouts/encoders
//!   (pure, checked byte-for-byte against rdma-core in `tests/mlx5_seg.rs`);
//! - [`wqe`]: WQE shapes and the ring cursor (wrap at the ring end);
//! - [`barrier`], [`mmio`], [`doorbell`]: the `post_send_db` protocol;
//! - [`sq`]: [`DirectSq`], a [`crate::post::SendQueue`]; [`raw_sq`]: a raw
//!   packet SQ (one SEND per frame, or [`mpw`]'s multi-packet WQEs);
//! - [`cq`]: [`DirectCq`], a [`crate::post::CompletionQueue`] that also
//!   retires SQ space (shared lock-free [`progress`] record);
//! - [`recv`], [`rq`], [`srq`]: the receive side: a QP's RQ and a shared
//!   receive queue posted directly (doorbell record only, no MMIO), and the
//!   ring record the poller completes receives from (`wqe_counter`,
//!   scatter-to-CQE copies, the SRQ's free list); [`recv_cq`]: the receive
//!   CQ that posts an SRQ receive dropped on an ODP page fault again;
//! - [`setup`]: the set-up steps (thread domain .. layout) that `--post auto`
//!   falls back from, with the reason;
//! - [`device`]: selection, the steps on a device and constructors from ibv objects.
//!
//! Hot path (`post`, `ring`, `poll`): `core` only, no allocation, no locks,
//! no formatting, no panicking operations on valid queues.

pub mod barrier;
pub mod be;
pub mod cq;
pub mod device;
pub mod doorbell;
pub mod env;
pub mod error;
pub mod eth_seg;
pub mod keepalive;
pub mod mmio;
pub mod mpw;
pub mod prm;
pub mod progress;
mod ptr_segs;
pub mod raw_list;
pub mod raw_sq;
pub mod recv;
pub mod recv_cq;
pub mod rq;
pub mod seg;
pub mod segwr;
pub mod setup;
pub mod sq;
pub mod srq;
pub mod wqe;

use core::fmt;

pub use cq::DirectCq;
pub use error::DirectError;
pub use keepalive::KeepAlive;
pub use mmio::{HwMmio, Mmio};
pub use sq::{DirectSq, Transport};

use crate::post::{Completion, WcStatus};
use prm::{vendor_syndrome_hint, Syndrome};

/// A human-readable account of a failed completion from the direct poller
/// (control path: use after the loop stopped on the error).
pub struct CompletionError<'a>(pub &'a Completion);

impl fmt::Display for CompletionError<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = self.0;
        let s = Syndrome(c.syndrome);
        write!(
            f,
            "completion with error on QP {:#x}, wr_id {}: {} (mlx5 syndrome {:#04x} {}, \
             vendor syndrome {:#04x}",
            c.qp_num,
            c.wr_id,
            c.status.name(),
            c.syndrome,
            s.name(),
            c.vendor_err,
        )?;
        if let Some(h) = vendor_syndrome_hint(c.vendor_err as u8) {
            write!(f, ": {h}")?;
        }
        write!(f, "); ")?;
        if c.status == WcStatus::SUCCESS {
            write!(f, "no error")
        } else {
            write!(f, "{}", s.hint())
        }
    }
}
