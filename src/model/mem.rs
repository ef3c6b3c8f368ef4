//! Zeroed, aligned memory the model hands out as "device" memory.

use std::alloc::{alloc_zeroed, dealloc, handle_alloc_error, Layout};
use std::ptr::NonNull;

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
