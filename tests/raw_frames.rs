//! perftest's raw Ethernet frames as rdmaperf builds them, read back with a
//! parser that is not rdmaperf's encoder (etherparse): every header variant
//! the raw tools' flags give, from the command line through `raw::params` to
//! `raw::frame`. Checked: each header's fields, the IPv4 checksum, the frame
//! size (`-s` less the CRC), the payload (perftest's buffer PRNG, written
//! here from perftest's C), and perftest's own quirks (IPv6 payload length,
//! UDP length). The frames are left in target/raw-frames.pcap (linktype
//! Ethernet), read back here, and by `tcpdump -r` where tcpdump is installed.

use etherparse::{Ethernet2Header, Ipv4Header, Ipv6Header, SingleVlanHeader, TcpHeader, UdpHeader};
use rdmaperf::raw::frame::{self, FrameSpec, Ip};
use rdmaperf::raw::pcap::{self, PcapWriter};
use rdmaperf::raw::{args, params, tools::RawTool};

const SEED: u32 = 0x1234_5678;

/// perftest_resources.c's `perftest_rand`, written out again from the C.
fn prng_bytes(n: usize) -> Vec<u8> {
    let mut st: u32 = SEED;
    let mut out = Vec::with_capacity(n + 4);
    while out.len() < n {
        let x = st;
        st = x.wrapping_mul(747796405).wrapping_add(2891336453);
        let w = ((x >> ((x >> 28) + 4)) ^ x).wrapping_mul(277803737);
        out.extend_from_slice(&((w >> 22) ^ w).to_le_bytes());
    }
    out
}

fn spec(tool: RawTool, cmd: &str) -> FrameSpec {
    let argv: Vec<String> = cmd.split_whitespace().map(String::from).collect();
    let a = args::parse(&argv).unwrap_or_else(|e| panic!("{cmd}: {e}"));
    params::resolve(tool, &a)
        .unwrap_or_else(|e| panic!("{cmd}: {e}"))
        .frame_spec()
}

const MACS: &str = "-B 02:00:00:00:00:01 -E 02:00:00:00:00:02";
const V4: &str = "-j 10.0.0.1 -J 10.0.0.2";
const V6: &str = "--raw_ipv6 -j fd00::1 -J fd00::2";
const PORTS: &str = "-k 5000 -K 6000";

/// (name, tool, command line, flows to build).
fn variants() -> Vec<(String, RawTool, String, u16)> {
    let bw = RawTool::Bw;
    // (name, tool, flags after the MACs and size, flows)
    let table = [
        ("l2", bw, String::new(), 1),
        ("l2-vlan", bw, "--vlan_en".to_string(), 1),
        ("l2-ethertype", bw, "-Y 0x88b5".to_string(), 1),
        ("ipv4", bw, format!("{V4} -T 184 -L 9"), 1),
        ("ipv4-udp", bw, format!("{V4} {PORTS}"), 1),
        ("ipv4-tcp", bw, format!("{V4} {PORTS} --tcp"), 1),
        (
            "ipv4-udp-vlan8",
            bw,
            format!("{V4} {PORTS} --vlan_pcp 8"),
            1,
        ),
        (
            "ipv4-udp-flows",
            bw,
            format!("{V4} {PORTS} --flows 4 --flows_burst 2 -n 16"),
            4,
        ),
        ("ipv6", bw, format!("{V6} -L 3"), 1),
        ("lat-ipv4-udp", RawTool::Lat, format!("{V4} {PORTS}"), 1),
        ("ipv6-udp", bw, format!("{V6} {PORTS}"), 1),
        (
            "ipv6-tcp-vlan",
            bw,
            format!("{V6} {PORTS} --tcp --vlan_pcp 5"),
            1,
        ),
    ];
    let mut v = Vec::new();
    for size in ["64", "128", "1518"] {
        for (name, tool, extra, flows) in &table {
            // IPv6 with L4 needs 66 (UDP) or 78 (TCP) bytes: refused at 64.
            if size == "64" && name.starts_with("ipv6-") {
                continue;
            }
            let cmd = format!("--client {MACS} -s {size} {extra}");
            v.push((format!("{name}/{size}"), *tool, cmd, *flows));
        }
    }
    v
}

/// Checks one frame with etherparse; returns where the payload starts.
fn check(name: &str, s: &FrameSpec, flow: u16, seq: u64, f: &[u8]) -> usize {
    assert_eq!(f.len(), s.size - 4, "{name}: -s counts the CRC");
    let (eth, mut rest) = Ethernet2Header::from_slice(f).unwrap();
    assert_eq!(eth.destination, s.dst_mac, "{name}");
    assert_eq!(eth.source, s.src_mac, "{name}");
    let tag = if let Some(pcp) = s.header.vlan_pcp {
        assert_eq!(eth.ether_type.0, 0x8100, "{name}");
        let (v, r) = SingleVlanHeader::from_slice(rest).unwrap();
        let want = if pcp == 8 { ((seq + 1) % 8) as u8 } else { pcp };
        assert_eq!(v.pcp.value(), want, "{name}");
        assert_eq!(v.vlan_id.value(), 1, "{name}");
        assert!(!v.drop_eligible_indicator, "{name}");
        rest = r;
        (v.ether_type.0, 4)
    } else {
        (eth.ether_type.0, 0)
    };
    let (ethertype, tag_len) = tag;
    let pkt = s.size - 18 - tag_len;
    if let Some(t) = s.header.ethertype {
        assert_eq!(ethertype, t, "{name}");
    }
    let l4_len = s.l4.map_or(0, |l| if l.tcp { 20 } else { 8 });
    let proto = s.l4.map_or(0, |l| if l.tcp { 6 } else { 17 });
    match s.ip {
        None => {
            if s.header.ethertype.is_none() {
                assert_eq!(ethertype as usize, pkt, "{name}: 802.3 length");
            }
            return 14 + tag_len;
        }
        Some(Ip::V4 { src, dst }) => {
            assert_eq!(ethertype, 0x0800, "{name}");
            let (ip, r) = Ipv4Header::from_slice(rest).unwrap();
            assert_eq!(ip.total_len as usize, pkt, "{name}");
            assert_eq!(
                ip.header_checksum,
                ip.calc_header_checksum(),
                "{name}: IPv4 checksum"
            );
            assert_eq!((ip.source, ip.destination), (src, dst), "{name}");
            assert_eq!(ip.time_to_live, s.header.hop_limit, "{name}");
            assert_eq!(ip.protocol.0, proto, "{name}");
            let tos = (ip.dscp.value() << 2) | ip.ecn.value();
            assert_eq!(tos, s.header.tos.unwrap_or(0), "{name}");
            assert_eq!(
                (ip.identification, ip.fragment_offset.value()),
                (0, 0),
                "{name}"
            );
            rest = r;
            // The strict whole-packet parse agrees (lengths consistent).
            etherparse::SlicedPacket::from_ethernet(f).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
        Some(Ip::V6 { src, dst }) => {
            assert_eq!(ethertype, 0x86dd, "{name}");
            let (ip, r) = Ipv6Header::from_slice(rest).unwrap();
            // perftest: htons(pkt - 40), less the L4 header as a host integer.
            let le = ((pkt - 40) as u16).swap_bytes().wrapping_sub(l4_len as u16);
            assert_eq!(ip.payload_length, le.swap_bytes(), "{name}");
            assert_eq!(
                ip.next_header.0,
                if proto == 0 { 0x3b } else { proto },
                "{name}"
            );
            assert_eq!(ip.hop_limit, s.header.hop_limit, "{name}");
            assert_eq!((ip.traffic_class, ip.flow_label.value()), (0, 0), "{name}");
            assert_eq!((ip.source, ip.destination), (src, dst), "{name}");
            rest = r;
        }
    }
    if let Some(l4) = s.l4 {
        let (sp, dp) = (l4.src_port + flow, l4.dst_port + flow);
        if l4.tcp {
            let (t, _) = TcpHeader::from_slice(rest).unwrap();
            assert_eq!((t.source_port, t.destination_port), (sp, dp), "{name}");
            assert_eq!(
                (t.data_offset(), t.window_size, t.checksum),
                (5, 8192, 0),
                "{name}"
            );
            assert_eq!(
                (t.sequence_number, t.acknowledgment_number),
                (0, 0),
                "{name}"
            );
            assert!(
                !(t.syn || t.ack || t.fin || t.rst || t.psh || t.urg),
                "{name}"
            );
        } else {
            let (u, _) = UdpHeader::from_slice(rest).unwrap();
            assert_eq!((u.source_port, u.destination_port), (sp, dp), "{name}");
            assert_eq!(u.length as usize, pkt - 20, "{name}: perftest's UDP length");
            assert_eq!(u.checksum, 0, "{name}");
        }
    }
    f.len() - rest.len() + l4_len
}

#[test]
fn every_variant_parses_and_lands_in_a_pcap() {
    let mut frames = Vec::new();
    for (name, tool, cmd, flows) in variants() {
        let s = spec(tool, &cmd);
        for flow in 0..flows {
            for seq in 0..3 {
                let f = frame::frame(&s, flow, seq, SEED);
                let at = check(&name, &s, flow, seq, &f);
                assert_eq!(at, s.header_len(), "{name}");
                assert_eq!(f[at..], prng_bytes(f.len())[at..f.len()], "{name}: payload");
                frames.push(f);
            }
        }
    }
    assert!(frames.len() > 100, "{} frames", frames.len());
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap()
        .join("raw-frames.pcap");
    let mut w = PcapWriter::new(std::fs::File::create(&path).unwrap()).unwrap();
    for (i, f) in frames.iter().enumerate() {
        w.record(1_000_000 + i as u64, f).unwrap();
    }
    w.finish().unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let (link, recs) = pcap::read(&bytes).unwrap();
    assert_eq!(link, 1, "linktype Ethernet");
    assert_eq!(recs.len(), frames.len());
    for (r, f) in recs.iter().zip(&frames) {
        assert_eq!(&r.2, f);
        assert_eq!(r.1 as usize, f.len());
        Ethernet2Header::from_slice(&r.2).unwrap();
    }
    tcpdump_reads(&path, frames.len());
    println!("wrote {} frames to {}", frames.len(), path.display());
}

/// `tcpdump -r` counts the records and decodes the first IPv4 UDP one.
fn tcpdump_reads(path: &std::path::Path, n: usize) {
    let out = match std::process::Command::new("tcpdump")
        .args(["-nn", "-e", "-r"])
        .arg(path)
        .output()
    {
        Ok(o) => o,
        Err(e) => {
            println!(
                "SKIPPED: tcpdump -r (tcpdump not installed: {e}); the file was read back above"
            );
            return;
        }
    };
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // One line per record (tcpdump adds indented hex for what it can't decode).
    let records = text
        .lines()
        .filter(|l| !l.starts_with(char::is_whitespace))
        .count();
    assert_eq!(records, n, "{text}");
    assert!(
        text.contains("10.0.0.1.5000 > 10.0.0.2.6000: UDP"),
        "{text}"
    );
    assert!(text.contains("vlan 1, p 5"), "{text}");
}

#[test]
fn a_server_with_b_sends_from_its_own_address_and_port() {
    let s = spec(RawTool::Bw, &format!("--server -b {MACS} {V4} {PORTS}"));
    assert_eq!(
        s.ip,
        Some(Ip::V4 {
            src: [10, 0, 0, 2],
            dst: [10, 0, 0, 1]
        })
    );
    let l4 = s.l4.unwrap();
    assert_eq!((l4.src_port, l4.dst_port), (6000, 5000));
    // New names: local is this side's, remote the peer's, on either side.
    let c = spec(RawTool::Bw, "--client --local_mac 02:00:00:00:00:01 --remote_mac 02:00:00:00:00:02 --local_ip 10.0.0.1 --remote_ip 10.0.0.2 --local_port 5000 --remote_port 6000");
    assert_eq!(
        c,
        spec(RawTool::Bw, &format!("--client {MACS} {V4} {PORTS}"))
    );
}

#[test]
fn raw_mcast_sends_to_the_ipv4_multicast_mac_from_port_zero() {
    let s = spec(
        RawTool::Bw,
        "--client -B 02:00:00:00:00:01 --raw_mcast -j 10.0.0.1 -J 239.129.2.3 -k 5000 -K 6000",
    );
    assert_eq!(s.dst_mac, [0x01, 0x00, 0x5e, 0x01, 0x02, 0x03]);
    assert_eq!(s.l4.unwrap().src_port, 0);
}
