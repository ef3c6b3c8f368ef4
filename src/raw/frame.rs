//! perftest's raw Ethernet frames, byte for byte (raw_ethernet_resources.c:
//! `create_raw_eth_pkt`, `build_pkt_on_buffer` and the `gen_*_header`
//! functions, as a little-endian host runs them).
//!
//! `-s` counts the 4-byte CRC the NIC appends: the frame handed to the NIC is
//! `size - 4` bytes, and perftest's "packet size" (the IPv4 total length) is
//! `size - 18`, 4 less again with a VLAN tag. Headers, in order: Ethernet
//! (802.1Q tag with `--vlan_en`), IPv4 (its checksum computed here) or IPv6
//! when `-J`/`-j` give an address, UDP (checksum 0) or TCP (`--tcp`) when both
//! ports are given. Without IP the ethertype field holds the length after
//! the Ethernet header (unless `-Y` names one). The bytes after the headers
//! are the buffer's content: perftest fills its buffers with `perftest_rand`
//! words before it writes the headers over their start ([`fill_rand`]).
//!
//! Kept as perftest writes them, though they are not what the RFCs say:
//! the IPv6 header carries neither `-T` (traffic class) nor `--flow_label`
//! (perftest puts both only in the steering rule); its payload length with a
//! UDP/TCP header is perftest's network-order value minus the L4 header
//! length, subtracted as a host integer; and the UDP length is the packet
//! size less an IPv4 header's 20 bytes, IPv6 or not. A stock perftest peer
//! sends and expects exactly these bytes.

/// Bytes the NIC adds to each frame (`HW_CRC_ADDITION`).
pub const CRC: usize = 4;
/// Ethernet header and CRC (`RAWETH_ADDITION`): `-s` less this is the packet size.
pub const RAWETH_ADDITION: usize = 18;
/// The smallest `-s` (`RAWETH_MIN_MSG_SIZE`).
pub const MIN_SIZE: usize = 64;
/// An 802.1Q tag.
pub const VLAN_TAG: usize = 4;
/// `-L`/`--hop_limit`'s default (`DEF_HOP_LIMIT`).
pub const DEF_HOP_LIMIT: u8 = 64;
/// `--vlan_pcp 8`: a different priority for each packet built.
pub const VLAN_PCP_VARIOUS: u8 = 8;

pub const ETHERTYPE_IPV4: u16 = 0x0800;
pub const ETHERTYPE_IPV6: u16 = 0x86dd;
const TPID: u16 = 0x8100;
const VLAN_VID: u16 = 1;
const UDP_PROTOCOL: u8 = 0x11;
const TCP_PROTOCOL: u8 = 0x06;
/// IPv6 next header without L4 ("no next header").
const IPV6_NO_NEXT: u8 = 0x3b;
const IPV4_HDR: usize = 20;
const IPV6_HDR: usize = 40;
const UDP_HDR: usize = 8;
const TCP_HDR: usize = 20;
const ETH_HDR: usize = 14;

/// The IP header's addresses (`-j` source, `-J` destination as the sender sees them).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ip {
    V4 { src: [u8; 4], dst: [u8; 4] },
    V6 { src: [u8; 16], dst: [u8; 16] },
}

/// UDP or TCP with the first flow's ports; flow `i` adds `i` to both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct L4 {
    pub tcp: bool,
    pub src_port: u16,
    pub dst_port: u16,
}

/// Everything a frame's bytes depend on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FrameSpec {
    /// `-s`: the frame on the wire, CRC included.
    pub size: usize,
    pub src_mac: [u8; 6],
    pub dst_mac: [u8; 6],
    pub header: HeaderOpts,
    pub ip: Option<Ip>,
    /// Only with an IP header (perftest's rules refuse ports without one).
    pub l4: Option<L4>,
}

/// The header fields the command line sets as they are, the same in every
/// frame of a run (the raw parameters hold them and hand them on to each
/// frame's spec). The default is perftest's: no tag, perftest's ethertype,
/// `-L 64`, TOS 0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeaderOpts {
    /// `--vlan_en`: the tag's priority (0..=7, or [`VLAN_PCP_VARIOUS`]).
    pub vlan_pcp: Option<u8>,
    /// `-Y`: replaces the ethertype perftest would choose.
    pub ethertype: Option<u16>,
    /// `-L`: IPv4 TTL, IPv6 hop limit.
    pub hop_limit: u8,
    /// `-T`: IPv4 TOS (0 when not given).
    pub tos: Option<u8>,
}

impl Default for HeaderOpts {
    fn default() -> Self {
        Self {
            vlan_pcp: None,
            ethertype: None,
            hop_limit: DEF_HOP_LIMIT,
            tos: None,
        }
    }
}

impl FrameSpec {
    /// A bare L2 frame of `size` bytes between two MACs.
    pub fn l2(size: usize, src_mac: [u8; 6], dst_mac: [u8; 6]) -> Self {
        Self {
            size,
            src_mac,
            dst_mac,
            header: HeaderOpts::default(),
            ip: None,
            l4: None,
        }
    }

    /// An IPv4/UDP frame (`-J`/`-j`, `-K`/`-k` without `--tcp`): the one the
    /// post paths, their tests and benches send.
    pub fn udp4(
        size: usize,
        macs: ([u8; 6], [u8; 6]),
        ips: ([u8; 4], [u8; 4]),
        ports: (u16, u16),
    ) -> Self {
        Self {
            ip: Some(Ip::V4 {
                src: ips.0,
                dst: ips.1,
            }),
            l4: Some(L4 {
                tcp: false,
                src_port: ports.0,
                dst_port: ports.1,
            }),
            ..Self::l2(size, macs.0, macs.1)
        }
    }

    /// The sample frame the selfcheck, the tests and the benches send: `size` bytes of
    /// UDP/IPv4 from 02:00:00:00:00:01, 10.0.0.1:5000 to 02:00:00:00:00:02, 10.0.0.2:6000.
    pub fn sample_udp4(size: usize) -> Self {
        Self::udp4(
            size,
            ([0x02, 0, 0, 0, 0, 1], [0x02, 0, 0, 0, 0, 2]),
            ([10, 0, 0, 1], [10, 0, 0, 2]),
            (5000, 6000),
        )
    }

    /// The bytes handed to the NIC: `-s` less the CRC.
    pub fn frame_len(&self) -> usize {
        self.size - CRC
    }

    /// Bytes from the Ethernet header up to the payload.
    pub fn header_len(&self) -> usize {
        let eth = ETH_HDR
            + if self.header.vlan_pcp.is_some() {
                VLAN_TAG
            } else {
                0
            };
        let ip = match self.ip {
            None => 0,
            Some(Ip::V4 { .. }) => IPV4_HDR,
            Some(Ip::V6 { .. }) => IPV6_HDR,
        };
        let l4 = match (self.ip, self.l4) {
            (Some(_), Some(L4 { tcp: true, .. })) => TCP_HDR,
            (Some(_), Some(L4 { tcp: false, .. })) => UDP_HDR,
            _ => 0,
        };
        eth + ip + l4
    }

    /// perftest's packet size: the IPv4 total length (`size - 18`, less a tag).
    fn pkt_size(&self) -> usize {
        let tag = if self.header.vlan_pcp.is_some() {
            VLAN_TAG
        } else {
            0
        };
        self.size - RAWETH_ADDITION - tag
    }

    /// The ethertype perftest writes (`create_raw_eth_pkt`).
    pub fn ethertype_field(&self) -> u16 {
        match (self.header.ethertype, self.ip) {
            (Some(t), _) => t,
            (None, Some(Ip::V4 { .. })) => ETHERTYPE_IPV4,
            (None, Some(Ip::V6 { .. })) => ETHERTYPE_IPV6,
            (None, None) => self.pkt_size() as u16,
        }
    }
}

/// perftest's buffer PRNG (`perftest_rand`), one 32-bit word per call.
pub fn perftest_rand(state: &mut u32) -> u32 {
    let x = *state;
    *state = x.wrapping_mul(747_796_405).wrapping_add(2_891_336_453);
    let word = ((x >> ((x >> 28) + 4)) ^ x).wrapping_mul(277_803_737);
    (word >> 22) ^ word
}

/// Fills `buf` as perftest fills a test buffer before writing headers:
/// `perftest_rand` words from `seed`, stored little-endian (a tail shorter
/// than a word is left as it was, as perftest's `buff_size / 4` loop does).
pub fn fill_rand(buf: &mut [u8], seed: u32) {
    let mut st = seed;
    for w in buf.chunks_exact_mut(4) {
        w.copy_from_slice(&perftest_rand(&mut st).to_le_bytes());
    }
}

/// The IPv4 header checksum (RFC 1071), as perftest's `ip_checksum` computes it.
pub fn ipv4_checksum(hdr: &[u8]) -> u16 {
    let mut sum: u32 = hdr
        .chunks_exact(2)
        .map(|w| u32::from(u16::from_be_bytes([w[0], w[1]])))
        .sum();
    while sum >> 16 != 0 {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// The 802.1Q priority of the `seq`-th packet perftest builds (0-based):
/// fixed, or with `--vlan_pcp 8` a counter that starts at 1.
pub fn vlan_pcp_of(pcp: u8, seq: u64) -> u8 {
    if pcp == VLAN_PCP_VARIOUS {
        ((seq + 1) & 7) as u8
    } else {
        pcp & 7
    }
}

/// Writes the headers of flow `flow`'s packet number `seq` over the start of
/// `frame`, which holds at least `spec.header_len()` bytes (the rules refuse
/// an `-s` too small for its headers); the payload is left as it is.
pub fn write_headers(spec: &FrameSpec, flow: u16, seq: u64, frame: &mut [u8]) {
    frame[0..6].copy_from_slice(&spec.dst_mac);
    frame[6..12].copy_from_slice(&spec.src_mac);
    let mut at = 12;
    if let Some(pcp) = spec.header.vlan_pcp {
        let tci = (u16::from(vlan_pcp_of(pcp, seq)) << 13) | VLAN_VID;
        frame[12..14].copy_from_slice(&TPID.to_be_bytes());
        frame[14..16].copy_from_slice(&tci.to_be_bytes());
        at = 16;
    }
    frame[at..at + 2].copy_from_slice(&spec.ethertype_field().to_be_bytes());
    at += 2;
    let Some(ip) = spec.ip else { return };
    let l4 = spec.l4;
    let proto = match l4 {
        Some(L4 { tcp: true, .. }) => TCP_PROTOCOL,
        Some(L4 { tcp: false, .. }) => UDP_PROTOCOL,
        None => 0,
    };
    let pkt = spec.pkt_size();
    at += match ip {
        Ip::V4 { src, dst } => ipv4(&mut frame[at..], src, dst, proto, pkt, &spec.header),
        Ip::V6 { src, dst } => ipv6(&mut frame[at..], src, dst, proto, pkt, &spec.header),
    };
    if let Some(l4) = l4 {
        let sport = l4.src_port.wrapping_add(flow);
        let dport = l4.dst_port.wrapping_add(flow);
        if l4.tcp {
            tcp(&mut frame[at..], sport, dport);
        } else {
            udp(&mut frame[at..], sport, dport, pkt);
        }
    }
}

fn ipv4(h: &mut [u8], src: [u8; 4], dst: [u8; 4], proto: u8, pkt: usize, o: &HeaderOpts) -> usize {
    let h = &mut h[..IPV4_HDR];
    h.fill(0);
    h[0] = 0x45;
    h[1] = o.tos.unwrap_or(0);
    h[2..4].copy_from_slice(&(pkt as u16).to_be_bytes());
    h[8] = o.hop_limit;
    h[9] = proto;
    h[12..16].copy_from_slice(&src);
    h[16..20].copy_from_slice(&dst);
    let sum = ipv4_checksum(h);
    h[10..12].copy_from_slice(&sum.to_be_bytes());
    IPV4_HDR
}

fn ipv6(
    h: &mut [u8],
    src: [u8; 16],
    dst: [u8; 16],
    proto: u8,
    pkt: usize,
    o: &HeaderOpts,
) -> usize {
    let h = &mut h[..IPV6_HDR];
    h.fill(0);
    h[0] = 0x60;
    h[4..6].copy_from_slice(&ipv6_payload_len(pkt, proto).to_be_bytes());
    h[6] = if proto == 0 { IPV6_NO_NEXT } else { proto };
    h[7] = o.hop_limit;
    h[8..24].copy_from_slice(&src);
    h[24..40].copy_from_slice(&dst);
    IPV6_HDR
}

/// The IPv6 payload length field as perftest leaves it on a little-endian
/// host: `htons(pkt - 40)`, then the L4 header's length subtracted from that
/// network-order value as a host integer (returned as the big-endian value
/// a parser reads from the two bytes).
pub fn ipv6_payload_len(pkt: usize, proto: u8) -> u16 {
    let be = ((pkt - IPV6_HDR) as u16).swap_bytes();
    let host = match proto {
        TCP_PROTOCOL => be.wrapping_sub(TCP_HDR as u16),
        UDP_PROTOCOL => be.wrapping_sub(UDP_HDR as u16),
        _ => be,
    };
    host.swap_bytes()
}

fn udp(h: &mut [u8], sport: u16, dport: u16, pkt: usize) {
    let h = &mut h[..UDP_HDR];
    h[0..2].copy_from_slice(&sport.to_be_bytes());
    h[2..4].copy_from_slice(&dport.to_be_bytes());
    h[4..6].copy_from_slice(&((pkt - IPV4_HDR) as u16).to_be_bytes());
    h[6..8].fill(0);
}

fn tcp(h: &mut [u8], sport: u16, dport: u16) {
    let h = &mut h[..TCP_HDR];
    h.fill(0);
    h[0..2].copy_from_slice(&sport.to_be_bytes());
    h[2..4].copy_from_slice(&dport.to_be_bytes());
    h[12] = 5 << 4;
    h[14..16].copy_from_slice(&8192u16.to_be_bytes());
}

/// One whole frame (CRC excluded) as it sits at the start of perftest's
/// buffer: its payload is `perftest_rand(seed)`'s words, the last one cut
/// where the frame ends (the buffer goes on past it).
pub fn frame(spec: &FrameSpec, flow: u16, seq: u64, seed: u32) -> Vec<u8> {
    let len = spec.frame_len();
    let mut f = vec![0u8; len.next_multiple_of(4)];
    fill_rand(&mut f, seed);
    write_headers(spec, flow, seq, &mut f);
    f.truncate(len);
    f
}

#[cfg(test)]
mod tests {
    use super::*;

    const SRC: [u8; 6] = [0x00, 0x11, 0x22, 0x33, 0x44, 0x55];
    const DST: [u8; 6] = [0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb];

    fn udp4(size: usize) -> FrameSpec {
        FrameSpec::udp4(size, (SRC, DST), ([1, 1, 1, 1], [2, 2, 2, 2]), (5000, 6000))
    }

    #[test]
    fn ipv4_udp_64_bytes_golden() {
        let f = frame(&udp4(64), 0, 0, 1);
        assert_eq!(f.len(), 60);
        #[rustfmt::skip]
        let want: [u8; 42] = [
            0x66, 0x77, 0x88, 0x99, 0xaa, 0xbb, 0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x08, 0x00,
            0x45, 0x00, 0x00, 0x2e, 0x00, 0x00, 0x00, 0x00, 0x40, 0x11, 0x74, 0xba,
            1, 1, 1, 1, 2, 2, 2, 2,
            0x13, 0x88, 0x17, 0x70, 0x00, 0x1a, 0x00, 0x00,
        ];
        assert_eq!(&f[..42], &want);
    }

    #[test]
    fn payload_is_perftest_rand_from_the_buffer_start() {
        let f = frame(&udp4(128), 0, 0, 7);
        let mut st = 7;
        let words: Vec<u8> = (0..31)
            .flat_map(|_| perftest_rand(&mut st).to_le_bytes())
            .collect();
        assert_eq!(&f[42..], &words[42..124]);
        // A different seed gives a different payload, same headers.
        let g = frame(&udp4(128), 0, 0, 8);
        assert_eq!(f[..42], g[..42]);
        assert_ne!(f[42..], g[42..]);
    }

    #[test]
    fn perftest_rand_first_words() {
        // perftest_rand(state = 0): x = 0 gives word 0; then state 2891336453.
        let mut st = 0;
        assert_eq!(perftest_rand(&mut st), 0);
        assert_eq!(st, 2_891_336_453);
        let x: u32 = 2_891_336_453;
        let w = ((x >> ((x >> 28) + 4)) ^ x).wrapping_mul(277_803_737);
        assert_eq!(perftest_rand(&mut st), (w >> 22) ^ w);
    }

    #[test]
    fn without_ip_the_ethertype_is_the_length() {
        let s = FrameSpec::l2(64, SRC, DST);
        assert_eq!(s.ethertype_field(), 46);
        assert_eq!(s.header_len(), 14);
        let mut v = s;
        v.header.vlan_pcp = Some(3);
        assert_eq!(v.ethertype_field(), 42);
        let mut y = v;
        y.header.ethertype = Some(0x88b5);
        let f = frame(&y, 0, 0, 1);
        assert_eq!(&f[12..18], &[0x81, 0x00, 0x60, 0x01, 0x88, 0xb5]);
    }

    #[test]
    fn vlan_pcp_various_counts_from_one() {
        let pcps: Vec<u8> = (0..9).map(|n| vlan_pcp_of(VLAN_PCP_VARIOUS, n)).collect();
        assert_eq!(pcps, [1, 2, 3, 4, 5, 6, 7, 0, 1]);
        assert_eq!(vlan_pcp_of(5, 99), 5);
        let mut s = udp4(64);
        s.header.vlan_pcp = Some(VLAN_PCP_VARIOUS);
        let f = frame(&s, 0, 6, 1);
        assert_eq!(&f[12..16], &[0x81, 0x00, 0xe0, 0x01]);
        // The IPv4 total length loses the tag's 4 bytes.
        assert_eq!(&f[18..22], &[0x45, 0x00, 0x00, 0x2a]);
    }

    #[test]
    fn tos_ttl_and_checksum() {
        let mut s = udp4(1500);
        s.header.tos = Some(0xb8);
        s.header.hop_limit = 1;
        let f = frame(&s, 0, 0, 1);
        assert_eq!(f[15], 0xb8);
        assert_eq!(f[22], 1);
        assert_eq!(ipv4_checksum(&f[14..34]), 0, "a valid header sums to 0");
    }

    #[test]
    fn flows_add_their_index_to_both_ports() {
        let f = frame(&udp4(64), 3, 0, 1);
        assert_eq!(&f[34..38], &[0x13, 0x8b, 0x17, 0x73]);
        let wrap = FrameSpec {
            l4: Some(L4 {
                tcp: false,
                src_port: 65535,
                dst_port: 1,
            }),
            ..udp4(64)
        };
        assert_eq!(&frame(&wrap, 1, 0, 1)[34..38], &[0, 0, 0, 2]);
    }

    #[test]
    fn tcp_header_as_perftest_writes_it() {
        let s = FrameSpec {
            l4: Some(L4 {
                tcp: true,
                src_port: 1,
                dst_port: 2,
            }),
            ..udp4(64)
        };
        let f = frame(&s, 0, 0, 1);
        assert_eq!(f[23], 6);
        assert_eq!(
            &f[34..54],
            &[0, 1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0x50, 0, 0x20, 0, 0, 0, 0, 0]
        );
        assert_eq!(s.header_len(), 54);
    }

    #[test]
    fn ipv6_payload_length_is_perftests() {
        // No L4: the plain length after the IPv6 header.
        assert_eq!(ipv6_payload_len(46, 0), 6);
        // UDP at -s 64: htons(6) - 8 on a little-endian host = 0x05f8 in
        // memory order f8 05, read back big-endian as 0xf805.
        assert_eq!(ipv6_payload_len(46, UDP_PROTOCOL), 0xf805);
        // TCP at a packet of 1000: 960 = 0x03c0, host value 0xc003 - 20 =
        // 0xbfef, bytes ef bf.
        assert_eq!(ipv6_payload_len(1000, TCP_PROTOCOL), 0xefbf);
        let mut s = FrameSpec {
            ip: Some(Ip::V6 {
                src: [0xfe; 16],
                dst: [0xfd; 16],
            }),
            l4: None,
            ..udp4(64)
        };
        s.header.tos = Some(0xff);
        let f = frame(&s, 0, 0, 1);
        assert_eq!(&f[12..22], &[0x86, 0xdd, 0x60, 0, 0, 0, 0, 6, 0x3b, 64]);
    }
}
