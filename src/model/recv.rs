//! The model's receive side, as the NIC sees it: each sender QP's peer has a
//! real RQ ring (or all peers share one SRQ) laid out as `mlx5dv_qp.rq` /
//! `mlx5dv_srq` describe, posted through its doorbell record only. A SEND
//! or WRITE_IMM consumes one WQE: the NIC reads the record's posted count,
//! takes the RQ WQE in order (or, told to, the next pair swapped: newer
//! firmware's out-of-order consumption) or the SRQ WQE at its head (then
//! follows `next_wqe_index`), scatters the payload through the WQE's data
//! segments (checking each lkey) or — RC/UC SENDs of up to 32 bytes, 64 with
//! 128-byte CQEs, when scatter-to-CQE is on — into the CQE instead, and
//! writes a real-format responder CQE (or RESP_ERR with the syndrome a
//! device reports) into the one CQ the senders complete on. No receive
//! posted: RNR, as for the abstract peer queue (`nic.rs`). The decoder shares
//! nothing with `mlx5::recv`, which writes these rings.

use std::sync::atomic::{AtomicU32, Ordering};

use super::config::RecvSpec;
use super::decode::{self, CqeOut};
use super::mem::RecvMem;

/// Bytes of the GRH a UD receive buffer starts with.
pub const GRH_BYTES: usize = 40;
const INVALID_LKEY: u32 = 0x100;
/// RESP_ERR syndromes (PRM): local length, local protection.
pub(crate) const LOCAL_LENGTH: u8 = 0x01;

/// The NIC's position in one receive ring.
#[derive(Default)]
pub(crate) struct RecvHw {
    buf: usize,
    dbrec: usize,
    /// WQEs consumed.
    consumed: u32,
    /// RQ: next WQE in order; one held back when consuming out of order.
    next: u32,
    held_wqe: Option<u32>,
    /// SRQ: the WQE the NIC takes next.
    srq_head: u16,
    /// SRQ out of order: a CQE held back until the next one is written.
    pub(crate) held: Option<CqeOut>,
    /// RQ: its QP was moved to the error state (`Model::recv_to_error`):
    /// every receive posted is flushed, messages are not answered.
    pub(crate) error: bool,
}

impl RecvHw {
    pub(crate) fn new(m: &RecvMem) -> Self {
        Self {
            buf: m.buf.ptr() as usize,
            dbrec: m.dbrec.ptr() as usize,
            ..Self::default()
        }
    }

    fn posted(&self) -> u16 {
        // SAFETY: word 0 of the ring's 64-byte record region (alive as long
        // as the model); the poster stores it concurrently.
        let raw = unsafe { AtomicU32::from_ptr(self.dbrec as *mut u32) }.load(Ordering::Acquire);
        (u32::from_be_bytes(raw.to_ne_bytes()) & 0xffff) as u16
    }

    pub(crate) fn wqe(&self, spec: &RecvSpec, idx: u32) -> Vec<u8> {
        let at = (idx & (spec.slots - 1)) as usize * spec.stride as usize;
        let mut w = vec![0u8; spec.stride as usize];
        // SAFETY: slot idx lies inside the ring region; the poster does not
        // touch a posted WQE until its CQE.
        unsafe {
            std::ptr::copy_nonoverlapping((self.buf + at) as *const u8, w.as_mut_ptr(), w.len())
        };
        w
    }

    /// The WQE the next receive takes, or `None` (nothing posted).
    pub(crate) fn take(&mut self, spec: &RecvSpec) -> Option<u16> {
        let avail = self.posted().wrapping_sub(self.consumed as u16);
        if avail == 0 {
            return None;
        }
        self.consumed += 1;
        if spec.srq {
            let idx = self.srq_head;
            self.srq_head = decode::be16(&self.wqe(spec, idx as u32), 2);
            return Some(idx);
        }
        if let Some(h) = self.held_wqe.take() {
            return Some(h as u16);
        }
        let idx = if spec.out_of_order && avail >= 2 {
            self.held_wqe = Some(self.next);
            self.next + 1
        } else {
            self.next
        };
        self.next += if self.held_wqe.is_some() { 2 } else { 1 };
        Some(idx as u16)
    }
}

/// A scatter entry of a receive WQE.
pub(crate) struct Seg {
    pub(crate) len: u32,
    pub(crate) lkey: u32,
    pub(crate) addr: u64,
}

pub(crate) fn segs(spec: &RecvSpec, w: &[u8]) -> Vec<Seg> {
    let first = if spec.srq { 16 } else { 0 };
    let mut v = Vec::new();
    let mut at = first;
    while at + 16 <= w.len() {
        let lkey = decode::be32(w, at + 4);
        if lkey == INVALID_LKEY {
            break;
        }
        v.push(Seg {
            len: decode::be32(w, at),
            lkey,
            addr: decode::be64(w, at + 8),
        });
        at += 16;
    }
    v
}
