//! The raw Ethernet tools' command line: their names (subcommands and
//! multicall), perftest master's flags for them, and perftest's rules and
//! refusals (perftest_parameters.c: `force_dependecies`' raw block,
//! `set_raw_eth_parameters`, `flow_rules_force_dependecies`,
//! `check_link_and_mtu`), then the binary on a host without RDMA devices.

use rdmaperf::cli;
use rdmaperf::raw::params::{self, RawParams, Side};
use rdmaperf::raw::rate::{self, RawRate};
use rdmaperf::raw::{args, tools::RawTool};

mod common;
use common::cli::{refused_before_run, run_rdmaperf as run};

const M: &str = "-B 02:00:00:00:00:01 -E 02:00:00:00:00:02";
const L3: &str = "-j 10.0.0.1 -J 10.0.0.2";
const L4: &str = "-j 10.0.0.1 -J 10.0.0.2 -k 5000 -K 6000";

fn resolve(tool: RawTool, cmd: &str) -> Result<RawParams, String> {
    let argv: Vec<String> = cmd.split_whitespace().map(String::from).collect();
    args::parse(&argv).and_then(|a| params::resolve(tool, &a))
}

fn ok(tool: RawTool, cmd: &str) -> RawParams {
    resolve(tool, cmd).unwrap_or_else(|e| panic!("{cmd}: {e}"))
}

/// Refused, with every `want` in the message.
fn refused(tool: RawTool, cmd: &str, want: &[&str]) {
    let e = resolve(tool, cmd)
        .err()
        .unwrap_or_else(|| panic!("{cmd}: accepted"));
    for w in want {
        assert!(e.contains(w), "{cmd}: wanted '{w}' in: {e}");
    }
}

#[test]
fn multicall_and_subcommand_names() {
    let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    for (ours, theirs, _) in RawTool::ALL {
        assert_eq!(
            cli::multicall_argv(v(&[&format!("/usr/bin/{theirs}"), "-Z"])),
            v(&["rdmaperf", ours, "-Z"])
        );
    }
    assert_eq!(
        RawTool::from_name("raw-eth-burst-lat"),
        Some(RawTool::BurstLat)
    );
    assert_eq!(
        RawTool::from_name("raw_ethernet_fs_rate"),
        Some(RawTool::FsRate)
    );
}

#[test]
fn perftests_defaults_per_tool() {
    let bw = ok(RawTool::Bw, &format!("--server {M}"));
    assert_eq!(
        (bw.size, bw.mtu, bw.inline_size, bw.raw.duplex),
        (1518, 1518, 0, false)
    );
    assert_eq!(bw.raw.side, Some(Side::Server));
    assert!(
        bw.notes[0].contains("Max msg size in RawEth is MTU 1518"),
        "{:?}",
        bw.notes
    );
    let lat = ok(RawTool::Lat, &format!("-Z {M}"));
    assert_eq!((lat.size, lat.inline_size, lat.raw.duplex), (64, 236, true));
    assert!(
        lat.notes[0].contains("Min msg size for RawEth is 64B"),
        "{:?}",
        lat.notes
    );
    let burst = ok(RawTool::BurstLat, &format!("-P {M}"));
    assert_eq!(
        (
            burst.size,
            burst.inline_size,
            burst.raw.duplex,
            burst.raw.tx_depth
        ),
        (64, 0, true, 128)
    );
    let fs = ok(RawTool::FsRate, &format!("--server {M}"));
    assert_eq!(fs.inline_size, 0);
    assert_eq!(ok(RawTool::Lat, &format!("-Z {M} -I 0")).inline_size, 0);
    assert_eq!(
        ok(RawTool::Bw, &format!("-Z {M} -s 9000 -m 9600")).size,
        9000
    );
    assert_eq!(ok(RawTool::Bw, &format!("-Z {M} -s 32")).size, 64);
    assert_eq!(ok(RawTool::Bw, &format!("-Z {M} -s 1K -m 512")).size, 512);
}

#[test]
fn required_side_and_macs() {
    refused(
        RawTool::Bw,
        "-B 02:00:00:00:00:01",
        &["--client or --server"],
    );
    refused(RawTool::Bw, "--server", &["source mac", "-B XX:XX"]);
    // -E: on the client, and in lat on both sides; a bw server does without.
    refused(
        RawTool::Bw,
        "--client -B 02:00:00:00:00:01",
        &["dest mac", "-E XX:XX"],
    );
    refused(RawTool::Lat, "--server -B 02:00:00:00:00:01", &["dest mac"]);
    ok(RawTool::Bw, "--server -B 02:00:00:00:00:01");
    ok(RawTool::BurstLat, "--server -B 02:00:00:00:00:01");
    // --raw_mcast: the destination is the group's MAC.
    let m = ok(
        RawTool::Bw,
        "--client -B 02:00:00:00:00:01 --raw_mcast -J 239.1.1.1",
    );
    assert_eq!(m.dst_mac(), [1, 0, 0x5e, 1, 1, 1]);
    refused(
        RawTool::Bw,
        &format!("-Z {M} host"),
        &["take no server name", "--client"],
    );
    refused(
        RawTool::Bw,
        "-Z -B 02:00:00:00:00 -E x",
        &["-B '02:00:00:00:00'", "six hex bytes"],
    );
}

#[test]
fn perftests_refused_flags_for_raw() {
    for (flag, want) in [
        ("-a", "do not support -a"),
        ("--all", "do not support -a"),
        ("-R", "RDMA CM isn't supported"),
        ("-z", "RDMA CM isn't supported"),
        ("-x 3", "GID index isn't supported"),
        ("--mmap=/tmp/f", "mmaped files aren't supported"),
        ("--pin_cores 1", "--pin_cores is not supported"),
        ("--numa_node 0", "--numa_node is not supported"),
        ("-G", "RSS isn't supported"),
        (
            "--no_such_flag",
            "not a flag of perftest's raw Ethernet tools",
        ),
    ] {
        refused(RawTool::Bw, &format!("-Z {M} {flag}"), &[want]);
    }
}

#[test]
fn old_and_new_address_names_do_not_mix() {
    refused(
        RawTool::Bw,
        "-Z -B 02:00:00:00:00:01 --remote_mac 02:00:00:00:00:02",
        &[
            "Mix of source with local|remote",
            "--local_mac/--remote_mac",
        ],
    );
    refused(
        RawTool::Bw,
        &format!("-P {M} --local_ip 10.0.0.1"),
        &["Mix of"],
    );
    let p = ok(RawTool::Lat, "-P --local_mac 02:00:00:00:00:01 --remote_mac 02:00:00:00:00:02 --local_ip 10.0.0.1 --remote_ip 10.0.0.2 --local_port 1 --remote_port 2");
    // A client's local address is perftest's client_ip, its remote the server_ip.
    assert_eq!(p.raw.client_port, Some(1));
    assert_eq!(p.raw.server_port, Some(2));
    let s = ok(RawTool::Lat, "-Z --local_mac 02:00:00:00:00:01 --remote_mac 02:00:00:00:00:02 --local_port 1 --remote_port 2 --local_ip 10.0.0.1 --remote_ip 10.0.0.2");
    assert_eq!((s.raw.server_port, s.raw.client_port), (Some(1), Some(2)));
}

#[test]
fn header_rules() {
    refused(
        RawTool::Bw,
        &format!("-P {M} -K 6000 {L3}"),
        &["both ports", "-k"],
    );
    refused(
        RawTool::Bw,
        &format!("-P {M} -k 5000 -K 6000"),
        &["source_ip and dest_ip", "-J"],
    );
    refused(
        RawTool::Bw,
        &format!("-P {M} -k 5000 -K 6000 -J 10.0.0.2"),
        &["source_ip and dest_ip"],
    );
    refused(
        RawTool::Bw,
        &format!("-P {M} --tcp {L3}"),
        &["in order to use TCP"],
    );
    refused(
        RawTool::Bw,
        &format!("-P {M} -J fd00::1"),
        &["not an IPv4 address", "--raw_ipv6"],
    );
    ok(
        RawTool::Bw,
        &format!("-P {M} --raw_ipv6 -J fd00::1 -j fd00::2"),
    );
    refused(RawTool::Bw, &format!("-P {M} -Y 0"), &["Invalid ethertype"]);
    refused(
        RawTool::Bw,
        &format!("-P {M} --vlan_pcp 9"),
        &["VLAN PCP", "0 to 8"],
    );
    assert_eq!(
        ok(RawTool::Bw, &format!("-P {M} --vlan_pcp 8"))
            .header
            .vlan_pcp,
        Some(8)
    );
    assert_eq!(
        ok(RawTool::Bw, &format!("-P {M} --vlan_en"))
            .header
            .vlan_pcp,
        Some(1)
    );
    refused(
        RawTool::Bw,
        &format!("-P {M} -L 256"),
        &["Hop Limit", "0 to 255"],
    );
    refused(RawTool::Bw, &format!("-P {M} -T 300"), &["TOS"]);
    refused(
        RawTool::Bw,
        &format!("-P {M} -m 10000"),
        &["MTU", "64 to 9600"],
    );
    // rdmaperf's own: the headers must fit in -s (perftest writes past the frame).
    refused(
        RawTool::Bw,
        &format!("-P {M} --raw_ipv6 -j fd00::1 -J fd00::2 -k 1 -K 2 --tcp --vlan_en -s 64"),
        &["need 82 bytes", "-s 82"],
    );
    ok(
        RawTool::Bw,
        &format!("-P {M} --raw_ipv6 -j fd00::1 -J fd00::2 -k 1 -K 2 --tcp --vlan_en -s 82"),
    );
}

#[test]
fn flows_rules() {
    refused(
        RawTool::Bw,
        &format!("-P {M} --flows 2"),
        &["UDP/TCP packets only"],
    );
    refused(
        RawTool::Bw,
        &format!("-P {M} {L4} --flows 0"),
        &["--flows '0'"],
    );
    refused(
        RawTool::Bw,
        &format!("-P {M} {L4} --flows 4 --flows_burst 2 -n 5"),
        &["full cycle on all flows", "multiple of 8"],
    );
    ok(
        RawTool::Bw,
        &format!("-P {M} {L4} --flows 4 --flows_burst 2 -n 8"),
    );
    ok(
        RawTool::Bw,
        &format!("-P {M} {L4} --flows 4 --flows_burst 2 -n 5 -D 2"),
    );
    refused(
        RawTool::Bw,
        &format!("-P {M} {L4} --flows 2 -b"),
        &["unidir tests only"],
    );
    refused(
        RawTool::Bw,
        &format!("-P {M} {L4} --flows 2 -v"),
        &["unidir tests only"],
    );
    refused(
        RawTool::FsRate,
        &format!("-Z {M} {L4} --flows 2"),
        &["FS rate test not requiring flows"],
    );
    refused(
        RawTool::Bw,
        &format!("-P {M} {L4} --flows_burst 2"),
        &["more then single flow", "--flows N"],
    );
}

#[test]
fn mode_rules() {
    let v = ok(RawTool::Bw, &format!("-P {M} -v"));
    assert!(
        v.raw.duplex
            && v.notes
                .iter()
                .any(|n| n.contains("changing to duplex mode")),
        "{:?}",
        v.notes
    );
    let q = ok(RawTool::Bw, &format!("-P {M} -v -r 64 -Q 100"));
    assert_eq!(q.raw.cq_mod, 64);
    refused(
        RawTool::Bw,
        &format!("-P {M} --raw_mcast -b"),
        &["unidirectional traffic only"],
    );
    refused(
        RawTool::Bw,
        &format!("-P {M} --raw_mcast -v"),
        &["unidirectional traffic only"],
    );
    refused(
        RawTool::Lat,
        &format!("-P {M} -q 2"),
        &["Multiple QPs only available on bw tests"],
    );
    refused(
        RawTool::Lat,
        &format!("-P {M} -b"),
        &["Bidirectional is only available in BW test"],
    );
    refused(
        RawTool::BurstLat,
        &format!("-P {M} -b"),
        &["Bi-Dir is not supported in LAT under load test"],
    );
    refused(
        RawTool::BurstLat,
        &format!("-P {M} -D 2"),
        &["currently support iteration mode only"],
    );
    assert_eq!(ok(RawTool::Bw, &format!("-P {M} -q 4")).raw.qps, 4);
    let r = ok(
        RawTool::Lat,
        &format!("-P {M} --reply_every 4 --promiscuous --sniffer --flow_label 1,2"),
    );
    assert_eq!((r.reply_every, r.promiscuous, r.sniffer), (4, true, true));
    assert_eq!(r.flow_labels, [1, 2]);
    let p = ok(
        RawTool::BurstLat,
        &format!("-P {M} --burst_size 10 --rate_limit 5 --rate_units M --rate_limit_type PP"),
    );
    assert_eq!(p.pacing.len(), 4);
}

#[test]
fn the_binary_refuses_before_opening_anything() {
    let (rc, _, err) = run(&["raw-eth-bw", "--client", "-B", "02:00:00:00:00:01"]);
    assert_eq!(rc, 2);
    assert!(
        err.starts_with("rdmaperf raw-eth-bw: you must enter dest mac"),
        "{err}"
    );
    let (rc, out, _) = run(&["raw-eth-lat", "--help"]);
    assert_eq!(rc, 0);
    assert!(
        out.contains("raw_ethernet_lat") && out.contains("-B, --source_mac <value>"),
        "{out}"
    );
    assert!(
        out.contains("Refused for raw Ethernet") && out.contains("--mmap"),
        "{out}"
    );
}

#[test]
fn without_a_device_the_tool_says_so() {
    if let Ok(list) = rdmaperf::verbs::devices() {
        let names: Vec<String> = list.into_iter().map(|d| d.name).collect();
        println!("SKIPPED: this host has RDMA devices ({})", names.join(", "));
        return;
    }
    let (rc, out, err) = run(&["raw-eth-bw", "--server", "-B", "02:00:00:00:00:01"]);
    assert_eq!(rc, 2, "{err}");
    // perftest's size note (65536 → MTU) comes once the device is open, not before a refusal.
    assert_eq!(out, "", "{out}");
    assert!(
        err.contains("rdmaperf raw-eth-bw: ") && err.contains("no RDMA devices"),
        "{err}"
    );
    assert!(err.contains("rdma link add"), "{err}");
}

#[test]
fn raw_mcast_groups_and_mgid() {
    let p = ok(
        RawTool::Bw,
        "--server -B 02:00:00:00:00:02 -J 239.129.2.3 -j 1.1.1.1 --raw_mcast",
    );
    // raw_ethernet_bw: 01:00:5e and the IP's low 23 bits; the MGID holds
    // that MAC in bytes 10..16, zeros before.
    let mut want = [0u8; 16];
    want[10..].copy_from_slice(&[0x01, 0x00, 0x5e, 0x01, 0x02, 0x03]);
    assert_eq!(p.mgid(), Some(want));
    assert_eq!(
        rdmaperf::tool::runs::raw_server::mgid_text(&want),
        "00:00:00:00:00:00:00:00:00:00:01:00:5e:01:02:03"
    );
    assert_eq!(ok(RawTool::Bw, &format!("--server {M}")).mgid(), None);
}

#[test]
fn rate_flags_on_raw_eth_bw() {
    let p = ok(
        RawTool::Bw,
        &format!("--client {M} --rate_limit 10 --rate_units M --rate_limit_type PP"),
    );
    assert!(
        matches!(p.rate, Some(RawRate::Pp(pp)) if pp.kbps == 81920),
        "{:?}",
        p.rate
    );
    let s = ok(RawTool::Bw, &format!("--client {M} --rate_limit 2"));
    assert!(matches!(s.rate, Some(RawRate::Sw(_))), "{:?}", s.rate);
    assert!(
        s.notes.iter().any(|n| n == rate::SW_FALLBACK),
        "{:?}",
        s.notes
    );
    refused(
        RawTool::Bw,
        &format!("--client {M} --rate_limit 2 --rate_limit_type HW"),
        &["static rate", "PP"],
    );
    refused(
        RawTool::Bw,
        &format!("--client {M} --burst_size 4"),
        &["Can't enable burst mode"],
    );
    // The binary takes them before any device is looked at.
    refused_before_run(
        &[
            "raw-eth-bw",
            "--client",
            "-B",
            "02:00:00:00:00:01",
            "-E",
            "02:00:00:00:00:02",
            "--rate_limit=3",
            "--rate_limit_type=PP",
        ],
        "MEGA_BYTE_PS",
    );
}

#[test]
fn post_method_and_post_list() {
    let p = ok(
        RawTool::Bw,
        &format!("--client {M} --post direct-mpw -l 32 -n 1024"),
    );
    assert_eq!((p.post.as_deref(), p.post_list), (Some("direct-mpw"), 32));
    assert_eq!(
        ok(RawTool::Bw, &format!("--client {M} --post auto")).post,
        None
    );
    assert_eq!(ok(RawTool::Bw, &format!("--client {M}")).post_list, 1);
    refused(
        RawTool::Bw,
        &format!("--client {M} --post mpw"),
        &["--post mpw", "direct-mpw or auto"],
    );
    refused(RawTool::Bw, &format!("--client {M} -l 0"), &["-l"]);
    refused(RawTool::Bw, &format!("--client {M} -t 16 -l 32"), &["-l"]);
}

/// perftest's post list rules (force_dependecies): -Q follows -l unless
/// given (with perftest's line), a given -Q divides -l, -n is a multiple of
/// -l by iterations, BW tests only (raw-eth-burst-lat is LAT_BY_BW).
#[test]
fn post_list_rules_of_perftest() {
    let p = ok(RawTool::Bw, &format!("--client {M} -l 5 -n 1000"));
    assert_eq!(p.raw.cq_mod, 5);
    assert!(p
        .notes
        .iter()
        .any(|n| n.contains("CQ moderation will be the size of the post list")));
    let p = ok(RawTool::Bw, &format!("--client {M} -l 8 -Q 4"));
    assert_eq!((p.post_list, p.raw.cq_mod), (8, 4));
    assert!(!p.notes.iter().any(|n| n.contains("Post List requested")));
    assert_eq!(
        ok(RawTool::Bw, &format!("--client {M} -l 3 -D 2"))
            .raw
            .cq_mod,
        3
    );
    assert_eq!(ok(RawTool::Bw, &format!("--client {M}")).raw.cq_mod, 100);
    // -t 8 -Q 8 -l 5 would leave five unsignalled frames that a list of
    // five can never get past: perftest refuses it, and so does rdmaperf.
    refused(
        RawTool::Bw,
        &format!("--client {M} -t 8 -Q 8 -l 5 -n 1000"),
        &["-l 5 is not a multiple of -Q 8", "drop -Q"],
    );
    refused(
        RawTool::Bw,
        &format!("--client {M} -l 3 -n 1000"),
        &["-n 1000 is not a multiple of -l 3"],
    );
    refused(
        RawTool::Lat,
        &format!("--client {M} -l 2"),
        &["supported in BW tests only", "raw-eth-lat", "drop -l"],
    );
    refused(
        RawTool::FsRate,
        &format!("--client {M} -l 2"),
        &["supported in BW tests only"],
    );
    assert_eq!(
        ok(RawTool::BurstLat, &format!("--client {M} -l 2 -n 100"))
            .raw
            .cq_mod,
        2
    );
}

#[test]
fn compare_of_raw_tools() {
    refused_before_run(
        &[
            "compare",
            "raw-eth-lat",
            "--client",
            "-B",
            "02:00:00:00:00:01",
        ],
        "compare runs raw-eth-bw's sender only",
    );
    // raw-eth-bw goes through the raw flags and checks: a bad flag or value
    // is refused before any device is looked at.
    refused_before_run(
        &["compare", "raw-eth-bw", "--client", "--reps", "0"],
        "--reps 0",
    );
    refused_before_run(
        &[
            "compare",
            "raw-eth-bw",
            "--client",
            "-B",
            "02:00:00:00:00:01",
            "-a",
        ],
        "do not support -a",
    );
    // A rate limit would hold every method at it.
    let rated = format!("compare raw-eth-bw --client {M} --rate_limit=1");
    refused_before_run(
        &rated.split_whitespace().collect::<Vec<_>>(),
        "drop --rate_limit",
    );
    // The server runs on its own, not under compare (refused before any
    // device, so on any host).
    refused_before_run(
        &[
            "compare",
            "raw-eth-bw",
            "--server",
            "-B",
            "02:00:00:00:00:01",
        ],
        "compare runs the sender's post methods (--client)",
    );
}

#[test]
fn unsorted_and_histogram_are_latency_flags() {
    const M: &str = "--client -B 02:00:00:00:00:01 -E 02:00:00:00:00:02";
    let p = ok(RawTool::Lat, &format!("{M} -U --report-histogrm"));
    assert!(p.unsorted && p.histogram);
    let p = ok(RawTool::Lat, M);
    assert!(!p.unsorted && !p.histogram);
    refused(
        RawTool::Bw,
        &format!("{M} -U"),
        &["-U: Available only on Latency tests"],
    );
    refused(
        RawTool::Bw,
        &format!("{M} -H"),
        &["-H: Available only on Latency tests"],
    );
}

/// raw-eth-bw's BW peak: on by default for a sender (and each side of
/// `-b`); off with `-N` (silently), and by perftest's rules with its
/// warning as a note: `-D`, a one-way server, more than 20000 iterations.
/// The latency tools keep none and say nothing.
#[test]
fn peak_rules() {
    const WARN: &str = "WARNING: BW peak won't be measured in this run.";
    let warned = |p: &RawParams| p.notes.iter().any(|n| n == WARN);
    for cmd in [
        format!("-P {M}"),
        format!("-P {M} -n 20000"),
        format!("-P {M} -b"),
        format!("-Z {M} -b"),
    ] {
        let p = ok(RawTool::Bw, &cmd);
        assert!(!p.no_peak && !warned(&p), "{cmd}: {:?}", p.notes);
    }
    for cmd in [format!("-P {M} -N"), format!("-P {M} --noPeak -D 2")] {
        let p = ok(RawTool::Bw, &cmd);
        assert!(p.no_peak && !warned(&p), "{cmd}: {:?}", p.notes);
    }
    for cmd in [
        format!("-P {M} -D 2"),
        format!("-Z {M}"),
        format!("-P {M} -n 20001"),
    ] {
        let p = ok(RawTool::Bw, &cmd);
        assert!(p.no_peak, "{cmd}");
        let n = p.notes.iter().filter(|n| *n == WARN).count();
        assert_eq!(n, 1, "{cmd}: {:?}", p.notes);
    }
    for tool in [RawTool::Lat, RawTool::BurstLat] {
        let p = ok(tool, &format!("-P {M} -N"));
        assert!(p.no_peak && !warned(&p), "{:?}", p.notes);
    }
}

/// raw-eth-lat and raw-eth-burst-lat take packet pacing (perftest master
/// allows it there: a QP attribute) and refuse the SW limiter, as perftest
/// does on latency tests, and a rate without PP, before anything runs.
#[test]
fn rate_flags_on_the_latency_tools() {
    let pp = "--rate_limit 10 --rate_units M --rate_limit_type PP";
    for tool in [RawTool::Lat, RawTool::BurstLat] {
        for side in ["-P", "-Z"] {
            let p = ok(tool, &format!("{side} {M} {pp}"));
            assert!(
                matches!(p.rate, Some(RawRate::Pp(pp)) if pp.kbps == 81920),
                "{tool:?} {side}: {:?}",
                p.rate
            );
        }
        refused(
            tool,
            &format!("-P {M} --rate_limit 1 --rate_limit_type SW"),
            &["SW Rate limiter", "PP"],
        );
        refused(
            tool,
            &format!("-P {M} --rate_limit 1"),
            &["only packet pacing", "PP"],
        );
    }
    let b = ok(RawTool::BurstLat, &format!("-P {M} --burst_size 8 {pp}"));
    assert!(
        matches!(b.rate, Some(RawRate::Pp(pp)) if pp.max_burst == 0),
        "--burst_size is the bursts' frame count: {:?}",
        b.rate
    );
    for tool in ["raw-eth-lat", "raw-eth-burst-lat"] {
        let cmd = format!("{tool} --client {M} --rate_limit=3 --rate_limit_type=SW");
        let argv: Vec<&str> = cmd.split_whitespace().collect();
        refused_before_run(&argv, "SW Rate limiter");
    }
}

/// `--payload_file_path` on the raw tools: the other tools' reader
/// (perftest's little-endian DWORDs, at most `-s` bytes), and one clear
/// refusal (exit 2, before anything opens) for a file it cannot use.
#[test]
fn payload_file_path_reads_perftests_dwords_up_to_the_size() {
    let dir = std::env::temp_dir().join(format!("rdmaperf-raw-payload-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let good = dir.join("good.txt");
    let words: Vec<String> = (0..40u32)
        .map(|i| format!("0x{:08x}", 0x0102_0304u32.wrapping_mul(i + 1)))
        .collect();
    std::fs::write(&good, words.join(",") + "\n").unwrap();
    let g = good.display();
    for tool in [RawTool::Bw, RawTool::Lat, RawTool::BurstLat] {
        let p = ok(tool, &format!("--client {M} -s 64 --payload_file_path {g}"));
        let pat = p.payload.as_deref().unwrap();
        assert_eq!(pat.len(), 64, "{tool:?}: cut at -s");
        assert_eq!(&pat[..8], &[4, 3, 2, 1, 8, 6, 4, 2], "little-endian DWORDs");
    }
    let p = ok(
        RawTool::Bw,
        &format!("--client {M} -s 1518 --payload_file_path={g}"),
    );
    assert_eq!(p.payload.as_ref().unwrap().len(), 160, "the whole file");
    assert!(ok(RawTool::Bw, &format!("--client {M}")).payload.is_none());
    let bad = dir.join("bad.txt");
    std::fs::write(&bad, "0x11223344,0x1234").unwrap();
    let b = bad.display().to_string();
    refused(
        RawTool::Bw,
        &format!("--client {M} --payload_file_path {b}"),
        &["--payload_file_path", "DWORD 1", "0xaaaaaaaa"],
    );
    let none = dir.join("missing.txt").display().to_string();
    refused(
        RawTool::Lat,
        &format!("--client {M} --payload_file_path {none}"),
        &["--payload_file_path", "cannot read it"],
    );
    refused_before_run(
        &[
            "raw-eth-bw",
            "--client",
            "-B",
            "02:00:00:00:00:01",
            "-E",
            "02:00:00:00:00:02",
            "--payload_file_path",
            &b,
        ],
        "--payload_file_path",
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
