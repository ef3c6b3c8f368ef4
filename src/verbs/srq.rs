//! Shared receive queues (`--use-srq`): one receive queue the QPs of a side
//! share, as perftest creates it (`ibv_create_srq`, max_wr = rx depth, one SGE).

use std::ptr::NonNull;
use std::sync::Arc;

use super::error::{errno_of, last_errno, Result, VerbsError};
use super::pd::Pd;
use crate::sys;

/// A basic SRQ of a PD, destroyed on drop (after the QPs that use it: each
/// holds an `Arc`).
pub struct Srq {
    srq: NonNull<sys::ibv_srq>,
    max_wr: u32,
    _pd: Arc<Pd>,
}

// SAFETY: SRQ verbs are thread-safe; posting goes through `&mut` post objects.
unsafe impl Send for Srq {}
// SAFETY: as above.
unsafe impl Sync for Srq {}

impl Srq {
    /// `ibv_create_srq` with `max_wr` receives of one SGE.
    pub fn new(pd: &Arc<Pd>, max_wr: u32) -> Result<Arc<Srq>> {
        let mut a = sys::ibv_srq_init_attr {
            attr: sys::ibv_srq_attr {
                max_wr,
                max_sge: 1,
                srq_limit: 0,
            },
            ..Default::default()
        };
        // SAFETY: the PD is live (Arc) and `a` an initialised in/out struct.
        let p = unsafe { sys::ibv_create_srq(pd.raw(), &mut a) };
        match NonNull::new(p) {
            Some(srq) => Ok(Arc::new(Srq {
                srq,
                max_wr,
                _pd: Arc::clone(pd),
            })),
            None => {
                let max = pd.context().attr().raw.max_srq_wr;
                Err(VerbsError::last_os(
                    "ibv_create_srq",
                    format!(
                        "--use-srq: {} could not create a shared receive queue of {max_wr} \
                         receives (device max_srq_wr {max}); lower -r/--rx-depth, or drop --use-srq",
                        pd.context().name()
                    ),
                ))
            }
        }
    }

    /// The raw SRQ, valid while `self` lives.
    pub fn raw(&self) -> *mut sys::ibv_srq {
        self.srq.as_ptr()
    }

    pub fn max_wr(&self) -> u32 {
        self.max_wr
    }
}

impl Drop for Srq {
    fn drop(&mut self) {
        // SAFETY: created once, destroyed once, after every QP holding it.
        let ret = unsafe { sys::ibv_destroy_srq(self.srq.as_ptr()) };
        if ret != 0 {
            let e = if ret < 0 { last_errno() } else { errno_of(ret) };
            eprintln!("warning: ibv_destroy_srq failed: errno {e}");
        }
    }
}
