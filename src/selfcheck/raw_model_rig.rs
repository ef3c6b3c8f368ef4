//! The raw rig on the queue model (feature `model`): a `RawSq` on a raw
//! Ethernet model QP (no minimum inline, a CQE for every WQE) posting from
//! a registered buffer; the model's Ethernet port decodes the WQEs from the
//! ring bytes with a reader of its own and puts the frames on its wire,
//! which the case compares with what it posted. The MMIO is the model's
//! recorder, so the doorbell protocol is checked too.

use super::raw_cases::{PairKind, RawMethod};
use super::raw_exec::RawRig;
use crate::mlx5::prm::Syndrome;
use crate::mlx5::raw_sq::{RawPkt, RawSq, RawSqConfig};
use crate::mlx5::DirectCq;
use crate::model::{Access, Model, ModelConfig, ModelMmio, ModelTransport};
use crate::post::{Completion, CompletionQueue, PostError, WcStatus};

/// Bytes of the frame buffer: 100 frames of 1518 bytes, a cache line apart.
const BUF: usize = 256 * 1024;

pub struct RawModelRig {
    // Drop order: the queues before the model, the model before the buffer.
    sq: RawSq<ModelMmio>,
    cq: DirectCq,
    model: Model,
    buf: Box<[u8]>,
    /// Frames accounted for by completions so far (the last CQE's wr_id).
    done: u64,
}

impl RawModelRig {
    pub fn new() -> Result<Self, String> {
        let model = Model::new(ModelConfig {
            wqe_cnt: 256,
            cqe_cnt: 512,
            transport: ModelTransport::RawEth { min_inline: 0 },
            record_history: false,
            ..ModelConfig::default()
        })?;
        let mut buf: Box<[u8]> = vec![0u8; BUF].into();
        // SAFETY: the buffer is owned by the rig and dropped after the model
        // and the SQ (field order); a boxed slice's bytes never move.
        let mr = unsafe { model.register(buf.as_mut_ptr(), BUF, Access::NONE) };
        let (mut sq, cq) = model.raw_pair(RawSqConfig::new(mr.lkey, 1))?;
        // SAFETY: as above: the buffer stays readable while the SQ lives.
        unsafe { sq.set_frame_source(buf.as_ptr(), BUF) };
        Ok(Self {
            sq,
            cq,
            model,
            buf,
            done: 0,
        })
    }

    fn error(&self, c: &Completion) -> String {
        format!(
            "completion wr_id {}: status {} ({}), mlx5 syndrome {:#04x} {}; the model's Ethernet \
             port: {:?}",
            c.wr_id,
            c.status.name(),
            c.status.0,
            c.syndrome,
            Syndrome(c.syndrome).name(),
            self.model.eth_rejected()
        )
    }
}

impl RawRig for RawModelRig {
    fn buf(&mut self) -> &mut [u8] {
        &mut self.buf
    }
    fn post(&mut self, m: RawMethod, pkts: &[RawPkt]) -> Result<(), PostError> {
        match m {
            RawMethod::Direct => self.sq.post_send(pkts),
            RawMethod::Mpw => self.sq.post_mpw(pkts, false),
            RawMethod::MpwInline => self.sq.post_mpw(pkts, true),
        }
    }
    fn pending(&mut self) -> Result<u64, String> {
        self.model.step();
        let mut wc = [Completion::default(); 16];
        loop {
            let k = self.cq.poll(&mut wc).map_err(|e| format!("poll: {e:?}"))?;
            for c in &wc[..k] {
                if c.status != WcStatus::SUCCESS {
                    return Err(self.error(c));
                }
                self.done = self.done.max(c.wr_id);
            }
            if k < wc.len() {
                break;
            }
        }
        let v = self.model.violations();
        if !v.is_empty() {
            return Err(format!("the model saw protocol violations: {v:?}"));
        }
        Ok(self.sq.sent() - self.done)
    }
    fn take_wire(&mut self) -> Vec<Vec<u8>> {
        self.model.take_wire()
    }
    fn wqes_run(&self) -> Option<u64> {
        Some(self.model.stats().wqes)
    }
    fn inject_drop(&mut self, n: u32) -> bool {
        self.model.drop_next_wqes(n);
        true
    }
    fn pair(&mut self, kind: PairKind) -> Result<(), String> {
        super::raw_pair_model::run_pair(kind)
    }
}
