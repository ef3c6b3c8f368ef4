//! Completion queue, optionally with a completion channel (`-e/--events`).

use std::ptr::NonNull;
use std::sync::Arc;

use super::context::Context;
use super::error::{last_errno, warn_if_failed, Result, VerbsError};
use crate::sys;

/// A completion queue. Polling goes through `crate::post::verbs_cq` or the
/// direct mlx5 poller, both from [`Cq::raw`].
pub struct Cq {
    cq: NonNull<sys::ibv_cq>,
    channel: Option<NonNull<sys::ibv_comp_channel>>,
    ctx: Arc<Context>,
}

// SAFETY: CQ control verbs are thread-safe; polling needs `&mut` on the
// poller objects, which hold their own Arc<Cq>.
unsafe impl Send for Cq {}
// SAFETY: as above; `&Cq` only offers thread-safe verbs.
unsafe impl Sync for Cq {}

impl Cq {
    /// A CQ of at least `cqe` entries; `with_channel` adds a completion
    /// channel for [`Cq::req_notify`] / [`Cq::wait_event`].
    pub fn new(ctx: &Arc<Context>, cqe: u32, with_channel: bool) -> Result<Arc<Cq>> {
        let channel = if with_channel {
            // SAFETY: the context is open (held by the Arc).
            let ch = unsafe { sys::ibv_create_comp_channel(ctx.raw()) };
            match NonNull::new(ch) {
                Some(ch) => Some(ch),
                None => {
                    return Err(VerbsError::last_os(
                        "ibv_create_comp_channel",
                        format!(
                            "could not create a completion channel on {}; run without \
                             -e/--events (polling mode)",
                            ctx.name()
                        ),
                    ))
                }
            }
        } else {
            None
        };
        let ch_ptr = channel.map_or(std::ptr::null_mut(), NonNull::as_ptr);
        let n = i32::try_from(cqe).unwrap_or(i32::MAX);
        // SAFETY: the context is open; `ch_ptr` is NULL or a live channel.
        let cq = unsafe { sys::ibv_create_cq(ctx.raw(), n, std::ptr::null_mut(), ch_ptr, 0) };
        match NonNull::new(cq) {
            Some(cq) => Ok(Arc::new(Cq {
                cq,
                channel,
                ctx: Arc::clone(ctx),
            })),
            None => {
                let errno = last_errno();
                if let Some(ch) = channel {
                    // SAFETY: created above, no CQ uses it.
                    unsafe { sys::ibv_destroy_comp_channel(ch.as_ptr()) };
                }
                Err(VerbsError::new(
                    "ibv_create_cq",
                    errno,
                    format!(
                        "a CQ of {cqe} entries on {} (device max_cqe {}); lower -t/--tx-depth, \
                         -r/--rx-depth or -q/--qp",
                        ctx.name(),
                        ctx.attr().max_cqe
                    ),
                ))
            }
        }
    }

    /// The raw CQ, valid while `self` lives.
    pub fn raw(&self) -> *mut sys::ibv_cq {
        self.cq.as_ptr()
    }

    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    /// Actual capacity (the provider may round up).
    pub fn cqe(&self) -> u32 {
        // SAFETY: the CQ is live; `cqe` is set at creation.
        let n = unsafe { self.cq.as_ref().cqe };
        u32::try_from(n).unwrap_or(0)
    }

    pub fn has_channel(&self) -> bool {
        self.channel.is_some()
    }

    /// The completion channel's fd (readable when an event is pending), to
    /// bound a wait with poll(2) before [`Cq::wait_event`].
    pub fn channel_fd(&self) -> Option<std::os::fd::RawFd> {
        // SAFETY: the channel is live while self is; `fd` is set at creation.
        self.channel.map(|ch| unsafe { ch.as_ref().fd })
    }

    /// Arms the CQ for one completion event.
    pub fn req_notify(&self, solicited_only: bool) -> Result<()> {
        // SAFETY: the CQ is live. (ibv_req_notify_cq is an inline calling the
        // provider's ops; the wrapped symbol is used.)
        let ret = unsafe { sys::ibv_req_notify_cq(self.raw(), i32::from(solicited_only)) };
        VerbsError::check(ret, "ibv_req_notify_cq", || {
            "could not arm the CQ; run without -e/--events".into()
        })?;
        Ok(())
    }

    /// Waits up to `timeout_ms` for the channel to deliver an event for this
    /// CQ and acks it: true if one came. poll(2) on the channel fd first, so a
    /// stop request (Ctrl-C) is seen within the timeout instead of blocking in
    /// `ibv_get_cq_event`. Re-arm with [`Cq::req_notify`] before polling again.
    pub fn wait_event_for(&self, timeout_ms: i32) -> Result<bool> {
        let Some(ch) = self.channel else {
            return self.wait_event().map(|()| true);
        };
        // SAFETY: `ch` is live while `self` is; `fd` is set at creation.
        let fd = unsafe { ch.as_ref().fd };
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd, count 1.
        let n = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
        if n < 0 {
            let e = last_errno();
            if e == libc::EINTR {
                return Ok(false);
            }
            return Err(VerbsError::new(
                "poll",
                e,
                "waiting on the completion channel failed; run without -e/--events",
            ));
        }
        if n == 0 || pfd.revents & libc::POLLIN == 0 {
            return Ok(false);
        }
        self.wait_event().map(|()| true)
    }

    /// Blocks until the channel delivers an event for this CQ, and acks it.
    /// Re-arm with [`Cq::req_notify`] before polling again.
    pub fn wait_event(&self) -> Result<()> {
        let Some(ch) = self.channel else {
            return Err(VerbsError::new(
                "ibv_get_cq_event",
                0,
                "this CQ has no completion channel; create it with with_channel = true",
            ));
        };
        let mut cq: *mut sys::ibv_cq = std::ptr::null_mut();
        let mut cq_ctx: *mut std::os::raw::c_void = std::ptr::null_mut();
        // SAFETY: `ch` is live while `self` is; out-pointers are valid.
        let ret = unsafe { sys::ibv_get_cq_event(ch.as_ptr(), &mut cq, &mut cq_ctx) };
        if ret != 0 {
            return Err(VerbsError::last_os(
                "ibv_get_cq_event",
                "waiting for a completion event failed",
            ));
        }
        // SAFETY: `cq` is the CQ the event came for (ours: the channel is
        // private to this CQ); exactly one event is acked.
        unsafe { sys::ibv_ack_cq_events(cq, 1) };
        Ok(())
    }
}

impl Drop for Cq {
    fn drop(&mut self) {
        // SAFETY: QPs and pollers hold an Arc<Cq>, so none is left; every
        // event was acked in wait_event; destroyed once, channel after.
        let ret = unsafe { sys::ibv_destroy_cq(self.cq.as_ptr()) };
        warn_if_failed("ibv_destroy_cq", ret);
        if let Some(ch) = self.channel {
            // SAFETY: its only CQ is gone; destroyed once.
            unsafe { sys::ibv_destroy_comp_channel(ch.as_ptr()) };
        }
    }
}
