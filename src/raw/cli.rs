//! `rdmaperf raw-eth-bw ...` (and `raw_ethernet_bw` as a multicall name):
//! the flags and perftest's rules, then the checks made before anything is
//! opened ([`prepare`]), and what does not run yet ([`not_yet`]: everything
//! but raw-eth-bw (sender, server and `-b` on `-q` QPs, `--server -v` on one), raw-eth-lat,
//! raw-eth-burst-lat and raw-eth-fs-rate says so and
//! exits 2, docs/raw-ethernet.md).
//! `tool::raw` runs what does.

use super::args::{self, FLAGS};
use super::params::{self, RawParams};
use super::preflight;
use super::tools::RawTool;

/// The tool a subcommand names, either spelling.
pub fn tool_of(sub: &str) -> Option<RawTool> {
    RawTool::from_name(sub)
}

/// `rdmaperf <raw tool> <argv>` up to the run: `--help`, the flags and
/// rules, the device checks and CAP_NET_RAW, perftest's notes. `Ok` holds
/// the device's name; `Err` is the exit status when nothing is to run (0
/// after `--help`, 2 after a refusal, already printed).
pub fn prepare(tool: RawTool, argv: &[String]) -> Result<(RawParams, String), i32> {
    let name = tool.name();
    let parsed = args::parse(argv);
    if parsed.as_ref().is_ok_and(|a| a.has("help")) {
        print!("{}", help(tool));
        return Err(0);
    }
    let p = match parsed.and_then(|a| params::resolve(tool, &a)) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("rdmaperf {name}: {e}");
            return Err(2);
        }
    };
    let dev = before_open(&p).map_err(|e| {
        eprintln!("{e}");
        2
    })?;
    // perftest prints these once the device is open (check_link_and_mtu).
    for n in &p.notes {
        println!(" {n}");
    }
    Ok((p, dev))
}

/// [`prepare`], then [`not_yet`]'s refusal (printed, exit 2): the parameters of a command
/// line rdmaperf runs, or the exit status when nothing is to run.
pub fn prepare_runnable(tool: RawTool, argv: &[String]) -> Result<RawParams, i32> {
    let (p, dev) = prepare(tool, argv)?;
    if let Some(e) = not_yet(&p, &dev) {
        eprintln!("{e}");
        return Err(2);
    }
    Ok(p)
}

/// What rdmaperf does not run yet for this command line, as the refusal
/// naming it and the stock tool to use; None when it runs (raw-eth-bw: the
/// sender, the server on any `-q`, `-b` on one QP, `--server -v` on one QP
/// with `-l` and `-D`; raw-eth-lat; raw-eth-burst-lat; raw-eth-fs-rate).
pub fn not_yet(p: &RawParams, dev: &str) -> Option<String> {
    let r = &p.raw;
    if r.tool == RawTool::BurstLat {
        if let Some(e) = burst_refusal(p) {
            return Some(e);
        }
    }
    let missing = match r.tool {
        RawTool::Lat if r.mac_fwd => Some("-v (MAC forwarding, run_iter_fw)"),
        RawTool::Lat if r.raw_mcast => Some("--raw_mcast (the multicast group attach)"),
        RawTool::Lat => None,
        RawTool::BurstLat if r.raw_mcast => Some("--raw_mcast (the multicast group attach)"),
        RawTool::BurstLat if p.post_list > 1 => Some("-l (a post list in the burst loop)"),
        RawTool::BurstLat => None,
        RawTool::FsRate => None,
        RawTool::Bw if r.mac_fwd && r.side != Some(super::ctx::Side::Server) => Some(
            "-v on a client (forwarding runs on the server: --server -v against a --client -b)",
        ),
        RawTool::Bw if r.mac_fwd && r.qps > 1 => Some("-v with -q above 1 (one QP forwards)"),
        RawTool::Bw => None,
    }?;
    Some(not_in_rdmaperf(r.tool, dev, missing))
}

/// The refusal of `missing` on `dev`: one sentence naming the stock tool.
fn not_in_rdmaperf(tool: RawTool, dev: &str, missing: &str) -> String {
    format!(
        "rdmaperf {}: the command line and {dev} pass every check, but {missing} is not in \
         rdmaperf yet (what runs of raw-eth-bw, raw-eth-lat, raw-eth-burst-lat and \
         raw-eth-fs-rate: docs/raw-ethernet.md): drop it, or run stock {} for now",
        tool.name(),
        tool.perftest_name()
    )
}

/// raw-eth-burst-lat's `--burst_size` (perftest: a whole number from 0;
/// 0 or none: `-t`, "Setting burst size to tx depth").
pub fn burst_size(p: &RawParams) -> Result<u64, String> {
    let given = p.pacing.iter().rev().find(|(k, _)| *k == "burst_size");
    let Some((_, v)) = given else {
        return Ok(p.raw.tx_depth);
    };
    match super::values::num("--burst_size", "Burst size", v, 0, i32::MAX as u64)? {
        0 => Ok(p.raw.tx_depth),
        b => Ok(b),
    }
}

/// raw-eth-burst-lat's own refusals, in one sentence each: a bad
/// `--burst_size`; a `--reply_every` above `-n` (no reply to time).
/// perftest's software limiter is refused with the rate flags
/// (`raw::rate`).
fn burst_refusal(p: &RawParams) -> Option<String> {
    let name = "rdmaperf raw-eth-burst-lat";
    if let Err(e) = burst_size(p) {
        return Some(format!("{name}: {e}"));
    }
    if u64::from(p.reply_every) > p.raw.iters {
        return Some(format!(
            "{name}: --reply_every {} is above -n {}: no reply would be timed: set \
             --reply_every to at most -n",
            p.reply_every, p.raw.iters
        ));
    }
    None
}

/// `rdmaperf compare <raw tool>` other than raw-eth-bw: refused (compare
/// runs raw-eth-bw's sender with each post method).
pub fn no_compare(tool: RawTool) -> String {
    format!(
        "rdmaperf compare {}: compare runs raw-eth-bw's sender only (its post methods): use \
         `rdmaperf compare raw-eth-bw --client ...`",
        tool.name()
    )
}

/// Why `rdmaperf compare raw-eth-bw <argv>` cannot run, found from the
/// flags alone (before any device): a server, or a rate limit.
pub fn compare_refusal(argv: &[String]) -> Option<String> {
    let p = args::parse(argv)
        .and_then(|a| params::resolve(RawTool::Bw, &a))
        .ok()?;
    if p.raw.side == Some(super::ctx::Side::Server) {
        return Some(
            "rdmaperf compare raw-eth-bw: compare runs the sender's post methods (--client); a \
             server counts what any sender sends: run `rdmaperf raw-eth-bw --server ...` beside it"
                .to_string(),
        );
    }
    p.rate.is_some().then(|| {
        "rdmaperf compare raw-eth-bw: a rate limit holds every post method at the same rate, so \
         the table would compare the limit: drop --rate_limit and its flags"
            .to_string()
    })
}

/// The device checks, then CAP_NET_RAW; the device's name when both pass.
fn before_open(p: &RawParams) -> Result<String, String> {
    let name = p.raw.tool.name();
    let list = crate::verbs::device::devices().map_err(|e| format!("rdmaperf {name}: {e}"))?;
    let dev =
        preflight::pick(&list, p.device.as_deref()).map_err(|e| format!("rdmaperf {name}: {e}"))?;
    let support = preflight::raw_support(std::path::Path::new(&dev.ibdev_path), dev.transport_type);
    if let Some(e) = preflight::device_refusal(&format!("rdmaperf {name}"), &dev.name, &support) {
        return Err(e);
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    if let Some(e) = preflight::cap_refusal(&format!("rdmaperf {name}"), &status) {
        return Err(e);
    }
    Ok(dev.name.clone())
}

/// The flags the raw tools take, and those refused with why.
pub fn help(tool: RawTool) -> String {
    let mut s = format!(
        "Usage: rdmaperf {} --server|--client -B <source MAC> [-E <dest MAC>] [flags]\n\
         (perftest's {}; the same flags by perftest master's names)\n\nFlags:\n",
        tool.name(),
        tool.perftest_name()
    );
    for f in FLAGS.iter().filter(|f| f.refused.is_none()) {
        s.push_str(&spell(f));
    }
    s.push_str("\nRefused for raw Ethernet (perftest's rules):\n");
    for f in FLAGS.iter().filter(|f| f.refused.is_some()) {
        s.push_str(&spell(f));
    }
    s
}

fn spell(f: &args::Flag) -> String {
    let short = f.short.map(|c| format!("-{c}, ")).unwrap_or_default();
    let v = if f.value { " <value>" } else { "" };
    format!("  {short}--{}{v}\n", f.long)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(tool: RawTool, cmd: &str) -> RawParams {
        let argv: Vec<String> = cmd.split_whitespace().map(String::from).collect();
        args::parse(&argv)
            .and_then(|a| params::resolve(tool, &a))
            .unwrap_or_else(|e| panic!("{cmd}: {e}"))
    }

    const M: &str = "-B 02:00:00:00:00:01 -E 02:00:00:00:00:02";

    #[test]
    fn compare_is_refused_with_the_methods_to_run() {
        let e = no_compare(RawTool::Lat);
        assert!(e.starts_with("rdmaperf compare raw-eth-lat: "), "{e}");
        assert!(e.contains("compare raw-eth-bw --client"), "{e}");
    }

    #[test]
    fn compare_refuses_a_server_command_line() {
        let argv = |c: &str| c.split_whitespace().map(String::from).collect::<Vec<_>>();
        let e = compare_refusal(&argv(&format!("--server {M}"))).unwrap();
        assert!(
            e.contains("--client") && e.contains("raw-eth-bw --server"),
            "{e}"
        );
        assert_eq!(compare_refusal(&argv(&format!("--client {M}"))), None);
        assert_eq!(compare_refusal(&argv("--server")), None);
        let e = compare_refusal(&argv(&format!("--client {M} --rate_limit 1"))).unwrap();
        assert!(e.contains("drop --rate_limit"), "{e}");
    }

    #[test]
    fn burst_lat_refuses_a_bad_burst_and_reply_every_above_n() {
        let b = |c: &str| p(RawTool::BurstLat, &format!("--client {M} {c}"));
        for (c, what) in [
            (
                "--burst_size x",
                "--burst_size 'x': Burst size must be a whole number",
            ),
            ("-n 10 --reply_every 11", "--reply_every 11 is above -n 10"),
        ] {
            let e = not_yet(&b(c), "mlx5_0").unwrap_or_else(|| panic!("{c}: runs"));
            assert!(
                e.starts_with("rdmaperf raw-eth-burst-lat: ") && e.contains(what),
                "{e}"
            );
            assert!(!e.contains('\n'), "one sentence: {e}");
        }
        assert_eq!(burst_size(&b("")), Ok(128), "none: -t (128 by default)");
        assert_eq!(burst_size(&b("-t 64 --burst_size 0")), Ok(64), "0: -t");
        assert_eq!(burst_size(&b("--burst_size 10")), Ok(10));
    }

    #[test]
    fn what_runs_and_what_is_refused() {
        let runs = [
            (RawTool::Bw, format!("--client {M}")),
            (
                RawTool::Bw,
                format!("--client {M} -j 1.1.1.1 -J 2.2.2.2 -k 1 -K 2 --flows 4"),
            ),
            (RawTool::FsRate, format!("--server {M}")),
            (RawTool::Lat, format!("--client {M}")),
            (
                RawTool::Lat,
                format!("--server {M} -j 1.1.1.1 -J 2.2.2.2 -k 1 -K 2"),
            ),
            (RawTool::Bw, format!("--server {M}")),
            (RawTool::BurstLat, format!("--client {M}")),
            (
                RawTool::BurstLat,
                format!("--server {M} --burst_size 16 --reply_every 4 -n 64 -t 32 -Q 8"),
            ),
            (
                RawTool::Bw,
                format!("--server {M} -j 1.1.1.1 -J 2.2.2.2 -k 1 -K 2 --flows 4 -r 1024"),
            ),
            (RawTool::Bw, format!("--server {M} -b")),
            (RawTool::Bw, format!("--server {M} -q 2")),
            (RawTool::Bw, format!("--server {M} -q 4 -D 3 --flows 2 -k 1 -K 2 -j 1.1.1.1 -J 2.2.2.2")),
            (
                RawTool::Bw,
                "--client -B 02:00:00:00:00:01 -J 224.0.0.5 -j 1.1.1.1 --raw_mcast".to_string(),
            ),
            (
                RawTool::Bw,
                "--server -B 02:00:00:00:00:02 -J 224.0.0.5 -j 1.1.1.1 --raw_mcast".to_string(),
            ),
            (RawTool::Bw, format!("--client {M} -b -n 100")),
            (RawTool::Bw, format!("--client {M} -b -q 2")),
            (RawTool::Bw, format!("--server {M} -b -q 4 -n 100")),
            (RawTool::Bw, format!("--server {M} -v -n 100")),
            (RawTool::Bw, format!("--server {M} -v -l 4 -n 100")),
            (RawTool::Bw, format!("--server {M} -v -D 5 -l 2")),
            (RawTool::Bw, format!("--server {M} -b -D 5")),
            (
                RawTool::Lat,
                format!("--client {M} --rate_limit 10 --rate_units M --rate_limit_type PP"),
            ),
            (
                RawTool::BurstLat,
                format!("--client {M} --burst_size 8 --rate_limit 1 --rate_units M --rate_limit_type PP"),
            ),
        ];
        for (t, c) in &runs {
            assert_eq!(not_yet(&p(*t, c), "mlx5_0"), None, "{c}");
        }
        let refused = [
            (RawTool::Bw, format!("--client {M} -v"), "-v on a client"),
            (RawTool::Bw, format!("--server {M} -v -q 2"), "-v with -q"),
            (
                RawTool::Lat,
                format!("--client {M} -J 224.0.0.5 -j 1.1.1.1 --raw_mcast"),
                "--raw_mcast",
            ),
            (
                RawTool::BurstLat,
                format!("--client {M} -l 2"),
                "-l (a post list",
            ),
        ];
        for (t, c, what) in &refused {
            let e = not_yet(&p(*t, c), "mlx5_0").unwrap_or_else(|| panic!("{c}: runs"));
            assert!(e.contains(what) && e.contains("mlx5_0"), "{c}: {e}");
            assert!(
                e.contains(&format!("run stock {}", t.perftest_name())),
                "{c}: {e}"
            );
            assert!(!e.contains('\n'), "one sentence: {e}");
        }
    }
}
