//! Per-tool flow: open the device, run perftest's control choreography, build
//! the resources, run the measurement loop with the chosen post method, report,
//! tear down. (The design card's map has no home for this glue; it sits between
//! `ctrl` (protocol), `run` (loops) and `report` (output), so it gets its own.)

pub mod cm_data;
pub mod compare;
pub mod compare_table;
pub mod counters;
pub mod cpu_util;
pub mod cpus;
pub mod device_rules;
pub mod devices;
pub mod direct;
pub mod duplex;
pub mod infinite;
pub mod info;
pub mod landing;
pub mod lat;
pub mod mem_setup;
pub mod method;
pub mod peer_check;
pub mod progress;
pub mod rdma_bw;
pub mod send_bw;
pub mod setup;
pub mod threads_bw;
pub mod threads_stock;

use crate::cli::params::{Conn, Kind, Params, Verb};
use crate::ctrl::{self, Role, Scenario, Tool};
use crate::run::stop;
use std::fmt;

/// The control protocol's view of this invocation (which tool, side, mode,
/// QPs; `mtu_bytes` bounds UD sweeps), for `ctrl::choreography`.
pub(crate) fn scenario(p: &Params, mtu_bytes: u32) -> Scenario {
    let tool = match (p.tool.kind, p.tool.verb) {
        (Kind::Bw, Verb::Write) => Tool::WriteBw,
        (Kind::Bw, Verb::Read) => Tool::ReadBw,
        (Kind::Bw, Verb::Send) => Tool::SendBw,
        (Kind::Bw, Verb::Atomic) => Tool::AtomicBw,
        (Kind::Lat, Verb::Write) => Tool::WriteLat,
        (Kind::Lat, Verb::Read) => Tool::ReadLat,
        (Kind::Lat, Verb::Send) => Tool::SendLat,
        (Kind::Lat, Verb::Atomic) => Tool::AtomicLat,
    };
    Scenario {
        tool,
        role: if p.is_server() {
            Role::Server
        } else {
            Role::Client
        },
        duplex: p.duplex,
        mode: if p.all_sizes {
            ctrl::Mode::AllSizes
        } else if p.is_duration() {
            ctrl::Mode::Duration
        } else {
            ctrl::Mode::Iterations
        },
        num_qps: p.num_qps as usize,
        ud_mtu: (p.conn == Conn::Ud).then_some(mtu_bytes),
    }
}

/// The one wording for a peer that vanished mid-run.
pub(crate) const PEER_EXITED: &str =
    "the peer exited during the run (its control connection closed)";

/// After an error completion: did the peer's exit cause it? Waits briefly
/// for the control connection's verdict (its end of file can trail the
/// error completions); never after our own stop request.
pub(crate) fn peer_exited_before(_wc: &crate::post::Completion) -> bool {
    !stop::requested() && crate::run::peer::gone_within(std::time::Duration::from_millis(1500))
}

/// A failure of a tool, already worded for the user (problem and fix).
#[derive(Debug)]
pub struct Fail {
    pub msg: String,
    /// Exit status to use (1 unless interrupted).
    pub status: i32,
}

impl Fail {
    pub fn new(msg: impl Into<String>) -> Fail {
        Fail {
            msg: msg.into(),
            status: 1,
        }
    }
    pub fn verbs(e: crate::verbs::VerbsError) -> Fail {
        Fail::new(e.to_string())
    }
    pub fn ctrl(e: crate::ctrl::CtrlError) -> Fail {
        Fail::new(e.to_string())
    }
}

impl fmt::Display for Fail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)
    }
}

/// Where a side prints. The loopback server is quiet so one table shows.
#[derive(Clone, Copy)]
pub struct Out {
    pub quiet: bool,
}

impl Out {
    pub fn print(&self, s: &str) {
        if !self.quiet && !s.is_empty() {
            use std::io::Write;
            let mut o = std::io::stdout().lock();
            let _ = o.write_all(s.as_bytes());
            let _ = o.flush();
        }
    }
}

/// The dashed line that closes perftest's table; with `--output=...` perftest
/// prints only the number, so scripts can take `BW=$(ib_write_bw ... --output=bandwidth)`.
pub(crate) fn result_line(p: &Params) -> &'static str {
    if p.output.is_none() {
        crate::report::text::RESULT_LINE
    } else {
        ""
    }
}

/// Flags rdmaperf parses (perftest's) but does not implement yet: refused with
/// a clear message rather than silently ignored.
fn not_implemented(p: &Params) -> Option<&'static str> {
    if p.use_event && (p.duplex || p.threads > 1) {
        return Some(
            "-e (completion events) with -b or --threads: not implemented in rdmaperf yet; drop -e (rdmaperf polls) or -b/--threads",
        );
    }
    if p.rdma_cm
        && p.conn == crate::cli::params::Conn::Ud
        && (p.duplex || p.tool.kind == crate::cli::params::Kind::Lat)
    {
        return Some(
            "-R with -c UD: rdmaperf runs it for unidirectional send-bw only so far (latency and -b need the peers' QPNs sent over the UD QPs); drop -R or -b, or use -c RC",
        );
    }
    if p.mr_per_qp && p.tool.kind == crate::cli::params::Kind::Lat {
        return Some("--mr_per_qp: latency tests use one QP; drop --mr_per_qp");
    }
    if p.run_infinitely && (p.tool.verb == Verb::Send || p.duplex || p.threads > 1) {
        return Some("--run_infinitely: rdmaperf runs it for write-bw, read-bw and atomic-bw (one thread, without -b) so far; use -D for send-bw, -b or --threads");
    }
    None
}

/// One side of one pair (the fabric mode runs each pair through this).
pub(crate) fn run_side(p: &Params, out: Out) -> Result<(), Fail> {
    if let Some(m) = not_implemented(p) {
        return Err(Fail::new(m));
    }
    let p = &device_rules::apply(p, out)?;
    for n in &p.notices {
        // perftest prints its parameter notices after a result line, first thing.
        out.print(crate::report::text::RESULT_LINE);
        out.print(&format!("{n}\n"));
    }
    if p.threads > 1 && !p.is_server() && p.tool.verb == Verb::Send {
        return Err(Fail::new(
            "send-bw --threads: the multi-threaded client is wired for write/read/atomic-bw only; use -q without --threads",
        ));
    }
    match (p.tool.kind, p.tool.verb) {
        (Kind::Bw, Verb::Write | Verb::Read | Verb::Atomic) if !p.duplex => {
            rdma_bw::run(p, out).map(|_| ())
        }
        (Kind::Bw, Verb::Send) if !p.duplex => send_bw::run(p, out),
        (Kind::Bw, _) if p.duplex => duplex::run(p, out),
        (Kind::Lat, _) => lat::run(p, out),
        _ => Err(Fail::new(format!(
            "{}{}: not implemented yet in rdmaperf; use stock perftest's {} for now",
            p.tool.name(),
            if p.duplex { " -b" } else { "" },
            p.tool.perftest_name()
        ))),
    }
}

/// Run the tool; returns the exit status.
pub fn run(p: Params) -> i32 {
    stop::install();
    let res = if p.loopback {
        loopback(&p)
    } else {
        run_side(&p, Out { quiet: false })
    };
    match res {
        Ok(()) => stop::exit_status().unwrap_or(0),
        Err(f) => match stop::exit_status() {
            // A signal stopped us: say so first, the step's own error after.
            Some(st) if !f.msg.starts_with("interrupted") => {
                eprintln!(
                    "rdmaperf {}: interrupted by signal {}: {}",
                    p.tool.name(),
                    st - 128,
                    f.msg
                );
                st
            }
            st => {
                eprintln!("rdmaperf {}: {}", p.tool.name(), f.msg);
                st.unwrap_or(f.status)
            }
        },
    }
}

/// Both ends in one process over 127.0.0.1: the server in a thread (quiet),
/// the client here.
fn loopback(p: &Params) -> Result<(), Fail> {
    loopback_with(p, Out { quiet: false }, run_side)
}

/// Loopback with a given client side (its return value is passed through).
pub fn loopback_with<T>(
    p: &Params,
    client_out: Out,
    client_side: fn(&Params, Out) -> Result<T, Fail>,
) -> Result<T, Fail> {
    let mut sp = p.clone();
    sp.server = None;
    // Marks the server as the loopback's: it stops waiting for a client after --timeout.
    sp.loopback = true;
    sp.json_file = None;
    sp.check_landing = false;
    let server = std::thread::spawn(move || run_side(&sp, Out { quiet: true }));
    let mut cp = p.clone();
    cp.server = Some("127.0.0.1".into());
    cp.loopback = false;
    let client = client_side(&cp, client_out);
    if client.is_err() {
        // The server may wait for a peer that never comes: ask it to stop.
        stop::request();
    }
    let server = server
        .join()
        .unwrap_or_else(|_| Err(Fail::new("loopback server thread panicked")));
    let client = client?;
    server.map_err(|f| Fail::new(format!("loopback server side: {f}")))?;
    Ok(client)
}
