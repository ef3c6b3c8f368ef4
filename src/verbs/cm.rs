//! librdmacm (`-R`): event channel, CM ids, address/route resolution,
//! connect/accept, and the QP attributes the CM computes.
//!
//! Our QPs are never handed to librdmacm (`id->qp` stays NULL): they are
//! created by [`super::Qp`] on our own context, and moved to RTR/RTS with the
//! attributes `rdma_init_qp_attr` returns (the kernel CM's path, PSNs, MTU,
//! timeouts). So one QP type and one teardown serve both connection methods.

use std::net::SocketAddrV4;
use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::error::{errno_of, last_errno, Result, VerbsError};
pub use super::values::CmEventType;
use crate::sys;

/// What a UD (RDMA_PS_UDP) connection's ESTABLISHED event carries: where to
/// send (the address vector, the peer's QPN and Q_Key).
#[derive(Clone, Copy)]
pub struct UdParam {
    pub qp_num: u32,
    pub qkey: u32,
    pub ah_attr: sys::ibv_ah_attr,
}

impl std::fmt::Debug for UdParam {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "UdParam {{ qp_num: {:#x}, qkey: {:#x} }}",
            self.qp_num, self.qkey
        )
    }
}

/// One CM event, copied out and already acked (so ids can be destroyed at any
/// time: `rdma_destroy_id` waits for unacked events).
#[derive(Clone, Copy, Debug)]
pub struct CmEvent {
    pub kind: CmEventType,
    /// Event status (errno-like; for REJECTED the IB reject reason).
    pub status: i32,
    /// ESTABLISHED on a UD id: the peer's address.
    pub ud: Option<UdParam>,
    /// The id the event is for; for CONNECT_REQUEST a new id we now own
    /// (take it with [`CmId::from_request`]).
    id: *mut sys::rdma_cm_id,
}

impl CmEvent {
    /// Whether the event is for `id`.
    pub fn is_for(&self, id: &CmId) -> bool {
        self.id == id.raw()
    }
}

/// `rdma_event_channel`: where CM events of its ids are delivered.
pub struct EventChannel {
    ch: NonNull<sys::rdma_event_channel>,
}

// SAFETY: librdmacm's calls on a channel are thread-safe (internally locked);
// we only read events through &self.
unsafe impl Send for EventChannel {}
// SAFETY: as above.
unsafe impl Sync for EventChannel {}

/// How `-R` fails when the kernel has no RDMA CM: the fix.
const NO_CM_HINT: &str = "the RDMA connection manager is not available: load the kernel modules \
     (`modprobe rdma_ucm`) so /dev/infiniband/rdma_cm exists, or run without -R";

impl EventChannel {
    pub fn new() -> Result<Arc<EventChannel>> {
        // SAFETY: no preconditions; NULL on failure.
        let ch = unsafe { sys::rdma_create_event_channel() };
        let ch = NonNull::new(ch)
            .ok_or_else(|| VerbsError::last_os("rdma_create_event_channel", NO_CM_HINT))?;
        let this = EventChannel { ch };
        // Non-blocking, so `next` can bound its wait with poll(2).
        let fd = this.fd();
        // SAFETY: fcntl on the channel's own open fd; no memory involved.
        let ok = unsafe {
            let fl = libc::fcntl(fd, libc::F_GETFL);
            fl >= 0 && libc::fcntl(fd, libc::F_SETFL, fl | libc::O_NONBLOCK) == 0
        };
        if !ok {
            return Err(VerbsError::last_os(
                "fcntl(rdma_cm channel)",
                "could not make the CM event channel non-blocking",
            ));
        }
        Ok(Arc::new(this))
    }

    pub fn fd(&self) -> RawFd {
        // SAFETY: the channel is live while self is.
        unsafe { self.ch.as_ref().fd }
    }

    fn raw(&self) -> *mut sys::rdma_event_channel {
        self.ch.as_ptr()
    }

    /// The next event, waiting at most `timeout`; `None` if none came.
    pub fn next(&self, timeout: Duration) -> Result<Option<CmEvent>> {
        if !poll_in(self.fd(), timeout) {
            return Ok(None);
        }
        let mut ev: *mut sys::rdma_cm_event = std::ptr::null_mut();
        // SAFETY: the channel is live; `ev` is a valid out-pointer. The fd is
        // non-blocking, so a spurious wakeup returns EAGAIN instead of blocking.
        let ret = unsafe { sys::rdma_get_cm_event(self.raw(), &mut ev) };
        if ret != 0 {
            let e = last_errno();
            if e == libc::EAGAIN || e == libc::EINTR {
                return Ok(None);
            }
            return Err(VerbsError::new(
                "rdma_get_cm_event",
                e,
                "reading the CM event channel failed",
            ));
        }
        // SAFETY: rdma_get_cm_event succeeded, so `ev` points to a live event
        // until it is acked just below.
        let out = unsafe {
            let kind = CmEventType((*ev).event);
            let id = (*ev).id;
            // The union holds `ud` for events of UD ids (librdmacm fills it
            // from the SIDR reply).
            let is_ud = !id.is_null() && (*id).ps == sys::RDMA_PS_UDP;
            let ud = (is_ud && kind == CmEventType::ESTABLISHED).then(|| {
                let u = (*ev).param.ud;
                UdParam {
                    qp_num: u.qp_num,
                    qkey: u.qkey,
                    ah_attr: u.ah_attr,
                }
            });
            CmEvent {
                kind,
                status: (*ev).status,
                ud,
                id,
            }
        };
        // SAFETY: acked exactly once; nothing reads `ev` afterwards.
        unsafe { sys::rdma_ack_cm_event(ev) };
        Ok(Some(out))
    }
}

impl Drop for EventChannel {
    fn drop(&mut self) {
        // SAFETY: every CmId holds an Arc of its channel, so none is left.
        unsafe { sys::rdma_destroy_event_channel(self.ch.as_ptr()) };
    }
}

/// poll(2) one fd for input; true if readable (or in error: the next call reports it).
pub(crate) fn poll_in(fd: RawFd, timeout: Duration) -> bool {
    poll_any(&[fd], timeout) != 0
}

/// poll(2) up to two fds for input: a bit set per readable fd (bit i = fds[i]).
pub fn poll_any(fds: &[RawFd], timeout: Duration) -> u32 {
    let mut p = [libc::pollfd {
        fd: -1,
        events: libc::POLLIN,
        revents: 0,
    }; 2];
    let n = fds.len().min(2);
    for (slot, &fd) in p.iter_mut().zip(&fds[..n]) {
        slot.fd = fd;
    }
    let ms = timeout.as_millis().min(i32::MAX as u128) as i32;
    // SAFETY: `n` valid pollfds on the stack.
    let r = unsafe { libc::poll(p.as_mut_ptr(), n as libc::nfds_t, ms) };
    if r <= 0 {
        return 0;
    }
    (0..n)
        .filter(|&i| p[i].revents != 0)
        .fold(0, |m, i| m | 1 << i)
}

/// Connection parameters perftest passes to rdma_connect/rdma_accept.
#[derive(Clone, Copy, Debug, Default)]
pub struct ConnParam {
    /// Our QP's number (our QPs are not attached to the id).
    pub qp_num: u32,
    /// READ/ATOMIC: outstanding reads each way (perftest: out_reads).
    pub responder_resources: u8,
    pub initiator_depth: u8,
    pub retry_count: u8,
    pub rnr_retry_count: u8,
    /// `-T`: not part of rdma_conn_param; set on the active id with
    /// [`CmId::set_tos`] after address resolution, as perftest does.
    pub tos: Option<u8>,
    /// `--bind_source_ip`: not part of rdma_conn_param either; the source
    /// address [`CmId::resolve_addr`] binds the id to.
    pub src: Option<std::net::Ipv4Addr>,
}

impl ConnParam {
    fn raw(&self) -> sys::rdma_conn_param {
        sys::rdma_conn_param {
            private_data: std::ptr::null(),
            private_data_len: 0,
            responder_resources: self.responder_resources,
            initiator_depth: self.initiator_depth,
            flow_control: 0,
            retry_count: self.retry_count,
            rnr_retry_count: self.rnr_retry_count,
            srq: 0,
            qp_num: self.qp_num,
        }
    }
}

/// One `rdma_cm_id` (RDMA_PS_TCP for RC, RDMA_PS_UDP for UD). Destroyed on drop.
pub struct CmId {
    id: NonNull<sys::rdma_cm_id>,
    ch: Arc<EventChannel>,
}

// SAFETY: librdmacm calls on an id are thread-safe; we hold no Rust-side state
// that is mutated through &self.
unsafe impl Send for CmId {}
// SAFETY: as above.
unsafe impl Sync for CmId {}

impl std::fmt::Debug for CmId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CmId").field("id", &self.id).finish()
    }
}

fn sockaddr_in(a: SocketAddrV4) -> libc::sockaddr_in {
    libc::sockaddr_in {
        sin_family: libc::AF_INET as libc::sa_family_t,
        sin_port: a.port().to_be(),
        sin_addr: libc::in_addr {
            s_addr: u32::from(*a.ip()).to_be(),
        },
        sin_zero: [0; 8],
    }
}

impl CmId {
    pub fn new(ch: &Arc<EventChannel>) -> Result<CmId> {
        Self::with_ps(ch, false)
    }

    /// An id for RC (`ud` false: RDMA_PS_TCP) or UD (RDMA_PS_UDP, SIDR) QPs.
    pub fn with_ps(ch: &Arc<EventChannel>, ud: bool) -> Result<CmId> {
        let ps = if ud {
            sys::RDMA_PS_UDP
        } else {
            sys::RDMA_PS_TCP
        };
        let mut id: *mut sys::rdma_cm_id = std::ptr::null_mut();
        // SAFETY: the channel is live; `id` is a valid out-pointer.
        let ret = unsafe { sys::rdma_create_id(ch.raw(), &mut id, std::ptr::null_mut(), ps) };
        match NonNull::new(id) {
            Some(id) if ret == 0 => Ok(CmId {
                id,
                ch: Arc::clone(ch),
            }),
            _ => Err(VerbsError::new("rdma_create_id", errno_of(ret), NO_CM_HINT)),
        }
    }

    /// Takes ownership of the id a CONNECT_REQUEST event created.
    pub fn from_request(ch: &Arc<EventChannel>, ev: &CmEvent) -> Option<CmId> {
        (ev.kind == CmEventType::CONNECT_REQUEST)
            .then(|| NonNull::new(ev.id))
            .flatten()
            .map(|id| CmId {
                id,
                ch: Arc::clone(ch),
            })
    }

    fn raw(&self) -> *mut sys::rdma_cm_id {
        self.id.as_ptr()
    }

    /// Starts address resolution (answered by ADDR_RESOLVED / ADDR_ERROR).
    /// `src` (perftest's --bind_source_ip) binds the id to that address first.
    pub fn resolve_addr(
        &self,
        dst: SocketAddrV4,
        src: Option<std::net::Ipv4Addr>,
        timeout_ms: i32,
    ) -> Result<()> {
        let mut sin = sockaddr_in(dst);
        let mut src_sin = src.map(|ip| sockaddr_in(SocketAddrV4::new(ip, 0)));
        let src_ptr = match src_sin.as_mut() {
            Some(s) => (s as *mut libc::sockaddr_in).cast(),
            None => std::ptr::null_mut(),
        };
        // SAFETY: the id is live; `sin` (and `src_sin` when given) are valid
        // sockaddr_in values that outlive the call (librdmacm copies them).
        let ret = unsafe {
            sys::rdma_resolve_addr(
                self.raw(),
                src_ptr,
                (&mut sin as *mut libc::sockaddr_in).cast(),
                timeout_ms,
            )
        };
        VerbsError::check(ret, "rdma_resolve_addr", || {
            format!("{dst}: give the server's IPv4 address on the RDMA interface")
        })
    }

    /// Starts route resolution (answered by ROUTE_RESOLVED / ROUTE_ERROR).
    pub fn resolve_route(&self, timeout_ms: i32) -> Result<()> {
        // SAFETY: the id is live and its address resolved.
        let ret = unsafe { sys::rdma_resolve_route(self.raw(), timeout_ms) };
        VerbsError::check(ret, "rdma_resolve_route", || {
            "no RDMA route to the server: give an address configured on the RDMA netdev \
             (not 127.0.0.1)"
                .into()
        })
    }

    /// Binds to INADDR_ANY:`port` and listens.
    pub fn listen(&self, port: u16, backlog: i32) -> Result<()> {
        let mut sin = sockaddr_in(SocketAddrV4::new(std::net::Ipv4Addr::UNSPECIFIED, port));
        // SAFETY: the id is live; `sin` is valid for the call.
        let ret =
            unsafe { sys::rdma_bind_addr(self.raw(), (&mut sin as *mut libc::sockaddr_in).cast()) };
        VerbsError::check(ret, "rdma_bind_addr", || {
            format!("port {port} is in use by another rdma_cm listener; pick another with -p")
        })?;
        // SAFETY: the id is live and bound.
        let ret = unsafe { sys::rdma_listen(self.raw(), backlog) };
        VerbsError::check(ret, "rdma_listen", || format!("listening on port {port}"))
    }

    pub fn connect(&self, p: &ConnParam) -> Result<()> {
        let mut raw = p.raw();
        // SAFETY: the id is live with a resolved route; `raw` outlives the call.
        let ret = unsafe { sys::rdma_connect(self.raw(), &mut raw) };
        VerbsError::check(ret, "rdma_connect", || {
            format!("QP {:#x}: sending the connect request failed", p.qp_num)
        })
    }

    pub fn accept(&self, p: &ConnParam) -> Result<()> {
        let mut raw = p.raw();
        // SAFETY: the id came from a CONNECT_REQUEST; `raw` outlives the call.
        let ret = unsafe { sys::rdma_accept(self.raw(), &mut raw) };
        VerbsError::check(ret, "rdma_accept", || {
            format!("QP {:#x}: accepting the connection failed", p.qp_num)
        })
    }

    /// `rdma_set_option(RDMA_OPTION_ID_TOS)`: the ToS of the connection's
    /// path (RoCE: the GRH traffic class, so the IP DSCP/ECN byte).
    pub fn set_tos(&self, tos: u8) -> Result<()> {
        let mut v = tos;
        // SAFETY: the id is live; the option is one byte (librdmacm checks the
        // length and copies the value).
        let ret = unsafe {
            sys::rdma_set_option(
                self.raw(),
                sys::RDMA_OPTION_ID as i32,
                sys::RDMA_OPTION_ID_TOS as i32,
                (&mut v as *mut u8).cast(),
                1,
            )
        };
        VerbsError::check(ret, "rdma_set_option(RDMA_OPTION_ID_TOS)", || {
            format!("the RDMA CM refused ToS {tos}")
        })
    }

    /// Active side without an attached QP: sends the RTU once our QP is RTS.
    pub fn establish(&self) -> Result<()> {
        // SAFETY: the id is live and got CONNECT_RESPONSE.
        let ret = unsafe { sys::rdma_establish(self.raw()) };
        VerbsError::check(ret, "rdma_establish", || "sending the RTU failed".into())
    }

    /// Best effort (teardown): the peer gets DISCONNECTED.
    pub fn disconnect(&self) {
        // SAFETY: the id is live; disconnecting an unconnected id just fails.
        unsafe { sys::rdma_disconnect(self.raw()) };
    }

    /// Refuses a connect request (best effort).
    pub fn reject(&self) {
        // SAFETY: the id came from a CONNECT_REQUEST; no private data.
        unsafe { sys::rdma_reject(self.raw(), std::ptr::null(), 0) };
    }

    /// The attributes (and mask) the CM wants for moving a QP to `state`.
    pub fn qp_attr(&self, state: u32) -> Result<(sys::ibv_qp_attr, u32)> {
        let mut attr = sys::ibv_qp_attr {
            qp_state: state,
            ..Default::default()
        };
        let mut mask: i32 = 0;
        // SAFETY: the id is live; both out-pointers are valid.
        let ret = unsafe { sys::rdma_init_qp_attr(self.raw(), &mut attr, &mut mask) };
        VerbsError::check(ret, "rdma_init_qp_attr", || {
            format!("the CM has no attributes for QP state {state} yet (connection not far enough)")
        })?;
        Ok((attr, mask as u32))
    }

    /// Name of the device the id is bound to (after address resolution or a
    /// connect request), e.g. to check it is the one given with -d.
    pub fn device_name(&self) -> Option<String> {
        // SAFETY: the id is live; `verbs` is NULL or a context librdmacm keeps
        // open while the id exists, whose `device` is valid.
        unsafe {
            let verbs = self.id.as_ref().verbs;
            if verbs.is_null() || (*verbs).device.is_null() {
                return None;
            }
            let name = sys::ibv_get_device_name((*verbs).device);
            (!name.is_null()).then(|| {
                std::ffi::CStr::from_ptr(name)
                    .to_string_lossy()
                    .into_owned()
            })
        }
    }

    /// Whether the id is for UD QPs (RDMA_PS_UDP).
    pub fn is_ud(&self) -> bool {
        // SAFETY: the id is live; `ps` is set at creation.
        unsafe { self.id.as_ref().ps == sys::RDMA_PS_UDP }
    }

    /// The peer's IPv4 address and port (after a connect request or address
    /// resolution), for messages.
    pub fn peer_v4(&self) -> Option<SocketAddrV4> {
        // SAFETY: the id is live; rdma_get_peer_addr returns a pointer into
        // it (the route's destination sockaddr).
        let sa = unsafe { sys::rdma_get_peer_addr(self.raw()) };
        if sa.is_null() {
            return None;
        }
        // SAFETY: `sa` points to a sockaddr_storage-sized union in the id;
        // the family decides how it is read.
        unsafe {
            if (*sa).sa_family as i32 != libc::AF_INET {
                return None;
            }
            let sin = &*(sa as *const libc::sockaddr_in);
            Some(SocketAddrV4::new(
                u32::from_be(sin.sin_addr.s_addr).into(),
                u16::from_be(sin.sin_port),
            ))
        }
    }

    /// The channel this id reports to.
    pub fn channel(&self) -> &Arc<EventChannel> {
        &self.ch
    }
}

impl Drop for CmId {
    fn drop(&mut self) {
        // SAFETY: destroyed once; every event was acked in EventChannel::next,
        // so this does not block; no QP is attached (ours are separate).
        unsafe { sys::rdma_destroy_id(self.id.as_ptr()) };
    }
}

/// Waits for `want` on `id` until `until`, skipping events for other ids and
/// ESTABLISHED/TIMEWAIT noise. Any other event for `id` is an error that names
/// it (REJECTED, UNREACHABLE, ... with status). `cancel` is polled between
/// waits (Ctrl-C).
pub fn expect(
    id: &CmId,
    want: CmEventType,
    until: Instant,
    cancel: &dyn Fn() -> bool,
) -> std::result::Result<CmEvent, CmWaitError> {
    loop {
        if cancel() {
            return Err(CmWaitError::Cancelled);
        }
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(CmWaitError::Timeout(want));
        }
        // Short slices, so `cancel` is seen within 100 ms.
        let ev = match id.channel().next(left.min(Duration::from_millis(100))) {
            Ok(Some(ev)) => ev,
            Ok(None) => continue,
            Err(e) => return Err(CmWaitError::Verbs(e)),
        };
        if !ev.is_for(id) && ev.kind != want {
            continue;
        }
        if ev.kind == want {
            return Ok(ev);
        }
        if ev.kind == CmEventType::ESTABLISHED || ev.kind == CmEventType::TIMEWAIT_EXIT {
            continue;
        }
        return Err(CmWaitError::Unexpected { want, got: ev });
    }
}

/// Why [`expect`] did not return the wanted event.
#[derive(Debug)]
pub enum CmWaitError {
    Timeout(CmEventType),
    Cancelled,
    Unexpected { want: CmEventType, got: CmEvent },
    Verbs(VerbsError),
}

impl std::fmt::Display for CmWaitError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CmWaitError::Timeout(w) => write!(f, "no {} event in time", w.name()),
            CmWaitError::Cancelled => f.write_str("interrupted"),
            CmWaitError::Unexpected { want, got } => {
                write!(f, "expected {} but got {}", want.name(), got.kind.name())?;
                if got.status != 0 {
                    write!(f, " (status {})", got.status)?;
                }
                Ok(())
            }
            CmWaitError::Verbs(e) => write!(f, "{e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sockaddr_is_network_order() {
        let s = sockaddr_in("169.254.7.1:18515".parse().unwrap());
        assert_eq!(s.sin_family as i32, libc::AF_INET);
        assert_eq!(u16::from_be(s.sin_port), 18515);
        assert_eq!(s.sin_addr.s_addr.to_ne_bytes(), [169, 254, 7, 1]);
    }

    #[test]
    fn conn_param_carries_our_qp_number() {
        let p = ConnParam {
            qp_num: 0x1234,
            responder_resources: 16,
            initiator_depth: 16,
            retry_count: 7,
            rnr_retry_count: 7,
            tos: Some(96),
            src: None,
        };
        let r = p.raw();
        assert_eq!(r.qp_num, 0x1234);
        assert_eq!((r.retry_count, r.rnr_retry_count), (7, 7));
        assert!(r.private_data.is_null());
    }
}
