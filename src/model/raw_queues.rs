//! A raw packet SQ on a model's memory (QP 0, built by the constructor used
//! after `mlx5dv_init_obj`) with the CQ, the wire its Ethernet port sends
//! to (`ModelTransport::RawEth`), and the receive side: raw QPs' RQs
//! (`ModelConfig::recv` with RQs; ring `q` is raw QP `q`'s RQ, give it
//! `RecvSpec::qpn` = `ModelConfig::qpn` so that its CQEs carry the QP's own
//! number), the flow table and the frames fed to it (`eth_rx.rs`).

use super::config::ModelTransport;
use super::flow::{FlowRule, RawRxStats};
use super::handle::{lock, Model};
use super::mmio::ModelMmio;
use super::recv_mmio::ModelRecvMmio;
use crate::mlx5::raw_sq::{RawSq, RawSqConfig};
use crate::mlx5::rq::DirectRq;
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

    /// Every QP's raw SQ (recording MMIO, each on its QP's own memory and
    /// BlueFlame register), in QP order, all on the one CQ (attached), as
    /// raw-eth-bw's sender creates `-q` QPs on one CQ. Once per model,
    /// instead of `raw_pair`; `cfgs` gives each QP's configuration (its
    /// frames' lkey), one per QP of the model.
    pub fn raw_queues(
        &self,
        cfgs: &[RawSqConfig],
    ) -> Result<(Vec<RawSq<ModelMmio>>, DirectCq), String> {
        self.raw_queues_with(cfgs, |q| self.mmio_of(q))
    }

    /// As [`raw_queues`](Self::raw_queues) with QP `q`'s MMIO from
    /// `mmio(q)` (e.g. `HwMmio` for the allocation test, then drive the
    /// NIC with [`step_dbrec`](Self::step_dbrec)).
    pub fn raw_queues_with<M: Mmio>(
        &self,
        cfgs: &[RawSqConfig],
        mmio: impl Fn(usize) -> M,
    ) -> Result<(Vec<RawSq<M>>, DirectCq), String> {
        if !matches!(self.shared.cfg.transport, ModelTransport::RawEth { .. }) {
            return Err("model: a raw SQ needs ModelTransport::RawEth".into());
        }
        if cfgs.len() != self.shared.cfg.qps as usize {
            return Err(format!(
                "model: {} raw SQ configurations for {} QPs",
                cfgs.len(),
                self.shared.cfg.qps
            ));
        }
        self.take_queues()?;
        let mut sqs = Vec::with_capacity(cfgs.len());
        for (q, cfg) in cfgs.iter().enumerate() {
            let qp = self.dv_qp_of(q);
            // SAFETY: the memory is owned by `shared`, which the SQ keeps
            // alive; each ring is fresh and this SQ its only producer (once
            // per model, `take_queues`); the BlueFlame register is QP q's.
            let sq = unsafe { RawSq::from_dv(&qp, self.qpn_of(q), *cfg, mmio(q), self.keep()) }
                .map_err(|e| e.to_string())?;
            sqs.push(sq);
        }
        let mut cq = self.cq()?;
        for sq in &sqs {
            cq.attach(sq.progress());
        }
        Ok((sqs, cq))
    }

    /// The frames the Ethernet port has sent, in order, taken off the wire.
    pub fn take_wire(&self) -> Vec<Vec<u8>> {
        std::mem::take(&mut lock(&self.shared.nic).eth.wire)
    }

    /// Why the Ethernet port refused WQEs (one line per refused WQE).
    pub fn eth_rejected(&self) -> Vec<&'static str> {
        lock(&self.shared.nic).eth.rejected.clone()
    }

    /// Installs a steering rule (as `ibv_create_flow` on raw QP
    /// `rule.ring`). Needs a raw model with RQs.
    pub fn add_flow(&self, rule: FlowRule) -> Result<(), String> {
        let cfg = &self.shared.cfg;
        if !matches!(cfg.transport, ModelTransport::RawEth { .. }) {
            return Err("model: flow rules need ModelTransport::RawEth".into());
        }
        match cfg.recv {
            Some(s) if !s.srq && rule.ring < cfg.qps as usize => {}
            _ => {
                return Err(format!(
                    "model: a flow rule for raw QP {} needs ModelConfig::recv with RQs and \
                     qps > {}",
                    rule.ring, rule.ring
                ))
            }
        }
        lock(&self.shared.nic).eth_rx.rules.push(rule);
        Ok(())
    }

    /// Removes every steering rule (as destroying the flows).
    pub fn clear_flows(&self) {
        lock(&self.shared.nic).eth_rx.rules.clear();
    }

    /// Removes one steering rule equal to `rule` (as `ibv_destroy_flow`);
    /// false when the table holds none.
    pub fn remove_flow(&self, rule: &FlowRule) -> bool {
        let rules = &mut lock(&self.shared.nic).eth_rx.rules;
        match rules.iter().position(|r| r == rule) {
            Some(i) => {
                rules.remove(i);
                true
            }
            None => false,
        }
    }

    /// The steering rules in the table now, in the order they were added.
    pub fn flow_rules(&self) -> Vec<FlowRule> {
        lock(&self.shared.nic).eth_rx.rules.clone()
    }

    /// One frame arrives at the port: steered, landed and completed (see
    /// `eth_rx.rs`). Returns the receives that completed successfully
    /// (0: dropped, or an error CQE).
    pub fn deliver(&self, frame: &[u8]) -> usize {
        let s = &self.shared;
        lock(&s.nic).deliver_raw(&s.mem, &s.cfg, frame)
    }

    /// Loop-back: every frame on the wire (what the raw SQs sent) is taken
    /// off it and delivered to the port, in order. Returns the frames
    /// taken.
    pub fn loop_back(&self) -> usize {
        let s = &self.shared;
        let mut nic = lock(&s.nic);
        let wire = std::mem::take(&mut nic.eth.wire);
        for f in &wire {
            nic.deliver_raw(&s.mem, &s.cfg, f);
        }
        wire.len()
    }

    /// The receive side's counters.
    pub fn raw_rx_stats(&self) -> RawRxStats {
        lock(&self.shared.nic).eth_rx.stats.clone()
    }

    /// Raw QP `q`'s RQ (recording the receive records' stores), to attach
    /// to the CQ with `cq.attach_recv(rq.qpn(), rq.ring())`. Once per ring.
    pub fn raw_rq(&self, q: usize) -> Result<DirectRq<ModelRecvMmio>, String> {
        self.raw_rq_with(q, self.recv_mmio(q))
    }

    /// As [`raw_rq`](Self::raw_rq) with any MMIO implementation (`HwMmio`:
    /// the real stores, for benches and the allocation test).
    pub fn raw_rq_with<M: Mmio>(&self, q: usize, mmio: M) -> Result<DirectRq<M>, String> {
        let dv = self.recv_dv_qp(q)?;
        let qpn = self.recv_qpn(q).unwrap_or_default();
        let mut nic = lock(&self.shared.nic);
        if nic.eth_rx.rq_taken.contains(&q) {
            return Err(format!("model: raw QP {q}'s RQ was taken already"));
        }
        nic.eth_rx.rq_taken.push(q);
        drop(nic);
        // SAFETY: the ring and record are model memory, which `keep()`
        // keeps alive as long as the RQ; the ring is fresh and this RQ is
        // its only poster (each ring is handed out once, above).
        unsafe { DirectRq::from_dv(&dv, qpn, self.keep(), mmio) }.map_err(|e| e.to_string())
    }
}
