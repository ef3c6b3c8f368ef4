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
use crate::run::raw_duplex_qps::RecvSideQps;
use crate::run::raw_recv::{DirectRx, RawRecvCfg, RawRecvCounts, RxClassify, VerbsRx};
use crate::run::raw_recv_qps::RecvQp;
use crate::run::stop;
use crate::tool::common::fail::Fail;
use crate::tool::session::raw_recv_qps_measure::per_qp_line;
use crate::tool::session::{raw_measure, raw_recv_measure};
use crate::tool::setup::raw_method::RawMethod;
use crate::tool::setup::raw_recv_method::RawRecvMethod;
use crate::tool::setup::raw_res::{DuplexSide, RawPort, RawRes, RawRx};

/// Silence on the receive side this long, frames still owed, ends the run
/// (perftest's `check_alive` gives up after 60 s without progress).
pub const RX_STALL: Duration = Duration::from_secs(60);

/// What the run gave: this side's send numbers, the peer's frames counted
/// (every QP's together) and, with several QPs, each QP's frames.
pub struct Both {
    pub sent: BwResult,
    pub counts: RawRecvCounts,
    pub per_qp: Vec<u64>,
    pub error: Option<DuplexRxError>,
}

/// Runs one side of `-b`; the report is printed on stdout.
pub fn run(p: &RawParams) -> Result<(), Fail> {
    let tool = "rdmaperf raw-eth-bw -b";
    let side = DuplexSide::open(p, tool)?;
    let (port, res, rx) = (&side.port, &side.res, &side.rx[..]);
    let ((method, why), (recv, rwhy)) = (&side.method, &side.recv);
    let (method, recv) = (*method, *recv);
    println!(
        " raw-eth-bw -b ({}): {} QP(s) on {} port {}, send: {why}, receive: {rwhy}, {} rule(s) \
         and {} receives each",
        if server(p) { "server" } else { "client" },
        rx.len(),
        port.ctx.name(),
        p.ib_port,
        rx[0].flows.len(),
        rx[0].slots
    );
    if let Some(line) = raw_measure::rate_banner(p) {
        println!("{line}");
    }
    let send = (port, res, method);
    let both = match recv {
        RawRecvMethod::Verbs => {
            let mut qps = Vec::with_capacity(rx.len());
            for (q, r) in res.qps.iter().zip(rx) {
                qps.push(RecvQp {
                    rq: VerbsRecv::new(&q.qp).map_err(Fail::verbs)?,
                    cq: VerbsCq::new(&r.cq, 16).map_err(Fail::verbs)?,
                    cfg: cfg_of(r),
                    counts: RawRecvCounts::default(),
                });
            }
            both::<_, _, VerbsRx>(p, send, &mut qps)?
        }
        RawRecvMethod::Direct => direct_recv(p, send, rx)?,
    };
    print!("{}", report(p, &both, port.gbps));
    match both.error {
        Some(e) => Err(Fail::new(format!("{tool}: {}", error_words(&e)))),
        None => Ok(()),
    }
}

/// A QP's receive slots.
fn cfg_of(rx: &RawRx) -> RawRecvCfg {
    // SAFETY: the MR holds `slots × stride` bytes and lives (in the
    // side's `rx`) past the run; only the NIC writes it then.
    unsafe { rx.recv_cfg() }
}

/// The peer's frames a run by iterations waits for: `-n` × `-q`
/// (perftest's `tot_iters`, both sides running the same `-q`).
pub fn rx_owed(p: &RawParams) -> u64 {
    p.raw.iters.saturating_mul(p.raw.qps.max(1))
}

fn server(p: &RawParams) -> bool {
    p.raw.side == Some(Side::Server)
}

/// What this side's receive side waits for: the peer's `-n` on each of
/// `-q` QPs (perftest's `tot_iters`; with `-D` no count: the window's end
/// ends the run, perftest's duration loop counts what comes), its first
/// frame on a server, `stall` of silence.
pub fn rx_wait(p: &RawParams, clock: &Clock, stall: Duration) -> RxWait {
    RxWait {
        owed: match p.raw.duration {
            Some(_) => u64::MAX,
            None => rx_owed(p),
        },
        wait_first: server(p),
        stall_ticks: clock.cycles_for(stall),
    }
}

/// The mlx5 direct RQ and CQ poller on the receive side, one of each per
/// QP.
fn direct_recv(
    p: &RawParams,
    send: (&RawPort, &RawRes, RawMethod),
    rx: &[RawRx],
) -> Result<Both, Fail> {
    let mut qps = Vec::with_capacity(rx.len());
    for (q, r) in send.1.qps.iter().zip(rx) {
        // SAFETY: the QP lives in `send.1` past this call (which drops the
        // RQ before returning), nothing was posted to its RQ, and only this
        // RQ posts to it.
        let rq = unsafe { rq_from_ibv_qp(q.qp.raw()) };
        let rq = rq.map_err(|e| Fail::new(e.to_string()))?;
        // SAFETY: the receive CQ lives in `rx` past this call, is fresh,
        // this QP's alone, and polled by this poller only.
        let cq = unsafe { cq_from_ibv_cq(r.cq.raw()) };
        let mut cq = cq.map_err(|e| Fail::new(e.to_string()))?;
        cq.attach_recv(rq.qpn(), rq.ring());
        qps.push(RecvQp {
            rq,
            cq,
            cfg: cfg_of(r),
            counts: RawRecvCounts::default(),
        });
    }
    both::<_, _, DirectRx>(p, send, &mut qps)
}

/// Every receive posted, then the sender's loop with the receive side
/// beside it: one QP's (`RecvSide`), or every QP's (`RecvSideQps`, the
/// peer's `-n` × `-q` owed).
fn both<R: RecvQueue, C: CompletionQueue, K: RxClassify>(
    p: &RawParams,
    send: (&RawPort, &RawRes, RawMethod),
    qps: &mut [RecvQp<R, C>],
) -> Result<Both, Fail> {
    for q in qps.iter_mut() {
        raw_recv_measure::post_receives(&mut q.rq, &q.cfg, "rdmaperf raw-eth-bw -b")
            .map_err(Fail::new)?;
    }
    let mut wc = [Completion::default(); 16];
    let clock = Clock::calibrate();
    let wait = rx_wait(p, &clock, RX_STALL);
    let (sent, error) = if let [q] = qps {
        let scratch = (&mut q.counts, &mut wc[..]);
        let mut side =
            RecvSide::<_, _, K, _>::new((&mut q.rq, &mut q.cq), &q.cfg, scratch, wait, clock::now);
        let sent = run_once_beside(p, send, &clock, &mut side)?;
        (sent, side.error.take())
    } else {
        let mut side = RecvSideQps::<_, _, K, _>::new(qps, &mut wc, wait, clock::now);
        let sent = run_once_beside(p, send, &clock, &mut side)?;
        (sent, side.error.take())
    };
    let mut counts = RawRecvCounts::default();
    for q in qps.iter() {
        counts.add(&q.counts);
    }
    let per_qp = match qps.len() {
        1 => Vec::new(),
        _ => qps.iter().map(|q| q.counts.packets).collect(),
    };
    Ok(Both {
        sent,
        counts,
        per_qp,
        error,
    })
}

/// The send table and line-rate line, then what arrived, one line each.
pub fn report(p: &RawParams, b: &Both, gbps: Option<f64>) -> String {
    let mut s = raw_measure::report(p, &b.sent, gbps);
    s.push_str(&match p.raw.duration {
        // A run Ctrl-C ended did not last its -D: say so, not "in D s".
        Some(d) if stop::requested() => format!(
            " received: {} of the peer's frames until interrupted (of a {d} s run)\n",
            b.counts.packets
        ),
        // The table's #iterations are this side's sends and receives in
        // the sample window (perftest's run_iter_bi); this is every frame.
        Some(d) => format!(
            " received: {} of the peer's frames in {d} s\n",
            b.counts.packets
        ),
        None => format!(
            " received: {} of the peer's {} frames\n",
            b.counts.packets,
            rx_owed(p)
        ),
    });
    if !b.per_qp.is_empty() {
        s.push_str(&per_qp_line(&b.per_qp));
    }
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
