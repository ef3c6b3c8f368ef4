//! The TCP connection under perftest's control protocol.
//!
//! perftest has no framing: every message is a fixed-size blob, written with
//! one `write` and read with one `read` that fails if short. We write each
//! message with one call too, but loop on reads (TCP may split), never read past
//! the current message, and bound every read by a per-step timeout so a silent
//! or foreign peer gives a named error instead of a hang.

use std::io::{self, ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::thread;
use std::time::{Duration, Instant};

use super::bound_connect::FromError;
use super::cm_link::CmLink;
use super::error::{CtrlError, Dir};
use super::stream_link::StreamLink;

/// perftest's default control port (`-p`).
pub const DEFAULT_PORT: u16 = 18515;
/// Default bound on one handshake step.
pub const DEFAULT_STEP_TIMEOUT: Duration = Duration::from_secs(30);
/// Default time a client keeps retrying to reach a server that is not up yet.
pub const DEFAULT_CONNECT_DEADLINE: Duration = Duration::from_secs(10);

/// How long `finish` waits for the peer's side of the close.
const DRAIN_WAIT: Duration = Duration::from_secs(1);
/// Largest single connect attempt while retrying.
const CONNECT_ATTEMPT_MAX: Duration = Duration::from_secs(2);
/// Retry backoff: first and largest pause between connect attempts.
const BACKOFF_FIRST: Duration = Duration::from_millis(50);
const BACKOFF_MAX: Duration = Duration::from_secs(1);
/// Poll interval of an accept with timeout.
const ACCEPT_POLL: Duration = Duration::from_millis(10);

/// Which side of the lock-step protocol we are: the client (perftest's side
/// with a server name) writes first, the server reads first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Client,
    Server,
}

/// A bound, listening server socket that has not accepted its client yet.
/// Split from [`Channel::listen`] so a caller (or test) can learn the port.
#[derive(Debug)]
pub struct Listener {
    inner: TcpListener,
    port: u16,
}

impl Listener {
    /// Binds `bind` (default 0.0.0.0, perftest's AF_INET wildcard) on `port`
    /// (0 = any free port). std sets SO_REUSEADDR on Unix listeners, as
    /// perftest does, so a restarted server can rebind at once.
    pub fn bind(bind: Option<&str>, port: u16) -> Result<Listener, CtrlError> {
        let host = bind.unwrap_or("0.0.0.0");
        let listen_err = |source| CtrlError::Listen {
            addr: format!("{host}:{port}"),
            port,
            source,
        };
        let addrs = resolve_ipv4_first(host, port)?;
        let mut last = io::Error::new(ErrorKind::AddrNotAvailable, "no address to bind");
        for addr in addrs {
            match TcpListener::bind(addr) {
                Ok(inner) => {
                    let port = inner.local_addr().map_err(listen_err)?.port();
                    return Ok(Listener { inner, port });
                }
                Err(e) => last = e,
            }
        }
        Err(listen_err(last))
    }

    /// The listening socket, so a signal handler can shut it down (which
    /// makes a blocked `accept` return).
    pub fn raw_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        self.inner.as_raw_fd()
    }

    /// The port actually bound.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Accepts the single client (perftest serves one client per process) and
    /// closes the listener. `None` waits forever, like perftest.
    pub fn accept(self, timeout: Option<Duration>) -> Result<Channel, CtrlError> {
        let port = self.port;
        let accept_err = |source| CtrlError::Accept { port, source };
        let (stream, peer) = match timeout {
            None => self.inner.accept().map_err(accept_err)?,
            Some(t) => {
                self.inner.set_nonblocking(true).map_err(accept_err)?;
                let start = Instant::now();
                loop {
                    match self.inner.accept() {
                        Ok(pair) => break pair,
                        Err(e) if e.kind() == ErrorKind::WouldBlock => {
                            if start.elapsed() >= t {
                                return Err(CtrlError::AcceptTimeout { port, waited: t });
                            }
                            thread::sleep(ACCEPT_POLL);
                        }
                        Err(e) if e.kind() == ErrorKind::Interrupted => {}
                        Err(e) => return Err(accept_err(e)),
                    }
                }
            }
        };
        stream.set_nonblocking(false).map_err(accept_err)?;
        Channel::new(stream, peer, Role::Server).map_err(accept_err)
    }
}

/// How a client's control connection is made (perftest's `--ipv6-addr`,
/// `--bind_source_ip`).
#[derive(Clone, Copy, Debug, Default)]
pub struct ConnectHow {
    /// Only the server's IPv6 addresses.
    pub ipv6_only: bool,
    /// Bind the socket to this address (port 0) before connecting.
    pub source: Option<SocketAddr>,
}

/// What carries the messages: perftest's TCP socket, (`-R`) an RC QP
/// connected by the RDMA CM, or another byte stream (see [`super::link`]).
#[derive(Debug)]
enum Io {
    Tcp(TcpStream),
    Cm(Box<CmLink>),
    Link(Box<dyn StreamLink>),
}

/// One control connection: lock-step exchanges of fixed-size messages.
#[derive(Debug)]
pub struct Channel {
    io: Io,
    peer: SocketAddr,
    role: Role,
    step_timeout: Option<Duration>,
}

/// `host`'s addresses (IPv4 first) that `how` allows: IPv6 only with
/// `--ipv6-addr`, the source address's family with `--bind_source_ip`.
fn usable_addrs(host: &str, port: u16, how: &ConnectHow) -> Result<Vec<SocketAddr>, CtrlError> {
    let mut addrs = resolve_ipv4_first(host, port)?;
    if how.ipv6_only {
        addrs.retain(SocketAddr::is_ipv6);
    }
    if let Some(src) = how.source {
        addrs.retain(|a| a.is_ipv4() == src.is_ipv4());
    }
    if addrs.is_empty() {
        let want = if how.ipv6_only || how.source.is_some_and(|s| s.is_ipv6()) {
            "IPv6"
        } else {
            "IPv4"
        };
        return Err(CtrlError::Resolve {
            host: host.to_owned(),
            port,
            source: io::Error::new(
                ErrorKind::AddrNotAvailable,
                format!(
                    "no {want} address for it (--ipv6-addr / --bind_source_ip ask for {want}); \
                     give the server's {want} address"
                ),
            ),
        });
    }
    Ok(addrs)
}

/// One connect attempt to `addr` (from `how.source` when given). The outer
/// error is final (the source address cannot be bound); the inner one is
/// worth retrying.
fn connect_once(
    addr: SocketAddr,
    attempt: Duration,
    how: &ConnectHow,
) -> Result<io::Result<TcpStream>, CtrlError> {
    Ok(match how.source {
        Some(src) => match super::bound_connect::connect_from(src, addr, attempt) {
            Ok(s) => Ok(s),
            Err(FromError::Connect(e)) => Err(e),
            Err(FromError::Source(source)) => {
                return Err(CtrlError::Io {
                    dir: Dir::Writing,
                    step: "binding the control socket (--bind_source_ip)".into(),
                    peer: addr,
                    source,
                })
            }
        },
        None => TcpStream::connect_timeout(&addr, attempt),
    })
}

impl Channel {
    fn new(stream: TcpStream, peer: SocketAddr, role: Role) -> io::Result<Channel> {
        // Lock-step small messages: never let Nagle hold one back.
        stream.set_nodelay(true)?;
        Ok(Channel {
            io: Io::Tcp(stream),
            peer,
            role,
            step_timeout: Some(DEFAULT_STEP_TIMEOUT),
        })
    }

    /// Server side: bind, accept one client, close the listener.
    pub fn listen(
        bind: Option<&str>,
        port: u16,
        accept_timeout: Option<Duration>,
    ) -> Result<Channel, CtrlError> {
        Listener::bind(bind, port)?.accept(accept_timeout)
    }

    /// Client side: connect to `host:port`, retrying with backoff until
    /// `deadline` has passed (perftest gives up at once; retrying lets the two
    /// sides start in either order). A zero deadline tries once.
    pub fn connect(host: &str, port: u16, deadline: Duration) -> Result<Channel, CtrlError> {
        Channel::connect_with(host, port, deadline, &ConnectHow::default())
    }

    /// [`Channel::connect`] with perftest's `--ipv6-addr` (IPv6 addresses
    /// only) and `--bind_source_ip` (bind the socket to a source first).
    pub fn connect_with(
        host: &str,
        port: u16,
        deadline: Duration,
        how: &ConnectHow,
    ) -> Result<Channel, CtrlError> {
        let addrs = usable_addrs(host, port, how)?;
        let start = Instant::now();
        let mut backoff = BACKOFF_FIRST;
        let mut last = String::from("no address");
        loop {
            for addr in &addrs {
                let left = deadline.saturating_sub(start.elapsed());
                let attempt = left.clamp(Duration::from_millis(100), CONNECT_ATTEMPT_MAX);
                let tried = connect_once(*addr, attempt, how)?;
                match tried {
                    Ok(s) => {
                        return Channel::new(s, *addr, Role::Client).map_err(|e| CtrlError::Io {
                            dir: Dir::Writing,
                            step: "connection setup".into(),
                            peer: *addr,
                            source: e,
                        })
                    }
                    Err(e) => last = e.to_string(),
                }
            }
            let left = deadline.saturating_sub(start.elapsed());
            if left.is_zero() {
                return Err(CtrlError::NoServer {
                    host: host.to_owned(),
                    port,
                    waited: deadline,
                    last,
                });
            }
            thread::sleep(backoff.min(left));
            backoff = (backoff * 2).min(BACKOFF_MAX);
        }
    }

    /// A control link over rdma_cm (`-R`), as the client or the server.
    pub fn from_cm(link: CmLink, role: Role) -> Channel {
        Channel {
            peer: link.peer(),
            io: Io::Cm(Box::new(link)),
            role,
            step_timeout: Some(DEFAULT_STEP_TIMEOUT),
        }
    }

    /// A control link over another byte stream (e.g. MPI between two ranks);
    /// the messages are perftest's TCP ones.
    pub fn from_link(link: Box<dyn StreamLink>, role: Role) -> Channel {
        Channel {
            peer: link.peer(),
            io: Io::Link(link),
            role,
            step_timeout: Some(DEFAULT_STEP_TIMEOUT),
        }
    }

    /// Whether messages go over rdma_cm (then key messages are binary).
    pub fn is_cm(&self) -> bool {
        matches!(self.io, Io::Cm(_))
    }

    /// rdma_cm only: the size of the next message (waiting for it).
    pub fn next_message_len(
        &mut self,
        step: &str,
        timeout: Option<Duration>,
    ) -> Result<Option<usize>, CtrlError> {
        match &mut self.io {
            Io::Cm(l) => l.next_len(step, timeout).map(Some),
            Io::Tcp(_) | Io::Link(_) => Ok(None),
        }
    }

    /// The connected socket, so a signal handler can shut it down (which
    /// makes a blocked read or write return at once); -1 over rdma_cm (its
    /// waits poll the stop flag instead).
    pub fn raw_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        match &self.io {
            Io::Tcp(s) => s.as_raw_fd(),
            Io::Cm(_) | Io::Link(_) => -1,
        }
    }

    /// A clone of the TCP socket (for a watcher that notices the peer's
    /// exit during a run); None over rdma_cm or another link, or if the clone fails.
    pub fn try_clone_socket(&self) -> Option<std::net::TcpStream> {
        match &self.io {
            Io::Tcp(s) => s.try_clone().ok(),
            _ => None,
        }
    }

    /// Client or server.
    pub fn role(&self) -> Role {
        self.role
    }

    /// The peer's address (for messages).
    pub fn peer(&self) -> SocketAddr {
        self.peer
    }

    /// Bound on each step's read/write; `None` waits forever.
    pub fn step_timeout(&self) -> Option<Duration> {
        self.step_timeout
    }

    /// Sets the bound on each step (default [`DEFAULT_STEP_TIMEOUT`]).
    pub fn set_step_timeout(&mut self, t: Option<Duration>) {
        self.step_timeout = t;
    }

    /// Writes one whole message (one `write` call for these sizes).
    pub fn send(&mut self, step: &str, msg: &[u8]) -> Result<(), CtrlError> {
        let r = match &mut self.io {
            Io::Tcp(s) => s
                .set_write_timeout(self.step_timeout)
                .and_then(|()| s.write_all(msg)),
            Io::Cm(l) => return l.send(step, msg, self.step_timeout),
            Io::Link(l) => l.write_all(msg, self.step_timeout),
        };
        r.map_err(|e| match e.kind() {
            ErrorKind::WouldBlock | ErrorKind::TimedOut => CtrlError::Timeout {
                dir: Dir::Writing,
                step: step.to_owned(),
                peer: self.peer,
                waited: self.step_timeout.unwrap_or_default(),
                got: 0,
                expected: msg.len(),
                bytes: Box::default(),
            },
            _ => io_err(self.peer, Dir::Writing, step, e),
        })
    }

    /// Reads exactly `len` bytes within the step timeout.
    pub fn recv(&mut self, step: &str, len: usize) -> Result<Vec<u8>, CtrlError> {
        self.recv_timeout(step, len, self.step_timeout)
    }

    /// Reads exactly `len` bytes within `timeout` (`None`: no bound; used
    /// while the peer may be running a measurement of any length).
    pub fn recv_timeout(
        &mut self,
        step: &str,
        len: usize,
        timeout: Option<Duration>,
    ) -> Result<Vec<u8>, CtrlError> {
        let mut buf = Vec::with_capacity(len);
        self.recv_more(step, &mut buf, len, timeout)?;
        Ok(buf)
    }

    /// Reads until `buf` holds `total` bytes, never past. Lets a caller look
    /// at the start of a message before asking for the rest; errors show all
    /// bytes received so far.
    pub fn recv_more(
        &mut self,
        step: &str,
        buf: &mut Vec<u8>,
        total: usize,
        timeout: Option<Duration>,
    ) -> Result<(), CtrlError> {
        let peer = self.peer;
        if let Io::Cm(l) = &mut self.io {
            return l.recv_more(step, buf, total, timeout);
        }
        let deadline = timeout.map(|t| (Instant::now() + t, t));
        let mut chunk = [0u8; 512];
        while buf.len() < total {
            let read_timeout = match deadline {
                None => None,
                Some((at, waited)) => {
                    let left = at.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(timeout_err(peer, step, buf, total, waited));
                    }
                    Some(left)
                }
            };
            let want = (total - buf.len()).min(chunk.len());
            let got = match &mut self.io {
                Io::Tcp(s) => {
                    if let Err(e) = s.set_read_timeout(read_timeout) {
                        return Err(io_err(peer, Dir::Reading, step, e));
                    }
                    s.read(&mut chunk[..want])
                }
                Io::Link(l) => l.read(&mut chunk[..want], read_timeout),
                Io::Cm(l) => return l.recv_more(step, buf, total, timeout),
            };
            match got {
                Ok(0) => {
                    return Err(CtrlError::PeerClosed {
                        dir: Dir::Reading,
                        step: step.to_owned(),
                        peer,
                        got: buf.len(),
                        expected: total,
                        bytes: buf.as_slice().into(),
                    })
                }
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    let waited = deadline.map_or(Duration::ZERO, |d| d.1);
                    return Err(timeout_err(peer, step, buf, total, waited));
                }
                Err(e) => return Err(io_err(peer, Dir::Reading, step, e)),
            }
        }
        Ok(())
    }

    /// One lock-step exchange: the client writes then reads, the server reads
    /// then writes. Both directions carry `out.len()` == `in_len` in perftest.
    pub fn exchange(
        &mut self,
        step: &str,
        out: &[u8],
        in_len: usize,
    ) -> Result<Vec<u8>, CtrlError> {
        self.exchange_timeout(step, out, in_len, self.step_timeout)
    }

    /// [`Channel::exchange`] with an explicit read timeout.
    pub fn exchange_timeout(
        &mut self,
        step: &str,
        out: &[u8],
        in_len: usize,
        timeout: Option<Duration>,
    ) -> Result<Vec<u8>, CtrlError> {
        match self.role {
            Role::Client => {
                self.send(step, out)?;
                self.recv_timeout(step, in_len, timeout)
            }
            Role::Server => {
                let got = self.recv_timeout(step, in_len, timeout)?;
                self.send(step, out)?;
                Ok(got)
            }
        }
    }

    /// Ends the connection: writes `trailer` if any (perftest 4.5's "done\0"),
    /// half-closes, and drains what the peer still sends until it closes or
    /// [`DRAIN_WAIT`] passes, so neither side's close turns into a reset.
    /// Errors are ignored: the close handshake before this already synced both
    /// sides. Returns the drained bytes.
    pub fn finish(self, trailer: Option<&[u8]>) -> Vec<u8> {
        let mut stream = match self.io {
            Io::Tcp(s) => s,
            Io::Cm(l) => {
                // No trailer over rdma_cm (perftest sends none there).
                l.finish();
                return Vec::new();
            }
            Io::Link(mut l) => {
                // The close handshake before this synced both sides; the
                // link needs no trailer.
                l.close();
                return Vec::new();
            }
        };
        if let Some(t) = trailer {
            let _ = stream.set_write_timeout(Some(DRAIN_WAIT));
            let _ = stream.write_all(t);
        }
        let _ = stream.shutdown(Shutdown::Write);
        let mut drained = Vec::new();
        let start = Instant::now();
        let mut chunk = [0u8; 64];
        while drained.len() < 4096 {
            let left = DRAIN_WAIT.saturating_sub(start.elapsed());
            if left.is_zero() || stream.set_read_timeout(Some(left)).is_err() {
                break;
            }
            match stream.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => drained.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
        drained
    }
}

fn timeout_err(
    peer: SocketAddr,
    step: &str,
    buf: &[u8],
    total: usize,
    waited: Duration,
) -> CtrlError {
    CtrlError::Timeout {
        dir: Dir::Reading,
        step: step.to_owned(),
        peer,
        waited,
        got: buf.len(),
        expected: total,
        bytes: buf.into(),
    }
}

fn io_err(peer: SocketAddr, dir: Dir, step: &str, source: io::Error) -> CtrlError {
    let step = step.to_owned();
    match source.kind() {
        ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted | ErrorKind::BrokenPipe => {
            CtrlError::PeerGone {
                dir,
                step,
                peer,
                source,
            }
        }
        _ => CtrlError::Io {
            dir,
            step,
            peer,
            source,
        },
    }
}

/// `host:port`'s addresses, IPv4 first: perftest is AF_INET only, so a name
/// with both kinds reaches a perftest peer on its first try.
fn resolve_ipv4_first(host: &str, port: u16) -> Result<Vec<SocketAddr>, CtrlError> {
    let mut addrs: Vec<SocketAddr> = (host, port)
        .to_socket_addrs()
        .map_err(|source| CtrlError::Resolve {
            host: host.to_owned(),
            port,
            source,
        })?
        .collect();
    addrs.sort_by_key(|a| !a.is_ipv4());
    Ok(addrs)
}
