//! `rdmaperf raw-eth-*` ([`main`]): the command line and checks
//! (`raw::cli::prepare`), then what runs; everything else is refused with
//! exit 2, naming what is missing and the stock tool (`raw::cli::not_yet`).
//!
//! What runs: raw-eth-fs-rate (`runs::raw_fs_rate`), `raw-eth-bw --server`
//! (the receiver, `runs::raw_server`) and `raw-eth-bw --client`, perftest's
//! raw_ethernet_bw sender, here. Open
//! the device and check the port (`setup::raw_res`), pick the post method
//! once (`setup::raw_method`), build the QPs and frames, run the loop
//! (`session::raw_measure`) and print perftest's table with the packet
//! rate against the line rate under it. A client attaches no steering rule
//! (perftest creates them on a server or a duplex side only). `-b` runs
//! both ways on either side (`runs::raw_duplex`), `--server -v` forwards
//! (`runs::raw_fw`); the sender's run itself is `runs::raw_send`.

use super::raw_send::run_once;
use crate::clock::Clock;
use crate::raw::cli;
use crate::raw::ctx::Side;
use crate::raw::params::RawParams;
use crate::raw::tools::RawTool;
use crate::run::stop;
use crate::tool::common::fail::Fail;
use crate::tool::session::raw_measure;
use crate::tool::setup::raw_method;
use crate::tool::setup::raw_res::{RawPort, RawRes};

/// Runs `rdmaperf <raw tool> <argv>`; returns the exit status.
pub fn main(tool: RawTool, argv: &[String]) -> i32 {
    let p = match cli::prepare_runnable(tool, argv) {
        Ok(p) => p,
        Err(status) => return status,
    };
    stop::install();
    let ran = match tool {
        RawTool::FsRate => super::raw_fs_rate::run(&p),
        RawTool::Lat | RawTool::BurstLat => super::raw_lat::run(&p),
        _ if p.raw.mac_fwd => super::raw_fw::run(&p),
        _ if p.raw.duplex => super::raw_duplex::run(&p),
        _ if p.raw.side == Some(Side::Server) => super::raw_server::run(&p),
        _ => run(&p),
    };
    let (status, line) = ending(tool, ran, stop::exit_status());
    if let Some(line) = line {
        eprintln!("{line}");
    }
    status
}

/// The exit status and the line for stderr of a run that ended with
/// `ran`, `signalled` being `stop::exit_status()`: as the other tools
/// (`tool::run`), a signal's status (130 for SIGINT, 143 for SIGTERM) wins
/// over a failure, and the line says the run was interrupted, before the
/// failure's words where the stop cut a step short.
pub fn ending(
    tool: RawTool,
    ran: Result<(), Fail>,
    signalled: Option<i32>,
) -> (i32, Option<String>) {
    let name = tool.name();
    match (ran, signalled) {
        (Ok(()), None) => (0, None),
        (Err(f), None) => (f.status, Some(f.msg)),
        (Ok(()), Some(st)) => (
            st,
            Some(format!(
                "rdmaperf {name}: interrupted by signal {}: the run stopped there (a result \
                 above is partial); its QPs and flow rules are released",
                st - 128
            )),
        ),
        (Err(f), Some(st)) => (
            st,
            Some(format!(
                "rdmaperf {name}: interrupted by signal {}: {}",
                st - 128,
                f.msg
            )),
        ),
    }
}

/// Runs the sender; the report is printed on stdout.
pub fn run(p: &RawParams) -> Result<(), Fail> {
    let asked = raw_method::parse(p.post.as_deref()).map_err(Fail::refused)?;
    let port = RawPort::open(p)?;
    let (method, why) = raw_method::decide(asked, &port.dev)
        .map_err(|e| Fail::refused(format!("rdmaperf raw-eth-bw: {e}")))?;
    let res = RawRes::create(&port, p, method)?;
    println!(
        " raw-eth-bw: {} QP(s) on {} port {}, post method {why}",
        p.raw.qps,
        port.ctx.name(),
        p.ib_port
    );
    if let Some(line) = raw_measure::rate_banner(p) {
        println!("{line}");
    }
    let r = run_once(p, (&port, &res, method), &Clock::calibrate())?;
    print!("{}", raw_measure::report(p, &r, port.gbps));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signal_is_the_exit_status_and_is_named() {
        let bw = RawTool::Bw;
        assert_eq!(ending(bw, Ok(()), None), (0, None));
        let (st, line) = ending(bw, Err(Fail::refused("no")), None);
        assert_eq!((st, line.as_deref()), (2, Some("no")));
        let (st, line) = ending(RawTool::Lat, Ok(()), Some(130));
        let line = line.unwrap();
        assert_eq!(st, 130);
        assert!(
            line.starts_with("rdmaperf raw-eth-lat: interrupted by signal 2:"),
            "{line}"
        );
        // A step the stop cut short fails: the signal's status still, its
        // words after the interruption.
        let (st, line) = ending(bw, Err(Fail::new("the run's numbers: none")), Some(143));
        assert_eq!(st, 143);
        assert_eq!(
            line.as_deref(),
            Some("rdmaperf raw-eth-bw: interrupted by signal 15: the run's numbers: none")
        );
    }
}
