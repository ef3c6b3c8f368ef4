//! The seam between the doorbell protocol and the memory it writes.
//!
//! [`Doorbell`](super::doorbell::Doorbell) is generic over [`Mmio`]: the real
//! implementation [`HwMmio`] is a zero-sized type whose methods are the
//! volatile stores and CPU barriers themselves (fully inlined, no cost); the
//! queue model (`crate::model`, feature `model`) implements it to perform the
//! same stores into model memory and record each one, so tests can assert the
//! exact order of doorbell-record, barrier, doorbell and BlueFlame writes.

use super::barrier;

/// Stores and barriers the doorbell protocol needs, in the order it issues them.
pub trait Mmio {
    /// Orders the WQE stores before the doorbell-record store
    /// ([`barrier::store_fence_dma`]).
    fn store_fence_dma(&self);
    /// Orders earlier stores before write-combining stores and flushes them
    /// ([`barrier::store_fence_wc`]).
    fn store_fence_wc(&self);
    /// Stores the SQ doorbell record (`dbrec[MLX5_SND_DBR]`); `raw` is the
    /// memory representation (already big-endian).
    ///
    /// # Safety
    /// `dbrec` must be the valid, 4-byte aligned doorbell record of this SQ.
    unsafe fn write_dbrec(&self, dbrec: *mut u32, raw: u32);
    /// One 8-byte store to the BlueFlame register (an ordinary doorbell);
    /// `raw` holds the first 8 bytes of the last ctrl segment as laid out in
    /// memory. Must be a single 64-bit store, never split.
    ///
    /// # Safety
    /// `reg` must be an 8-byte aligned address inside this SQ's UAR register.
    unsafe fn write_db64(&self, reg: *mut u64, raw: u64);
    /// One 64-byte BlueFlame chunk: whole 16- or 8-byte stores in ascending
    /// address order (never `memcpy`, which may use string instructions
    /// that do not keep that order).
    ///
    /// # Safety
    /// `reg` must be a 64-byte aligned address inside this SQ's UAR register
    /// with 64 bytes of room; `src` must be readable and 64-byte aligned.
    unsafe fn write_bf64(&self, reg: *mut u64, src: *const [u64; 8]);
}

/// The real thing: volatile stores to the mapped doorbell record / UAR page
/// and the architecture's barriers.
#[derive(Clone, Copy, Default, Debug)]
pub struct HwMmio;

impl Mmio for HwMmio {
    #[inline(always)]
    fn store_fence_dma(&self) {
        barrier::store_fence_dma();
    }
    #[inline(always)]
    fn store_fence_wc(&self) {
        barrier::store_fence_wc();
    }
    #[inline(always)]
    unsafe fn write_dbrec(&self, dbrec: *mut u32, raw: u32) {
        // SAFETY: the caller guarantees `dbrec` is this SQ's valid, aligned
        // doorbell record; volatile keeps the store from being elided or merged.
        unsafe { dbrec.write_volatile(raw) }
    }
    #[inline(always)]
    unsafe fn write_db64(&self, reg: *mut u64, raw: u64) {
        // SAFETY: the caller guarantees `reg` is an aligned address in the
        // mapped UAR register; an aligned volatile u64 store is one 64-bit
        // store instruction on x86-64 and aarch64.
        unsafe { reg.write_volatile(raw) }
    }
    #[inline(always)]
    unsafe fn write_bf64(&self, reg: *mut u64, src: *const [u64; 8]) {
        // x86-64: four 16-byte stores, ascending (as UCX's BlueFlame copy;
        // the ring side wrote each 16-byte unit as one store, so the loads
        // are forwarded). Elsewhere: eight 8-byte stores, ascending.
        #[cfg(target_arch = "x86_64")]
        {
            use core::arch::x86_64::__m128i;
            let (s, d) = (src.cast::<__m128i>(), reg.cast::<__m128i>());
            let mut i = 0;
            while i < 4 {
                // SAFETY: the caller guarantees 64 readable bytes at `src`
                // and 64 bytes of room at `reg`, both 64-byte aligned (so
                // each 16-byte access is aligned); volatile keeps each store
                // whole and in order.
                unsafe { d.add(i).write_volatile(s.add(i).read()) };
                i += 1;
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        {
            // SAFETY: the caller guarantees `src` is readable and aligned
            // (ring memory the SQ owns).
            let words = unsafe { src.read() };
            let mut i = 0;
            while i < 8 {
                // SAFETY: the caller guarantees 64 bytes of aligned room at
                // `reg`; the stores go out one by one in ascending order.
                unsafe { reg.add(i).write_volatile(words[i]) };
                i += 1;
            }
        }
    }
}
