//! Protection domain.

use std::sync::Arc;

use super::context::Context;
use super::error::{warn_if_failed, Result, VerbsError};
use crate::sys;

/// A protection domain. Holds its context open; MRs, QPs and AHs hold it.
pub struct Pd {
    pd: *mut sys::ibv_pd,
    ctx: Arc<Context>,
}

// SAFETY: PD verbs are thread-safe in libibverbs; the struct only holds the
// pointer and an Arc.
unsafe impl Send for Pd {}
// SAFETY: as above; no unsynchronised mutation through `&Pd`.
unsafe impl Sync for Pd {}

impl Pd {
    pub fn new(ctx: &Arc<Context>) -> Result<Arc<Pd>> {
        // SAFETY: the context is open (held by the Arc).
        let pd = unsafe { sys::ibv_alloc_pd(ctx.raw()) };
        if pd.is_null() {
            return Err(VerbsError::last_os(
                "ibv_alloc_pd",
                format!(
                    "could not allocate a protection domain on {}; the device may be out of \
                     resources (max_pd {})",
                    ctx.name(),
                    ctx.attr().max_pd
                ),
            ));
        }
        Ok(Arc::new(Pd {
            pd,
            ctx: Arc::clone(ctx),
        }))
    }

    pub fn context(&self) -> &Arc<Context> {
        &self.ctx
    }

    /// The raw PD, valid while `self` lives.
    pub fn raw(&self) -> *mut sys::ibv_pd {
        self.pd
    }
}

impl Drop for Pd {
    fn drop(&mut self) {
        // SAFETY: every child holds an Arc<Pd>, so none is left; freed once.
        let ret = unsafe { sys::ibv_dealloc_pd(self.pd) };
        warn_if_failed("ibv_dealloc_pd", ret);
    }
}
