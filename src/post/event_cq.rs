//! `-e/--events`: a [`CompletionQueue`] that sleeps on the CQ's completion
//! channel before polling, so the loops (bw, recv, lat) run unchanged.
//!
//! perftest's order: arm the CQ once before the run; then before each poll
//! wait for an event, ack it, re-arm, poll. Two differences, both about not
//! hanging: after a poll that filled the whole batch the next poll goes
//! straight to the CQ (there may be more entries than the batch, and no new
//! event will come for them — perftest's known `-e` hang), and the wait is a
//! poll(2) on the channel fd with a timeout, so Ctrl-C and the loops' stall
//! detection still work. Without events it is a pass-through (one branch).

use std::sync::Arc;

use super::{Completion, CompletionQueue, PostError};
use crate::verbs::{Cq, VerbsError};

/// How long one wait blocks before the loop gets control back (stop flag, stall check).
pub const WAIT_MS: i32 = 100;

/// The verbs poller of `cq` (batches of `batch`) behind events when `events`.
pub fn verbs(
    cq: &Arc<Cq>,
    batch: usize,
    events: bool,
) -> Result<EventCq<super::verbs_cq::VerbsCq>, VerbsError> {
    EventCq::new(super::verbs_cq::VerbsCq::new(cq, batch)?, cq, events)
}

/// How a poller asks for the next completion event of its CQ. libmlx5's
/// `ibv_req_notify_cq` arms with libmlx5's consumer index, which a direct
/// poller never advances: the direct CQ arms with its own (`mlx5::cq`).
pub trait Arm {
    /// Request an event at the next completion of `cq`.
    fn arm(&mut self, cq: &Cq) -> Result<(), VerbsError>;
    /// One event of this CQ was taken from the channel (and acked).
    fn event_delivered(&mut self) {}
}

impl Arm for super::verbs_cq::VerbsCq {
    fn arm(&mut self, cq: &Cq) -> Result<(), VerbsError> {
        cq.req_notify(false)
    }
}

/// Completion events in front of a poller `C` of the same CQ.
pub struct EventCq<C> {
    inner: C,
    cq: Option<Arc<Cq>>,
    need_wait: bool,
}

impl<C> EventCq<C> {
    /// The poller behind the events (control path: attach queues).
    pub fn inner_mut(&mut self) -> &mut C {
        &mut self.inner
    }
}

impl<C: CompletionQueue + Arm> EventCq<C> {
    /// With `events` (the CQ must have a channel), arms the CQ now; without, a pass-through.
    pub fn new(mut inner: C, cq: &Arc<Cq>, events: bool) -> Result<Self, VerbsError> {
        if events {
            if !cq.has_channel() {
                return Err(VerbsError::new(
                    "ibv_req_notify_cq",
                    0,
                    "-e: this CQ was created without a completion channel (internal); report this",
                ));
            }
            inner.arm(cq)?;
        }
        Ok(EventCq {
            inner,
            cq: events.then(|| Arc::clone(cq)),
            need_wait: true,
        })
    }
}

impl<C: CompletionQueue + Arm> CompletionQueue for EventCq<C> {
    #[inline]
    fn poll(&mut self, out: &mut [Completion]) -> Result<usize, PostError> {
        let Some(cq) = &self.cq else {
            return self.inner.poll(out);
        };
        if self.need_wait {
            let got = cq
                .wait_event_for(WAIT_MS)
                .map_err(|e| PostError::Errno(e.errno))?;
            if got {
                self.inner.event_delivered();
                self.inner.arm(cq).map_err(|e| PostError::Errno(e.errno))?;
            }
        }
        let n = self.inner.poll(out)?;
        self.need_wait = n < out.len();
        Ok(n)
    }

    fn unknown_qpn_cqes(&self) -> u64 {
        self.inner.unknown_qpn_cqes()
    }
}
