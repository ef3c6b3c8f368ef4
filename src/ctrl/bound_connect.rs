//! `--bind_source_ip`: a TCP connect from a chosen source address (perftest
//! `ethernet_client_connect`: socket, bind, connect). std's `TcpStream` has
//! no bind-before-connect, so the socket, bind and connect calls go to libc;
//! the socket is owned by a `TcpStream` from its creation on, so every error
//! path closes it.

use std::io;
use std::mem::size_of;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::time::Duration;

/// A `sockaddr_in`/`sockaddr_in6` for `a`, as bytes long enough for either.
fn raw_addr(a: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // An all-zero sockaddr_storage is a valid "unspecified" address; the
    // family and fields are filled in below.
    let mut st: libc::sockaddr_storage = unsafe_zeroed();
    let len = match a {
        SocketAddr::V4(v4) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: v4.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(v4.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            write_into(&mut st, sin);
            size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(v6) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: v6.port().to_be(),
                sin6_flowinfo: v6.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: v6.ip().octets(),
                },
                sin6_scope_id: v6.scope_id(),
            };
            write_into(&mut st, sin6);
            size_of::<libc::sockaddr_in6>()
        }
    };
    (st, len as libc::socklen_t)
}

fn unsafe_zeroed() -> libc::sockaddr_storage {
    // SAFETY: sockaddr_storage is plain old data (integers and byte arrays);
    // all-zero bytes are a valid value of it.
    unsafe { std::mem::zeroed() }
}

/// Copies a sockaddr_in/_in6 to the front of the storage.
fn write_into<T: Copy>(st: &mut libc::sockaddr_storage, v: T) {
    const { assert!(size_of::<T>() <= size_of::<libc::sockaddr_storage>()) };
    // SAFETY: T (sockaddr_in or sockaddr_in6) fits in sockaddr_storage (checked
    // above at compile time), and sockaddr_storage is aligned for every
    // sockaddr type by definition; the write stays inside `st`.
    unsafe { std::ptr::write((st as *mut libc::sockaddr_storage).cast::<T>(), v) }
}

/// Why [`connect_from`] failed: the source address (fatal: retrying cannot
/// help, perftest gives up too) or the connect itself (the server may not
/// listen yet).
#[derive(Debug)]
pub enum FromError {
    Source(io::Error),
    Connect(io::Error),
}

impl std::fmt::Display for FromError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FromError::Source(e) | FromError::Connect(e) => e.fmt(f),
        }
    }
}

/// The socket call shared by bind(2) and connect(2).
type AddrCall =
    unsafe extern "C" fn(libc::c_int, *const libc::sockaddr, libc::socklen_t) -> libc::c_int;

/// `call` (bind or connect) on `stream`'s socket with `addr`; the errno as
/// an error.
fn at_addr(stream: &TcpStream, addr: &SocketAddr, call: AddrCall) -> io::Result<()> {
    let (a, len) = raw_addr(addr);
    // SAFETY: the fd is a live socket (owned by `stream`); `a` is a valid
    // sockaddr of `len` bytes that outlives the call (the kernel copies it).
    let r = unsafe {
        call(
            stream.as_raw_fd(),
            (&a as *const libc::sockaddr_storage).cast(),
            len,
        )
    };
    if r != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Connects to `dst` from `src` (port 0: the kernel picks one), giving up
/// after `timeout` (SO_SNDTIMEO bounds a blocking connect on Linux).
pub fn connect_from(
    src: SocketAddr,
    dst: SocketAddr,
    timeout: Duration,
) -> Result<TcpStream, FromError> {
    if src.is_ipv4() != dst.is_ipv4() {
        return Err(FromError::Source(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "source {} and server {} are of different address families",
                src.ip(),
                dst
            ),
        )));
    }
    let family = if dst.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    // SAFETY: socket(2) takes no pointers; its result is checked below.
    let fd = unsafe { libc::socket(family, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(FromError::Source(io::Error::last_os_error()));
    }
    // SAFETY: `fd` is a socket we just created and nothing else owns.
    let stream = TcpStream::from(unsafe { OwnedFd::from_raw_fd(fd) });
    stream
        .set_write_timeout(Some(timeout.max(Duration::from_millis(1))))
        .map_err(FromError::Connect)?;
    if let Err(e) = at_addr(&stream, &src, libc::bind) {
        return Err(FromError::Source(io::Error::new(
            e.kind(),
            format!(
                "bind to source {}: {e} (give an address of this host, see `ip addr`)",
                src.ip()
            ),
        )));
    }
    at_addr(&stream, &dst, libc::connect).map_err(FromError::Connect)?;
    stream.set_write_timeout(None).map_err(FromError::Connect)?;
    Ok(stream)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn binds_the_source_then_connects() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let dst = l.local_addr().unwrap();
        // 127.0.0.2 is ours too (all of 127/8 is loopback): the server sees it.
        let src: SocketAddr = "127.0.0.2:0".parse().unwrap();
        let s = connect_from(src, dst, Duration::from_secs(5)).unwrap();
        assert_eq!(s.local_addr().unwrap().ip(), src.ip());
        let (_c, peer) = l.accept().unwrap();
        assert_eq!(peer.ip(), src.ip());
    }

    #[test]
    fn errors_name_the_problem() {
        let dst: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let e = connect_from("[::1]:0".parse().unwrap(), dst, Duration::from_secs(1))
            .unwrap_err()
            .to_string();
        assert!(e.contains("different address families"), "{e}");
        // 169.254.254.254 is not an address of this host.
        let e = connect_from(
            "169.254.254.254:0".parse().unwrap(),
            dst,
            Duration::from_secs(1),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("bind to source 169.254.254.254"), "{e}");
    }
}
