//! A raw packet SQ on a model's memory (QP 0, built by the constructor used
//! after `mlx5dv_init_obj`) with the CQ, and the wire its Ethernet port
//! sends to (`ModelTransport::RawEth`).

use super::config::ModelTransport;
use super::handle::{lock, Model};
use super::mmio::ModelMmio;
use crate::mlx5::raw_sq::{RawSq, RawSqConfig};
use crate::mlx5::{DirectCq, Mmio};

impl Model {
    /// QP 0's raw SQ (recording MMIO) and the CQ (attached). Once per model,
    /// instead of `pair`; the model must be `ModelTransport::RawEth`.
    pub fn raw_pair(&self, cfg: RawSqConfig) -> Result<(RawSq<ModelMmio>, DirectCq), String> {
        self.raw_pair_with(cfg, self.mmio())
    }

    /// As [`raw_pair`](Self::raw_pair) with any MMIO implementation (e.g.
    /// `HwMmio` for benches, then drive the NIC with
    /// [`step_dbrec`](Self::step_dbrec)).
    pub fn raw_pair_with<M: Mmio>(
        &self,
        cfg: RawSqConfig,
        mmio: M,
    ) -> Result<(RawSq<M>, DirectCq), String> {
        if !matches!(self.shared.cfg.transport, ModelTransport::RawEth { .. }) {
            return Err("model: a raw SQ needs ModelTransport::RawEth".into());
        }
        self.take_queues()?;
        let qp = self.dv_qp_of(0);
        // SAFETY: the memory is owned by `shared`, which the SQ keeps alive;
        // the ring is fresh and this SQ is its only producer (once per model,
        // `take_queues`); the BlueFlame register is QP 0's own.
        let sq = unsafe { RawSq::from_dv(&qp, self.qpn_of(0), cfg, mmio, self.keep()) }
            .map_err(|e| e.to_string())?;
        let mut cq = self.cq()?;
        cq.attach(sq.progress());
        Ok((sq, cq))
    }

    /// The frames the Ethernet port has sent, in order, taken off the wire.
    pub fn take_wire(&self) -> Vec<Vec<u8>> {
        std::mem::take(&mut lock(&self.shared.nic).eth.wire)
    }

    /// Why the Ethernet port refused WQEs (one line per refused WQE).
    pub fn eth_rejected(&self) -> Vec<&'static str> {
        lock(&self.shared.nic).eth.rejected.clone()
    }
}
