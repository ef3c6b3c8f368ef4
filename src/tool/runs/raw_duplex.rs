//! `raw-eth-bw -b` (either side): perftest's raw_ethernet_bw both ways
//! (`run_iter_bi`). One raw packet QP sends this side's frames and, with
//! the steering rules `raw::steer` builds for this side, receives the
//! peer's on its own CQ; the send method (`--post`, `setup::raw_method`)
//! and the receive path (`setup::raw_recv_method`) are picked once. The
//! loop is the sender's with the receive side beside it
//! (`run::raw_duplex`); a server sends once its first frame is in. Report:
//! perftest's table for this side's sends (perftest prints each raw side's
//! own; with `-D` its sends and receives in the sample window, as
//! `run_iter_bi` counts them), the packet-rate line, then what arrived and
//! the findings.

use std::time::Duration;

use super::raw_send::run_once_beside;
use crate::clock::{self, Clock};
use crate::mlx5::device::{cq_from_ibv_cq, rq_from_ibv_qp};
use crate::post::verbs_cq::{VerbsCq, VerbsRecv};
use crate::post::{Completion, CompletionQueue, RecvQueue};
use crate::raw::ctx::Side;
use crate::raw::params::RawParams;
use crate::report::stats::BwResult;
use crate::run::raw_duplex::{DuplexRxError, RecvSide, RxWait};
use crate::run::raw_recv::{DirectRx, RawRecvCfg, RawRecvCounts, RxClassify, VerbsRx};
use crate::tool::common::fail::Fail;
use crate::tool::session::{raw_measure, raw_recv_measure};
use crate::tool::setup::raw_method::RawMethod;
use crate::tool::setup::raw_recv_method::RawRecvMethod;
use crate::tool::setup::raw_res::{DuplexSide, RawPort, RawRes, RawRx};

/// Silence on the receive side this long, frames still owed, ends the run
/// (perftest's `check_alive` gives up after 60 s without progress).
pub const RX_STALL: Duration = Duration::from_secs(60);

/// What the run gave: this side's send numbers, the peer's frames counted.
pub struct Both {
    pub sent: BwResult,
    pub counts: RawRecvCounts,
    pub error: Option<DuplexRxError>,
}

/// Runs one side of `-b`; the report is printed on stdout.
pub fn run(p: &RawParams) -> Result<(), Fail> {
    let tool = "rdmaperf raw-eth-bw -b";
    let side = DuplexSide::open(p, tool)?;
    let (port, res, rx) = (&side.port, &side.res, &side.rx);
    let ((method, why), (recv, rwhy)) = (&side.method, &side.recv);
    let (method, recv) = (*method, *recv);
    println!(
        " raw-eth-bw -b ({}): 1 QP on {} port {}, send: {why}, receive: {rwhy}, {} rule(s), {} \
         receives",
        if server(p) { "server" } else { "client" },
        port.ctx.name(),
        p.ib_port,
        rx.flows.len(),
        rx.slots
    );
    if let Some(line) = raw_measure::rate_banner(p) {
        println!("{line}");
    }
    // SAFETY: the MR holds `slots × stride` bytes and lives (in `res`)
    // past the run; only the NIC writes it then.
    let cfg = unsafe { rx.recv_cfg() };
    let both = match recv {
        RawRecvMethod::Verbs => {
            let mut rq = VerbsRecv::new(&res.qps[0].qp).map_err(Fail::verbs)?;
            let mut cq = VerbsCq::new(&rx.cq, 16).map_err(Fail::verbs)?;
            both::<_, _, VerbsRx>(p, (port, res, method), (&mut rq, &mut cq, &cfg))?
        }
        RawRecvMethod::Direct => direct_recv(p, (port, res, method), rx, &cfg)?,
    };
    print!("{}", report(p, &both, port.gbps));
    match both.error {
        Some(e) => Err(Fail::new(format!("{tool}: {}", error_words(&e)))),
        None => Ok(()),
    }
}

fn server(p: &RawParams) -> bool {
    p.raw.side == Some(Side::Server)
}

/// What this side's receive side waits for: the peer's `-n` (with `-D` no
/// count: the window's end ends the run, perftest's duration loop counts
/// what comes), its first frame on a server, `stall` of silence.
pub fn rx_wait(p: &RawParams, clock: &Clock, stall: Duration) -> RxWait {
    RxWait {
        owed: match p.raw.duration {
            Some(_) => u64::MAX,
            None => p.raw.iters,
        },
        wait_first: server(p),
        stall_ticks: clock.cycles_for(stall),
    }
}

/// The mlx5 direct RQ and CQ poller on the receive side.
fn direct_recv(
    p: &RawParams,
    send: (&RawPort, &RawRes, RawMethod),
    rx: &RawRx,
    cfg: &RawRecvCfg,
) -> Result<Both, Fail> {
    // SAFETY: the QP lives in `send.1` past this call (which drops the RQ
    // before returning), nothing was posted to its RQ, and only this RQ
    // posts to it.
    let rq = unsafe { rq_from_ibv_qp(send.1.qps[0].qp.raw()) };
    let mut rq = rq.map_err(|e| Fail::new(e.to_string()))?;
    // SAFETY: the receive CQ lives in `rx` past this call, is fresh, and is
    // polled by this poller only.
    let cq = unsafe { cq_from_ibv_cq(rx.cq.raw()) };
    let mut cq = cq.map_err(|e| Fail::new(e.to_string()))?;
    cq.attach_recv(rq.qpn(), rq.ring());
    both::<_, _, DirectRx>(p, send, (&mut rq, &mut cq, cfg))
}

/// Every receive posted, then the sender's loop with the receive side
/// beside it.
fn both<R: RecvQueue, C: CompletionQueue, K: RxClassify>(
    p: &RawParams,
    (port, res, method): (&RawPort, &RawRes, RawMethod),
    (rq, cq, cfg): (&mut R, &mut C, &RawRecvCfg),
) -> Result<Both, Fail> {
    raw_recv_measure::post_receives(rq, cfg, "rdmaperf raw-eth-bw -b").map_err(Fail::new)?;
    let mut counts = RawRecvCounts::default();
    let mut wc = [Completion::default(); 16];
    let clock = Clock::calibrate();
    let wait = rx_wait(p, &clock, RX_STALL);
    let scratch = (&mut counts, &mut wc[..]);
    let mut side = RecvSide::<_, _, K, _>::new((rq, cq), cfg, scratch, wait, clock::now);
    let sent = run_once_beside(p, (port, res, method), &clock, &mut side)?;
    let error = side.error.take();
    Ok(Both {
        sent,
        counts,
        error,
    })
}

/// The send table and line-rate line, then what arrived, one line each.
pub fn report(p: &RawParams, b: &Both, gbps: Option<f64>) -> String {
    let mut s = raw_measure::report(p, &b.sent, gbps);
    s.push_str(&match p.raw.duration {
        // The table's #iterations are this side's sends and receives in
        // the sample window (perftest's run_iter_bi); this is every frame.
        Some(d) => format!(
            " received: {} of the peer's frames in {d} s\n",
            b.counts.packets
        ),
        None => format!(
            " received: {} of the peer's {} frames\n",
            b.counts.packets, p.raw.iters
        ),
    });
    s.push_str(&raw_recv_measure::counts_text(&b.counts, p.size));
    s
}

/// The receive side's error worded for the user.
pub fn error_words(e: &DuplexRxError) -> String {
    match e {
        DuplexRxError::Recv(r) => raw_recv_measure::error_words(r),
        DuplexRxError::Stalled { received, owed } => format!(
            "no frame from the peer for {} s, {received}{} in: is the peer running \
             raw-eth-bw -b with the mirrored addresses (its -E is this side's -B), started \
             server first?",
            RX_STALL.as_secs(),
            match *owed {
                u64::MAX => String::new(),
                n => format!(" of {n}"),
            }
        ),
    }
}
