//! raw-eth-bw's sender run once (`run_once`), for `raw-eth-bw --client`,
//! `-b` (with the receive side beside it, `run_once_beside`) and `compare`:
//! the post method's queue and CQ set up on the resources (`setup::raw_res`),
//! the loop run (`session::raw_measure`), the numbers or the error worded.

use crate::clock::Clock;
use crate::mlx5::device::{bf_reg_of, raw_sq_from_ibv_qp, shared_bf_reg};
use crate::mlx5::raw_sq::{RawSq, RawSqConfig};
use crate::mlx5::{DirectCq, HwMmio};
use crate::post::post_send::PostSendQueue;
use crate::post::verbs_cq::VerbsCq;
use crate::post::wr_api::WrApiQueue;
use crate::post::{SendQueue, WrDesc};
use crate::raw::params::RawParams;
use crate::report::stats::BwResult;
use crate::run::bw::BwOutcome;
use crate::run::raw_bw::{Alone, Beside, Direct, DirectMpw, RawPost, Verbs};
use crate::run::raw_qpn::ByQpn;
use crate::tool::common::fail::Fail;
use crate::tool::session::raw_measure::{self, Stamps};
use crate::tool::setup::raw_method::RawMethod;
use crate::tool::setup::raw_res::{RawPort, RawRes};

/// One run of the sender with `method` on fresh resources `res`, timed
/// with `clock` (calibrated once by the caller): its numbers, or the
/// loop's error worded (a Ctrl-C keeps the partial result).
pub fn run_once(
    p: &RawParams,
    (port, res, method): (&RawPort, &RawRes, RawMethod),
    clock: &Clock,
) -> Result<BwResult, Fail> {
    run_once_beside(p, (port, res, method), clock, &mut Alone)
}

/// [`run_once`] with `beside` run in the same loop (`-b`'s receive side,
/// which keeps its own counts and error).
pub fn run_once_beside<B: Beside>(
    p: &RawParams,
    (port, res, method): (&RawPort, &RawRes, RawMethod),
    clock: &Clock,
    beside: &mut B,
) -> Result<BwResult, Fail> {
    let mut stamps = Stamps::for_run(p, res.qps.len());
    let side = (beside, &mut stamps);
    let out = match method {
        RawMethod::PostSend | RawMethod::WrApi => run_verbs(p, res, method, clock, side)?,
        RawMethod::Direct | RawMethod::DirectMpw => {
            run_direct(p, (res, port), method, clock, side)?
        }
    };
    finish(p, method, (&out, &stamps), res.qps.len() as u32, clock.hz())
}

/// The numbers of the loop's outcome `out` (its peak stamps `stamps`, on
/// `qps` QPs), or its error worded for `method`; a Ctrl-C's outcome is the
/// partial result (the frames completed until then).
pub fn finish(
    p: &RawParams,
    method: RawMethod,
    (out, stamps): (&BwOutcome, &Stamps),
    qps: u32,
    hz: f64,
) -> Result<BwResult, Fail> {
    if let Some(e) = &out.error {
        if *e != crate::run::bw::RunError::Interrupted {
            return Err(Fail::new(format!(
                "rdmaperf raw-eth-bw --post {}: {} ({} of {} frames completed)",
                method.name(),
                raw_measure::error_words(e),
                out.completed,
                out.posted
            )));
        }
    }
    raw_measure::result_stamped(p, out, stamps, qps, hz).map_err(Fail::new)
}

fn bases(res: &RawRes) -> Vec<u64> {
    res.qps.iter().map(|q| q.mr.addr()).collect()
}

/// `post-send` or `wr-api` over the provider's CQ.
fn run_verbs<B: Beside>(
    p: &RawParams,
    res: &RawRes,
    method: RawMethod,
    clock: &Clock,
    beside: (&mut B, &mut Stamps),
) -> Result<BwOutcome, Fail> {
    let mut cq = VerbsCq::new(&res.cq, 16).map_err(Fail::verbs)?;
    let descs = || vec![WrDesc::default(); p.post_list as usize].into_boxed_slice();
    if method == RawMethod::PostSend {
        let mut posts = Vec::new();
        for (i, q) in res.qps.iter().enumerate() {
            let sq = PostSendQueue::new(&q.qp, p.post_list as usize, None).map_err(Fail::verbs)?;
            posts.push(verbs_post(sq, (i, p.inline_size), q.mr.lkey(), descs()));
        }
        return Ok(measure(p, (&mut posts, &mut cq), res, clock, beside));
    }
    let mut posts = Vec::new();
    for (i, q) in res.qps.iter().enumerate() {
        let sq = WrApiQueue::new(&q.qp, None).map_err(Fail::verbs)?;
        posts.push(verbs_post(sq, (i, p.inline_size), q.mr.lkey(), descs()));
    }
    Ok(measure(p, (&mut posts, &mut cq), res, clock, beside))
}

fn verbs_post<S: SendQueue>(
    sq: S,
    (i, inline_max): (usize, u32),
    lkey: u32,
    descs: Box<[WrDesc]>,
) -> Verbs<S> {
    Verbs {
        sq,
        qp: i as u32,
        lkey,
        inline_max,
        descs,
    }
}

fn measure<P: RawPost, C: crate::post::CompletionQueue, B: Beside>(
    p: &RawParams,
    (posts, cq): (&mut [P], &mut C),
    res: &RawRes,
    clock: &Clock,
    beside: (&mut B, &mut Stamps),
) -> BwOutcome {
    raw_measure::measure_stamped(p, (posts, cq), (&bases(res), res.slots), clock, beside)
}

/// `direct` or `direct-mpw`: one mlx5 raw SQ per QP (each its own frames,
/// QP `i`'s buffer) and the direct CQ poller of the one CQ they share,
/// whose completions `ByQpn` gives back to their QP.
fn run_direct<B: Beside>(
    p: &RawParams,
    (res, port): (&RawRes, &RawPort),
    method: RawMethod,
    clock: &Clock,
    beside: (&mut B, &mut Stamps),
) -> Result<BwOutcome, Fail> {
    let sqs = direct_sqs(p, res, port)?;
    // SAFETY: the CQ is live while `res` is, fresh, and polled by this
    // poller only.
    let mut cq: DirectCq = unsafe { crate::mlx5::device::cq_from_ibv_cq(res.cq.raw()) }
        .map_err(|e| Fail::new(e.to_string()))?;
    for sq in &sqs {
        cq.attach(sq.progress());
    }
    let qpns: Vec<u32> = res.qps.iter().map(|q| q.qp.qpn()).collect();
    let mut cq = ByQpn::new(cq, &qpns);
    Ok(match method {
        RawMethod::DirectMpw => {
            let mut posts: Vec<_> = sqs.into_iter().map(DirectMpw::<HwMmio>).collect();
            measure(p, (&mut posts, &mut cq), res, clock, beside)
        }
        _ => {
            let mut posts: Vec<_> = sqs.into_iter().map(Direct::<HwMmio>).collect();
            measure(p, (&mut posts, &mut cq), res, clock, beside)
        }
    })
}

/// Each QP's raw SQ over its own buffer; refused when libmlx5 gave two of
/// the QPs one BlueFlame register (each SQ keeps its own toggle of it).
fn direct_sqs(p: &RawParams, res: &RawRes, port: &RawPort) -> Result<Vec<RawSq<HwMmio>>, Fail> {
    let mut regs = Vec::with_capacity(res.qps.len());
    for q in &res.qps {
        // SAFETY: the QP is live while `res` is, an mlx5 QP (the method
        // choice checked the device).
        regs.push(unsafe { bf_reg_of(q.qp.raw()) }.map_err(|e| Fail::new(e.to_string()))?);
    }
    if let Some((i, j)) = shared_bf_reg(&regs) {
        return Err(Fail::new(format!(
            "rdmaperf raw-eth-bw: the direct raw SQs with -q {}: libmlx5 gave QPs {i} and {j} one \
             BlueFlame register (a shared bfreg), which two direct SQs cannot ring from \
             their own toggles: use fewer QPs, or --post post-send",
            regs.len()
        )));
    }
    // A CQE every cq_mod-th frame comes from the loop (`signal_list_end`);
    // the SQ's own count only adds some where a ring of the largest WQEs
    // (15 WQEBBs) would otherwise hold none.
    let depth = (p.raw.tx_depth as u32).max(p.post_list);
    let mut sqs = Vec::with_capacity(res.qps.len());
    for q in &res.qps {
        let mut cfg = RawSqConfig::new(q.mr.lkey(), (depth / 16).max(1));
        cfg.min_inline = port.dev.min_inline;
        // The QP is live while `res` is (borrowed by the caller, which drops
        // the SQ before returning), fresh, posted to by this SQ only, and
        // the one QP of this process writing its BlueFlame register
        // (checked above among the run's QPs).
        // SAFETY: as said above.
        let sq = unsafe { raw_sq_from_ibv_qp(q.qp.raw(), cfg) };
        let mut sq = sq.map_err(|e| Fail::new(e.to_string()))?;
        // SAFETY: the MR's buffer stays registered and readable while `res` lives.
        unsafe { sq.set_frame_source(q.mr.addr() as *const u8, res.slots.buffer_len()) };
        sqs.push(sq);
    }
    Ok(sqs)
}
