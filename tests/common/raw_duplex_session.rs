//! raw-eth-bw `-b`'s session on a model host's QP, as
//! `tool::runs::raw_duplex` runs it (`session::raw_measure::measure_beside`
//! with `run::raw_duplex`'s receive side beside it): `raw_duplex_model`'s
//! two sides, and `raw_fw_model`'s client.

use super::raw_host::Host;
use rdmaperf::run::raw_lat::RxRing;
use std::time::Duration;

use rdmaperf::clock::{self, Clock};
use rdmaperf::post::Completion;
use rdmaperf::raw::params::RawParams;
use rdmaperf::run::bw::BwOutcome;
use rdmaperf::run::raw_duplex::{DuplexRxError, RecvSide};
use rdmaperf::run::raw_recv::{DirectRx, RawRecvCfg, RawRecvCounts};
use rdmaperf::tool::runs::raw_duplex::{self, report, Both};
use rdmaperf::tool::session::{raw_measure, raw_recv_measure};

/// What one side ran.
pub struct Ran {
    pub out: BwOutcome,
    pub counts: RawRecvCounts,
    pub error: Option<DuplexRxError>,
    pub report: String,
}

/// One side of `-b` on its host, as `tool::runs::raw_duplex` runs it
/// (the receive stall given instead of the tool's 60 s).
pub fn duplex(p: &RawParams, h: Host<'_>, stall: Duration) -> Ran {
    // SAFETY: the ring's buffer is registered and outlives the session
    // (the host keeps it); only the model's NIC writes it.
    let cfg = unsafe { ring_cfg(h.ring) };
    raw_recv_measure::post_receives(h.rq, &cfg, "test").unwrap();
    let clock = Clock::calibrate();
    let mut counts = RawRecvCounts::default();
    let mut wc = [Completion::default(); 16];
    let wait = raw_duplex::rx_wait(p, &clock, stall);
    let scratch = (&mut counts, &mut wc[..]);
    let mut side =
        RecvSide::<_, _, DirectRx, _>::new((h.rq, h.rcq), &cfg, scratch, wait, clock::now);
    let posts = std::slice::from_mut(h.post);
    let bases = [h.tx_base];
    let out = raw_measure::measure_beside(p, (posts, h.scq), (&bases, h.slots), &clock, &mut side);
    let error = side.error.take();
    let sent = raw_measure::result(p, &out, 1, clock.hz()).unwrap();
    let both = Both {
        sent,
        counts: counts.clone(),
        per_qp: Vec::new(),
        error: None,
    };
    Ran {
        out,
        counts,
        error,
        report: report(p, &both, Some(100.0)),
    }
}

/// The receive loops' view of a model host's receive ring.
///
/// # Safety
/// The ring's buffer must be registered and outlive every loop over the
/// result; only the model's NIC (and a forwarding loop) may touch it.
pub unsafe fn ring_cfg(r: RxRing) -> RawRecvCfg {
    // SAFETY: the caller's contract.
    unsafe { RawRecvCfg::new(r.base as *const u8, r.stride, r.room, r.slots, r.lkey) }
}
