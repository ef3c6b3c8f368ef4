//! The model's own reading of the PRM: WQE parsing straight from ring bytes
//! and CQE composition. Deliberately shares no code (and no constants) with
//! `crate::mlx5`, so an encoder bug cannot be mirrored by the decoder.

/// Send opcodes the model executes (PRM "send WQE opcodes").
pub(crate) mod op {
    pub const NOP: u8 = 0x00;
    pub const RDMA_WRITE: u8 = 0x08;
    pub const RDMA_WRITE_IMM: u8 = 0x09;
    pub const SEND: u8 = 0x0a;
    pub const SEND_IMM: u8 = 0x0b;
    pub const RDMA_READ: u8 = 0x10;
    pub const ATOMIC_CS: u8 = 0x11;
    pub const ATOMIC_FA: u8 = 0x12;
}

/// Error syndromes the model produces (PRM error CQE).
pub(crate) mod synd {
    pub const LOCAL_QP_OP: u8 = 0x02;
    pub const LOCAL_PROT: u8 = 0x04;
    pub const WR_FLUSH: u8 = 0x05;
    pub const REMOTE_INVAL_REQ: u8 = 0x12;
    pub const REMOTE_ACCESS: u8 = 0x13;
    pub const REMOTE_OP: u8 = 0x14;
    pub const RETRY_EXC: u8 = 0x15;
    pub const RNR_RETRY_EXC: u8 = 0x16;
    pub const REMOTE_ABORTED: u8 = 0x22;
}

/// Vendor syndromes that accompany them. Not publicly documented; the values
/// are the ones ConnectX NICs reported in public bug reports where known.
pub(crate) mod vendor {
    /// LOCAL_QP_OP for an unsupported opcode (UCX issue #1151: "synd 0x2 vend 0x68").
    pub const BAD_OPCODE: u8 = 0x68;
    /// LOCAL_QP_OP for a malformed ctrl segment (ds, QPN, index): no public
    /// report found; the model uses the bad-opcode value.
    pub const MALFORMED: u8 = 0x68;
    /// LOCAL_PROT for a bad lkey/range (perftest #173: status 4, vendor 0x51).
    pub const LKEY: u8 = 0x51;
    /// REMOTE_ACCESS for a bad rkey/range (SPDK #964 error-CQE dump `...8813`).
    pub const RKEY: u8 = 0x88;
    /// REMOTE_INVAL_REQ (charm #2532: syndrome 0x12, vendor 0x8a).
    pub const REM_INV: u8 = 0x8a;
    /// WR_FLUSH after the QP entered the error state (nvme-cli #3268: 0x5/0xf9).
    pub const FLUSH: u8 = 0xf9;
    /// REMOTE_ABORTED on a responder's ODP page fault (rdma-core
    /// `MLX5_CQE_VENDOR_SYNDROME_ODP_PFAULT`).
    pub const ODP_PAGE_FAULT: u8 = 0x93;
    /// No public value known.
    pub const UNKNOWN: u8 = 0x00;
}

/// Completion-enable bits of `fm_ce_se` (bits 3:2 = 2: always a CQE).
pub(crate) const CE_ALWAYS: u8 = 0x08;
pub(crate) const CE_MASK: u8 = 0x0c;
/// The inline bit of a data-segment byte count.
pub(crate) const INLINE_BIT: u32 = 1 << 31;

pub(crate) fn be16(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}
pub(crate) fn be32(b: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
pub(crate) fn be64(b: &[u8], at: usize) -> u64 {
    ((be32(b, at) as u64) << 32) | be32(b, at + 4) as u64
}

/// The control segment (first 16 bytes of a WQE).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ctrl {
    pub opmod: u8,
    pub index: u16,
    pub opcode: u8,
    pub qpn: u32,
    pub ds: u8,
    pub fm_ce_se: u8,
    pub imm: [u8; 4],
}

pub(crate) fn ctrl(w: &[u8]) -> Ctrl {
    Ctrl {
        opmod: w[0],
        index: be16(w, 1),
        opcode: w[3],
        qpn: be32(w, 4) >> 8,
        ds: w[7] & 0x3f,
        fm_ce_se: w[11],
        imm: [w[12], w[13], w[14], w[15]],
    }
}

/// WQEBBs a WQE of `ds` units occupies (a ds of 0 still takes one).
pub(crate) fn wqebbs(ds: u8) -> u16 {
    ((ds as u16) + 3).max(4) / 4
}

/// One gather/scatter entry.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Sge {
    pub len: u32,
    pub key: u32,
    pub addr: u64,
}

/// Where a WQE's local data is.
#[derive(Clone, Debug)]
pub(crate) enum Payload {
    Sges(Vec<Sge>),
    Inline(Vec<u8>),
}

impl Payload {
    pub(crate) fn len(&self) -> u64 {
        match self {
            Payload::Sges(v) => v.iter().map(|s| s.len as u64).sum(),
            Payload::Inline(v) => v.len() as u64,
        }
    }
}

/// The data part of a WQE: units `from..ds` of `w`. An inline segment runs
/// to its byte count (padded to 16); data segments are 16 bytes each.
pub(crate) fn payload(w: &[u8], from: usize, ds: usize) -> Result<Payload, &'static str> {
    let end = ds * 16;
    let mut at = from * 16;
    if at > end {
        return Err("ds too small for the opcode's segments");
    }
    if at < end && be32(w, at) & INLINE_BIT != 0 {
        let len = (be32(w, at) & !INLINE_BIT) as usize;
        if at + 4 + len > end {
            return Err("inline byte count runs past ds");
        }
        return Ok(Payload::Inline(w[at + 4..at + 4 + len].to_vec()));
    }
    let mut v = Vec::new();
    while at < end {
        let bc = be32(w, at);
        if bc & INLINE_BIT != 0 {
            return Err("inline segment after data segments");
        }
        v.push(Sge {
            // A byte count of 0 means 2 GiB to the NIC.
            len: if bc == 0 { 1 << 31 } else { bc },
            key: be32(w, at + 4),
            addr: be64(w, at + 8),
        });
        at += 16;
    }
    Ok(Payload::Sges(v))
}

/// A CQE as the NIC writes it (owner bit added by the writer).
pub(crate) enum CqeOut {
    Req {
        wqe_opcode: u8,
        qpn: u32,
        counter: u16,
        byte_cnt: u32,
    },
    Err {
        wqe_opcode: u8,
        qpn: u32,
        counter: u16,
        syndrome: u8,
        vendor: u8,
    },
    /// A receive completed at a peer's real receive ring (`recv.rs`).
    Resp {
        /// CQE opcode: 1 WRITE_IMM, 2 SEND, 3 SEND_IMM.
        opcode: u8,
        qpn: u32,
        counter: u16,
        byte_cnt: u32,
        imm: [u8; 4],
        flags_rqpn: u32,
        /// The payload scattered into the CQE instead of the buffer.
        inline: Option<Vec<u8>>,
        /// With 128-byte CQEs: a payload of up to 32 bytes in format 1.
        format1: bool,
        /// Bytes 28..29, `hds_ip_ext` and `l4_hdr_type_etc`: what a raw
        /// packet QP's receive says about the frame (`eth_rx.rs`); zero
        /// for the RDMA receives.
        rx: [u8; 2],
    },
    RespErr {
        qpn: u32,
        counter: u16,
        syndrome: u8,
        vendor: u8,
    },
}

impl CqeOut {
    /// Bytes 0..63 and the final `op_own` byte without the owner bit, and
    /// for a payload scattered into a 128-byte entry, its first half.
    pub(crate) fn compose(&self, cqe128: bool) -> ([u8; 63], u8, Option<[u8; 64]>) {
        let mut b = [0u8; 63];
        if let CqeOut::Resp {
            opcode,
            qpn,
            counter,
            byte_cnt,
            imm,
            flags_rqpn,
            ref inline,
            format1,
            rx,
        } = *self
        {
            b[24..28].copy_from_slice(&flags_rqpn.to_be_bytes());
            b[28..30].copy_from_slice(&rx);
            b[36..40].copy_from_slice(&imm);
            b[44..48].copy_from_slice(&byte_cnt.to_be_bytes());
            b[56..60].copy_from_slice(&(qpn & 0x00ff_ffff).to_be_bytes());
            b[60..62].copy_from_slice(&counter.to_be_bytes());
            let own = opcode << 4;
            return match inline {
                // Format 2: the payload fills the entry's first 64 bytes.
                Some(p) if cqe128 && !(format1 && p.len() <= 32) => {
                    let mut half = [0u8; 64];
                    half[..p.len()].copy_from_slice(p);
                    (b, own | 2 << 2, Some(half))
                }
                // Format 1: the payload in the CQE's own bytes 0..31.
                Some(p) => {
                    b[..p.len()].copy_from_slice(p);
                    (b, own | 1 << 2, None)
                }
                None => (b, own, None),
            };
        }
        let (b, own) = self.compose_other(b);
        (b, own, None)
    }

    fn compose_other(&self, mut b: [u8; 63]) -> ([u8; 63], u8) {
        match *self {
            CqeOut::Resp { .. } => (b, 0xf0),
            CqeOut::RespErr {
                qpn,
                counter,
                syndrome,
                vendor,
            } => {
                b[54] = vendor;
                b[55] = syndrome;
                b[56..60].copy_from_slice(&(qpn & 0x00ff_ffff).to_be_bytes());
                b[60..62].copy_from_slice(&counter.to_be_bytes());
                (b, 0xe0)
            }
            CqeOut::Req {
                wqe_opcode,
                qpn,
                counter,
                byte_cnt,
            } => {
                b[44..48].copy_from_slice(&byte_cnt.to_be_bytes());
                b[56..60].copy_from_slice(&((wqe_opcode as u32) << 24 | qpn).to_be_bytes());
                b[60..62].copy_from_slice(&counter.to_be_bytes());
                (b, 0x00)
            }
            CqeOut::Err {
                wqe_opcode,
                qpn,
                counter,
                syndrome,
                vendor,
            } => {
                b[54] = vendor;
                b[55] = syndrome;
                b[56..60].copy_from_slice(&((wqe_opcode as u32) << 24 | qpn).to_be_bytes());
                b[60..62].copy_from_slice(&counter.to_be_bytes());
                (b, 0xd0)
            }
        }
    }
}
