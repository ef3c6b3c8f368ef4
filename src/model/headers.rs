//! The model NIC's own reading of a frame's headers: the destination MAC,
//! one 802.1Q tag, IPv4/IPv6 addresses and lengths, the TCP/UDP ports, and
//! what it writes about them into a receive CQE (`hds_ip_ext`: L2/L3/L4
//! OK; `l4_hdr_type_etc`: the L3 and L4 header types): the IPv4 header
//! checksum verified, the TCP/UDP checksum over the pseudo-header. A UDP
//! checksum of 0 over IPv4 means "none sent" (RFC 768) and counts as good;
//! over IPv6 it is not allowed (RFC 8200 §8.1) and counts as bad. Also the
//! send side's checksum offload (`fill_checksums`, for `cs_flags`).
//!
//! Imports nothing from the crate: it shares nothing with `raw::frame`,
//! which builds the frames, nor with `mlx5`, which reads the CQE.

/// `hds_ip_ext` bits (PRM; mlx5dv.h `MLX5_CQE_L2_OK` ...).
const L2_OK: u8 = 1 << 0;
const L3_OK: u8 = 1 << 1;
const L4_OK: u8 = 1 << 2;
/// `l4_hdr_type_etc`: the L3 type in bits 3:2, the L4 type in bits 6:4.
const L3_IPV6: u8 = 1 << 2;
const L3_IPV4: u8 = 2 << 2;
const L4_TCP: u8 = 1 << 4;
const L4_UDP: u8 = 2 << 4;
const L4_TCP_EMPTY_ACK: u8 = 3 << 4;
const L4_TCP_ACK: u8 = 4 << 4;

/// The IP header as the NIC read it.
#[derive(Debug)]
pub(crate) struct Ip {
    pub(crate) v6: bool,
    /// IPv4 addresses in the first 4 bytes.
    pub(crate) src: [u8; 16],
    pub(crate) dst: [u8; 16],
    /// IPv4: the header checksum verifies and the lengths fit the frame;
    /// IPv6: the payload length fits the frame.
    ok: bool,
}

/// The TCP/UDP header as the NIC read it.
#[derive(Debug)]
pub(crate) struct L4 {
    pub(crate) tcp: bool,
    pub(crate) src_port: u16,
    pub(crate) dst_port: u16,
    /// The CQE's L4 type.
    kind: u8,
    ok: bool,
}

/// A frame's headers, as far as the NIC reads them.
#[derive(Debug)]
pub(crate) struct Headers {
    pub(crate) dst_mac: [u8; 6],
    pub(crate) ip: Option<Ip>,
    pub(crate) l4: Option<L4>,
}

fn be16(f: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([f[at], f[at + 1]])
}

/// The ones'-complement sum of `b` (odd length padded with 0) added to `acc`.
fn sum16(mut acc: u32, b: &[u8]) -> u32 {
    for c in b.chunks(2) {
        acc += u32::from(c[0]) << 8 | u32::from(c.get(1).copied().unwrap_or(0));
    }
    acc
}

fn fold(mut acc: u32) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

impl Headers {
    /// Reads `f` (at least 14 bytes: the port sends nothing shorter).
    pub(crate) fn parse(f: &[u8]) -> Self {
        let mut h = Headers {
            dst_mac: f[..6].try_into().unwrap_or([0; 6]),
            ip: None,
            l4: None,
        };
        let (mut at, mut ty) = (14, be16(f, 12));
        if ty == 0x8100 && f.len() >= 18 {
            (at, ty) = (18, be16(f, 16));
        }
        let l4 = match ty {
            0x0800 => h.ipv4(f, at),
            0x86dd => h.ipv6(f, at),
            _ => None,
        };
        if let Some((proto, from, to, fits)) = l4 {
            h.l4 = read_l4(f, proto, (from, to), fits, h.ip.as_ref());
        }
        h
    }

    /// The IPv4 header at `at`: the protocol, where L4 starts and ends (the
    /// frame's end when the total length runs past it) and whether the
    /// length fits.
    fn ipv4(&mut self, f: &[u8], at: usize) -> Option<(u8, usize, usize, bool)> {
        if f.len() < at + 20 || f[at] >> 4 != 4 {
            return None;
        }
        let ihl = (f[at] & 0x0f) as usize * 4;
        let total = be16(f, at + 2) as usize;
        let fits = ihl >= 20 && total >= ihl && at + total <= f.len();
        let sum_ok = f.len() >= at + ihl && fold(sum16(0, &f[at..at + ihl.max(20)])) == 0xffff;
        let mut ip = Ip {
            v6: false,
            src: [0; 16],
            dst: [0; 16],
            ok: fits && sum_ok,
        };
        ip.src[..4].copy_from_slice(&f[at + 12..at + 16]);
        ip.dst[..4].copy_from_slice(&f[at + 16..at + 20]);
        self.ip = Some(ip);
        // Fragments past the first carry no L4 header.
        let frag_off = be16(f, at + 6) & 0x1fff;
        let end = if fits { at + total } else { f.len() };
        (ihl >= 20 && frag_off == 0).then_some((f[at + 9], at + ihl, end, fits))
    }

    /// The IPv6 header at `at` (no extension headers).
    fn ipv6(&mut self, f: &[u8], at: usize) -> Option<(u8, usize, usize, bool)> {
        if f.len() < at + 40 || f[at] >> 4 != 6 {
            return None;
        }
        let end = at + 40 + be16(f, at + 4) as usize;
        let fits = end <= f.len();
        self.ip = Some(Ip {
            v6: true,
            src: f[at + 8..at + 24].try_into().unwrap_or([0; 16]),
            dst: f[at + 24..at + 40].try_into().unwrap_or([0; 16]),
            ok: fits,
        });
        Some((f[at + 6], at + 40, end.min(f.len()), fits))
    }

    /// The CQE's `hds_ip_ext` and `l4_hdr_type_etc` for this frame.
    pub(crate) fn cqe_bytes(&self) -> [u8; 2] {
        let mut ok = L2_OK;
        let mut ty = 0;
        if let Some(ip) = &self.ip {
            ty |= if ip.v6 { L3_IPV6 } else { L3_IPV4 };
            ok |= if ip.ok { L3_OK } else { 0 };
        }
        if let Some(l4) = &self.l4 {
            ty |= l4.kind;
            ok |= if l4.ok { L4_OK } else { 0 };
        }
        [ok, ty]
    }
}

/// The TCP (6) or UDP (17) header in `f[from..to]`, its checksum checked
/// when the IP length fits the frame (the type is read either way, as the
/// NIC's parser follows the protocol field).
fn read_l4(
    f: &[u8],
    proto: u8,
    (from, to): (usize, usize),
    fits: bool,
    ip: Option<&Ip>,
) -> Option<L4> {
    let (tcp, min) = match proto {
        6 => (true, 20),
        17 => (false, 8),
        _ => return None,
    };
    let ip = ip?;
    if to < from + min {
        return None;
    }
    let seg = &f[from..to];
    let csum = be16(seg, if tcp { 16 } else { 6 });
    let ok = if !fits {
        false
    } else if !tcp && csum == 0 {
        !ip.v6 // no checksum sent: allowed over IPv4 only
    } else {
        let addrs = if ip.v6 { 16 } else { 4 };
        let mut acc = sum16(0, &ip.src[..addrs]);
        acc = sum16(acc, &ip.dst[..addrs]);
        acc += u32::from(proto) + seg.len() as u32;
        fold(sum16(acc, seg)) == 0xffff
    };
    let kind = if !tcp {
        L4_UDP
    } else if seg[13] & 0x10 == 0 {
        L4_TCP
    } else if seg.len() == ((seg[12] >> 4) as usize * 4) {
        L4_TCP_EMPTY_ACK
    } else {
        L4_TCP_ACK
    };
    Some(L4 {
        tcp,
        src_port: be16(seg, 0),
        dst_port: be16(seg, 2),
        kind,
        ok,
    })
}

/// The send side's checksum offload (an Ethernet segment's `cs_flags`:
/// `l3` the IPv4 header checksum, `l4` the TCP/UDP checksum over the
/// pseudo-header), written into `f` as a NIC fills them. Only where the IP
/// lengths fit the frame (perftest's IPv6 payload length never does: such a
/// frame goes out as it was); a UDP checksum that computes to 0 is sent as
/// 0xffff (RFC 768).
pub(crate) fn fill_checksums(f: &mut [u8], l3: bool, l4: bool) {
    let at = if f.len() >= 18 && be16(f, 12) == 0x8100 {
        18
    } else {
        14
    };
    let ty = if f.len() >= at { be16(f, at - 2) } else { 0 };
    let h = Headers::parse(f);
    let (Some(ip), true) = (&h.ip, ty == 0x0800 || ty == 0x86dd) else {
        return;
    };
    let (v6, src, dst) = (ip.v6, ip.src, ip.dst);
    let (hdr, proto, end) = if v6 {
        (40, f[at + 6], at + 40 + be16(f, at + 4) as usize)
    } else {
        (
            (f[at] & 0x0f) as usize * 4,
            f[at + 9],
            at + be16(f, at + 2) as usize,
        )
    };
    if hdr < 20 || end > f.len() || at + hdr > end {
        return;
    }
    if l3 && !v6 {
        f[at + 10..at + 12].fill(0);
        let c = !fold(sum16(0, &f[at..at + hdr]));
        f[at + 10..at + 12].copy_from_slice(&c.to_be_bytes());
    }
    let from = at + hdr;
    let off = match proto {
        6 if end >= from + 20 => 16,
        17 if end >= from + 8 => 6,
        _ => return,
    };
    if l4 {
        let addrs = if v6 { 16 } else { 4 };
        f[from + off..from + off + 2].fill(0);
        let mut acc = sum16(sum16(0, &src[..addrs]), &dst[..addrs]);
        acc += u32::from(proto) + (end - from) as u32;
        let mut c = !fold(sum16(acc, &f[from..end]));
        if proto == 17 && c == 0 {
            c = 0xffff;
        }
        f[from + off..from + off + 2].copy_from_slice(&c.to_be_bytes());
    }
}

/// A 14-byte Ethernet header, a 20-byte IPv4 header (192.168.0.1 to
/// 192.168.0.199, its checksum computed here), then 8 bytes of UDP (ports
/// 12345 to 53) with checksum 0: for the model's unit tests.
#[cfg(test)]
pub(crate) fn v4_udp() -> Vec<u8> {
    let mut f = vec![2, 0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 2, 0x08, 0x00];
    f.extend_from_slice(&[
        0x45, 0x00, 0x00, 0x1c, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8, 0x00,
        0x01, 0xc0, 0xa8, 0x00, 0xc7,
    ]);
    let c = !fold(sum16(0, &f[14..34]));
    f[24..26].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&[0x30, 0x39, 0x00, 0x35, 0x00, 0x08, 0x00, 0x00]);
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_ipv4_udp_frame_is_typed_and_checked() {
        let f = v4_udp();
        let h = Headers::parse(&f);
        assert_eq!(h.cqe_bytes(), [L2_OK | L3_OK | L4_OK, L3_IPV4 | L4_UDP]);
        let mut bad = f.clone();
        bad[24] ^= 1;
        assert_eq!(Headers::parse(&bad).cqe_bytes()[0], L2_OK | L4_OK);
        // A wrong UDP checksum (not 0) is caught.
        let mut bad = f;
        bad[41] = 1;
        assert_eq!(Headers::parse(&bad).cqe_bytes()[0], L2_OK | L3_OK);
    }

    #[test]
    fn checksum_offload_fills_what_the_receive_side_checks() {
        let mut f = v4_udp();
        f[24..26].fill(0);
        f[40] = 0x12; // a non-zero UDP checksum that is wrong
        assert_eq!(Headers::parse(&f).cqe_bytes()[0], L2_OK);
        fill_checksums(&mut f, true, false);
        assert_eq!(Headers::parse(&f).cqe_bytes()[0], L2_OK | L3_OK);
        fill_checksums(&mut f, false, true);
        assert_eq!(Headers::parse(&f).cqe_bytes()[0], L2_OK | L3_OK | L4_OK);
    }
}
