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
        // SAFETY: forwarded; the caller's contract is `bf_copy64`'s.
        unsafe { bf_copy64(reg, src) }
    }
}

/// Copies one 64-byte chunk to the BlueFlame register as the architecture
/// write-combines it best (rdma-core's `mmio_memcpy_x64`, UCX's
/// `uct_ib_mlx5_bf_copy_bb`):
/// - x86-64: four 16-byte stores, ascending (as UCX; the ring side wrote
///   each 16-byte unit as one store, so the loads are forwarded);
/// - aarch64: one `ld4`/`st4` pair of four 128-bit NEON registers, rdma-core's
///   `vst4q_u64(dst, vld4q_u64(src))`. The interleaving of `ld4` and `st4`
///   cancels out, so memory gets the bytes unchanged, and the 64 bytes leave
///   in one store instruction. Eight scalar 8-byte stores do not combine on
///   Arm: NVIDIA's kernel patch for mlx5's write-combining test found the
///   u64 loop "failed almost all the time on Grace", and the NIC then
///   fetches the WQE by DMA (right data, the latency BlueFlame exists to
///   save is lost);
/// - elsewhere: eight 8-byte stores, ascending.
///
/// `tests/disasm_bf.rs` reads the release binary and fails unless the copy
/// came out as those vector stores on both architectures.
///
/// # Safety
/// `reg` must be a 64-byte aligned address with 64 bytes of room (a
/// BlueFlame register half); `src` must be readable and 64-byte aligned.
#[inline(always)]
pub unsafe fn bf_copy64(reg: *mut u64, src: *const [u64; 8]) {
    #[cfg(target_arch = "x86_64")]
    {
        use core::arch::x86_64::__m128i;
        let (s, d) = (src.cast::<__m128i>(), reg.cast::<__m128i>());
        let mut i = 0;
        while i < 4 {
            // SAFETY: the caller guarantees 64 readable bytes at `src` and 64 bytes of room
            // at `reg`, both 64-byte aligned (so each 16-byte access is aligned); volatile
            // keeps each store whole and in order.
            unsafe { d.add(i).write_volatile(s.add(i).read()) };
            i += 1;
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        use core::arch::aarch64::{vld4q_u64, vst4q_u64};
        // `st4` is one instruction, so the compiler cannot split or reorder the chunk; the
        // surrounding barriers (`store_fence_wc`, asm without `nomem`) keep it between them.
        // SAFETY: NEON is part of the aarch64 baseline (the target enables it); the caller
        // guarantees 64 readable bytes at `src` and 64 bytes of room at `reg`.
        unsafe { vst4q_u64(reg, vld4q_u64(src.cast::<u64>())) }
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
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
