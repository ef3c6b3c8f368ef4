//! What two rdmaperf peers exchange after the run, before the close: each
//! side's explanation (`--explain`), so each can print the peer's findings
//! beside its own. The exchange happens in [`super::Session::close`] /
//! [`super::Session::finish`] — the one point every tool passes with the
//! control channel still open and both sides done measuring — only when
//! both sides said they would (the `explain` bit of [`super::wire::PeerParams`]).
//!
//! The session knows nothing about explanations: the side that wants one
//! registers, on its own thread, a provider of its bytes before the tool
//! runs ([`provide`]) and takes what came back after ([`take`]). Thread
//! local, because the fabric mode and loopback run several sides in one
//! process, each on its own thread.

use std::cell::RefCell;

/// Largest payload taken from a peer (an explanation is a few KiB).
pub const MAX_LEN: u32 = 1 << 20;

/// What the peer's side of the exchange gave.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PeerExplain {
    /// The peer's bytes.
    Received(Vec<u8>),
    /// The peer is stock perftest: it has no explanation to give.
    Stock,
    /// An rdmaperf peer run without `--explain`.
    NotAsked,
    /// The exchange failed; why.
    Failed(String),
}

type Provider = Box<dyn FnMut() -> Vec<u8>>;

thread_local! {
    static PROVIDER: RefCell<Option<Provider>> = const { RefCell::new(None) };
    static RECEIVED: RefCell<Option<PeerExplain>> = const { RefCell::new(None) };
}

/// This thread's session will send `f()` after the run (when the peer also
/// explains) and keep the peer's for [`take`].
pub fn provide(f: impl FnMut() -> Vec<u8> + 'static) {
    PROVIDER.with(|p| *p.borrow_mut() = Some(Box::new(f)));
    RECEIVED.with(|r| *r.borrow_mut() = None);
}

/// Whether this thread registered a provider.
pub fn wanted() -> bool {
    PROVIDER.with(|p| p.borrow().is_some())
}

/// This thread's bytes to send (once; the provider is dropped).
pub(crate) fn local() -> Option<Vec<u8>> {
    PROVIDER.with(|p| p.borrow_mut().take()).map(|mut f| f())
}

/// Records what the peer gave.
pub(crate) fn set(e: PeerExplain) {
    RECEIVED.with(|r| *r.borrow_mut() = Some(e));
}

/// What the peer gave (`None`: the session never reached its close, e.g.
/// the run failed), and drops the provider if it was never used.
pub fn take() -> Option<PeerExplain> {
    PROVIDER.with(|p| p.borrow_mut().take());
    RECEIVED.with(|r| r.borrow_mut().take())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_provider_per_thread_used_once() {
        assert!(!wanted());
        provide(|| b"mine".to_vec());
        assert!(wanted());
        std::thread::spawn(|| assert!(!wanted(), "another thread has none"))
            .join()
            .unwrap();
        assert_eq!(local(), Some(b"mine".to_vec()));
        assert_eq!(local(), None, "sent once");
        set(PeerExplain::Stock);
        assert_eq!(take(), Some(PeerExplain::Stock));
        assert_eq!(take(), None);
    }
}
