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
use super::raw_list::{next_fm, Last, RawPkt};
use super::seg::{CtrlSeg, DataSeg};
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

/// The WQEs and WQEBBs a list takes (checked before anything is written).
pub fn plan(pkts: &[RawPkt], inline: bool) -> (usize, usize) {
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
