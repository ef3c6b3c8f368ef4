//! One side of one pair: refuse what is not implemented, apply the device
//! rules, pick the tool's run module; and loopback (both sides in one
//! process). The fabric mode and `compare` run pairs through here.

use super::common::device_rules;
use super::common::fail::Fail;
use super::common::out::Out;
use super::runs::duplex;
use super::runs::lat;
use super::runs::rdma_bw;
use super::runs::send_bw;
use crate::cli::params::{Kind, Params, Verb};
use crate::ctrl::after_run;
use crate::explain::bracket::{Bracket, Explanation, PeerFacts};
use crate::explain::doctor::HostFacts;
use crate::explain::gpu_findings;
use crate::explain::sysfs::SysRoot;
use crate::run::stop;
use std::rc::Rc;

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
        return Err(Fail::refused(m));
    }
    if p.threads <= 1 {
        if let Some(list) = &p.cpus {
            super::common::cpus::restrict_current(list).map_err(Fail::refused)?;
        }
    }
    let p = &device_rules::apply(p, out)?;
    for n in &p.notices {
        // perftest prints its parameter notices after a result line, first thing.
        out.print(crate::report::text::RESULT_LINE);
        out.print(&format!("{n}\n"));
    }
    if p.gpu.as_ref().is_some_and(|g| g.no_scatter_to_cqe) {
        // perftest's disable_mlx5_scatter_to_cqe, after its line (a notice
        // above). libmlx5 reads the variable at each QP's creation, which
        // comes later, before any thread of this run exists.
        std::env::set_var("MLX5_SCATTER_TO_CQE", "0");
    }
    if p.threads > 1 && !p.is_server() && p.tool.verb == Verb::Send {
        return Err(Fail::refused(
            "send-bw --threads: the multi-threaded client is wired for write/read/atomic-bw only; use -q without --threads",
        ));
    }
    explained(p, out, || match (p.tool.kind, p.tool.verb) {
        (Kind::Bw, Verb::Write | Verb::Read | Verb::Atomic) if !p.duplex => {
            // The last size's payload rate, for the verdict: bytes x Mpps.
            rdma_bw::run(p, out).map(|v| v.last().map(|s| s.size as f64 * s.result.msg_rate * 8e-3))
        }
        (Kind::Bw, Verb::Send) if !p.duplex => send_bw::run(p, out).map(|_| None),
        (Kind::Bw, _) if p.duplex => duplex::run(p, out).map(|_| None),
        (Kind::Lat, _) => lat::run(p, out).map(|_| None),
        _ => Err(Fail::refused(format!(
            "{}{}: not implemented yet in rdmaperf; use stock perftest's {} for now",
            p.tool.name(),
            if p.duplex { " -b" } else { "" },
            p.tool.perftest_name()
        ))),
    })
}

/// The longest `--explain` waits after a run for the port's packet
/// counters to stop moving before its explanation goes to the peer.
const SETTLE_MAX: std::time::Duration = std::time::Duration::from_secs(3);

/// `--explain`: this port's counters and the device's facts before and
/// after the tool (never inside its loop), the verdict after its result —
/// also after a failed run, whose counters say most.
/// After a GPU run (`--use_cuda`): the GPU–NIC path's findings (the GPU far from the NIC, no
/// GPUDirect path, the IOMMU translating) ranked with the counters'. A GPU sysfs does not
/// show (the test fake's) is said, not hidden.
fn with_gpu_findings(e: Explanation, p: &Params, root: &SysRoot, out: &Out) -> Explanation {
    if p.gpu.is_none() {
        return e;
    }
    let Some(bdf) = super::setup::gpu_mem::opened_bus_id() else {
        return e;
    };
    match gpu_findings::findings_for(&root.0, &bdf, &e.device) {
        Ok(f) => e.with_findings(f),
        Err(why) => {
            out.print(&format!(
                " Explain: GPU {bdf}'s path to {} not read: {why}\n",
                e.device
            ));
            e
        }
    }
}

fn explained(
    p: &Params,
    out: Out,
    run: impl FnOnce() -> Result<Option<f64>, Fail>,
) -> Result<(), Fail> {
    if !p.explain {
        return run().map(|_| ());
    }
    let root = SysRoot::default();
    let bracket = Bracket::start(root.clone(), p.ib_dev.as_deref(), p.ib_port as u32).map(Rc::new);
    // An rdmaperf peer with --explain gets this side's explanation at the
    // close, read then (after the run, before the close handshake).
    if let Ok(b) = &bracket {
        let (b, root) = (Rc::clone(b), root.clone());
        after_run::provide(move || {
            // Both ends read once in-flight work has drained, so that the
            // packets one sent and the other received can be compared.
            let e = b.settled(&HostFacts::read(&root), SETTLE_MAX);
            e.to_json().to_string().into_bytes()
        });
    }
    let res = run();
    let peer = PeerFacts::from_exchange(after_run::take());
    out.print(crate::report::text::RESULT_LINE);
    match bracket {
        Ok(b) => {
            let e = b
                .finish(
                    res.as_ref().ok().copied().flatten(),
                    &HostFacts::read(&root),
                )
                .with_peer(peer);
            let e = with_gpu_findings(e, p, &root, &out);
            out.print(&e.text(p.num_qps));
            if let Some(path) = p.json_file.as_deref().filter(|f| f.exists()) {
                if let Err(why) = e.add_to_json_file(path) {
                    out.print(&format!(" Explain: not added to the JSON report: {why}\n"));
                }
            }
        }
        Err(why) => out.print(&format!(" Explain: nothing to read ({why})\n")),
    }
    out.print(crate::report::text::RESULT_LINE);
    res.map(|_| ())
}

/// Both ends in one process over 127.0.0.1: the server in a thread (quiet),
/// the client here.
pub(crate) fn loopback(p: &Params) -> Result<(), Fail> {
    loopback_with(p, Out { quiet: false }, run_side)
}

/// Loopback with a given client side (its return value is passed through).
pub fn loopback_with<T>(
    p: &Params,
    client_out: Out,
    client_side: fn(&Params, Out) -> Result<T, Fail>,
) -> Result<T, Fail> {
    loopback_sides(p, client_out, run_side, client_side).map(|(_, c)| c)
}

/// Loopback with the same side function on both ends, both results kept:
/// (server's, client's) — `compare` reads the receiver's cost this way.
pub fn loopback_both<T: Send + 'static>(
    p: &Params,
    side: fn(&Params, Out) -> Result<T, Fail>,
) -> Result<(T, T), Fail> {
    loopback_sides(p, Out { quiet: true }, side, side)
}

/// Both ends in one process: `server_side` in a thread (quiet), the client
/// here; a failed client asks the server to stop.
fn loopback_sides<S: Send + 'static, T>(
    p: &Params,
    client_out: Out,
    server_side: fn(&Params, Out) -> Result<S, Fail>,
    client_side: fn(&Params, Out) -> Result<T, Fail>,
) -> Result<(S, T), Fail> {
    let mut sp = p.clone();
    sp.server = None;
    // Marks the server as the loopback's: it stops waiting for a client after --timeout.
    sp.loopback = true;
    sp.json_file = None;
    sp.check_landing = false;
    let server = std::thread::spawn(move || server_side(&sp, Out { quiet: true }));
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
    let server = server.map_err(|f| Fail::new(format!("loopback server side: {f}")))?;
    Ok((server, client))
}
