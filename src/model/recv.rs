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

use super::decode::{self, op, synd, vendor, CqeOut};
use super::mem::Region;
use super::nic::Nic;
use super::{Access, ModelConfig, ModelTransport};

/// Shape of the modelled receive queues ([`ModelConfig::recv`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvSpec {
    /// One SRQ every peer receives from (else one RQ per peer QP).
    pub srq: bool,
    /// Slots: RQ `wqe_cnt`, or SRQ `tail + 1` (a power of two >= 2).
    pub slots: u32,
    /// WQE stride in bytes (a power of two; RQ >= 16, SRQ >= 32).
    pub stride: u32,
    /// QPN of sender QP 0's peer (QP i's peer is `qpn + i`).
    pub qpn: u32,
    /// RC/UC SENDs that fit land in the CQE, not in the buffer.
    pub scatter_to_cqe: bool,
    /// RQ WQEs consumed in swapped pairs (1, 0, 3, 2, ...).
    pub out_of_order: bool,
    /// UD: a 40-byte GRH precedes the payload, and the CQE says so.
    pub grh: bool,
}

impl Default for RecvSpec {
    fn default() -> Self {
        Self {
            srq: false,
            slots: 64,
            stride: 16,
            qpn: 0x000456,
            scatter_to_cqe: true,
            out_of_order: false,
            grh: false,
        }
    }
}

/// Bytes of the GRH a UD receive buffer starts with.
pub const GRH_BYTES: usize = 40;
const INVALID_LKEY: u32 = 0x100;
/// RESP_ERR syndromes (PRM): local length, local protection.
const LOCAL_LENGTH: u8 = 0x01;

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

/// The NIC's position in one receive ring.
#[derive(Default)]
pub(crate) struct RecvHw {
    buf: usize,
    dbrec: usize,
    /// WQEs consumed.
    consumed: u32,
    /// RQ: next WQE in order; one held back when consuming out of order.
    next: u32,
    held: Option<u32>,
    /// SRQ: the WQE the NIC takes next.
    srq_head: u16,
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

    fn wqe(&self, spec: &RecvSpec, idx: u32) -> Vec<u8> {
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
    fn take(&mut self, spec: &RecvSpec) -> Option<u16> {
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
        if let Some(h) = self.held.take() {
            return Some(h as u16);
        }
        let idx = if spec.out_of_order && avail >= 2 {
            self.held = Some(self.next);
            self.next + 1
        } else {
            self.next
        };
        self.next += if self.held.is_some() { 2 } else { 1 };
        Some(idx as u16)
    }
}

/// A scatter entry of a receive WQE.
struct Seg {
    len: u32,
    lkey: u32,
    addr: u64,
}

fn segs(spec: &RecvSpec, w: &[u8]) -> Vec<Seg> {
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

impl Nic {
    /// Delivers one message to QP `q`'s peer through its real receive ring.
    /// `Err` is what the requester's CQE reports.
    pub(crate) fn deliver_direct(
        &mut self,
        cfg: &ModelConfig,
        q: usize,
        data: &[u8],
        opcode: u8,
        imm: Option<[u8; 4]>,
        rnr_is_error: bool,
    ) -> Result<(), (u8, u8)> {
        let Some(spec) = cfg.recv.as_ref() else {
            return Err((synd::LOCAL_QP_OP, vendor::UNKNOWN));
        };
        let r = if spec.srq { 0 } else { q };
        let Some(idx) = self.recv[r].take(spec) else {
            return self.no_receive(q, rnr_is_error);
        };
        let qpn = spec.qpn + q as u32;
        if spec.srq && self.odp_faults > 0 {
            // An ODP page fault on the receive buffer: the NIC drops the
            // SRQ WQE it took, says so in a RESP_ERR CQE, and answers the
            // sender with an RNR NAK (it retries the message).
            self.odp_faults -= 1;
            self.resp_cqes.push(CqeOut::RespErr {
                qpn,
                counter: idx,
                syndrome: synd::REMOTE_ABORTED,
                vendor: vendor::ODP_PAGE_FAULT,
            });
            return self.no_receive(q, rnr_is_error);
        }
        let w = self.recv[r].wqe(spec, idx as u32);
        let ud = matches!(cfg.transport, ModelTransport::Ud { .. });
        let send = opcode != op::RDMA_WRITE_IMM;
        let mut payload = Vec::with_capacity(data.len() + GRH_BYTES);
        if ud && spec.grh {
            payload.push(0x60); // IPv6 version nibble; the rest zero
            payload.resize(GRH_BYTES, 0);
        }
        payload.extend_from_slice(data);
        let err = |syndrome, vendor| CqeOut::RespErr {
            qpn,
            counter: idx,
            syndrome,
            vendor,
        };
        let limit = if cfg.cqe_size == 128 { 64 } else { 32 };
        let in_cqe = send && !ud && spec.scatter_to_cqe && payload.len() <= limit;
        if send && !in_cqe {
            let sg = segs(spec, &w);
            let room: u64 = sg.iter().map(|s| s.len as u64).sum();
            if payload.len() as u64 > room {
                self.resp_cqes.push(err(LOCAL_LENGTH, vendor::UNKNOWN));
                // UD has no response: the sender sees success.
                return if ud {
                    Ok(())
                } else {
                    Err((synd::REMOTE_INVAL_REQ, vendor::REM_INV))
                };
            }
            let mut at = 0usize;
            for s in &sg {
                let n = (s.len as usize).min(payload.len() - at);
                if n == 0 {
                    break;
                }
                if self
                    .mr(s.lkey, s.addr, n as u64, Access::LOCAL_WRITE.0)
                    .is_none()
                {
                    self.resp_cqes.push(err(synd::LOCAL_PROT, vendor::LKEY));
                    return if ud {
                        Ok(())
                    } else {
                        Err((synd::REMOTE_OP, vendor::UNKNOWN))
                    };
                }
                // SAFETY: inside a registered, locally writable region.
                unsafe { std::ptr::copy(payload.as_ptr().add(at), s.addr as *mut u8, n) };
                at += n;
            }
        }
        let flags_rqpn = if ud {
            (cfg.qpn + q as u32) | if spec.grh { 1 << 28 } else { 0 }
        } else {
            0
        };
        self.resp_cqes.push(CqeOut::Resp {
            opcode: match opcode {
                op::RDMA_WRITE_IMM => 1,
                op::SEND_IMM => 3,
                _ => 2,
            },
            qpn,
            counter: idx,
            byte_cnt: payload.len() as u32,
            imm: imm.unwrap_or_default(),
            flags_rqpn,
            inline: in_cqe.then_some(payload),
        });
        Ok(())
    }
}
