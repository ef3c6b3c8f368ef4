//! The model's Ethernet port: a raw packet QP's WQEs read as the PRM lays
//! them out, each frame reassembled (inline header, then data pointers
//! gathered from registered memory, or inline bytes) and put on the wire, a
//! list of frames a test compares or records with `raw::pcap`.
//!
//! Its own reading of the bytes, sharing nothing with `crate::mlx5`'s
//! encoders:
//! - SEND (0x0a): ctrl, Ethernet segment (`inline_hdr_sz` big-endian at
//!   byte 12, the header from byte 14, the segment padded to 16 bytes),
//!   then data segments (pointer, or inline with bit 31 of the byte count);
//!   one frame. An inline header shorter than the device's minimum is
//!   refused, as a ConnectX-4 Lx refuses it.
//! - ENHANCED_MPSW (0x29): ctrl, an Ethernet segment without inline
//!   header, then one segment per frame (pointer, or inline padded to 16);
//!   at most 32 frames and 60 units. Refused where the device wants a
//!   minimum inline (eMPW is off there).
//!
//! The Ethernet segment's `cs_flags` are honoured: with L3 the NIC writes
//! the IPv4 header checksum, with L4 the TCP/UDP checksum (`flow.rs`).
//!
//! A WQE that does not parse completes with a local QP operation error and
//! sends nothing; the reason is kept in [`EthPort::rejected`].

use super::decode::{synd, vendor, Ctrl};
use super::headers::fill_checksums;

const OP_SEND: u8 = 0x0a;
const OP_EMPW: u8 = 0x29;
const INLINE: u32 = 1 << 31;
/// PRM limits of one eMPW WQE.
const EMPW_PACKETS: usize = 32;
const EMPW_UNITS: usize = 60;
/// An Ethernet header: no frame is shorter.
const ETH_HDR: usize = 14;
/// The Ethernet segment's `cs_flags` (WQE byte 16 + 4) and its bits: the
/// NIC fills the IPv4 header checksum (L3) and the TCP/UDP one (L4).
const CS_FLAGS: usize = 20;
const CS_L3: u8 = 1 << 6;
const CS_L4: u8 = 1 << 7;

/// Where a frame's bytes are: a range of the WQE, or registered memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Piece {
    Wqe { at: usize, len: usize },
    Ptr { key: u32, addr: u64, len: u32 },
}

/// The frames a port has sent and the WQEs it refused.
#[derive(Default, Debug)]
pub(crate) struct EthPort {
    pub(crate) wire: Vec<Vec<u8>>,
    pub(crate) rejected: Vec<&'static str>,
}

fn be32(w: &[u8], at: usize) -> u32 {
    u32::from_be_bytes([w[at], w[at + 1], w[at + 2], w[at + 3]])
}

/// One segment at byte `at` (before `end`): the piece and where the next
/// segment starts.
fn segment(w: &[u8], at: usize, end: usize) -> Result<(Piece, usize), &'static str> {
    let bc = be32(w, at);
    if bc & INLINE != 0 {
        let len = (bc & !INLINE) as usize;
        let next = (at + 4 + len).next_multiple_of(16);
        if len == 0 || next > end {
            return Err("inline segment runs past ds (missing or wrong byte count)");
        }
        return Ok((Piece::Wqe { at: at + 4, len }, next));
    }
    if bc == 0 {
        return Err("data segment with byte count 0");
    }
    let addr = u64::from_be_bytes(w[at + 8..at + 16].try_into().unwrap_or([0; 8]));
    let key = be32(w, at + 4);
    Ok((Piece::Ptr { key, addr, len: bc }, at + 16))
}

/// The Ethernet segment at byte 16: its inline header (as a piece, maybe
/// empty) and where the next segment starts.
fn eth_seg(w: &[u8], end: usize) -> Result<(Piece, usize), &'static str> {
    if end < 32 {
        return Err("ds too small for ctrl and Ethernet segments");
    }
    let sz = u16::from_be_bytes([w[28], w[29]]) as usize;
    let next = (16 + 14 + sz).next_multiple_of(16);
    if next > end {
        return Err("inline header runs past ds");
    }
    Ok((Piece::Wqe { at: 30, len: sz }, next))
}

/// A raw SEND: one frame, its pieces in order.
pub(crate) fn parse_send(
    w: &[u8],
    ds: usize,
    min_inline: usize,
) -> Result<Vec<Piece>, &'static str> {
    let end = ds * 16;
    let (hdr, mut at) = eth_seg(w, end)?;
    if matches!(hdr, Piece::Wqe { len, .. } if len < min_inline) {
        return Err("inline header shorter than the device's minimum inline");
    }
    let mut v = vec![hdr];
    while at < end {
        let (p, next) = segment(w, at, end)?;
        v.push(p);
        at = next;
    }
    Ok(v)
}

/// An eMPW WQE: one frame per segment after the Ethernet segment.
pub(crate) fn parse_empw(
    w: &[u8],
    ds: usize,
    min_inline: usize,
) -> Result<Vec<Piece>, &'static str> {
    if min_inline != 0 {
        return Err("eMPW on a device that wants a minimum inline header");
    }
    if ds > EMPW_UNITS {
        return Err("eMPW WQE over 60 units");
    }
    let end = ds * 16;
    let (hdr, mut at) = eth_seg(w, end)?;
    if hdr != (Piece::Wqe { at: 30, len: 0 }) {
        return Err("eMPW Ethernet segment with an inline header");
    }
    let mut v = Vec::new();
    while at < end {
        let (p, next) = segment(w, at, end)?;
        v.push(p);
        at = next;
    }
    if v.is_empty() || v.len() > EMPW_PACKETS {
        return Err("eMPW WQE with no packet or more than 32");
    }
    Ok(v)
}

impl EthPort {
    /// Executes a raw QP's WQE `w`: its frames go on the wire, or none when
    /// it does not parse or a pointer is outside registered memory
    /// (`mr_ok(key, addr, len)`). Returns the bytes sent.
    pub(crate) fn exec(
        &mut self,
        w: &[u8],
        c: &Ctrl,
        min_inline: usize,
        mr_ok: impl Fn(u32, u64, u64) -> bool,
    ) -> Result<u32, (u8, u8)> {
        let ds = c.ds as usize;
        let parsed = match c.opcode {
            OP_SEND => parse_send(w, ds, min_inline).map(|v| vec![v]),
            OP_EMPW => {
                parse_empw(w, ds, min_inline).map(|v| v.into_iter().map(|p| vec![p]).collect())
            }
            _ => return Err((synd::LOCAL_QP_OP, vendor::BAD_OPCODE)),
        };
        let cs = w.get(CS_FLAGS).copied().unwrap_or(0);
        let frames = parsed.and_then(|fs| {
            fs.iter()
                .map(|f| {
                    let mut f = assemble(w, f, &mr_ok)?;
                    if cs & (CS_L3 | CS_L4) != 0 {
                        fill_checksums(&mut f, cs & CS_L3 != 0, cs & CS_L4 != 0);
                    }
                    Ok(f)
                })
                .collect::<Result<Vec<_>, _>>()
        });
        match frames {
            Ok(fs) => {
                let bytes = fs.iter().map(|f| f.len() as u32).sum();
                self.wire.extend(fs);
                Ok(bytes)
            }
            Err(why) => {
                self.rejected.push(why);
                if why == NOT_REGISTERED {
                    Err((synd::LOCAL_PROT, vendor::LKEY))
                } else {
                    Err((synd::LOCAL_QP_OP, vendor::MALFORMED))
                }
            }
        }
    }
}

const NOT_REGISTERED: &str = "data pointer outside registered memory (lkey or range)";

/// A frame from its pieces.
fn assemble(
    w: &[u8],
    pieces: &[Piece],
    mr_ok: &impl Fn(u32, u64, u64) -> bool,
) -> Result<Vec<u8>, &'static str> {
    let mut f = Vec::new();
    for p in pieces {
        match *p {
            Piece::Wqe { at, len } => f.extend_from_slice(&w[at..at + len]),
            Piece::Ptr { key, addr, len } => {
                if !mr_ok(key, addr, len as u64) {
                    return Err(NOT_REGISTERED);
                }
                let at = f.len();
                f.resize(at + len as usize, 0);
                // SAFETY: the range lies in a registered region, which
                // `Model::register`'s contract keeps valid and readable.
                unsafe { std::ptr::copy(addr as *const u8, f.as_mut_ptr().add(at), len as usize) };
            }
        }
    }
    if f.len() < ETH_HDR {
        return Err("frame shorter than an Ethernet header");
    }
    Ok(f)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::decode::ctrl;

    /// An eMPW WQE by hand: two inline 20-byte frames (units 2..4, 4..6).
    fn empw(ds: u8) -> Vec<u8> {
        let mut w = vec![0u8; 128];
        w[3] = OP_EMPW;
        w[7] = ds;
        for (k, at) in [(0u8, 32usize), (1, 64)] {
            w[at..at + 4].copy_from_slice(&(20 | INLINE).to_be_bytes());
            w[at + 4..at + 24].fill(0xa0 + k);
        }
        w
    }

    fn run(w: &[u8], min_inline: usize) -> (Result<u32, (u8, u8)>, EthPort) {
        let mut port = EthPort::default();
        let r = port.exec(w, &ctrl(w), min_inline, |_, _, _| true);
        (r, port)
    }

    #[test]
    fn a_well_formed_empw_sends_its_frames() {
        let (r, port) = run(&empw(6), 0);
        assert_eq!(r, Ok(40));
        assert_eq!(port.wire, vec![vec![0xa0; 20], vec![0xa1; 20]]);
    }

    #[test]
    fn a_wrong_ds_or_a_missing_pad_is_caught() {
        // ds one short: the second frame's inline data runs past ds.
        let (r, port) = run(&empw(5), 0);
        assert_eq!(r, Err((synd::LOCAL_QP_OP, vendor::MALFORMED)));
        assert!(port.wire.is_empty(), "nothing of a refused WQE is sent");
        // ds one long: an empty unit is a data segment with byte count 0.
        assert!(run(&empw(7), 0).0.is_err());
        // No pad: the second frame right after the first's 24 bytes; the
        // decoder reads its byte count where the pad should be.
        let mut w = empw(6);
        let second: Vec<u8> = w[64..88].to_vec();
        w[56..80].copy_from_slice(&second);
        w[80..88].fill(0);
        let (r, port) = run(&w, 0);
        assert!(
            r.is_err() || port.wire != empw_frames(),
            "a missing pad must not pass"
        );
        // A device with a minimum inline refuses eMPW.
        assert!(run(&empw(6), 18).0.is_err());
    }

    fn empw_frames() -> Vec<Vec<u8>> {
        vec![vec![0xa0; 20], vec![0xa1; 20]]
    }

    #[test]
    fn a_send_must_carry_the_minimum_inline() {
        // SEND, ds 3: ctrl, Ethernet segment without inline header, 12
        // bytes inline in unit 2: shorter than an Ethernet header.
        let mut w = vec![0u8; 64];
        w[3] = OP_SEND;
        w[7] = 3;
        w[32..36].copy_from_slice(&(12 | INLINE).to_be_bytes());
        assert!(run(&w, 0).0.is_err(), "a 12-byte frame is refused");
        // 18 bytes inline in the Ethernet segment, 12 more inline: 30 bytes.
        w[7] = 4;
        w[28..30].copy_from_slice(&18u16.to_be_bytes());
        w[30..48].fill(0x11);
        w[48..52].copy_from_slice(&(12 | INLINE).to_be_bytes());
        w[52..64].fill(0x22);
        let (r, port) = run(&w, 18);
        assert_eq!(r, Ok(30));
        assert_eq!(port.wire[0][..18], [0x11; 18]);
        assert_eq!(port.wire[0][18..], [0x22; 12]);
        // Without the inline header, an 18-byte-minimum device refuses it.
        w[28..30].fill(0);
        w[7] = 3;
        w[32..36].copy_from_slice(&(12 | INLINE).to_be_bytes());
        let (r, port) = run(&w, 18);
        assert!(r.is_err());
        assert_eq!(
            port.rejected,
            ["inline header shorter than the device's minimum inline"]
        );
    }
}
