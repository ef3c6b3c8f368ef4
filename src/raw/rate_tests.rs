use super::*;
use crate::raw::args;

fn rate(cmd: &str) -> (Result<Option<RawRate>, String>, Vec<String>) {
    let argv: Vec<String> = cmd.split_whitespace().map(String::from).collect();
    let a = args::parse(&argv).expect(cmd);
    let mut notes = Vec::new();
    let r = limit(&a, 128, a.has("bidirectional"), &mut notes);
    (r, notes)
}

fn refused(cmd: &str, want: &[&str]) {
    let (r, _) = rate(cmd);
    let e = r.expect_err(cmd);
    for w in want {
        assert!(e.contains(w), "{cmd}: no {w:?} in {e:?}");
    }
}

#[test]
fn no_rate_flags_run_unlimited() {
    assert_eq!(rate("--client").0, Ok(None));
}

#[test]
fn a_rate_alone_falls_back_to_sw_with_perftests_notices() {
    let (r, notes) = rate("--client --rate_limit 2.5");
    let Some(RawRate::Sw(l)) = r.unwrap() else {
        panic!("not SW")
    };
    assert_eq!((l.value, l.units, l.burst), (2.5, RateUnits::Gbps, 128));
    assert_eq!(notes, [SW_FALLBACK, "Setting burst size to tx depth = 128"]);
}

#[test]
fn sw_takes_burst_and_units() {
    let (r, notes) =
        rate("--client --rate_limit=1000000 --rate_units=p --rate_limit_type=SW --burst_size=16");
    let Some(RawRate::Sw(l)) = r.unwrap() else {
        panic!("not SW")
    };
    assert_eq!((l.units, l.burst), (RateUnits::Pps, 16));
    assert!(notes.is_empty(), "{notes:?}");
    // 16 frames every 16 µs.
    assert!((l.burst_gap_secs(64) - 16e-6).abs() < 1e-12);
}

#[test]
fn pp_converts_mibps_to_kbps_and_keeps_burst_and_typical() {
    let (r, _) = rate("--client --rate_limit=100 --rate_units=M --rate_limit_type=PP --burst_size=4096 --typical_pkt_size=64");
    assert_eq!(
        r.unwrap(),
        Some(RawRate::Pp(PacketPacing {
            kbps: 100 * 8 * 1024,
            max_burst: 4096,
            typical_pkt: 64
        }))
    );
}

#[test]
fn perftests_refusals_name_the_fix() {
    refused(
        "--client --rate_limit=10 --rate_limit_type=PP",
        &["MEGA_BYTE_PS", "--rate_units=M"],
    );
    refused(
        "--client --rate_limit=10 --rate_limit_type=HW",
        &["static", "PP", "SW"],
    );
    refused(
        "--client --burst_size=8",
        &["Can't enable burst mode", "--rate_limit"],
    );
    refused(
        "--client --rate_limit=1 --typical_pkt_size=64",
        &["only supports PP"],
    );
    refused("--client --rate_limit=0", &["above 0"]);
    refused(
        "--client --rate_limit=1 --rate_units=k",
        &["--rate_units=k"],
    );
    refused(
        "--client --rate_limit=1 --rate_limit_type=sw",
        &["upper case"],
    );
    refused("--client --rate_limit_type=SW", &["--rate_limit=<rate>"]);
    refused("--client -b --rate_limit=1", &["bidirectional", "drop -b"]);
}

#[test]
fn pp_paces_a_duplex_run_the_sw_limiter_does_not() {
    let (r, _) = rate("--client -b --rate_limit=1 --rate_units=M --rate_limit_type=PP");
    assert!(matches!(r, Ok(Some(RawRate::Pp(_)))), "{r:?}");
}

fn lat_rate(tool: RawTool, cmd: &str) -> RateResult {
    let argv: Vec<String> = cmd.split_whitespace().map(String::from).collect();
    lat_limit(&args::parse(&argv).expect(cmd), tool)
}

/// raw-eth-lat and raw-eth-burst-lat: packet pacing only (perftest master
/// allows it there); burst-lat's `--burst_size` stays its bursts' count.
#[test]
fn latency_tools_take_packet_pacing_only() {
    let pp = "--rate_limit 10 --rate_units M --rate_limit_type PP";
    let lat = lat_rate(
        RawTool::Lat,
        &format!("{pp} --burst_size 3000 --typical_pkt_size 64"),
    );
    assert_eq!(
        lat,
        Ok(Some(RawRate::Pp(PacketPacing {
            kbps: 81920,
            max_burst: 3000,
            typical_pkt: 64
        })))
    );
    let burst = lat_rate(RawTool::BurstLat, &format!("{pp} --burst_size 16"));
    assert_eq!(
        burst,
        Ok(Some(RawRate::Pp(PacketPacing {
            kbps: 81920,
            max_burst: 0,
            typical_pkt: 0
        })))
    );
    assert_eq!(lat_rate(RawTool::Lat, ""), Ok(None));
    assert_eq!(lat_rate(RawTool::BurstLat, "--burst_size 16"), Ok(None));
    for tool in [RawTool::Lat, RawTool::BurstLat] {
        for (cmd, want) in [
            ("--rate_limit_type SW", "SW Rate limiter cann't be executed"),
            (
                "--rate_limit 1 --rate_limit_type SW",
                "use --rate_limit_type=PP",
            ),
            ("--rate_limit 1", "only packet pacing"),
            ("--rate_limit 1 --rate_limit_type HW", "static rate"),
            ("--rate_limit 1 --rate_limit_type PP", "MEGA_BYTE_PS"),
            ("--rate_limit 1 --rate_limit_type XX", "use PP"),
            ("--rate_limit_type PP", "none was given"),
            ("--typical_pkt_size 64", "none was given"),
        ] {
            let e = lat_rate(tool, cmd).expect_err(cmd);
            assert!(e.contains(want), "{tool:?} {cmd}: {e}");
        }
    }
    let e = lat_rate(RawTool::Lat, "--burst_size 4").unwrap_err();
    assert!(e.contains("Can't enable burst mode"), "{e}");
}
