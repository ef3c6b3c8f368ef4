//! CPU barriers for talking to the NIC, named by what they order
//! (as in Linux `rust/kernel/io.rs`), mapped like rdma-core's
//! `util/udma_barrier.h`. Self-contained (`core` only) so it can be
//! compile-checked for aarch64 on its own.
//!
//! | here                | rdma-core                 | x86-64           | aarch64     |
//! |---------------------|---------------------------|------------------|-------------|
//! | `store_fence_dma`   | `udma_to_device_barrier`  | compiler barrier | `dmb oshst` |
//! | `store_fence_wc`    | `mmio_wc_start` / `mmio_flush_writes` | `sfence` | `dsb st` |
//! | `load_fence_dma`    | `udma_from_device_barrier`| `lfence`         | `dmb oshld` |

#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
use core::sync::atomic::{fence, Ordering};

/// Orders earlier stores to DMA-visible write-back memory (the WQEs) before
/// later ones (the doorbell record), as seen by the NIC.
///
/// x86-64 keeps stores in program order (TSO), so only the compiler must be
/// stopped from reordering; aarch64 needs a store barrier to the outer
/// shareable domain the NIC's DMA belongs to.
#[inline(always)]
pub fn store_fence_dma() {
    #[cfg(target_arch = "x86_64")]
    core::sync::atomic::compiler_fence(core::sync::atomic::Ordering::SeqCst);
    #[cfg(target_arch = "aarch64")]
    // SAFETY: a barrier instruction: no operands, touches no memory itself;
    // without `nomem` the asm also acts as a compiler memory barrier.
    unsafe {
        core::arch::asm!("dmb oshst", options(nostack, preserves_flags))
    };
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    fence(Ordering::SeqCst);
}

/// Orders all earlier stores before later write-combining MMIO stores and
/// drains the write-combining buffer (so a doorbell / BlueFlame write leaves
/// the CPU now, whole, and in order with the doorbell record).
///
/// x86-64: WC stores are weakly ordered against ordinary stores; `sfence`
/// orders both and flushes the WC buffers. aarch64: `dsb st`, as rdma-core
/// v44 and HEAD (`mmio_wc_start`/`mmio_flush_writes`): a `dmb` orders but does
/// not wait for the write-combining buffer to drain, and rdma-core stays with
/// the conservative choice where WC mappings on Arm have misbehaved (UCX
/// #2767: ThunderX2 BlueFlame latency).
#[inline(always)]
pub fn store_fence_wc() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `sfence` has no operands and only orders stores; without
    // `nomem` it is also a compiler memory barrier.
    unsafe {
        core::arch::asm!("sfence", options(nostack, preserves_flags))
    };
    #[cfg(target_arch = "aarch64")]
    // SAFETY: a barrier instruction: no operands, touches no memory itself.
    unsafe {
        core::arch::asm!("dsb st", options(nostack, preserves_flags))
    };
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    fence(Ordering::SeqCst);
}

/// Orders the load of a CQE's owner byte before the loads of the rest of the
/// CQE, so no field is read from before the NIC finished writing it
/// (PRM: read the owner bit, barrier, then read the CQE).
///
/// x86-64: `lfence` as rdma-core; aarch64: load barrier to the outer
/// shareable domain (rdma-core HEAD).
#[inline(always)]
pub fn load_fence_dma() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `lfence` has no operands; without `nomem` it is also a compiler
    // memory barrier.
    unsafe {
        core::arch::asm!("lfence", options(nostack, preserves_flags))
    };
    #[cfg(target_arch = "aarch64")]
    // SAFETY: a barrier instruction: no operands, touches no memory itself.
    unsafe {
        core::arch::asm!("dmb oshld", options(nostack, preserves_flags))
    };
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    fence(Ordering::SeqCst);
}
