//! The MPI implementation of the endpoint-exchange seam
//! ([`crate::ctrl::link::StreamLink`]): perftest's control messages of one
//! pair as tagged MPI messages between the two ranks. Each step and each
//! side of a pair has its own tag, so the pairs a rank runs at once (incast,
//! alltoall, `-b`) and late messages of a failed step never mix.

use super::alive;
use super::comm::{self, CommError};
use crate::ctrl::link::StreamLink;
use crate::run::stop;
use std::io::{self, ErrorKind};
use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

/// First tag of the pair links (below: the fabric's own control messages).
pub const TAG_PAIR: i32 = 100;
/// Steps before the tags repeat (MPI guarantees tags up to 32767).
const TAG_STEPS: usize = 8000;

/// The tag a message of `step` carries when its sender is (or is not) the
/// pair's client.
pub fn tag(step: usize, sender_is_client: bool) -> i32 {
    TAG_PAIR + 2 * (step % TAG_STEPS) as i32 + i32::from(!sender_is_client)
}

#[derive(Debug)]
pub struct MpiLink {
    peer: usize,
    send_tag: i32,
    recv_tag: i32,
    /// Bytes of the last message not read yet.
    pending: Vec<u8>,
    pos: usize,
    /// Bound of a wait the tool leaves unbounded (the peer's measurement).
    run_cap: Duration,
    closed: bool,
}

impl MpiLink {
    /// This rank's end of the pair with `peer` in `step`.
    pub fn new(peer: usize, step: usize, client: bool, run_cap: Duration) -> MpiLink {
        MpiLink {
            peer,
            send_tag: tag(step, client),
            recv_tag: tag(step, !client),
            pending: Vec::new(),
            pos: 0,
            run_cap,
            closed: false,
        }
    }

    fn deadline(&self, timeout: Option<Duration>) -> Instant {
        Instant::now() + timeout.unwrap_or(self.run_cap)
    }

    /// Runs `op` (a bounded receive: a probe that takes nothing until a
    /// message matches, so it can be repeated) in slices up to `deadline`,
    /// giving up as soon as the peer is named gone (`alive`): rank 0's bound
    /// on a silent rank then ends this pair too, not the pair's own bounds.
    fn wait<T>(
        &self,
        deadline: Instant,
        mut op: impl FnMut(Instant) -> Result<T, CommError>,
    ) -> Result<T, Gave> {
        loop {
            if alive::is_gone(self.peer) {
                return Err(Gave::Gone);
            }
            let slice = (Instant::now() + SLICE).min(deadline);
            match op(slice) {
                Err(CommError::TimedOut) if slice < deadline => continue,
                Err(e) => return Err(Gave::Comm(e)),
                Ok(v) => return Ok(v),
            }
        }
    }
}

/// How often a wait looks whether rank 0 named the peer gone.
const SLICE: Duration = Duration::from_millis(100);

/// Why a wait of the link ended without its message.
enum Gave {
    Comm(CommError),
    Gone,
}

fn io_error(e: Gave, peer: usize, waited: Option<Duration>) -> io::Error {
    match e {
        Gave::Gone => io::Error::new(
            ErrorKind::ConnectionAborted,
            format!("rank {peer} stopped answering (rank 0 named it silent)"),
        ),
        Gave::Comm(CommError::TimedOut) => io::Error::new(
            ErrorKind::TimedOut,
            format!(
                "rank {peer} did not answer within {:?}",
                waited.unwrap_or_default()
            ),
        ),
        // Not Interrupted: the channel retries that; a signal ends the pair.
        Gave::Comm(CommError::Stopped) => {
            io::Error::new(ErrorKind::ConnectionAborted, "stopped by a signal")
        }
    }
}

impl StreamLink for MpiLink {
    fn write_all(&mut self, msg: &[u8], timeout: Option<Duration>) -> io::Result<()> {
        if msg.is_empty() {
            return Ok(()); // an empty message means "closed" on the wire
        }
        let d = self.deadline(timeout);
        // Not in slices: each send call posts the message (a timed-out one
        // stays posted), so only the start looks at the peer's state.
        if alive::is_gone(self.peer) {
            return Err(io_error(Gave::Gone, self.peer, None));
        }
        comm::send(self.peer, self.send_tag, msg, d, stop::requested)
            .map_err(Gave::Comm)
            .map_err(|e| io_error(e, self.peer, timeout.or(Some(self.run_cap))))
    }

    fn read(&mut self, buf: &mut [u8], timeout: Option<Duration>) -> io::Result<usize> {
        if self.pos >= self.pending.len() {
            if self.closed {
                return Ok(0);
            }
            let d = self.deadline(timeout);
            let (_, m) = self
                .wait(d, |t| {
                    comm::recv(Some(self.peer), self.recv_tag, t, stop::requested)
                })
                .map_err(|e| io_error(e, self.peer, timeout.or(Some(self.run_cap))))?;
            if m.is_empty() {
                self.closed = true;
                return Ok(0);
            }
            self.pending = m;
            self.pos = 0;
        }
        let n = buf.len().min(self.pending.len() - self.pos);
        buf[..n].copy_from_slice(&self.pending[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }

    fn peer(&self) -> SocketAddr {
        // Ranks have no socket address; the port field names the rank in errors.
        SocketAddr::from((Ipv4Addr::UNSPECIFIED, self.peer.min(65535) as u16))
    }

    fn close(&mut self) {
        // The close marker; a peer already gone is no error here.
        let d = Instant::now() + Duration::from_secs(1);
        let _ = comm::send(self.peer, self.send_tag, &[], d, || false);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tags_apart_per_step_and_side() {
        let mut seen = std::collections::HashSet::new();
        for step in 0..100 {
            for c in [true, false] {
                assert!(seen.insert(tag(step, c)));
                assert!(tag(step, c) < 32767 && tag(step, c) >= TAG_PAIR);
            }
        }
        assert_eq!(tag(TAG_STEPS, true), tag(0, true));
        let l = MpiLink::new(3, 7, true, Duration::from_secs(1));
        let r = MpiLink::new(0, 7, false, Duration::from_secs(1));
        assert_eq!(l.send_tag, r.recv_tag);
        assert_eq!(l.recv_tag, r.send_tag);
    }
}
