//! Zeroed, aligned memory the model hands out as "device" memory.

use std::alloc::{alloc_zeroed, dealloc, handle_alloc_error, Layout};
use std::ptr::NonNull;

use super::config::RecvSpec;

/// One zeroed allocation, freed on drop.
pub(crate) struct Region {
    ptr: NonNull<u8>,
    layout: Layout,
}

// SAFETY: a Region is an owned allocation; all concurrent access to its bytes
// goes through raw pointers under the model's protocol (atomics for shared
// words, disjoint ranges otherwise), never through references.
unsafe impl Send for Region {}
// SAFETY: as above.
unsafe impl Sync for Region {}

impl Region {
    /// `len` zeroed bytes aligned to `align` (a power of two).
    pub(crate) fn new(len: usize, align: usize) -> Self {
        let layout = match Layout::from_size_align(len.max(1), align) {
            Ok(l) => l,
            Err(_) => panic!("model: bad region layout {len}/{align}"),
        };
        // SAFETY: the layout has a non-zero size.
        let p = unsafe { alloc_zeroed(layout) };
        let Some(ptr) = NonNull::new(p) else {
            handle_alloc_error(layout)
        };
        Self { ptr, layout }
    }
    pub(crate) fn ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
    pub(crate) fn len(&self) -> usize {
        self.layout.size()
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout, freed once.
        unsafe { dealloc(self.ptr.as_ptr(), self.layout) }
    }
}

/// One QP's memory: its SQ ring, doorbell record and UAR page.
pub(crate) struct QpMem {
    pub(crate) sq: Region,
    pub(crate) dbrec: Region,
    pub(crate) uar: Region,
}

pub(crate) struct Mem {
    pub(crate) qps: Vec<QpMem>,
    pub(crate) cq: Region,
    pub(crate) cq_dbrec: Region,
    /// The CQ's UAR (arm doorbells; the poller never arms).
    pub(crate) cq_uar: Region,
    /// The peers' receive rings (`ModelConfig::recv`): one per QP, or one SRQ.
    pub(crate) recv: Vec<RecvMem>,
}

/// One receive ring's memory.
pub(crate) struct RecvMem {
    pub(crate) buf: Region,
    /// Word 0: the posted count (RQ: `dbrec[MLX5_RCV_DBR]`; SRQ: its record).
    pub(crate) dbrec: Region,
}

impl RecvMem {
    pub(crate) fn new(spec: &RecvSpec) -> Self {
        Self {
            buf: Region::new((spec.slots * spec.stride) as usize, 4096),
            dbrec: Region::new(64, 64),
        }
    }
}
