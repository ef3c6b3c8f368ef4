//! Text output vs stock perftest 4.5 captures (tests/data/perftest-output/, made by
//! scripts/capture-perftest.sh: stock perftest over soft-RoCE in a VM).
//!
//! Each capture is rebuilt from the report API: the parameters perftest used
//! (from the command line and perftest's fix-ups), plus the run-specific values
//! (QPN, PSN, RKey, VAddr, measured numbers) parsed from the capture. The 4.5
//! dialect must reproduce the file byte for byte; the master dialect must match
//! it after normalising the two documented header/row differences.

use std::path::PathBuf;

use rdmaperf::report::info::{Connection, LinkLayer};
use rdmaperf::report::info::{Dialect, Role, Support, TestInfo, TestKind, Verb};
use rdmaperf::report::stats::{BwResult, BwUnits, LatStats};
use rdmaperf::report::text::{
    address_line, bw_header, bw_row, info_block, lat_header, lat_row, Dest, Side,
    INLINE_UNSUPPORTED, RESULT_LINE, SERVER_WAIT_BANNER,
};

/// One captured command.
struct Case {
    name: &'static str,
    verb: Verb,
    kind: TestKind,
    qps: u32,
    tx_depth: u32,
    rx_depth: u32,
    cq_mod: u32,
    duplex: bool,
    gbits: bool,
    pcie: Support,
    /// Default inline size was nonzero and rxe is unknown: the warning is printed.
    inline_warning: bool,
}

const fn case(name: &'static str, verb: Verb, kind: TestKind) -> Case {
    Case {
        name,
        verb,
        kind,
        qps: 1,
        tx_depth: 100, // -n 100 clamps tx_depth (and rx_depth) to the iterations
        rx_depth: 100,
        cq_mod: 1, // auto-disabled above 8192 bytes
        duplex: false,
        gbits: false,
        pcie: Support::On,
        inline_warning: false,
    }
}

fn cases() -> Vec<Case> {
    use TestKind::{Bw, Lat};
    vec![
        Case {
            cq_mod: 100,
            ..case("write_bw_s64", Verb::Write, Bw)
        },
        Case {
            cq_mod: 100,
            tx_depth: 128,
            ..case("write_bw_D2_s64", Verb::Write, Bw)
        },
        Case {
            inline_warning: true,
            ..case("read_bw", Verb::Read, Bw)
        },
        case("send_bw", Verb::Send, Bw),
        Case {
            cq_mod: 100, // 8-byte atomics keep the default
            inline_warning: true,
            ..case("atomic_bw", Verb::Atomic, Bw)
        },
        Case {
            tx_depth: 1,
            pcie: Support::Off,
            ..case("write_lat", Verb::Write, Lat)
        },
        Case {
            tx_depth: 1,
            ..case("send_lat", Verb::Send, Lat)
        },
        Case {
            tx_depth: 1,
            inline_warning: true,
            ..case("read_lat", Verb::Read, Lat)
        },
        Case {
            qps: 2,
            ..case("write_bw_q2", Verb::Write, Bw)
        },
        Case {
            duplex: true,
            ..case("write_bw_b", Verb::Write, Bw)
        },
        Case {
            gbits: true,
            ..case("write_bw_gbits", Verb::Write, Bw)
        },
    ]
}

fn info(c: &Case, role: Role, dialect: Dialect) -> TestInfo {
    TestInfo {
        dialect,
        verb: c.verb,
        kind: c.kind,
        role,
        duplex: c.duplex,
        device: "rxe0".into(),
        num_qps: c.qps,
        connection: Connection::Rc,
        pcie_relaxed: c.pcie,
        wr_api: false, // perftest 4.5 turns the new post API off for rxe
        tx_depth: c.tx_depth,
        rx_depth: c.rx_depth,
        cq_mod: c.cq_mod,
        mtu: 1024,
        link: LinkLayer::Ethernet,
        gid_index: Some(0),
        inline_size: 0,
        out_reads: 128,
        bw_units: if c.gbits { BwUnits::Gbit } else { BwUnits::MiB },
        ..TestInfo::default()
    }
}

fn data_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/perftest-output")
}

/// Parses `0x1a`-style hex (perftest's `%#x`, where 0 prints as plain zeros).
fn hex(s: &str) -> u64 {
    u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap()
}

/// Parses an address line and the GID line after it back into a [`Dest`].
fn parse_dest(addr: &str, gid: &str) -> Dest {
    let w: Vec<&str> = addr.split_whitespace().collect();
    let field = |name: &str| {
        w.iter()
            .position(|&x| x == name)
            .map(|k| hex(w[k + 1]))
            .unwrap_or(0)
    };
    let mut g = [0u8; 16];
    let bytes: Vec<u8> = gid
        .trim()
        .trim_start_matches("GID: ")
        .split(':')
        .map(|b| b.parse().unwrap())
        .collect();
    g.copy_from_slice(&bytes);
    Dest {
        lid: field("LID") as u16,
        qpn: field("QPN") as u32,
        psn: field("PSN") as u32,
        out_reads: field("OUT") as u32,
        rkey: field("RKey") as u32,
        vaddr: field("VAddr"),
        srqn: 0,
        gid: g,
    }
}

fn nums(row: &str) -> Vec<f64> {
    row.split_whitespace().map(|x| x.parse().unwrap()).collect()
}

/// Rebuilds a whole capture from the report API.
fn rebuild(c: &Case, role: Role, capture: &str, dialect: Dialect) -> String {
    let i = info(c, role, dialect);
    let lines: Vec<&str> = capture.lines().collect();
    let mut out = String::new();
    if c.inline_warning {
        out += RESULT_LINE;
        out += INLINE_UNSUPPORTED;
    }
    if role == Role::Server {
        out += SERVER_WAIT_BANNER;
    }
    out += &info_block(&i);
    let mut k = lines
        .iter()
        .position(|l| l.starts_with(" local address"))
        .expect("address lines");
    while lines[k].contains(" address: ") {
        let side = if lines[k].starts_with(" local") {
            Side::Local
        } else {
            Side::Remote
        };
        out += &address_line(side, &parse_dest(lines[k], lines[k + 1]), &i);
        k += 2;
    }
    let header_at = k + 1; // dashes, then the header
    let row = lines.get(header_at + 1).copied().unwrap_or("");
    let has_row = !row.starts_with("---");
    // Read/atomic latency servers are passive: perftest prints no header or row.
    let has_header = lines
        .get(header_at)
        .is_some_and(|l| l.starts_with(" #bytes"));
    match c.kind {
        _ if !has_header => {}
        TestKind::Bw => {
            out += &bw_header(&i);
            let v = nums(row);
            assert_eq!(v.len(), 5, "BW row {row:?}");
            let r = BwResult {
                size: v[0] as u64,
                iters: v[1] as u64,
                bw_peak: v[2],
                bw_avg: v[3],
                msg_rate: v[4],
                bw_peak_exact: 0.0,
            };
            out += &bw_row(&r, &i, 0.0);
        }
        TestKind::Lat => {
            out += &lat_header(&i);
            if has_row {
                let v = nums(row);
                let s = LatStats {
                    t_min: v[2],
                    t_max: v[3],
                    t_typical: v[4],
                    t_avg: v[5],
                    t_stdev: v[6],
                    p99: v[7],
                    p99_9: v[8],
                    samples: 0,
                };
                out += &lat_row(v[0] as u64, v[1] as u64, &s, &i, 0.0);
            }
        }
    }
    out += RESULT_LINE;
    out
}

#[test]
fn captures_rebuild_byte_for_byte_in_4_5_dialect() {
    let dir = data_dir();
    let mut checked = 0;
    for c in cases() {
        for (role, side) in [(Role::Client, "client"), (Role::Server, "server")] {
            let path = dir.join(format!("{}.{side}.txt", c.name));
            let capture = std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            let got = rebuild(&c, role, &capture, Dialect::V4_5);
            assert_eq!(got, capture, "{}", path.display());
            checked += 1;
        }
    }
    assert_eq!(checked, 22);
}

/// The header and result rows in master's format equal the 4.5 capture after the
/// two documented differences are normalised: "MB/sec" became "MiB/sec", and the
/// gap before MsgRate grew from "\t\t   " to "\t\t     ".
#[test]
fn master_header_and_rows_match_normalised_4_5() {
    let dir = data_dir();
    for c in cases() {
        for (role, side) in [(Role::Client, "client"), (Role::Server, "server")] {
            let capture =
                std::fs::read_to_string(dir.join(format!("{}.{side}.txt", c.name))).unwrap();
            let master = rebuild(&c, role, &capture, Dialect::Master);
            let tail = |s: &str| -> String {
                let at = s.find(" #bytes").unwrap_or(s.len());
                s[at..].to_string()
            };
            let want = tail(&capture)
                .replace("[MB/sec]", "[MiB/sec]")
                .replace("\t\t   0", "\t\t     0")
                .replace("\t\t   1", "\t\t     1");
            assert_eq!(tail(&master), want, "{} {side}", c.name);
        }
    }
}

/// The master info block differs from 4.5 only by the documented extra fields.
#[test]
fn master_info_block_extends_4_5_lines() {
    let c = &cases()[0];
    let old = info_block(&info(c, Role::Client, Dialect::V4_5));
    let new = info_block(&info(c, Role::Client, Dialect::Master));
    let normalised = new
        .replace("\t\tLock-free      : OFF", "")
        .replace("\t\tUsing Enhanced Reorder      : OFF", "")
        .replace(" CQE Poll Batch  : 16\n", "");
    assert_eq!(normalised, old);
}
