//! `raw-eth-lat --client|--server`: perftest's raw_ethernet_lat ping-pong.
//! Open the device and check the port (`setup::raw_res::RawPort`), pick the
//! post method once (`--post`: post-send, wr-api or direct; direct-mpw is
//! refused, and `auto` takes direct where it would take direct-mpw, since a
//! ping-pong has one frame to post), create the QP, its frames, receives
//! and steering rules (`setup::raw_lat_res`), run the loop
//! (`session::raw_lat_measure`: the client sends first, the server
//! answers each frame) and print perftest's latency table. Both sides
//! print it, as perftest's do.

use crate::clock::Clock;
use crate::mlx5::device::{cq_from_ibv_cq, raw_sq_from_ibv_qp, rq_from_ibv_qp};
use crate::mlx5::raw_sq::{RawPkt, RawSqConfig};
use crate::mlx5::HwMmio;
use crate::post::post_send::PostSendQueue;
use crate::post::verbs_cq::{VerbsCq, VerbsRecv};
use crate::post::wr_api::WrApiQueue;
use crate::post::{SendQueue, WrDesc};
use crate::raw::params::RawParams;
use crate::run::lat::LatError;
use crate::run::raw_bw::{Direct, Verbs};
use crate::run::raw_lat::RxRing;
use crate::tool::common::fail::Fail;
use crate::tool::session::raw_lat_measure::{self as measure, RawLatRun, STALL};
use crate::tool::setup::raw_lat_res::RawLatRes;
use crate::tool::setup::raw_method::{self, RawDevice, RawMethod};
use crate::tool::setup::raw_res::RawPort;

/// `--post direct-mpw` on raw-eth-lat: refused in one sentence.
pub const NO_MPW: &str = "rdmaperf raw-eth-lat: --post direct-mpw packs many frames into one \
                          WQE and a ping-pong posts one frame at a time: use --post direct";

/// The method for raw-eth-lat: raw-eth-bw's choice on one QP, without
/// direct-mpw (refused when asked, direct instead under `auto`).
pub fn decide_lat(
    asked: Option<RawMethod>,
    dev: &RawDevice,
) -> Result<(RawMethod, String), String> {
    if asked == Some(RawMethod::DirectMpw) {
        return Err(NO_MPW.into());
    }
    let (m, why) =
        raw_method::decide(asked, dev, 1).map_err(|e| format!("rdmaperf raw-eth-lat: {e}"))?;
    Ok(match m {
        RawMethod::DirectMpw => (
            RawMethod::Direct,
            "auto: direct (mlx5; one frame per post, so no multi-packet WQE)".into(),
        ),
        _ => (m, why),
    })
}

/// Runs one side; the table is printed on stdout.
pub fn run(p: &RawParams) -> Result<(), Fail> {
    let asked = raw_method::parse(p.post.as_deref()).map_err(Fail::refused)?;
    if asked == Some(RawMethod::DirectMpw) {
        return Err(Fail::refused(NO_MPW));
    }
    let port = RawPort::open(p)?;
    let (method, why) = decide_lat(asked, &port.dev).map_err(Fail::refused)?;
    let res = RawLatRes::create(&port, p, method)?;
    println!(
        " raw-eth-lat {}: 1 QP on {} port {}, {} rule(s), post method {why}",
        if p.raw.side == Some(crate::raw::ctx::Side::Server) {
            "server"
        } else {
            "client"
        },
        port.ctx.name(),
        p.ib_port,
        res.flows.len(),
    );
    let clock = Clock::calibrate();
    let frames = measure::frames(res.tx.addr(), &res.slots);
    let rx = RxRing {
        base: res.rx.addr(),
        stride: res.stride,
        room: res.stride,
        slots: res.rx_slots,
        lkey: res.rx.lkey(),
    };
    let ran = match method {
        RawMethod::PostSend | RawMethod::WrApi => {
            run_verbs(p, &res, method, (&frames, rx), &clock)?
        }
        _ => run_direct(p, &res, &port, (&frames, rx), &clock)?,
    };
    finish(p, &ran, &clock, method)
}

/// The table (what was measured, also after Ctrl-C), then the error.
fn finish(p: &RawParams, ran: &RawLatRun, clock: &Clock, method: RawMethod) -> Result<(), Fail> {
    let o = &ran.outcome;
    let interrupted = o.error == Some(LatError::Interrupted);
    match measure::report(p, ran, clock.hz()) {
        Ok(s) => print!("{s}"),
        Err(e) if o.error.is_none() => return Err(Fail::new(format!("rdmaperf raw-eth-lat: {e}"))),
        Err(_) => {}
    }
    match &o.error {
        None => Ok(()),
        Some(_) if interrupted => Ok(()),
        Some(e) => Err(Fail::new(format!(
            "rdmaperf raw-eth-lat --post {}: {}",
            method.name(),
            measure::error_words(e, o)
        ))),
    }
}

fn post_failed(e: crate::post::PostError) -> Fail {
    Fail::new(format!(
        "rdmaperf raw-eth-lat: posting the receives failed: {e:?}"
    ))
}

/// `post-send` or `wr-api`, `ibv_post_recv`, the provider's CQs.
fn run_verbs(
    p: &RawParams,
    res: &RawLatRes,
    method: RawMethod,
    bufs: (&[RawPkt], RxRing),
    clock: &Clock,
) -> Result<RawLatRun, Fail> {
    let mut scq = VerbsCq::new(&res.scq, 1).map_err(Fail::verbs)?;
    let mut rcq = VerbsCq::new(&res.rcq, 1).map_err(Fail::verbs)?;
    let mut rq = VerbsRecv::new(&res.qp).map_err(Fail::verbs)?;
    let lkey = res.tx.lkey();
    if method == RawMethod::PostSend {
        let sq = PostSendQueue::new(&res.qp, 1, None).map_err(Fail::verbs)?;
        let mut post = verbs_post(sq, lkey, p.inline_size);
        return measure::measure(
            p,
            (&mut post, &mut scq),
            (&mut rq, &mut rcq),
            bufs,
            (clock, STALL),
        )
        .map_err(post_failed);
    }
    let sq = WrApiQueue::new(&res.qp, None).map_err(Fail::verbs)?;
    let mut post = verbs_post(sq, lkey, p.inline_size);
    measure::measure(
        p,
        (&mut post, &mut scq),
        (&mut rq, &mut rcq),
        bufs,
        (clock, STALL),
    )
    .map_err(post_failed)
}

fn verbs_post<S: SendQueue>(sq: S, lkey: u32, inline_max: u32) -> Verbs<S> {
    Verbs {
        sq,
        qp: 0,
        lkey,
        inline_max,
        descs: vec![WrDesc::default(); 1].into_boxed_slice(),
    }
}

/// The mlx5 direct raw SQ, direct RQ and both direct CQ pollers.
fn run_direct(
    p: &RawParams,
    res: &RawLatRes,
    port: &RawPort,
    bufs: (&[RawPkt], RxRing),
    clock: &Clock,
) -> Result<RawLatRun, Fail> {
    let depth = (p.raw.tx_depth as u32).max(1);
    let mut cfg = RawSqConfig::new(res.tx.lkey(), (depth / 16).max(1));
    cfg.min_inline = port.dev.min_inline;
    let e = |e: crate::mlx5::DirectError| Fail::new(e.to_string());
    // The QP is live while `res` is (borrowed past this call, which drops
    // the SQ and RQ before returning), fresh, posted to by this SQ and RQ
    // only, and the one QP of this process writing its BlueFlame register.
    // SAFETY: as said above.
    let mut sq = unsafe { raw_sq_from_ibv_qp(res.qp.raw(), cfg) }.map_err(e)?;
    // SAFETY: the MR's buffer stays registered and readable while `res` lives.
    unsafe { sq.set_frame_source(res.tx.addr() as *const u8, res.slots.buffer_len()) };
    // SAFETY: as for the SQ: nothing was posted to the RQ, only this posts.
    let mut rq = unsafe { rq_from_ibv_qp(res.qp.raw()) }.map_err(e)?;
    // SAFETY: both CQs live in `res` past this call, are fresh, and are
    // polled by these pollers only.
    let (scq, rcq) = unsafe { (cq_from_ibv_cq(res.scq.raw()), cq_from_ibv_cq(res.rcq.raw())) };
    let (mut scq, mut rcq) = (scq.map_err(e)?, rcq.map_err(e)?);
    scq.attach(sq.progress());
    rcq.attach_recv(rq.qpn(), rq.ring());
    let mut post = Direct::<HwMmio>(sq);
    measure::measure(
        p,
        (&mut post, &mut scq),
        (&mut rq, &mut rcq),
        bufs,
        (clock, STALL),
    )
    .map_err(post_failed)
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

    #[test]
    fn direct_mpw_is_refused_and_auto_takes_direct() {
        let e = decide_lat(Some(RawMethod::DirectMpw), &CX6).unwrap_err();
        assert!(
            e.contains("one frame at a time") && e.contains("--post direct"),
            "{e}"
        );
        assert!(!e.contains('\n'), "one sentence: {e}");
        let (m, why) = decide_lat(None, &CX6).unwrap();
        assert_eq!(m, RawMethod::Direct, "{why}");
        assert!(why.contains("one frame per post"), "{why}");
        assert_eq!(decide_lat(None, &CX4).unwrap().0, RawMethod::Direct);
        assert_eq!(decide_lat(None, &OTHER).unwrap().0, RawMethod::PostSend);
    }

    #[test]
    fn the_other_methods_are_raw_eth_bws_choice() {
        for m in [RawMethod::PostSend, RawMethod::WrApi, RawMethod::Direct] {
            assert_eq!(decide_lat(Some(m), &CX6).unwrap().0, m);
        }
        let e = decide_lat(Some(RawMethod::Direct), &OTHER).unwrap_err();
        assert!(e.starts_with("rdmaperf raw-eth-lat: --post direct"), "{e}");
        assert!(decide_lat(Some(RawMethod::WrApi), &OTHER).is_err());
    }
}
