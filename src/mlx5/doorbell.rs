//! Ringing the SQ doorbell exactly as rdma-core's `post_send_db()`:
//!
//! 1. WQE stores → `store_fence_dma` → doorbell record `dbrec[1] = BE(pi)`;
//! 2. `store_fence_wc`;
//! 3. BlueFlame copy of a single WQE (≤ `bf.size`, 64-byte chunks, ascending,
//!    explicit stores) or one 8-byte store of the last WQE's first 8 bytes;
//! 4. `store_fence_wc`;
//! 5. toggle the BlueFlame half.
//!
//! The register is assumed dedicated to this SQ (a QP created on a
//! thread-domain parent PD, see `device::HwSteps`), so the toggle
//! needs no lock and is not shared.

use super::env::BfPolicy;
use super::mmio::Mmio;
use super::prm::{DS_BYTES, WQEBB};
use super::wqe::SqRing;

/// Doorbell record, BlueFlame register and toggle of one SQ.
pub struct Doorbell<M: Mmio> {
    /// `&dbrec[MLX5_SND_DBR]`.
    dbrec: *mut u32,
    /// `bf.reg`: BlueFlame buffer 0 of the register.
    reg: *mut u8,
    /// `bf.size`: bytes per half; 0 = no BlueFlame, 8-byte doorbells only.
    bf_size: u32,
    /// 0 or `bf_size`: the half the next write goes to.
    bf_offset: u32,
    /// The largest WQE (bytes) sent by BlueFlame without / with inline
    /// data: `bf_size`, or 0 where libmlx5's environment turns BlueFlame off
    /// for that kind ([`BfPolicy`]).
    bf_plain: u32,
    bf_inl: u32,
    mmio: M,
}

// SAFETY: the doorbell owns its register and record exclusively (module doc);
// moving it to another thread moves that ownership.
unsafe impl<M: Mmio + Send> Send for Doorbell<M> {}

impl<M: Mmio> Doorbell<M> {
    /// # Safety
    /// `sq_dbrec` must be the SQ doorbell record and `reg` the BlueFlame
    /// register with two halves of `bf_size` bytes (or at least 8 writable
    /// bytes when `bf_size == 0`), both valid while the doorbell is used, and
    /// the register must not be written by anyone else.
    pub unsafe fn new(sq_dbrec: *mut u32, reg: *mut u8, bf_size: u32, mmio: M) -> Self {
        Self {
            dbrec: sq_dbrec,
            reg,
            bf_size,
            bf_offset: 0,
            bf_plain: bf_size,
            bf_inl: bf_size,
            mmio,
        }
    }

    /// Follows libmlx5's rule (`post_send_db`): BlueFlame only without
    /// `shut_up`, and for WQEs without inline data only with `prefer`. The
    /// halves still alternate after every doorbell, as libmlx5's do.
    pub fn set_policy(&mut self, p: BfPolicy) {
        self.bf_inl = if p.shut_up { 0 } else { self.bf_size };
        self.bf_plain = if p.prefer { self.bf_inl } else { 0 };
    }

    /// The half the next doorbell goes to (0 or `bf.size`).
    pub fn bf_offset(&self) -> u32 {
        self.bf_offset
    }

    /// The `Mmio` implementation (the model reads its record through it).
    pub fn mmio(&self) -> &M {
        &self.mmio
    }

    /// Rings for a post list of `nreq` WQEs that ends with the WQE at WQEBB
    /// `last_bb` of `last_ds` units; `pi` is the producer index after it;
    /// `inl`: that WQE carries inline data (for the [`BfPolicy`]).
    ///
    /// # Safety
    /// All WQEs up to `pi` must be completely written in `ring`, and `ring`
    /// must be the ring this doorbell belongs to.
    #[inline(always)]
    pub unsafe fn ring(
        &mut self,
        ring: &SqRing,
        pi: u16,
        last_bb: u16,
        last_ds: u8,
        nreq: usize,
        inl: bool,
    ) {
        let dst = self.begin(pi);
        let bytes = last_ds as usize * DS_BYTES;
        let limit = if inl { self.bf_inl } else { self.bf_plain };
        // (`limit != 0` is implied: last_ds > 1 makes bytes > 0; limit is
        // 0 or bf_size.)
        if nreq == 1 && last_ds > 1 && bytes <= limit as usize {
            // BlueFlame: the whole WQE through the register, padded to whole
            // 64-byte chunks (at least one: bytes > 0); the source follows
            // the ring around its end.
            if bytes <= WQEBB {
                // One chunk (the common case), without the loop bookkeeping.
                // SAFETY: the WQE's WQEBB is 64-byte aligned ring memory
                // written by the caller; 64 <= bf_size (a multiple of 64, and
                // bytes > 0), so the chunk fits this half of the register.
                unsafe {
                    self.mmio.write_bf64(
                        dst.cast::<u64>(),
                        ring.bb_ptr(last_bb).cast::<[u64; 8]>().cast_const(),
                    )
                };
            } else {
                let mut i = 0;
                while i * WQEBB < bytes {
                    let src = ring.bb_ptr(last_bb.wrapping_add(i as u16));
                    // SAFETY: `src` is a 64-byte aligned WQEBB of the ring (written by the
                    // caller); `dst + 64 i` stays inside this half of the register: i · 64 <
                    // bytes <= bf_size, a multiple of 64, so the chunk ends by the half's end.
                    unsafe {
                        self.mmio.write_bf64(
                            dst.add(i * WQEBB).cast::<u64>(),
                            src.cast::<[u64; 8]>().cast_const(),
                        )
                    };
                    i += 1;
                }
            }
        } else {
            // Doorbell: the first 8 bytes of the last ctrl segment, raw, as
            // one 64-bit store (never byte-swapped as a u64, never split).
            // SAFETY: the ctrl segment is written and 64-byte aligned; dst is
            // 8-byte aligned inside the register.
            unsafe {
                let raw = ring.bb_ptr(last_bb).cast::<u64>().read();
                self.mmio.write_db64(dst.cast::<u64>(), raw);
            }
        }
        self.end();
    }

    /// [`ring`](Self::ring) for one WQE of one WQEBB (`ds <= 4`) at WQEBB
    /// `bb`, without inline data: BlueFlame when `ds > 1` and the register
    /// has halves (which then hold at least 64 bytes) the policy lets it
    /// use, else the 8-byte doorbell; the same stores and fences, without
    /// the size arithmetic.
    ///
    /// # Safety
    /// As [`ring`](Self::ring), and the WQE at `bb` must have `ds <= 4`.
    #[inline(always)]
    pub unsafe fn ring_one_bb(&mut self, ring: &SqRing, pi: u16, bb: u16, ds: u8) {
        debug_assert!(ds <= 4);
        let dst = self.begin(pi);
        let src = ring.bb_ptr(bb);
        if ds > 1 && self.bf_plain != 0 {
            // SAFETY: src is the WQE's 64-byte aligned WQEBB, written by the
            // caller; bf_plain != 0 is bf_size, a multiple of 64, so the chunk fits
            // this half of the register.
            unsafe {
                self.mmio
                    .write_bf64(dst.cast::<u64>(), src.cast::<[u64; 8]>().cast_const())
            };
        } else {
            // SAFETY: as in `ring`: the first 8 bytes of the written ctrl
            // segment, one store to an aligned address of the register.
            unsafe {
                self.mmio
                    .write_db64(dst.cast::<u64>(), src.cast::<u64>().read())
            };
        }
        self.end();
    }

    /// Steps 1 and 2: the doorbell record, between its two fences. Returns
    /// the register half to write.
    #[inline(always)]
    fn begin(&mut self, pi: u16) -> *mut u8 {
        // Fence: the NIC may fetch WQEs as soon as it sees the new doorbell
        // record, so every WQE store must be visible before that store.
        self.mmio.store_fence_dma();
        // SAFETY: the constructor's contract: dbrec is this SQ's record.
        unsafe {
            self.mmio
                .write_dbrec(self.dbrec, u32::from_ne_bytes((pi as u32).to_be_bytes()))
        };
        // Fence: the record (write-back memory) must reach memory before the
        // write-combining doorbell/BlueFlame stores, which are not ordered
        // with it otherwise; the NIC reads the record on the doorbell.
        self.mmio.store_fence_wc();
        self.reg.wrapping_add(self.bf_offset as usize)
    }

    /// Steps 4 and 5.
    #[inline(always)]
    fn end(&mut self) {
        // Fence: flush the write-combining buffer so this doorbell reaches
        // the NIC now, whole, before anything written to the other half.
        self.mmio.store_fence_wc();
        self.bf_offset ^= self.bf_size;
    }
}
