//! A [`QueueFactory`] over the queue model for the multi-threaded bw engine
//! (`run::threads`): each worker gets its own model — SQ ring, CQ, doorbell
//! page, buffers — so nothing is shared between threads, as with one QP,
//! CQ and UAR per thread on hardware. Posting uses the real stores
//! ([`HwMmio`]); the polling thread steps the model's NIC inline.

use super::config::{Access, ModelConfig};
use super::handle::Model;
use crate::mlx5::{DirectCq, DirectSq, HwMmio};
use crate::post::{Completion, CompletionQueue, Op, PostError};
use crate::run::bw::{BwConfig, QpTarget};
use crate::run::threads::QueueFactory;

/// One worker's CQ side: owns its model and the two buffers the NIC copies
/// between (they live exactly as long as the model).
pub struct ModelWorkerCq {
    cq: DirectCq,
    model: Model,
    bufs: (Box<[u8]>, Box<[u8]>),
}

impl ModelWorkerCq {
    /// The source and destination buffers (e.g. to check where data landed).
    pub fn buffers(&self) -> (&[u8], &[u8]) {
        (&self.bufs.0, &self.bufs.1)
    }

    pub fn model(&self) -> &Model {
        &self.model
    }
}

impl CompletionQueue for ModelWorkerCq {
    fn poll(&mut self, out: &mut [Completion]) -> Result<usize, PostError> {
        self.model.step_dbrec();
        self.cq.poll(out)
    }
}

/// Builds one model per worker, with one QP (the model holds one).
#[derive(Clone, Copy, Debug)]
pub struct ModelWorkers {
    pub wqe_cnt: u32,
    pub cqe_cnt: u32,
    /// Bytes of each of the two buffers; the source is filled with `fill`.
    pub buf: usize,
    pub fill: u8,
}

impl ModelWorkers {
    /// The run the example and the tests give these workers: 64-byte
    /// WRITEs cycling through 64 positions of the buffer, 128 deep,
    /// signalled at least every 16, with the receive cost measured.
    pub fn write_64(iters: u64, post_list: u32, stall_ticks: u64) -> BwConfig {
        BwConfig {
            op: Op::Write,
            size: 64,
            iters,
            post_list,
            tx_depth: 128,
            cq_mod: post_list.max(16),
            inline: false,
            positions: 64,
            step: 64,
            stall_ticks,
            cost: true,
        }
    }
}

impl Default for ModelWorkers {
    fn default() -> Self {
        Self {
            wqe_cnt: 256,
            cqe_cnt: 64,
            buf: 1 << 16,
            fill: 7,
        }
    }
}

impl QueueFactory for ModelWorkers {
    type Sq = DirectSq<HwMmio>;
    type Cq = ModelWorkerCq;

    fn build(
        &self,
        thread: usize,
        qps: &[usize],
    ) -> Result<(Vec<Self::Sq>, ModelWorkerCq, Vec<QpTarget>), String> {
        if qps.len() != 1 {
            return Err(format!(
                "thread {thread}: {} QPs, but a model holds one; give each worker one QP",
                qps.len()
            ));
        }
        let model = Model::new(ModelConfig {
            wqe_cnt: self.wqe_cnt,
            cqe_cnt: self.cqe_cnt,
            record_history: false,
            ..Default::default()
        })?;
        let (sq, cq) = model.pair_with(HwMmio)?;
        let mut local = vec![self.fill; self.buf].into_boxed_slice();
        let mut remote = vec![0u8; self.buf].into_boxed_slice();
        // SAFETY: the buffers move into ModelWorkerCq together with the model
        // (boxed: their addresses do not change) and live as long as it does.
        let (lk, rk) = unsafe {
            (
                model.register(local.as_mut_ptr(), self.buf, Access::ALL),
                model.register(remote.as_mut_ptr(), self.buf, Access::ALL),
            )
        };
        let target = QpTarget {
            laddr: local.as_ptr() as u64,
            lkey: lk.lkey,
            raddr: remote.as_ptr() as u64,
            rkey: rk.rkey,
        };
        Ok((
            vec![sq],
            ModelWorkerCq {
                cq,
                model,
                bufs: (local, remote),
            },
            vec![target],
        ))
    }
}
