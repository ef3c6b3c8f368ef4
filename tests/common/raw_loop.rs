//! raw-eth-bw's sender's QPs on a loop-back model (`Model::raw_queues`, no
//! peer: frames stay on the model's wire), as the send-side model tests
//! (`raw_run_model`, `raw_send_qps_model`, `raw_stop_model`) set them up:
//! one buffer per QP filled as the tool fills it, QP `q`'s with the seed
//! `SEED ^ q` so every frame tells which QP sent it.

use super::raw_steer_model::{self, CLIENT};
use rdmaperf::clock::Clock;
use rdmaperf::mlx5::raw_sq::{RawSq, RawSqConfig};
use rdmaperf::mlx5::{DirectCq, Mmio};
use rdmaperf::model::{Access, Model, ModelConfig, ModelMmio};
use rdmaperf::post::CompletionQueue;
use rdmaperf::raw::params::RawParams;
use rdmaperf::raw::slots::{self, Slots};
use rdmaperf::raw::tools::RawTool;
use rdmaperf::run::bw::BwOutcome;
use rdmaperf::run::raw_bw::{Alone, Direct, DirectMpw, RawPost};
use rdmaperf::tool::session::raw_measure::{self, Stamps};

/// QP 0's seed.
pub const SEED: u32 = 0x5eed;

/// The model and the send buffers its SQs read (the model is dropped
/// first; the caller's SQs and CQ, declared after, before both).
pub struct RawLoop {
    pub model: Model,
    pub bufs: Vec<Vec<u8>>,
    pub slots: Slots,
}

impl RawLoop {
    /// `n_qps` raw SQs of `p`'s frames (`raw::slots`'s layout) on one CQ,
    /// each SQ's frame source its own registered buffer.
    pub fn new(p: &RawParams, n_qps: usize) -> (Self, Vec<RawSq<ModelMmio>>, DirectCq) {
        let slots = Slots::new(p.size, p.raw.flows, p.raw.flows_burst, p.post_list, 4096);
        let (mut rig, sqs, cq) = Self::with(slots, n_qps, 8, Model::mmio_of);
        for (i, b) in rig.bufs.iter_mut().enumerate() {
            slots::fill(b, &p.frame_spec(), &slots, SEED ^ i as u32);
        }
        (rig, sqs, cq)
    }

    /// `n_qps` raw SQs (signalling every `sig`-th WQE, QP `q`'s MMIO
    /// `mmio(model, q)`) on one CQ, each SQ's frame source its own zeroed buffer
    /// of `slots`'s length.
    pub fn with<M: Mmio>(
        slots: Slots,
        n_qps: usize,
        sig: u32,
        mmio: impl Fn(&Model, usize) -> M,
    ) -> (Self, Vec<RawSq<M>>, DirectCq) {
        let mut bufs: Vec<Vec<u8>> = (0..n_qps).map(|_| vec![0u8; slots.buffer_len()]).collect();
        let model = Model::new(ModelConfig {
            qps: n_qps as u32,
            ..ModelConfig::raw_eth_loop(256)
        })
        .unwrap();
        let mut cfgs = Vec::new();
        for b in &mut bufs {
            // SAFETY: `bufs` goes into the returned rig beside the model and
            // outlives the SQs (the caller drops them first); a Vec's bytes
            // stay in place when the rig moves.
            let mr = unsafe { model.register(b.as_mut_ptr(), b.len(), Access::NONE) };
            cfgs.push(RawSqConfig::new(mr.lkey, sig));
        }
        let (mut sqs, cq) = model.raw_queues_with(&cfgs, |q| mmio(&model, q)).unwrap();
        for (sq, b) in sqs.iter_mut().zip(&bufs) {
            // SAFETY: as above.
            unsafe { sq.set_frame_source(b.as_ptr(), b.len()) };
        }
        (Self { model, bufs, slots }, sqs, cq)
    }

    /// Each buffer's address: the frames' bases.
    pub fn bases(&self) -> Vec<u64> {
        self.bufs.iter().map(|b| b.as_ptr() as u64).collect()
    }
}

/// The direct post methods the send-side model tests run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Method {
    Direct,
    DirectMpw,
}

/// The client's command line (`raw_steer_model::CLIENT`) with `extra`, as
/// raw-eth-bw's parameters.
pub fn client(extra: &str) -> RawParams {
    raw_steer_model::params(RawTool::Bw, &format!("{CLIENT} {extra}"))
}

/// raw-eth-bw's sender (`tool::session::raw_measure`, on a fixed 1 GHz
/// clock, no receive side) posting `m` on `sqs` from `frames`, completions
/// from `cq`.
pub fn measure<C: CompletionQueue>(
    (m, p): (Method, &RawParams),
    sqs: Vec<RawSq<ModelMmio>>,
    cq: &mut C,
    frames: (&[u64], Slots),
    stamps: &mut Stamps,
) -> BwOutcome {
    fn go<P: RawPost, C: CompletionQueue>(
        p: &RawParams,
        posts: &mut [P],
        cq: &mut C,
        frames: (&[u64], Slots),
        stamps: &mut Stamps,
    ) -> BwOutcome {
        let clock = Clock::fixed(1e9);
        raw_measure::measure_stamped(p, (posts, cq), frames, &clock, (&mut Alone, stamps))
    }
    match m {
        Method::Direct => {
            let mut posts: Vec<_> = sqs.into_iter().map(Direct::<ModelMmio>).collect();
            go(p, &mut posts, cq, frames, stamps)
        }
        Method::DirectMpw => {
            let mut posts: Vec<_> = sqs.into_iter().map(DirectMpw::<ModelMmio>).collect();
            go(p, &mut posts, cq, frames, stamps)
        }
    }
}
