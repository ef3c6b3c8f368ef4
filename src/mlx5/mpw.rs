//! Enhanced multi-packet send WQEs (eMPW) as DPDK's mlx5 driver lays them
//! out (mlx5_prm.h, mlx5_tx.h): a control segment with opcode
//! ENHANCED_MPSW (0x29, opmod 0), an Ethernet segment without inline
//! header, then one segment per packet: a 16-byte data segment (pointer),
//! or the packet inline (byte count with bit 31 set, the bytes, padded to
//! 16). A session (one WQE) closes at [`EMPW_MAX_PACKETS`] packets or when
//! the next packet would take it past [`EMPW_MAX_DS`] units.

#[cfg(test)]
use super::eth_seg::write_eth_seg;
use super::prm::Opcode;
use super::progress::SqProgress;
use super::ptr_segs;
use super::raw_list::{next_fm, Last, RawPkt, SrcCheck};
use super::seg::{CtrlSeg, DataSeg};
use super::segwr;
use super::wqe::{inline_ds, SqRing, WqeCursor};

/// `MLX5_EMPW_MAX_PACKETS` (= `MLX5_TX_COMP_THRESH`): packets per WQE.
pub const EMPW_MAX_PACKETS: usize = 32;
/// `MLX5_WQE_SIZE_MAX / MLX5_WSEG_SIZE`: a session's WQE is at most 60
/// 16-byte units (960 bytes), below the 6-bit `ds` field's 63.
pub const EMPW_MAX_DS: usize = 60;
/// WQEBBs of the largest eMPW WQE.
pub const EMPW_MAX_WQEBBS: u32 = EMPW_MAX_DS.div_ceil(4) as u32;
/// `MLX5_EMPW_MAX_INLINE_LEN` (4 WQEBBs): longer packets go by pointer
/// even in an inline session.
pub const EMPW_MAX_INLINE: u32 = 256;
/// Ctrl + Ethernet segment.
const HEAD_DS: usize = 2;

/// Units packet `p` takes in a session.
#[inline(always)]
pub const fn pkt_ds(len: u32, inline: bool) -> usize {
    if inline && len <= EMPW_MAX_INLINE {
        inline_ds(len) as usize
    } else {
        1
    }
}

/// The next session from the front of `pkts` (not empty): how many packets
/// it carries and its `ds`. Every packet fits a session alone (an inline
/// one takes at most 17 units).
#[inline(always)]
pub fn session(pkts: &[RawPkt], inline: bool) -> (usize, usize) {
    let (mut n, mut ds) = (0, HEAD_DS);
    for p in pkts.iter().take(EMPW_MAX_PACKETS) {
        let u = pkt_ds(p.len, inline);
        if ds + u > EMPW_MAX_DS {
            break;
        }
        ds += u;
        n += 1;
    }
    (n, ds)
}

/// A session's Ethernet segment (no inline header, mss 0): the 16 bytes
/// `write_eth_seg(.., cs_flags, 0, &[])` writes, built as one unit.
#[inline(always)]
const fn session_eth(cs_flags: u8) -> [u8; 16] {
    let mut e = [0u8; 16];
    e[4] = cs_flags;
    e
}

/// WQEBBs of a pointer session of `n` packets (ctrl, Ethernet segment,
/// one unit a packet).
const fn ptr_nbb(n: usize) -> usize {
    (HEAD_DS + n).div_ceil(4)
}

/// The WQEs and WQEBBs a list takes (checked before anything is written).
/// By pointer every packet takes one unit and 2 + 32 units fit a session,
/// so sessions are the list cut every [`EMPW_MAX_PACKETS`] packets: counted,
/// not walked.
pub fn plan(pkts: &[RawPkt], inline: bool) -> (usize, usize) {
    if !inline {
        let (full, rest) = (pkts.len() / EMPW_MAX_PACKETS, pkts.len() % EMPW_MAX_PACKETS);
        let last = if rest == 0 { 0 } else { ptr_nbb(rest) };
        return (
            full + (rest != 0) as usize,
            full * ptr_nbb(EMPW_MAX_PACKETS) + last,
        );
    }
    let (mut wqes, mut nbb, mut rest) = (0, 0, pkts);
    while !rest.is_empty() {
        let (n, ds) = session(rest, inline);
        wqes += 1;
        nbb += ds.div_ceil(4);
        rest = &rest[n..];
    }
    (wqes, nbb)
}

/// What writing a list needs of the SQ.
pub(crate) struct Writer<'a> {
    pub(crate) ring: &'a SqRing,
    pub(crate) qpn: u32,
    pub(crate) cs_flags: u8,
    pub(crate) lkey: u32,
    pub(crate) inline: bool,
    pub(crate) cq_every: u32,
}

impl Writer<'_> {
    /// Writes the list's sessions from WQEBB `pi`; returns the producer
    /// index after them and the last WQE. The caller checked that the
    /// list's [`plan`] WQEBBs are free from `pi` and that every packet lies
    /// in readable memory outside the ring.
    #[inline(always)]
    pub(crate) fn write(
        &self,
        pkts: &[RawPkt],
        pi: u16,
        quiet: &mut u32,
        sent: &mut u64,
        progress: &SqProgress,
    ) -> (u16, Last) {
        debug_assert!(self.inline, "pointer lists go through write_ptr");
        let rec = progress.recorder();
        let (mut bb, mut rest, mut last) = (pi, pkts, Last { bb: pi, ds: 0 });
        while !rest.is_empty() {
            let (n, ds) = session(rest, self.inline);
            let nbb = ds.div_ceil(4) as u16;
            let fm = next_fm(quiet, self.cq_every);
            *sent += n as u64;
            rec.record(bb, *sent, nbb);
            // The session's nbb WQEBBs from bb are free (the caller's room
            // check covers the whole plan) and the cursor wraps at the ring end.
            // SAFETY: as above; exactly `ds` units are written (`session`'s
            // count); packets are readable, not ring memory (caller contract).
            unsafe { self.write_one(&rest[..n], bb, ds as u8, fm) };
            last = Last { bb, ds: ds as u8 };
            bb = bb.wrapping_add(nbb);
            rest = &rest[n..];
        }
        (bb, last)
    }

    /// [`write`](Self::write) by pointer: sessions of up to 32 packets, one
    /// data segment each (`ptr_segs`), a session's units split once at the
    /// ring end (no per-packet size test or wrap test).
    /// The CPU never reads a packet here, so the frame source check is
    /// gathered in `chk` as the list is written, for the caller to judge
    /// before it commits anything: the WQEs of a refused list lie in free
    /// WQEBBs no doorbell names.
    #[inline(always)]
    pub(crate) fn write_ptr(
        &self,
        pkts: &[RawPkt],
        pi: u16,
        (quiet, sent): (&mut u32, &mut u64),
        progress: &SqProgress,
        chk: &mut SrcCheck,
    ) -> (u16, Last) {
        let rec = progress.recorder();
        let words = PtrWords::new(self.qpn, self.cs_flags, self.lkey);
        let (mut bb, mut last) = (pi, Last { bb: pi, ds: 0 });
        for chunk in pkts.chunks(EMPW_MAX_PACKETS) {
            let ds = HEAD_DS + chunk.len();
            let nbb = ptr_nbb(chunk.len()) as u16;
            let fm = next_fm(quiet, self.cq_every);
            *sent += chunk.len() as u64;
            rec.record(bb, *sent, nbb);
            let w = self.ring.bb_ptr(bb);
            // The session's nbb WQEBBs from bb are free (the caller's room
            // check covers the plan): its head is the first WQEBB's two
            // units; its packets' units follow from w + 32 up to the ring
            // end and go on from the ring start (the end is a WQEBB
            // boundary, so every unit stays whole and 16-byte aligned).
            // SAFETY: as above; exactly `ds` units are written.
            unsafe {
                let (c0, c1) = words.ctrl(bb, ds as u8, fm);
                segwr::ctrl(w, c0, c1);
                segwr::ctrl(w.add(16), words.eth0, 0);
                let room =
                    self.ring.start().add(self.ring.bytes()).offset_from(w) as usize / 16 - 2;
                let (before, after) = chunk.split_at(chunk.len().min(room));
                ptr_segs::put(w.add(32), before, words.lkey, chk);
                ptr_segs::put(self.ring.start(), after, words.lkey, chk);
            }
            last = Last { bb, ds: ds as u8 };
            bb = bb.wrapping_add(nbb);
        }
        (bb, last)
    }

    /// One session: ctrl, Ethernet segment, one segment per packet.
    ///
    /// # Safety
    /// As [`write`](Self::write), for this session's WQEBBs at `bb`.
    #[inline(always)]
    unsafe fn write_one(&self, pkts: &[RawPkt], bb: u16, ds: u8, fm: u8) {
        let ctrl = CtrlSeg::new(bb, Opcode::ENHANCED_MPSW, 0, self.qpn, fm, ds, 0, [0; 4]);
        let e16 = session_eth(self.cs_flags);
        // SAFETY: the caller owns the ds units from bb; ctrl, eth and the
        // packets' units are exactly `ds` (`session`); inline sources are
        // readable and outside the ring.
        unsafe {
            let mut c = WqeCursor::new(self.ring, bb);
            c.put16(ctrl.to_bytes());
            c.put16(e16);
            for p in pkts {
                if self.inline && p.len <= EMPW_MAX_INLINE {
                    c.put_inline(p.addr as *const u8, p.len as usize);
                } else {
                    c.put16(DataSeg::new(p.len, self.lkey, p.addr).to_bytes());
                }
            }
        }
    }
}

/// A pointer session's store words, built once per list (the layout of
/// [`RawSendWords`](super::eth_seg::RawSendWords): native-endian words of
/// the big-endian units).
struct PtrWords {
    /// Ctrl bytes 0..8 without WQE index and ds: opmod 0, ENHANCED_MPSW, qpn.
    ctrl0: u64,
    /// Ethernet segment bytes 0..8 (`cs_flags`); bytes 8..16 are zero.
    eth0: u64,
    /// Data segment bytes 4..8 (`BE32(lkey)`) in place.
    lkey: u64,
}

// The store words are little-endian layouts (as `eth_seg.rs`'s).
const _: () = assert!(cfg!(target_endian = "little"));

impl PtrWords {
    #[inline(always)]
    fn new(qpn: u32, cs_flags: u8, lkey: u32) -> Self {
        let be0 = ((Opcode::ENHANCED_MPSW.0 as u64) << 32) | (((qpn & 0x00ff_ffff) as u64) << 8);
        Self {
            ctrl0: be0.swap_bytes(),
            eth0: (cs_flags as u64) << 32,
            lkey: (lkey.swap_bytes() as u64) << 32,
        }
    }

    /// The session's ctrl words: WQE index `bb` (bytes 1..3), `ds` (byte
    /// 7), `fm_ce_se` (byte 11).
    #[inline(always)]
    fn ctrl(&self, bb: u16, ds: u8, fm: u8) -> (u64, u64) {
        let c0 = self.ctrl0 | ((bb.swap_bytes() as u64) << 8) | ((ds as u64) << 56);
        (c0, (fm as u64) << 24)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pkts(n: usize, len: u32) -> Vec<RawPkt> {
        (0..n)
            .map(|i| RawPkt {
                addr: i as u64 * 2048,
                len,
            })
            .collect()
    }

    #[repr(C, align(64))]
    struct Ring([u8; 64 * 64]);

    /// The pointer writer's bytes, from `pi` (wrapping), against the
    /// general session walker's (`session` + `write_one`).
    fn both_writers(pkts: &[RawPkt], pi: u16, cs_flags: u8) -> (Vec<u8>, Vec<u8>) {
        let (mut a, mut b) = (Box::new(Ring([0xee; 4096])), Box::new(Ring([0xee; 4096])));
        let progress = SqProgress::new(0x123, 64);
        let mut out = Vec::new();
        for (r, lean) in [(&mut a, true), (&mut b, false)] {
            // SAFETY: a 64-byte aligned buffer of 64 WQEBBs, owned here.
            let ring =
                unsafe { SqRing::new(core::ptr::NonNull::new(r.0.as_mut_ptr()).unwrap(), 64) };
            let w = Writer {
                ring: &ring,
                qpn: 0x123,
                cs_flags,
                lkey: 0xa1b2_c3d4,
                inline: false,
                cq_every: 3,
            };
            let (mut quiet, mut sent) = (0, 0);
            if lean {
                let mut chk = SrcCheck::new((0, 1 << 61), 14);
                w.write_ptr(pkts, pi, (&mut quiet, &mut sent), &progress, &mut chk);
            } else {
                let (mut bb, mut rest) = (pi, pkts);
                while !rest.is_empty() {
                    let (n, ds) = session(rest, false);
                    let fm = next_fm(&mut quiet, 3);
                    // SAFETY: the ring holds the whole list (asserted by the callers' sizes).
                    unsafe { w.write_one(&rest[..n], bb, ds as u8, fm) };
                    bb = bb.wrapping_add(ds.div_ceil(4) as u16);
                    rest = &rest[n..];
                }
            }
            out.push(r.0.to_vec());
        }
        (out.remove(0), out.remove(0))
    }

    #[test]
    fn the_pointer_writer_matches_the_session_walker() {
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let pkts: Vec<RawPkt> = (0..100)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                RawPkt {
                    addr: x >> 2,
                    len: (x >> 40) as u32 % 9000 + 14,
                }
            })
            .collect();
        for (n, pi) in [(1, 0), (16, 5), (32, 61), (33, 62), (64, 60), (100, 40)] {
            let (lean, walked) = both_writers(&pkts[..n], pi, 0xc0);
            assert!(lean == walked, "{n} packets from WQEBB {pi}");
            assert_eq!(plan(&pkts[..n], false), {
                let (mut w, mut b, mut rest) = (0, 0, &pkts[..n]);
                while !rest.is_empty() {
                    let (k, ds) = session(rest, false);
                    (w, b, rest) = (w + 1, b + ds.div_ceil(4), &rest[k..]);
                }
                (w, b)
            });
        }
    }

    #[test]
    fn the_session_eth_unit_is_write_eth_segs() {
        for cs in 0..=255 {
            let mut eth = [0xaau8; 32];
            assert_eq!(write_eth_seg(&mut eth, cs, 0, &[]), 16);
            assert_eq!(eth[..16], session_eth(cs));
        }
    }

    #[test]
    fn pointer_sessions_close_at_32_packets() {
        assert_eq!(session(&pkts(32, 60), false), (32, 34));
        assert_eq!(session(&pkts(33, 60), false), (32, 34));
        assert_eq!(plan(&pkts(33, 60), false), (2, 9 + 1));
        assert_eq!(plan(&pkts(32, 1514), false), (1, 9));
    }

    #[test]
    fn inline_sessions_close_at_60_units() {
        // 60 bytes inline: (4 + 60) / 16 = 4 units; 2 + 14 · 4 = 58.
        assert_eq!(session(&pkts(20, 60), true), (14, 58));
        // 61 bytes: 5 units; 2 + 11 · 5 = 57.
        assert_eq!(session(&pkts(20, 61), true), (11, 57));
        // 256 bytes: 17 units, three fit; 257 goes by pointer.
        assert_eq!(session(&pkts(5, 256), true), (3, 53));
        assert_eq!(session(&pkts(40, 257), true), (32, 34));
        assert_eq!(EMPW_MAX_WQEBBS, 15);
    }
}
