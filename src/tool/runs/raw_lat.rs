//! `raw-eth-lat --client|--server`: perftest's raw_ethernet_lat ping-pong
//! (and `raw-eth-burst-lat`, below).
//! Open the device and check the port (`setup::raw_res::RawPort`), pick the
//! post method once (`--post`: post-send, wr-api or direct; direct-mpw is
//! refused, and `auto` takes direct where it would take direct-mpw, since a
//! ping-pong has one frame to post), create the QP, its frames, receives
//! and steering rules (`setup::raw_lat_res`), run the loop
//! (`session::raw_lat_measure`: the client sends first, the server
//! answers each frame) and print perftest's latency table. Both sides
//! print it, as perftest's do. raw-eth-burst-lat runs here too: the same
//! QP and methods, its loop chosen by `session::raw_lat_session` (the
//! client sends bursts and times the replies; the server answers every
//! `--reply_every`-th frame and prints the table's header only).

use crate::clock::Clock;
use crate::mlx5::device::{cq_from_ibv_cq, raw_sq_from_ibv_qp, rq_from_ibv_qp};
use crate::mlx5::raw_sq::{RawPkt, RawSqConfig};
use crate::mlx5::HwMmio;
use crate::post::post_send::PostSendQueue;
use crate::post::verbs_cq::{VerbsCq, VerbsRecv};
use crate::post::wr_api::WrApiQueue;
use crate::post::{CompletionQueue, RecvQueue, SendQueue, WrDesc};
use crate::raw::params::RawParams;
use crate::run::lat::LatError;
use crate::run::raw_bw::{Direct, RawPost, Verbs};
use crate::run::raw_lat::{RawQp, RxRing};
use crate::tool::common::fail::Fail;
use crate::tool::session::raw_lat_measure::{self as measure, STALL};
use crate::tool::session::raw_lat_session::{Ran, Session};
use crate::tool::setup::raw_lat_res::RawLatRes;
use crate::tool::setup::raw_method::{self, RawDevice, RawMethod};
use crate::tool::setup::raw_res::RawPort;

/// `--post direct-mpw` on a tool that posts one frame at a time (raw-eth-lat,
/// raw-eth-burst-lat): refused in one sentence.
pub fn no_mpw(tool: &str) -> String {
    format!(
        "rdmaperf {tool}: --post direct-mpw packs many frames into one WQE and {tool} posts one \
         frame at a time: use --post direct"
    )
}

/// The method for raw-eth-lat and raw-eth-burst-lat (`tool`): raw-eth-bw's
/// choice on one QP, without direct-mpw (refused when asked, direct instead
/// under `auto`).
pub fn decide_lat(
    tool: &str,
    asked: Option<RawMethod>,
    dev: &RawDevice,
) -> Result<(RawMethod, String), String> {
    if asked == Some(RawMethod::DirectMpw) {
        return Err(no_mpw(tool));
    }
    let (m, why) = raw_method::decide(asked, dev).map_err(|e| format!("rdmaperf {tool}: {e}"))?;
    Ok(match m {
        RawMethod::DirectMpw => (
            RawMethod::Direct,
            "auto: direct (mlx5; one frame per post, so no multi-packet WQE)".into(),
        ),
        _ => (m, why),
    })
}

/// Runs one side of raw-eth-lat or raw-eth-burst-lat; the table is
/// printed on stdout.
pub fn run(p: &RawParams) -> Result<(), Fail> {
    let clock = Clock::calibrate();
    let session = Session {
        p,
        clock: &clock,
        stall: STALL,
    };
    let (ran, method) = on_one_qp(p, &session)?;
    finish(p, &ran, &clock, method)
}

/// raw-eth-lat and raw-eth-burst-lat up to their loops: the post method
/// (`--post`, [`decide_lat`]), the port, one raw QP with its frames,
/// receives and rules (`setup::raw_lat_res`), the line saying what runs,
/// then the session on the queues of the chosen method.
fn on_one_qp(p: &RawParams, m: &Session) -> Result<(Ran, RawMethod), Fail> {
    let tool = p.raw.tool.name();
    let asked = raw_method::parse(p.post.as_deref()).map_err(Fail::refused)?;
    if asked == Some(RawMethod::DirectMpw) {
        return Err(Fail::refused(no_mpw(tool)));
    }
    let port = RawPort::open(p)?;
    let (method, why) = decide_lat(tool, asked, &port.dev).map_err(Fail::refused)?;
    let res = RawLatRes::create(&port, p, method)?;
    println!(
        " {tool} {}: 1 QP on {} port {}, {} rule(s), post method {why}",
        if p.raw.side == Some(crate::raw::ctx::Side::Server) {
            "server"
        } else {
            "client"
        },
        port.ctx.name(),
        p.ib_port,
        res.ruled.0.len(),
    );
    if let Some(line) = crate::tool::session::raw_measure::rate_banner(p) {
        println!("{line}");
    }
    let frames = measure::frames(res.tx.0.addr(), &res.tx.1);
    let rx = res.rx.1;
    let ran = match method {
        RawMethod::PostSend => {
            let sq = PostSendQueue::new(res.qp(), 1, None).map_err(Fail::verbs)?;
            run_verbs(p, &res, sq, (&frames, rx), m)?
        }
        RawMethod::WrApi => {
            let sq = WrApiQueue::new(res.qp(), None).map_err(Fail::verbs)?;
            run_verbs(p, &res, sq, (&frames, rx), m)?
        }
        _ => run_direct(p, &res, &port, (&frames, rx), m)?,
    };
    Ok((ran, method))
}

/// The table (what was measured, also after Ctrl-C; a table that cannot
/// be made is the error when the run had none), then the loop's error
/// (Ctrl-C is none).
fn finish(p: &RawParams, ran: &Ran, clock: &Clock, method: RawMethod) -> Result<(), Fail> {
    let tool = p.raw.tool.name();
    let o = ran.outcome();
    match ran.report(p, clock.hz()) {
        Ok(s) => print!("{s}"),
        Err(e) if o.error.is_none() => return Err(Fail::new(format!("rdmaperf {tool}: {e}"))),
        Err(_) => {}
    }
    match &o.error {
        None | Some(LatError::Interrupted) => Ok(()),
        Some(e) => Err(Fail::new(format!(
            "rdmaperf {tool} --post {}: {}",
            method.name(),
            ran.error_words(p, e)
        ))),
    }
}

/// The session on one QP's queues; a failed first post of the receives is
/// the error.
fn go<P, R, C, D>(
    m: &Session,
    p: &RawParams,
    (sq, scq): (&mut P, &mut C),
    (rq, rcq): (&mut R, &mut D),
    (frames, rx): (&[RawPkt], RxRing),
) -> Result<Ran, Fail>
where
    P: RawPost,
    R: RecvQueue,
    C: CompletionQueue,
    D: CompletionQueue,
{
    let qp = RawQp::new((sq, scq), (rq, rcq), (frames, rx));
    m.run(qp).map_err(|e| {
        Fail::new(format!(
            "rdmaperf {}: posting the receives failed: {e:?}",
            p.raw.tool.name()
        ))
    })
}

/// `post-send` or `wr-api` (`sq`), `ibv_post_recv`, the provider's CQs.
fn run_verbs<S: SendQueue>(
    p: &RawParams,
    res: &RawLatRes,
    sq: S,
    (frames, rx): (&[RawPkt], RxRing),
    m: &Session,
) -> Result<Ran, Fail> {
    let mut scq = VerbsCq::new(&res.cqs.0, 1).map_err(Fail::verbs)?;
    let mut rcq = VerbsCq::new(&res.cqs.1, 1).map_err(Fail::verbs)?;
    let mut rq = VerbsRecv::new(res.qp()).map_err(Fail::verbs)?;
    let mut post = Verbs {
        sq,
        qp: 0,
        lkey: res.tx.0.lkey(),
        inline_max: p.inline_size,
        descs: vec![WrDesc::default(); 1].into_boxed_slice(),
    };
    go(
        m,
        p,
        (&mut post, &mut scq),
        (&mut rq, &mut rcq),
        (frames, rx),
    )
}

/// The mlx5 direct raw SQ, direct RQ and both direct CQ pollers.
fn run_direct(
    p: &RawParams,
    res: &RawLatRes,
    port: &RawPort,
    (frames, rx): (&[RawPkt], RxRing),
    m: &Session,
) -> Result<Ran, Fail> {
    let depth = (p.raw.tx_depth as u32).max(1);
    let mut cfg = RawSqConfig::new(res.tx.0.lkey(), (depth / 16).max(1));
    cfg.min_inline = port.dev.min_inline;
    let e = |e: crate::mlx5::DirectError| Fail::new(e.to_string());
    // The QP is live while `res` is (borrowed past this call, which drops
    // the SQ and RQ before returning), fresh, posted to by this SQ and RQ
    // only, and the one QP of this process writing its BlueFlame register.
    // SAFETY: as said above.
    let mut sq = unsafe { raw_sq_from_ibv_qp(res.qp().raw(), cfg) }.map_err(e)?;
    // SAFETY: the MR's buffer stays registered and readable while `res` lives.
    unsafe { sq.set_frame_source(res.tx.0.addr() as *const u8, res.tx.1.buffer_len()) };
    // SAFETY: as for the SQ: nothing was posted to the RQ, only this posts.
    let mut rq = unsafe { rq_from_ibv_qp(res.qp().raw()) }.map_err(e)?;
    // SAFETY: both CQs live in `res` past this call, are fresh, and are
    // polled by these pollers only.
    let (scq, rcq) = unsafe {
        (
            cq_from_ibv_cq(res.cqs.0.raw()),
            cq_from_ibv_cq(res.cqs.1.raw()),
        )
    };
    let (mut scq, mut rcq) = (scq.map_err(e)?, rcq.map_err(e)?);
    scq.attach(sq.progress());
    rcq.attach_recv(rq.qpn(), rq.ring());
    let mut post = Direct::<HwMmio>(sq);
    go(
        m,
        p,
        (&mut post, &mut scq),
        (&mut rq, &mut rcq),
        (frames, rx),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const CX6: RawDevice = RawDevice {
        mlx5: true,
        enhanced_mpw: true,
        min_inline: 0,
        wr_api: true,
    };
    const CX4: RawDevice = RawDevice {
        mlx5: true,
        enhanced_mpw: false,
        min_inline: 18,
        wr_api: true,
    };
    const OTHER: RawDevice = RawDevice {
        mlx5: false,
        enhanced_mpw: false,
        min_inline: 18,
        wr_api: false,
    };

    const T: &str = "raw-eth-lat";

    #[test]
    fn direct_mpw_is_refused_and_auto_takes_direct() {
        let e = decide_lat(T, Some(RawMethod::DirectMpw), &CX6).unwrap_err();
        assert!(
            e.contains("one frame at a time") && e.contains("--post direct"),
            "{e}"
        );
        assert!(!e.contains('\n'), "one sentence: {e}");
        let (m, why) = decide_lat(T, None, &CX6).unwrap();
        assert_eq!(m, RawMethod::Direct, "{why}");
        assert!(why.contains("one frame per post"), "{why}");
        assert_eq!(decide_lat(T, None, &CX4).unwrap().0, RawMethod::Direct);
        assert_eq!(decide_lat(T, None, &OTHER).unwrap().0, RawMethod::PostSend);
    }

    #[test]
    fn the_other_methods_are_raw_eth_bws_choice() {
        for m in [RawMethod::PostSend, RawMethod::WrApi, RawMethod::Direct] {
            assert_eq!(decide_lat(T, Some(m), &CX6).unwrap().0, m);
        }
        let e = decide_lat(T, Some(RawMethod::Direct), &OTHER).unwrap_err();
        assert!(e.starts_with("rdmaperf raw-eth-lat: --post direct"), "{e}");
        assert!(decide_lat(T, Some(RawMethod::WrApi), &OTHER).is_err());
    }
}
