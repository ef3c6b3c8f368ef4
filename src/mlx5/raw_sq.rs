//! A raw packet SQ (`IBV_QPT_RAW_PACKET`) posted directly: frames already
//! built in a registered buffer go out either one SEND WQE per packet
//! ([`RawSq::post_send`], [`RawSendWords`]) or packed into
//! enhanced multi-packet WQEs ([`RawSq::post_mpw`], `mpw.rs`). The ring,
//! the doorbell (record, BlueFlame or 8-byte doorbell) and the consumer
//! progress are the ones the RDMA direct SQ uses (`wqe.rs`, `doorbell.rs`,
//! `progress.rs`).
//!
//! Completions are sparse: every `cq_every`-th WQE asks for a CQE
//! (CQ_UPDATE) and the others do not; a [`DirectCq`](super::cq::DirectCq)
//! polling such a CQE retires every WQE up to it. Each WQE's `wr_id` is the
//! number of packets posted on this SQ up to and including it, so a
//! completion says how many packets have left.

use core::ptr::NonNull;
use std::sync::Arc;

use super::doorbell::Doorbell;
use super::error::DirectError;
use super::eth_seg::{RawSendWords, ETH_L2_INLINE_HEADER_SIZE};
use super::keepalive::KeepAlive;
use super::mmio::{HwMmio, Mmio};
use super::mpw::{self, EMPW_MAX_WQEBBS};
use super::progress::SqProgress;
pub use super::raw_list::RawPkt;
use super::raw_list::{next_fm, Last, SrcCheck};
use super::sq::check_qp_layout;
use super::wqe::SqRing;
use crate::post::PostError;
use crate::sys::mlx5dv_qp;

/// The shortest frame the SQ accepts: an Ethernet header.
pub const MIN_FRAME: u32 = 14;

/// How a raw SQ stamps its WQEs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawSqConfig {
    /// The device's minimum inline header (libmlx5 collapses the kernel's
    /// NONE/L2/IP/TCP_UDP to 0 or [`ETH_L2_INLINE_HEADER_SIZE`]).
    pub min_inline: usize,
    /// The Ethernet segment's `cs_flags` ([`CS_L3`](super::eth_seg::CS_L3) | [`CS_L4`](super::eth_seg::CS_L4)).
    pub cs_flags: u8,
    /// The lkey of the buffer the frames lie in.
    pub lkey: u32,
    /// One WQE in this many asks for a CQE (1: every WQE).
    pub cq_every: u32,
}

impl RawSqConfig {
    /// No inline header, no checksum offload, a CQE every `cq_every` WQEs:
    /// what a ConnectX-5 or later takes for perftest's frames.
    pub fn new(lkey: u32, cq_every: u32) -> Self {
        Self {
            min_inline: 0,
            cs_flags: 0,
            lkey,
            cq_every,
        }
    }
}

/// A raw packet SQ. `M` is the MMIO seam ([`HwMmio`], or the model's
/// recorder in tests).
pub struct RawSq<M: Mmio = HwMmio> {
    ring: SqRing,
    pi: u16,
    /// Last consumer index read from `progress`.
    ci: u16,
    wqe_cnt: u32,
    qpn: u32,
    cfg: RawSqConfig,
    /// Every SEND WQE's store words but index, stamp and frame (from `cfg`).
    words: RawSendWords,
    /// The frame-source check: where frames may be read by the CPU (inline
    /// header, inline data) and the shortest frame (an Ethernet header, or
    /// the minimum inline header where longer; eMPW runs only where that is
    /// 0). Built once in [`set_frame_source`](Self::set_frame_source) and
    /// copied per list.
    src_chk: SrcCheck,
    /// WQEs posted since the last one that asked for a CQE.
    quiet: u32,
    /// The next list's last WQE asks for a CQE ([`RawSq::signal_list_end`]).
    signal_end: bool,
    /// Packets posted so far.
    sent: u64,
    progress: Arc<SqProgress>,
    db: Doorbell<M>,
    _keepalive: KeepAlive,
}

impl<M: Mmio> RawSq<M> {
    /// Builds the SQ from what `mlx5dv_init_obj` returned for a raw packet QP.
    ///
    /// Errors: the layout checks of the RDMA direct SQ, a minimum inline
    /// other than 0 or 18, or a `cq_every` of 0 or above `wqe_cnt / 15`
    /// (every ring full of the largest WQEs must hold one that asks for a
    /// CQE, or nothing would ever free it).
    ///
    /// # Safety
    /// As [`DirectSq::from_dv`](super::sq::DirectSq::from_dv): the pointers
    /// stay valid while the SQ lives, the QP is fresh (pi 0), nothing else
    /// posts to it or writes its BlueFlame register, `qpn` is its number.
    pub unsafe fn from_dv(
        qp: &mlx5dv_qp,
        qpn: u32,
        cfg: RawSqConfig,
        mmio: M,
        keepalive: KeepAlive,
    ) -> Result<Self, DirectError> {
        check_qp_layout(qp)?;
        check_config(&cfg, qp.sq.wqe_cnt)?;
        let Some(buf) = NonNull::new(qp.sq.buf.cast::<u8>()) else {
            return Err(DirectError::Config {
                problem: "sq.buf is null (internal: checked by check_qp_layout)",
                fix: "report this",
            });
        };
        let n = qp.sq.wqe_cnt;
        // SAFETY: checked by check_qp_layout (non-null, 64-aligned,
        // power-of-two count); validity is the caller's contract.
        let ring = unsafe { SqRing::new(buf, n) };
        // SAFETY: dbrec[1] is the SQ record; register validity and
        // exclusivity are the caller's contract.
        let db = unsafe { Doorbell::new(qp.dbrec.add(1), qp.bf.reg.cast(), qp.bf.size, mmio) };
        Ok(Self {
            ring,
            pi: 0,
            ci: 0,
            wqe_cnt: n,
            qpn,
            cfg,
            words: RawSendWords::new(qpn, cfg.cs_flags, cfg.min_inline, cfg.lkey),
            src_chk: SrcCheck::new((0, 0), MIN_FRAME),
            quiet: 0,
            signal_end: false,
            sent: 0,
            progress: SqProgress::new(qpn, n),
            db,
            _keepalive: keepalive,
        })
    }

    /// Declares the buffer the frames lie in: the CPU reads their inline
    /// header (and, for inline eMPW, their bytes) from it, so a packet
    /// outside it is refused (`PostError::Unsupported`).
    ///
    /// # Safety
    /// `addr..addr+len` must stay readable while the SQ lives.
    pub unsafe fn set_frame_source(&mut self, addr: *const u8, len: usize) {
        let src = (addr as u64, addr as u64 + len as u64);
        let min = MIN_FRAME.max(self.cfg.min_inline as u32);
        self.src_chk = SrcCheck::new(src, min);
    }

    /// The progress record a [`DirectCq`](super::cq::DirectCq) needs.
    pub fn progress(&self) -> &Arc<SqProgress> {
        &self.progress
    }
    /// Producer index (WQEBBs, 16 bits).
    pub fn pi(&self) -> u16 {
        self.pi
    }
    /// Packets posted so far.
    pub fn sent(&self) -> u64 {
        self.sent
    }
    /// WQEBBs posted and not yet retired by a polled completion.
    pub fn outstanding(&self) -> u32 {
        self.pi.wrapping_sub(self.progress.ci()) as u32
    }
    /// The MMIO implementation (the model's recorder in tests).
    pub fn mmio(&self) -> &M {
        self.db.mmio()
    }

    /// Makes the next list posted end with a WQE that asks for a CQE (a
    /// run's last packets, or perftest's every `cq_mod`-th), whatever the
    /// `cq_every` count says; the count then goes on from that WQE. Kept
    /// until a post succeeds.
    pub fn signal_list_end(&mut self) {
        self.signal_end = true;
    }

    /// The quiet count to start a list of `wqes` WQEs from: unchanged, or,
    /// when the list must end signalled, the one that makes its last WQE
    /// reach `cq_every`.
    #[inline(always)]
    fn quiet_for(&mut self, wqes: usize) -> u32 {
        let signal = core::mem::take(&mut self.signal_end);
        self.quiet_at(wqes, signal)
    }

    /// [`quiet_for`](Self::quiet_for) without taking the signal request.
    #[inline(always)]
    fn quiet_at(&self, wqes: usize, signal: bool) -> u32 {
        if !signal {
            return self.quiet;
        }
        let every = self.cfg.cq_every;
        (every - (wqes as u32 % every)) % every
    }

    /// Posts one SEND WQE per packet (ctrl, Ethernet segment with the
    /// minimum inline header, one data segment), one doorbell for the list.
    /// All or nothing: `QueueFull` when the list's WQEBBs are not free,
    /// `Unsupported` for a packet outside the frame source or shorter than
    /// [`MIN_FRAME`] / the minimum inline, or a list longer than the ring.
    #[inline]
    pub fn post_send(&mut self, pkts: &[RawPkt]) -> Result<(), PostError> {
        match pkts {
            [] => Ok(()),
            [p] => self.post_one(p),
            _ => self.post_list(pkts),
        }
    }

    /// One packet: the steps of [`post_list`](Self::post_list) without the
    /// loop, and the one-WQEBB doorbell (BlueFlame where the register has
    /// halves), as write-bw's single post.
    #[inline(always)]
    fn post_one(&mut self, p: &RawPkt) -> Result<(), PostError> {
        self.check(core::slice::from_ref(p))?;
        if !self.has_room_for(1) {
            return Err(PostError::QueueFull);
        }
        let mut quiet = self.quiet_for(1);
        let fm = next_fm(&mut quiet, self.cfg.cq_every);
        let bb = self.pi;
        self.sent += 1;
        self.progress.recorder().record(bb, self.sent, 1);
        // WQEBB bb is free (room checked): 64 aligned bytes of the ring,
        // owned by this SQ. The frame is not ring memory.
        // SAFETY: as above; the frame is readable and >= the minimum inline (`check`).
        let ds = unsafe {
            let src = p.addr as *const u8;
            self.words
                .put(self.ring.bb_ptr(bb), (bb, fm), src, p.addr, p.len)
        };
        (self.quiet, self.pi) = (quiet, bb.wrapping_add(1));
        // SAFETY: the one WQE up to pi is written at WQEBB bb, one WQEBB
        // (ds 3 or 4).
        unsafe { self.db.ring_one_bb(&self.ring, self.pi, bb, ds) };
        Ok(())
    }

    /// A list of two or more packets (see [`post_send`](Self::post_send)),
    /// out of line: a caller inlines the one-packet path above and calls
    /// this one (inlined into a caller's loop it came out slower).
    #[inline(never)]
    fn post_list(&mut self, pkts: &[RawPkt]) -> Result<(), PostError> {
        self.check(pkts)?;
        self.check_room(pkts.len())?;
        let q0 = self.quiet_for(pkts.len());
        let rec = self.progress.recorder();
        let (mut quiet, mut sent, mut bb) = (q0, self.sent, self.pi);
        let (c, words) = (&self.cfg, self.words);
        let mut last = Last { bb, ds: 0 };
        for p in pkts {
            let fm = next_fm(&mut quiet, c.cq_every);
            sent += 1;
            rec.record(bb, sent, 1);
            // WQEBB bb is free (room checked for the whole list): 64 aligned
            // bytes of the ring, owned by this SQ. The frame is not ring memory.
            // SAFETY: as above; the frame is readable and >= the minimum inline (`check`).
            let ds = unsafe {
                let src = p.addr as *const u8;
                words.put(self.ring.bb_ptr(bb), (bb, fm), src, p.addr, p.len)
            };
            last = Last { bb, ds };
            bb = bb.wrapping_add(1);
        }
        (self.quiet, self.sent, self.pi) = (quiet, sent, bb);
        // SAFETY: every WQE up to bb is written in this SQ's ring.
        unsafe {
            self.db
                .ring(&self.ring, bb, last.bb, last.ds, pkts.len(), false)
        };
        Ok(())
    }

    /// Posts the packets in enhanced multi-packet WQEs (`mpw.rs`): each
    /// session closes at [`mpw::EMPW_MAX_PACKETS`] packets or
    /// [`mpw::EMPW_MAX_DS`] units; `inline` copies each packet of up to
    /// [`mpw::EMPW_MAX_INLINE`] bytes into the WQE, longer ones go by
    /// pointer. Refused (`Unsupported`) where the device wants a minimum
    /// inline header (eMPW is off there), and as [`post_send`](Self::post_send).
    pub fn post_mpw(&mut self, pkts: &[RawPkt], inline: bool) -> Result<(), PostError> {
        if pkts.is_empty() {
            return Ok(());
        }
        if self.cfg.min_inline != 0 {
            return Err(PostError::Unsupported);
        }
        if !inline {
            return self.post_mpw_ptr(pkts);
        }
        self.check(pkts)?;
        let (wqes, nbb) = mpw::plan(pkts, inline);
        self.check_room(nbb)?;
        let (mut quiet, mut sent) = (self.quiet_for(wqes), self.sent);
        let (pi, last) =
            self.mpw_writer(inline)
                .write(pkts, self.pi, &mut quiet, &mut sent, &self.progress);
        (self.quiet, self.sent, self.pi) = (quiet, sent, pi);
        // SAFETY: every WQE up to pi is written in this SQ's ring.
        unsafe { self.db.ring(&self.ring, pi, last.bb, last.ds, wqes, inline) };
        Ok(())
    }

    /// [`post_mpw`](Self::post_mpw) by pointer: one pass writes the sessions
    /// and gathers the frame source check (the CPU reads no packet), which
    /// is judged before anything is committed: a refused list leaves the
    /// producer index, counters and doorbell as they were.
    #[inline(always)]
    fn post_mpw_ptr(&mut self, pkts: &[RawPkt]) -> Result<(), PostError> {
        let (wqes, nbb) = mpw::plan(pkts, false);
        self.check_room(nbb)?;
        let (mut quiet, mut sent) = (self.quiet_at(wqes, self.signal_end), self.sent);
        let mut chk = self.src_chk;
        let (pi, last) = self.mpw_writer(false).write_ptr(
            pkts,
            self.pi,
            (&mut quiet, &mut sent),
            &self.progress,
            &mut chk,
        );
        if !chk.ok() {
            return Err(PostError::Unsupported);
        }
        (self.quiet, self.sent, self.pi, self.signal_end) = (quiet, sent, pi, false);
        // SAFETY: every WQE up to pi is written in this SQ's ring.
        unsafe { self.db.ring(&self.ring, pi, last.bb, last.ds, wqes, false) };
        Ok(())
    }

    /// The eMPW writer over this SQ's ring and stamps.
    #[inline(always)]
    fn mpw_writer(&self, inline: bool) -> mpw::Writer<'_> {
        mpw::Writer {
            ring: &self.ring,
            qpn: self.qpn,
            cs_flags: self.cfg.cs_flags,
            lkey: self.cfg.lkey,
            inline,
            cq_every: self.cfg.cq_every,
        }
    }

    /// `Unsupported` for a list larger than the ring, `QueueFull` when its
    /// `nbb` WQEBBs are not free now.
    #[inline(always)]
    fn check_room(&mut self, nbb: usize) -> Result<(), PostError> {
        if nbb > self.wqe_cnt as usize {
            return Err(PostError::Unsupported);
        }
        if !self.has_room_for(nbb as u16) {
            return Err(PostError::QueueFull);
        }
        Ok(())
    }

    /// Every packet lies in the frame source and is long enough
    /// ([`SrcCheck`]'s test, before anything is written: these paths read
    /// the frames).
    #[inline(always)]
    fn check(&self, pkts: &[RawPkt]) -> Result<(), PostError> {
        let mut chk = self.src_chk;
        pkts.iter().for_each(|p| chk.see(p));
        if chk.ok() {
            Ok(())
        } else {
            Err(PostError::Unsupported)
        }
    }

    /// True when `nbb` WQEBBs are free from the producer index; reloads the
    /// shared consumer index only when the cached one says no.
    #[inline(always)]
    fn has_room_for(&mut self, nbb: u16) -> bool {
        let end = self.pi.wrapping_add(nbb);
        if end.wrapping_sub(self.ci) as u32 <= self.wqe_cnt {
            return true;
        }
        self.ci = self.progress.ci();
        end.wrapping_sub(self.ci) as u32 <= self.wqe_cnt
    }
}

fn check_config(cfg: &RawSqConfig, wqe_cnt: u32) -> Result<(), DirectError> {
    if cfg.min_inline != 0 && cfg.min_inline != ETH_L2_INLINE_HEADER_SIZE {
        return Err(DirectError::Config {
            problem: "the minimum inline header must be 0 or 18 bytes",
            fix: "pass what mlx5dv reports for the device (0 or 18)",
        });
    }
    if cfg.cq_every == 0 || cfg.cq_every as u64 * EMPW_MAX_WQEBBS as u64 > wqe_cnt as u64 {
        return Err(DirectError::Config {
            problem: "cq_every must be 1 or more and at most sq.wqe_cnt / 15",
            fix: "ask for a completion more often, or create a deeper SQ",
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mlx5::prm::fm_ce_se;

    fn cfg(min_inline: usize, cq_every: u32) -> RawSqConfig {
        RawSqConfig {
            min_inline,
            cs_flags: 0,
            lkey: 1,
            cq_every,
        }
    }

    #[test]
    fn config_limits() {
        assert!(check_config(&cfg(0, 4), 64).is_ok());
        assert!(check_config(&cfg(18, 4), 64).is_ok());
        assert!(check_config(&cfg(14, 4), 64).is_err());
        assert!(check_config(&cfg(0, 0), 64).is_err());
        assert!(check_config(&cfg(0, 5), 64).is_err());
    }

    #[test]
    fn every_nth_wqe_asks_for_a_cqe() {
        let mut q = 0;
        let fms: Vec<u8> = (0..8).map(|_| next_fm(&mut q, 3)).collect();
        let c = fm_ce_se::CQ_UPDATE;
        assert_eq!(fms, [0, 0, c, 0, 0, c, 0, 0]);
    }
}
