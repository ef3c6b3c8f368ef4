//! `raw-eth-bw --server -v`: perftest's MAC forwarding (`run_iter_fw`) on
//! one raw packet QP. The resources are `-b`'s (`setup::raw_res`: the QP,
//! its send CQ, the receive CQ, the receive buffer and this side's steering
//! rules); the sends name the received frames, so the post methods point
//! into the receive MR (its lkey; the direct SQ's frame source is that
//! buffer). The loop is `run::raw_fw`. Report: perftest's table of what was
//! forwarded, the packet-rate line, then what arrived, as `-b` prints it.

use core::marker::PhantomData;

use std::time::Duration;

use super::raw_duplex::{Both, RX_STALL};
use crate::clock::{self, Clock};
use crate::mlx5::device::{cq_from_ibv_cq, raw_sq_from_ibv_qp, rq_from_ibv_qp};
use crate::mlx5::raw_sq::{RawPkt, RawSqConfig};
use crate::mlx5::{DirectCq, HwMmio};
use crate::post::post_send::PostSendQueue;
use crate::post::verbs_cq::{VerbsCq, VerbsRecv};
use crate::post::wr_api::WrApiQueue;
use crate::post::{Completion, CompletionQueue, RecvQueue, SendQueue, WrDesc};
use crate::raw::params::RawParams;
use crate::run::bw::RunError;
use crate::run::raw_bw::{Direct, DirectMpw, RawPost, Verbs};
use crate::run::raw_fw::{FwBuf, FwError, FwLoop, FwOutcome};
use crate::run::raw_recv::{DirectRx, RawRecvCounts, RxClassify, VerbsRx};
use crate::tool::common::fail::Fail;
use crate::tool::session::{bw_measure, raw_measure, raw_recv_measure};
use crate::tool::setup::raw_method::RawMethod;
use crate::tool::setup::raw_recv_method::RawRecvMethod;
use crate::tool::setup::raw_res::{DuplexSide, RawPort, RawRes, RawRx};

const TOOL: &str = "rdmaperf raw-eth-bw -v";

/// What the run gave: the loop's outcome, the frames counted, and the
/// rate of the clock its stamps were read with.
pub struct Forwarded {
    pub out: FwOutcome,
    pub counts: RawRecvCounts,
    pub hz: f64,
}

/// Runs the forwarder; the report is printed on stdout.
pub fn run(p: &RawParams) -> Result<(), Fail> {
    let side = DuplexSide::open(p, TOOL)?;
    // One QP forwards (`raw::cli::not_yet`).
    let (port, res, rx) = (&side.port, &side.res, &side.rx[0]);
    let ((method, why), (recv, rwhy)) = (&side.method, &side.recv);
    let (method, recv) = (*method, *recv);
    println!(
        " raw-eth-bw -v (forwarding): 1 QP on {} port {}, send: {why}, receive: {rwhy}, {} \
         rule(s), {} receives",
        port.ctx.name(),
        p.ib_port,
        rx.flows.len(),
        rx.slots
    );
    if let Some(note) = ports_note(p) {
        println!("{note}");
    }
    let fw = forward(p, (port, res, rx), (method, recv))?;
    // A run stopped before its first forward has no table; its error says why.
    match report(p, &fw, port.gbps) {
        Ok(s) => print!("{s}"),
        Err(f) if fw.out.error.is_none() => return Err(f),
        Err(_) => {}
    }
    match &fw.out.error {
        // Ctrl-C: the partial report stands (the exit status is the signal's).
        None | Some(FwError::Send(RunError::Interrupted)) => Ok(()),
        Some(e) => Err(Fail::new(format!(
            "{TOOL}: {}",
            error_words(e, &fw.out, p.raw.iters)
        ))),
    }
}

/// The forwarder swaps the MACs only (as perftest): a frame goes back
/// with its IPs and ports, so a `-b` client's rule (the server's ports the
/// other way) matches it only where the two ports are the same.
pub fn ports_note(p: &RawParams) -> Option<String> {
    let (s, c) = (p.raw.server_port?, p.raw.client_port?);
    (s != c).then(|| {
        format!(
            " note: forwarded frames keep their ports ({c} to {s}); a raw-eth-bw -b client \
             steers only frames from port {s} to {c} to itself: give it -k and -K the same"
        )
    })
}

/// perftest's table of the forwards, the packet-rate line, what arrived
/// (as `-b` prints it) and the forwarded count.
pub fn report(p: &RawParams, fw: &Forwarded, gbps: Option<f64>) -> Result<String, Fail> {
    let sent = raw_measure::result(p, &fw.out.sent, 1, fw.hz).map_err(Fail::new)?;
    let both = Both {
        sent,
        counts: fw.counts.clone(),
        per_qp: Vec::new(),
        error: None,
    };
    let mut s = super::raw_duplex::report(p, &both, gbps);
    s.push_str(&format!(
        " forwarded: {} frames, MACs swapped\n",
        fw.out.sent.completed
    ));
    Ok(s)
}

/// The receive path's queue and CQ, then the send side's.
pub fn forward(
    p: &RawParams,
    (port, res, rx): (&RawPort, &RawRes, &RawRx),
    (method, recv): (RawMethod, RawRecvMethod),
) -> Result<Forwarded, Fail> {
    // SAFETY: the MR holds `slots × stride` bytes, registered for local
    // write, and lives (in `rx`) past the run; only the NIC and the loop
    // (between a slot's receive completion and its send) touch it then.
    let buf = unsafe { FwBuf::new(rx.recv_cfg()) };
    match recv {
        RawRecvMethod::Verbs => {
            let mut rq = VerbsRecv::new(&res.qps[0].qp).map_err(Fail::verbs)?;
            let mut cq = VerbsCq::new(&rx.cq, 16).map_err(Fail::verbs)?;
            send_side::<_, _, VerbsRx>(p, (port, res, rx, method), (&mut rq, &mut cq, &buf))
        }
        RawRecvMethod::Direct => {
            // SAFETY: the QP lives in `res` past this call (which drops the
            // RQ before returning), nothing was posted to its RQ, and only
            // this RQ posts to it.
            let rq = unsafe { rq_from_ibv_qp(res.qps[0].qp.raw()) };
            let mut rq = rq.map_err(|e| Fail::new(e.to_string()))?;
            // SAFETY: the receive CQ lives in `rx` past this call, is fresh,
            // and is polled by this poller only.
            let cq = unsafe { cq_from_ibv_cq(rx.cq.raw()) };
            let mut cq = cq.map_err(|e| Fail::new(e.to_string()))?;
            cq.attach_recv(rq.qpn(), rq.ring());
            send_side::<_, _, DirectRx>(p, (port, res, rx, method), (&mut rq, &mut cq, &buf))
        }
    }
}

/// The receive queue, its CQ and the buffer.
pub type RecvParts<'a, R, C> = (&'a mut R, &'a mut C, &'a FwBuf);

/// The post method on the QP, its SGEs (or frame source) in the receive MR.
fn send_side<R: RecvQueue, C: CompletionQueue, K: RxClassify>(
    p: &RawParams,
    (port, res, rx, method): (&RawPort, &RawRes, &RawRx, RawMethod),
    recv: RecvParts<'_, R, C>,
) -> Result<Forwarded, Fail> {
    let qp = &res.qps[0].qp;
    if !method.is_direct() {
        let mut cq = VerbsCq::new(&res.cq, 16).map_err(Fail::verbs)?;
        return if method == RawMethod::PostSend {
            let sq = PostSendQueue::new(qp, p.post_list as usize, None).map_err(Fail::verbs)?;
            run_loop::<_, _, _, _, K>(p, (&mut verbs(sq, p, rx), &mut cq), recv, RX_STALL)
        } else {
            let sq = WrApiQueue::new(qp, None).map_err(Fail::verbs)?;
            run_loop::<_, _, _, _, K>(p, (&mut verbs(sq, p, rx), &mut cq), recv, RX_STALL)
        };
    }
    let depth = p.raw.tx_depth as u32;
    let mut cfg = RawSqConfig::new(rx.mr.lkey(), (depth / 16).max(1));
    cfg.min_inline = port.dev.min_inline;
    // SAFETY: the QP is live while `res` is (borrowed for this call, which
    // drops the SQ before returning), fresh, posted to by this SQ only, and
    // the one QP of this process writing its BlueFlame register.
    let sq = unsafe { raw_sq_from_ibv_qp(qp.raw(), cfg) };
    let mut sq = sq.map_err(|e| Fail::new(e.to_string()))?;
    let len = rx.slots as usize * rx.stride as usize;
    // SAFETY: the receive MR stays registered and readable while `res` lives.
    unsafe { sq.set_frame_source(rx.mr.addr() as *const u8, len) };
    // SAFETY: the send CQ is live while `res` is, fresh, and polled by this
    // poller only.
    let cq = unsafe { cq_from_ibv_cq(res.cq.raw()) };
    let mut cq: DirectCq = cq.map_err(|e| Fail::new(e.to_string()))?;
    cq.attach(sq.progress());
    if method == RawMethod::DirectMpw {
        return run_loop::<_, _, _, _, K>(
            p,
            (&mut DirectMpw::<HwMmio>(sq), &mut cq),
            recv,
            RX_STALL,
        );
    }
    run_loop::<_, _, _, _, K>(p, (&mut Direct::<HwMmio>(sq), &mut cq), recv, RX_STALL)
}

fn verbs<S: SendQueue>(sq: S, p: &RawParams, rx: &RawRx) -> Verbs<S> {
    Verbs {
        sq,
        qp: 0,
        lkey: rx.mr.lkey(),
        inline_max: p.inline_size,
        descs: vec![WrDesc::default(); p.post_list as usize].into_boxed_slice(),
    }
}

/// Every receive posted, then the loop; silence for `stall` after the
/// first frame ends it.
pub fn run_loop<P: RawPost, S: CompletionQueue, R: RecvQueue, C: CompletionQueue, K: RxClassify>(
    p: &RawParams,
    (post, send_cq): (&mut P, &mut S),
    (rq, recv_cq, buf): RecvParts<'_, R, C>,
    stall: Duration,
) -> Result<Forwarded, Fail> {
    raw_recv_measure::post_receives(rq, buf.cfg(), TOOL).map_err(Fail::new)?;
    let clock = Clock::calibrate();
    let mut cfg = raw_measure::config(p, &clock);
    cfg.stall_ticks = clock.cycles_for(stall);
    let mut counts = RawRecvCounts::default();
    let mut held = vec![(0u32, 0u32); buf.cfg().slots() as usize];
    let mut list = vec![RawPkt::default(); cfg.post_list as usize];
    let mut wc = [Completion::default(); 16];
    // -D: perftest's margins (a quarter each side), counted from the first frame.
    let window = p
        .raw
        .duration
        .map(|s| bw_measure::window(s, s / 4, &clock, 0));
    let out = FwLoop::<_, _, _, _, K, _> {
        cfg,
        window,
        post,
        send_cq,
        rq,
        recv_cq,
        buf,
        counts: &mut counts,
        held: &mut held,
        list: &mut list,
        wc: &mut wc,
        now: clock::now,
        classify: PhantomData,
    }
    .run();
    Ok(Forwarded {
        out,
        counts,
        hz: clock.hz(),
    })
}

/// The loop's error worded for the user.
pub fn error_words(e: &FwError, out: &FwOutcome, owed: u64) -> String {
    match e {
        FwError::Recv(r) => raw_recv_measure::error_words(r),
        FwError::RecvFailed(s) => format!("a receive completed with status {}", s.name()),
        FwError::Send(s) => format!(
            "{} ({} of {} forwards completed)",
            raw_measure::error_words(s),
            out.sent.completed,
            out.sent.posted
        ),
        FwError::Stalled { received, .. } => format!(
            "no completion for {} s, {received} of {owed} frames in: is the client running \
             raw-eth-bw --client -b with the mirrored addresses (its -E is this side's -B), \
             started after this server?",
            RX_STALL.as_secs()
        ),
    }
}
