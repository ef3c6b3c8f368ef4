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
//! (perftest creates them on a server or a duplex side only).

use crate::clock::Clock;
use crate::mlx5::device::raw_sq_from_ibv_qp;
use crate::mlx5::raw_sq::RawSqConfig;
use crate::mlx5::{DirectCq, HwMmio};
use crate::post::post_send::PostSendQueue;
use crate::post::verbs_cq::VerbsCq;
use crate::post::wr_api::WrApiQueue;
use crate::post::{SendQueue, WrDesc};
use crate::raw::cli;
use crate::raw::ctx::Side;
use crate::raw::params::RawParams;
use crate::raw::tools::RawTool;
use crate::report::stats::BwResult;
use crate::run::bw::BwOutcome;
use crate::run::raw_bw::{Direct, DirectMpw, RawPost, Verbs};
use crate::run::stop;
use crate::tool::common::fail::Fail;
use crate::tool::session::raw_measure;
use crate::tool::setup::raw_method::{self, RawMethod};
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
        RawTool::Lat => super::raw_lat::run(&p),
        _ if p.raw.side == Some(Side::Server) => super::raw_server::run(&p),
        _ => run(&p),
    };
    match ran {
        Ok(()) => stop::exit_status().unwrap_or(0),
        Err(f) => {
            eprintln!("{}", f.msg);
            f.status
        }
    }
}

/// Runs the sender; the report is printed on stdout.
pub fn run(p: &RawParams) -> Result<(), Fail> {
    let asked = raw_method::parse(p.post.as_deref()).map_err(Fail::refused)?;
    let port = RawPort::open(p)?;
    let (method, why) = raw_method::decide(asked, &port.dev, p.raw.qps)
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
    let r = run_once(p, &port, &res, method)?;
    print!("{}", raw_measure::report(p, &r, port.gbps));
    Ok(())
}

/// One run of the sender with `method` on fresh resources `res`: its
/// numbers, or the loop's error worded (a Ctrl-C keeps the partial result).
pub fn run_once(
    p: &RawParams,
    port: &RawPort,
    res: &RawRes,
    method: RawMethod,
) -> Result<BwResult, Fail> {
    let clock = Clock::calibrate();
    let out = match method {
        RawMethod::PostSend | RawMethod::WrApi => run_verbs(p, res, method, &clock)?,
        RawMethod::Direct | RawMethod::DirectMpw => run_direct(p, res, method, port, &clock)?,
    };
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
    raw_measure::result(p, &out, res.qps.len() as u32, clock.hz()).map_err(Fail::new)
}

fn bases(res: &RawRes) -> Vec<u64> {
    res.qps.iter().map(|q| q.mr.addr()).collect()
}

/// `post-send` or `wr-api` over the provider's CQ.
fn run_verbs(
    p: &RawParams,
    res: &RawRes,
    method: RawMethod,
    clock: &Clock,
) -> Result<BwOutcome, Fail> {
    let mut cq = VerbsCq::new(&res.cq, 16).map_err(Fail::verbs)?;
    let descs = || vec![WrDesc::default(); p.post_list as usize].into_boxed_slice();
    if method == RawMethod::PostSend {
        let mut posts = Vec::new();
        for (i, q) in res.qps.iter().enumerate() {
            let sq = PostSendQueue::new(&q.qp, p.post_list as usize, None).map_err(Fail::verbs)?;
            posts.push(verbs_post(sq, (i, p.inline_size), q.mr.lkey(), descs()));
        }
        return Ok(measure(p, &mut posts, &mut cq, res, clock));
    }
    let mut posts = Vec::new();
    for (i, q) in res.qps.iter().enumerate() {
        let sq = WrApiQueue::new(&q.qp, None).map_err(Fail::verbs)?;
        posts.push(verbs_post(sq, (i, p.inline_size), q.mr.lkey(), descs()));
    }
    Ok(measure(p, &mut posts, &mut cq, res, clock))
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

fn measure<P: RawPost, C: crate::post::CompletionQueue>(
    p: &RawParams,
    posts: &mut [P],
    cq: &mut C,
    res: &RawRes,
    clock: &Clock,
) -> BwOutcome {
    raw_measure::measure(p, posts, cq, &bases(res), res.slots, clock)
}

/// `direct` or `direct-mpw`: the mlx5 raw SQ on QP 0 (one QP, checked by
/// the method choice) and the direct CQ poller.
fn run_direct(
    p: &RawParams,
    res: &RawRes,
    method: RawMethod,
    port: &RawPort,
    clock: &Clock,
) -> Result<BwOutcome, Fail> {
    let q = &res.qps[0];
    // A CQE every cq_mod-th frame comes from the loop (`signal_list_end`);
    // the SQ's own count only adds some where a ring of the largest WQEs
    // (15 WQEBBs) would otherwise hold none.
    let depth = (p.raw.tx_depth as u32).max(p.post_list);
    let mut cfg = RawSqConfig::new(q.mr.lkey(), (depth / 16).max(1));
    cfg.min_inline = port.dev.min_inline;
    // The QP is live while `res` is (borrowed for this call, which drops
    // the SQ before returning), fresh, posted to by this SQ only, and the
    // one QP of this process writing its BlueFlame register.
    // SAFETY: as said above.
    let sq = unsafe { raw_sq_from_ibv_qp(q.qp.raw(), cfg) };
    let mut sq = sq.map_err(|e| Fail::new(e.to_string()))?;
    // SAFETY: the MR's buffer stays registered and readable while `res` lives.
    unsafe { sq.set_frame_source(q.mr.addr() as *const u8, res.slots.buffer_len()) };
    // SAFETY: the CQ is live while `res` is, fresh, and polled by this
    // poller only.
    let mut cq: DirectCq = unsafe { crate::mlx5::device::cq_from_ibv_cq(res.cq.raw()) }
        .map_err(|e| Fail::new(e.to_string()))?;
    cq.attach(sq.progress());
    Ok(match method {
        RawMethod::DirectMpw => measure(p, &mut [DirectMpw::<HwMmio>(sq)], &mut cq, res, clock),
        _ => measure(p, &mut [Direct::<HwMmio>(sq)], &mut cq, res, clock),
    })
}
