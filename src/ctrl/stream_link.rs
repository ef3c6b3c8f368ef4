//! The byte stream a control channel can run over besides TCP and rdma_cm
//! (see [`super::link`]); its own file so `channel` and `link` do not import
//! each other.

use std::io;
use std::net::SocketAddr;
use std::time::Duration;

/// A reliable, ordered byte stream to one peer with bounded waits.
pub trait StreamLink: Send + std::fmt::Debug {
    /// Writes all of `msg`, waiting at most `timeout` (None: no bound).
    fn write_all(&mut self, msg: &[u8], timeout: Option<Duration>) -> io::Result<()>;
    /// Reads 1..=buf.len() bytes, waiting at most `timeout`; Ok(0) when the
    /// peer closed; `ErrorKind::TimedOut` when the time ran out.
    fn read(&mut self, buf: &mut [u8], timeout: Option<Duration>) -> io::Result<usize>;
    /// An address that names the peer in errors.
    fn peer(&self) -> SocketAddr;
    /// Ends the link (the peer's reads see the close).
    fn close(&mut self);
}
