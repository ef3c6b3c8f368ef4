//! Replays control-channel byte streams captured from stock perftest 4.5 (6.06)
//! talking to itself over soft-RoCE (tests/data/captures/README.md): every
//! message is cut by the sizes our choreography predicts for that tool,
//! decoded with our codecs, re-encoded and compared byte for byte; decoded
//! keys and reports are checked against what perftest printed.

use std::fs;
use std::path::{Path, PathBuf};

use rdmaperf::ctrl::choreo::{choreography, Entry, Message, Mode, Scenario, Step, Tool};
use rdmaperf::ctrl::wire::{self, BwReport, Dest, PeerVersion, DONE, KEY_LEN_GID};
use rdmaperf::ctrl::Role;

fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

/// One direction's bytes, and the relay's chunk sequence numbers by offset.
#[derive(Default)]
struct Stream {
    bytes: Vec<u8>,
    /// (offset, seq) of each chunk, in offset order.
    chunks: Vec<(usize, u64)>,
}

impl Stream {
    /// Sequence number of the chunk holding byte `off`.
    fn seq_at(&self, off: usize) -> u64 {
        let i = self.chunks.partition_point(|&(o, _)| o <= off);
        self.chunks[i - 1].1
    }
}

fn load(name: &str) -> (Stream, Stream) {
    let path = data_dir().join("captures").join(format!("{name}.jsonl"));
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let (mut c2s, mut s2c) = (Stream::default(), Stream::default());
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let rec: serde_json::Value = serde_json::from_str(line).expect("JSON record");
        let hex = rec["hex"].as_str().expect("hex");
        let bytes: Vec<u8> = (0..hex.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex digit"))
            .collect();
        let s = match rec["dir"].as_str() {
            Some("c2s") => &mut c2s,
            Some("s2c") => &mut s2c,
            d => panic!("bad dir {d:?}"),
        };
        let off = rec["off"].as_u64().expect("off") as usize;
        assert_eq!(off, s.bytes.len(), "{name}: chunks must be contiguous");
        assert_eq!(rec["len"].as_u64(), Some(bytes.len() as u64));
        s.chunks.push((off, rec["seq"].as_u64().expect("seq")));
        s.bytes.extend_from_slice(&bytes);
    }
    (c2s, s2c)
}

/// Decodes one message, re-encodes it and demands identical bytes.
fn roundtrip(m: Message, b: &[u8], peer: &PeerVersion, report: &mut BwReport) -> Option<Dest> {
    match m {
        Message::Version => {
            let v = wire::decode_version(b).unwrap();
            assert_eq!(wire::encode_version(&v.text).unwrap(), b);
        }
        Message::SysData(what) => {
            let x = wire::decode_sysdata(what, b).unwrap();
            assert_eq!(wire::encode_sysdata(x), b);
        }
        Message::Mtu => {
            let x = wire::decode_mtu(b).unwrap();
            assert_eq!(wire::encode_mtu(x, b.len()).unwrap(), b);
        }
        Message::Key => {
            let d = wire::decode_key(b).unwrap();
            assert_eq!(wire::encode_key(&d).unwrap(), b);
            return Some(d);
        }
        Message::Report(f) => {
            f.decode(report, b, peer).unwrap();
            assert_eq!(f.encode(report, peer), b);
        }
    }
    None
}

/// What one side sent, decoded.
#[derive(Default)]
struct Sent {
    /// Per QP: the dest from the first key round.
    dests: Vec<Dest>,
    reports: Vec<BwReport>,
}

fn replay(name: &str, scn: Scenario) -> (Sent, Sent) {
    assert_eq!(scn.role, Role::Client);
    let (c2s, s2c) = load(name);
    let peer = wire::decode_version(&s2c.bytes[..16]).unwrap();
    assert_eq!(peer.text, "6.06", "captures come from perftest 4.5");
    let client: Vec<Entry> = choreography(&scn);
    let server: Vec<Entry> = choreography(&scn.peer());

    // Both sides' exchanges agree, so cutting by the client's sequence cuts both.
    let (cs, closes) = rdmaperf::ctrl::choreo::wire_messages(&client, KEY_LEN_GID, false, &peer);
    let (ss, _) = rdmaperf::ctrl::choreo::wire_messages(&server, KEY_LEN_GID, false, &peer);
    assert_eq!(cs, ss);
    let total: usize = cs.iter().sum::<usize>() + if closes { DONE.len() } else { 0 };
    assert_eq!(c2s.bytes.len(), total, "{name}: client stream length");
    assert_eq!(s2c.bytes.len(), total, "{name}: server stream length");

    let mut sent = [Sent::default(), Sent::default()];
    let mut off = 0;
    for e in &client {
        let msgs = e.step.messages(KEY_LEN_GID, false, &peer);
        if e.step == Step::BwReport {
            sent.iter_mut()
                .for_each(|s| s.reports.push(BwReport::default()));
        }
        for (m, len) in msgs {
            // Lock-step, client first: the client's message is read before the server's.
            assert!(
                c2s.seq_at(off) < s2c.seq_at(off),
                "{name}: {} at offset {off}: server wrote before client",
                e.step
            );
            for (dir, stream) in [(0, &c2s), (1, &s2c)] {
                let b = &stream.bytes[off..off + len];
                let side = &mut sent[dir];
                let mut scratch = BwReport::default();
                let report = side.reports.last_mut().unwrap_or(&mut scratch);
                let Some(d) = roundtrip(m, b, &peer, report) else {
                    continue;
                };
                // Every hand_shake carries the dest of its QP (barriers: QP 0).
                let qp = match e.step {
                    Step::Keys { qp, .. } => qp,
                    _ => 0,
                };
                if qp == side.dests.len() {
                    side.dests.push(d);
                }
                assert_eq!(
                    side.dests[qp], d,
                    "{name}: {} carries QP {qp}'s dest",
                    e.step
                );
            }
            off += len;
        }
    }
    if closes {
        assert_eq!(&c2s.bytes[off..], DONE);
        assert_eq!(&s2c.bytes[off..], DONE);
    }
    let [c, s] = sent;
    assert_eq!(c.dests.len(), scn.num_qps);
    assert_eq!(s.dests.len(), scn.num_qps);
    (c, s)
}

fn output(name: &str, side: &str) -> String {
    let p = data_dir()
        .join("perftest-output")
        .join(format!("{name}.{side}.txt"));
    fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// One printed "address" line pair as (field, value) pairs, e.g. " local
/// address: LID 0000 QPN 0x0011 PSN 0x469dac RKey 0x0002fe VAddr
/// 0x0055b72e8ca000" + " GID: 254:128:..." (fields vary per tool: send and
/// atomic omit RKey/VAddr, read adds OUT).
type Printed = Vec<(String, u64)>;

fn printed_dests(text: &str, which: &str) -> Vec<(Printed, [u8; 16])> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let Some(rest) = l.trim().strip_prefix(&format!("{which} address:")) else {
            continue;
        };
        let t: Vec<&str> = rest.split_whitespace().collect();
        let fields = t
            .chunks(2)
            .map(|kv| {
                let v = u64::from_str_radix(kv[1].trim_start_matches("0x"), 16).unwrap();
                (kv[0].to_owned(), v)
            })
            .collect();
        let mut gid = [0u8; 16];
        let g = lines[i + 1].trim().strip_prefix("GID:").expect("GID line");
        for (slot, x) in gid.iter_mut().zip(g.trim().split(':')) {
            *slot = x.parse().unwrap(); // perftest prints %02d
        }
        out.push((fields, gid));
    }
    out
}

/// Every field perftest printed matches the dest we decoded.
fn same_printed(decoded: &[Dest], printed: &[(Printed, [u8; 16])]) {
    assert_eq!(decoded.len(), printed.len());
    for (d, (fields, gid)) in decoded.iter().zip(printed) {
        assert_eq!(d.gid, Some(*gid));
        for (k, v) in fields {
            let ours = match k.as_str() {
                "LID" => u64::from(d.lid),
                "QPN" => u64::from(d.qpn),
                "PSN" => u64::from(d.psn),
                "OUT" => u64::from(d.out_reads),
                "RKey" => u64::from(d.rkey),
                "VAddr" => d.vaddr,
                other => panic!("unknown printed field {other}"),
            };
            assert_eq!(ours, *v, "{k}");
        }
        assert!(fields.len() >= 3, "LID, QPN, PSN at least");
    }
}

fn check_printed_keys(name: &str, client: &Sent, server: &Sent) {
    let (co, so) = (output(name, "client"), output(name, "server"));
    same_printed(&client.dests, &printed_dests(&co, "local"));
    same_printed(&server.dests, &printed_dests(&co, "remote"));
    same_printed(&server.dests, &printed_dests(&so, "local"));
    same_printed(&client.dests, &printed_dests(&so, "remote"));
}

/// The numbers of the result row perftest printed after the "#bytes" header.
fn printed_row(text: &str) -> Vec<String> {
    let mut lines = text.lines().skip_while(|l| !l.contains("#bytes"));
    lines.next().expect("result header");
    let row = lines.next().expect("result row");
    row.split_whitespace().map(str::to_owned).collect()
}

fn row_of(r: &BwReport) -> Vec<String> {
    vec![
        r.size.to_string(),
        r.iters.to_string(),
        format!("{:.2}", r.bw_peak),
        format!("{:.2}", r.bw_avg),
        format!("{:.6}", r.msg_rate),
    ]
}

fn scenario(tool: Tool, duplex: bool, mode: Mode, num_qps: usize) -> Scenario {
    Scenario {
        num_qps,
        ..Scenario::new(tool, Role::Client, duplex, mode)
    }
}

/// Unidirectional write/read/atomic_bw: the server prints the client's report.
fn check_unidir_bw(name: &str, scn: Scenario) {
    let (c, s) = replay(name, scn);
    check_printed_keys(name, &c, &s);
    assert_eq!(c.reports.len(), 1);
    assert_eq!(printed_row(&output(name, "server")), row_of(&c.reports[0]));
    // The client prints the same measurement itself.
    assert_eq!(printed_row(&output(name, "client")), row_of(&c.reports[0]));
}

/// One test per unidirectional bw capture: capture, tool, mode, QPs.
macro_rules! unidir_bw_tests {
    ($($test:ident: $name:literal, $tool:ident, $mode:ident, $qps:literal;)*) => {$(
        #[test]
        fn $test() {
            check_unidir_bw($name, scenario(Tool::$tool, false, Mode::$mode, $qps));
        }
    )*};
}

unidir_bw_tests! {
    write_bw: "write_bw_s64", WriteBw, Iterations, 1;
    write_bw_duration: "write_bw_D2_s64", WriteBw, Duration, 1;
    write_bw_report_gbits: "write_bw_gbits", WriteBw, Iterations, 1;
    write_bw_two_qps: "write_bw_q2", WriteBw, Iterations, 2;
    read_bw: "read_bw", ReadBw, Iterations, 1;
    atomic_bw: "atomic_bw", AtomicBw, Iterations, 1;
}

#[test]
fn write_bw_duplex() {
    let name = "write_bw_b";
    let (c, s) = replay(name, scenario(Tool::WriteBw, true, Mode::Iterations, 1));
    check_printed_keys(name, &c, &s);
    // Both print the sum of both sides' reports.
    let (mine, theirs) = (c.reports[0], s.reports[0]);
    let sum = BwReport {
        bw_peak: mine.bw_peak + theirs.bw_peak,
        bw_avg: mine.bw_avg + theirs.bw_avg,
        msg_rate: mine.msg_rate + theirs.msg_rate,
        ..mine
    };
    assert_eq!(printed_row(&output(name, "client")), row_of(&sum));
}

/// Replays capture `name` (one QP, iterations) and checks the keys both
/// sides printed.
fn replayed(name: &str, tool: Tool) -> (Sent, Sent) {
    let (c, s) = replay(name, scenario(tool, false, Mode::Iterations, 1));
    check_printed_keys(name, &c, &s);
    (c, s)
}

#[test]
fn send_bw() {
    let (c, _) = replayed("send_bw", Tool::SendBw);
    assert!(c.reports.is_empty());
}

#[test]
fn write_lat() {
    replayed("write_lat", Tool::WriteLat);
}

#[test]
fn read_lat() {
    let (c, _) = replayed("read_lat", Tool::ReadLat);
    // READ advertises its outstanding-reads limit; rxe gives 128.
    assert_eq!(c.dests[0].out_reads, 0x80);
}

#[test]
fn send_lat() {
    replayed("send_lat", Tool::SendLat);
}

#[test]
fn every_capture_is_replayed() {
    let names = [
        "write_bw_s64",
        "write_bw_D2_s64",
        "write_bw_gbits",
        "write_bw_q2",
        "read_bw",
        "atomic_bw",
        "write_bw_b",
        "send_bw",
        "write_lat",
        "read_lat",
        "send_lat",
    ];
    let mut found: Vec<String> = fs::read_dir(data_dir().join("captures"))
        .unwrap()
        .filter_map(|e| {
            let n = e.ok()?.file_name().into_string().ok()?;
            n.strip_suffix(".jsonl").map(str::to_owned)
        })
        .collect();
    found.sort();
    let mut want: Vec<String> = names.iter().map(|s| s.to_string()).collect();
    want.sort();
    assert_eq!(
        found, want,
        "a capture without a replay test (or the reverse)"
    );
}
