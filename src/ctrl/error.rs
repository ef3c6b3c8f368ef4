//! Errors of the control channel. Each names the step, the peer and the fix.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use super::wire::{show_bytes, WireError};

/// Direction of a failed transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dir {
    Reading,
    Writing,
}

impl fmt::Display for Dir {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Dir::Reading => "reading",
            Dir::Writing => "writing",
        })
    }
}

/// Seconds, as "2s" or "0.5s".
pub(crate) fn secs(d: &Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0}s")
    } else {
        format!("{s:.1}s")
    }
}

/// Anything that can go wrong on the control channel.
#[derive(Debug, thiserror::Error)]
pub enum CtrlError {
    #[error(
        "no rdmaperf/perftest server at {host}:{port} after {} ({last}) — start the server \
         first or check -p",
        secs(waited)
    )]
    NoServer {
        host: String,
        port: u16,
        waited: Duration,
        /// The last connect error.
        last: String,
    },

    #[error("cannot resolve {host}:{port}: {source} — check the host name or address")]
    Resolve {
        host: String,
        port: u16,
        source: io::Error,
    },

    #[error(
        "cannot listen on {addr}: {source} — is another server using port {port}? stop it or \
         pick another port with -p"
    )]
    Listen {
        addr: String,
        port: u16,
        source: io::Error,
    },

    #[error(
        "no client connected to port {port} within {} — start the client with this host's \
         address and -p {port}",
        secs(waited)
    )]
    AcceptTimeout { port: u16, waited: Duration },

    #[error("accepting a client on port {port}: {source}")]
    Accept { port: u16, source: io::Error },

    #[error(
        "{}: peer closed after {got} of {expected} bytes{} — the peer exited; check its \
         output (same tool and flags on both sides?)",
        at(*dir, step, peer),
        partial(bytes)
    )]
    PeerClosed {
        dir: Dir,
        step: String,
        peer: SocketAddr,
        got: usize,
        expected: usize,
        bytes: Box<[u8]>,
    },

    #[error(
        "{}: timed out after {} with {got} of {expected} bytes{} — the peer stopped \
         answering; is it running the same test with the same flags?",
        at(*dir, step, peer),
        secs(waited),
        partial(bytes)
    )]
    Timeout {
        dir: Dir,
        step: String,
        peer: SocketAddr,
        waited: Duration,
        got: usize,
        expected: usize,
        bytes: Box<[u8]>,
    },

    #[error(
        "{}: the peer closed the connection ({source}) — the peer exited; check its output \
         (same tool and flags on both sides?)",
        at(*dir, step, peer)
    )]
    PeerGone {
        dir: Dir,
        step: String,
        peer: SocketAddr,
        source: io::Error,
    },

    #[error("{}: {source}", at(*dir, step, peer))]
    Io {
        dir: Dir,
        step: String,
        peer: SocketAddr,
        source: io::Error,
    },

    #[error("reading {step} from {peer}: {source}")]
    Protocol {
        step: String,
        peer: SocketAddr,
        source: WireError,
    },

    /// Setting up the rdma_cm control connection (`-R`) failed.
    #[error("rdma_cm control connection ({step}, {peer}): {detail}")]
    Cm {
        step: String,
        peer: String,
        detail: String,
    },

    /// A local value that cannot be sent (programming or configuration error).
    #[error("cannot send {step}: {source}")]
    Local { step: String, source: WireError },

    /// The session's methods were called out of protocol order.
    #[error("control session misuse: {0} (this is a bug in rdmaperf; please report it)")]
    Order(&'static str),
}

impl CtrlError {
    /// For a message read in parts: report the whole message's size.
    pub(crate) fn expecting(mut self, whole: usize) -> CtrlError {
        if let CtrlError::PeerClosed { expected, .. } | CtrlError::Timeout { expected, .. } =
            &mut self
        {
            *expected = whole;
        }
        self
    }
}

/// "reading X from peer" / "writing X to peer".
fn at(dir: Dir, step: &str, peer: &SocketAddr) -> String {
    match dir {
        Dir::Reading => format!("reading {step} from {peer}"),
        Dir::Writing => format!("writing {step} to {peer}"),
    }
}

fn partial(b: &[u8]) -> String {
    if b.is_empty() {
        String::new()
    } else {
        format!(": {}", show_bytes(b))
    }
}
