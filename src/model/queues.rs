//! The direct queues on a model's memory: each QP's [`DirectSq`] (with a
//! recording [`ModelMmio`], or any [`Mmio`]) and the one [`DirectCq`], built
//! by the very constructors used after `mlx5dv_init_obj`.

use std::any::Any;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::config::ModelTransport;
use super::handle::Model;
use super::mmio::ModelMmio;
use crate::mlx5::seg::DatagramSeg;
use crate::mlx5::{DirectCq, DirectSq, Mmio, Transport};

impl Model {
    /// A recorder of stores into QP 0's memory.
    pub fn mmio(&self) -> ModelMmio {
        self.mmio_of(0)
    }

    /// A recorder of stores into QP `q`'s memory (its doorbell record and UAR).
    pub fn mmio_of(&self, q: usize) -> ModelMmio {
        ModelMmio {
            shared: Arc::clone(&self.shared),
            qp: q,
        }
    }

    /// The direct SQ of QP 0 (recording MMIO) and the CQ (attached) on this
    /// model's queues. Once per model: a second SQ would post into the same
    /// ring.
    pub fn pair(&self) -> Result<(DirectSq<ModelMmio>, DirectCq), String> {
        self.pair_with(self.mmio())
    }

    /// Every QP's direct SQ (recording MMIO), in QP order, and the one CQ
    /// with all of them attached. Once per model (instead of `pair`).
    pub fn queues(&self) -> Result<(Vec<DirectSq<ModelMmio>>, DirectCq), String> {
        self.take_queues()?;
        let mut sqs = Vec::with_capacity(self.shared.cfg.qps as usize);
        for q in 0..self.shared.cfg.qps as usize {
            sqs.push(self.sq_of(q, self.mmio_of(q), self.transport())?);
        }
        let mut cq = self.cq()?;
        for sq in &sqs {
            cq.attach(sq.progress());
        }
        Ok((sqs, cq))
    }

    /// As [`pair`](Self::pair) with any MMIO implementation (e.g. `HwMmio`
    /// for benches, then drive the NIC with [`step_dbrec`](Self::step_dbrec)).
    pub fn pair_with<M: Mmio>(&self, mmio: M) -> Result<(DirectSq<M>, DirectCq), String> {
        self.pair_with_transport(mmio, self.transport())
    }

    /// As [`pair_with`](Self::pair_with) with the SQ's transport given (e.g.
    /// a UD address vector built as the tool builds it from an AH) instead
    /// of the one `ModelConfig::transport` implies.
    pub fn pair_with_transport<M: Mmio>(
        &self,
        mmio: M,
        transport: Transport,
    ) -> Result<(DirectSq<M>, DirectCq), String> {
        self.take_queues()?;
        let sq = self.sq_of(0, mmio, transport)?;
        let mut dcq = self.cq()?;
        dcq.attach(sq.progress());
        Ok((sq, dcq))
    }

    /// QP `q`'s SQ built outside `pair`/`queues` (e.g. a QP the poller is
    /// not told about: its CQEs are unknown to it).
    ///
    /// # Safety
    /// Once per QP, and not for a QP `pair`/`queues` built: a ring must have
    /// one producer.
    pub unsafe fn extra_sq(&self, q: usize) -> Result<DirectSq<ModelMmio>, String> {
        self.sq_of(q, self.mmio_of(q), self.transport())
    }

    pub(super) fn take_queues(&self) -> Result<(), String> {
        if self.shared.queues_taken.swap(true, Ordering::AcqRel) {
            return Err(
                "model: the SQ/CQ queues were already created (pair or queues, once per model)"
                    .into(),
            );
        }
        Ok(())
    }

    pub(super) fn keep(&self) -> Option<Arc<dyn Any + Send + Sync>> {
        Some(Arc::clone(&self.shared) as Arc<dyn Any + Send + Sync>)
    }

    /// The CQ poller (call once, from `take_queues` callers).
    pub(super) fn cq(&self) -> Result<DirectCq, String> {
        let cq = self.dv_cq();
        // SAFETY: the memory is owned by `shared`, which the poller keeps
        // alive; created once per model (`take_queues`).
        unsafe { DirectCq::from_dv(&cq, self.keep()) }.map_err(|e| e.to_string())
    }

    /// The SQ transport `ModelConfig::transport` implies.
    fn transport(&self) -> Transport {
        match self.shared.cfg.transport {
            ModelTransport::Rc | ModelTransport::RawEth { .. } => Transport::Rc,
            ModelTransport::Ud { peer_qpn, qkey } => Transport::Ud(
                DatagramSeg::new(0, 0, 0, 0, 0, 0x0001, [0; 6], 0, 64, 0, [0; 16])
                    .with_ud_dest(peer_qpn, qkey),
            ),
        }
    }

    /// QP `q`'s SQ (call once per QP, from `take_queues` callers).
    fn sq_of<M: Mmio>(
        &self,
        q: usize,
        mmio: M,
        transport: Transport,
    ) -> Result<DirectSq<M>, String> {
        let qp = self.dv_qp_of(q);
        // SAFETY: the memory is owned by `shared`, which the SQ keeps alive;
        // the ring is fresh and this SQ is its only producer (once per model,
        // `take_queues`); the BlueFlame register is on this QP's own UAR.
        unsafe { DirectSq::from_dv(&qp, self.qpn_of(q), transport, mmio, self.keep()) }
            .map_err(|e| e.to_string())
    }
}
