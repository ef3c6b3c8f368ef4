//! The endpoint-exchange seam: what carries perftest's control messages
//! (versions, MTU, key messages with QPN/PSN/LID/GID/rkey/vaddr, barriers,
//! reports) between the two ends of a pair. Three implementations: perftest's
//! TCP session and rdma_cm (`-R`) in [`super::channel`], and any
//! [`StreamLink`] given to [`Channel::from_link`], e.g. the fabric mode's MPI
//! link between two ranks. The tools ask [`super::Session`] for the steps and
//! never see which one runs.
//!
//! A caller that already holds the link for a pair (the fabric mode) hands a
//! ready session to the next tool run on this thread with [`provide`]; the
//! tools' `connect` takes it with [`take`] instead of opening TCP or rdma_cm.

use super::channel::{Channel, Role};
use super::session::Session;
pub use super::stream_link::StreamLink;
use std::cell::RefCell;
use std::time::Duration;

thread_local! {
    static NEXT: RefCell<Option<Session>> = const { RefCell::new(None) };
}

/// A session over `link` with perftest's `role` and per-step `timeout`.
pub fn session(link: Box<dyn StreamLink>, role: Role, timeout: Duration) -> Session {
    let mut ch = Channel::from_link(link, role);
    ch.set_step_timeout(Some(timeout));
    Session::new(ch)
}

/// The next control session this thread's tool opens is `s`.
pub fn provide(s: Session) {
    NEXT.with(|n| *n.borrow_mut() = Some(s));
}

/// The session [`provide`]d to this thread, if any (taken once).
pub fn take() -> Option<Session> {
    NEXT.with(|n| n.borrow_mut().take())
}
