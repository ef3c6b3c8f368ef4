//! The direct path's set-up steps (`crate::mlx5::setup::DirectSteps`) on the
//! model, with a failure injected at any step: what `--post auto` falls back
//! from is tested without a ConnectX.

use super::handle::Model;
use crate::mlx5::setup::{DirectQpAttr, DirectSteps, SetupStep};
use crate::sys;

/// Fail `step` with `errno` on QP `at` (0-based; `at == qps` means the send
/// CQ, `qps + 1` the receive CQ (the model's one CQ again), `qps + 2` the
/// SRQ (with `ModelConfig::recv` `srq`); those have only the InitObj and
/// Layout steps). A Layout failure makes `mlx5dv_init_obj` describe a
/// 128-byte SQ stride (a 256-byte CQE for a CQ, a 16-byte SRQ stride),
/// which the real layout check refuses. A QP's RQ (`ModelConfig::recv`
/// with RQs) is described as the model has it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Inject {
    pub step: SetupStep,
    pub errno: i32,
    pub at: usize,
}

/// The steps on `model`'s queues: QP `i` of the set-up is the model's QP `i`.
pub struct ModelSteps<'m> {
    model: &'m Model,
    next: usize,
    inject: Option<Inject>,
    /// Steps run, in order (QP index, step), for tests.
    pub trace: Vec<(usize, SetupStep)>,
}

/// One model QP under construction.
pub struct ModelQp {
    pub index: usize,
}

impl<'m> ModelSteps<'m> {
    pub fn new(model: &'m Model, inject: Option<Inject>) -> Self {
        Self {
            model,
            next: 0,
            inject,
            trace: Vec::new(),
        }
    }

    fn step(&mut self, at: usize, step: SetupStep) -> Result<(), i32> {
        self.trace.push((at, step));
        match self.inject {
            Some(i) if i.at == at && i.step == step => Err(i.errno),
            _ => Ok(()),
        }
    }

    fn layout_broken(&self, at: usize) -> bool {
        self.inject
            .is_some_and(|i| i.at == at && i.step == SetupStep::Layout)
    }
}

impl DirectSteps for ModelSteps<'_> {
    type Qp = ModelQp;

    fn begin(&mut self) -> ModelQp {
        let index = self.next;
        self.next += 1;
        ModelQp { index }
    }
    fn alloc_td(&mut self, qp: &mut ModelQp) -> Result<(), i32> {
        self.step(qp.index, SetupStep::ThreadDomain)
    }
    fn alloc_parent_domain(&mut self, qp: &mut ModelQp) -> Result<(), i32> {
        self.step(qp.index, SetupStep::ParentDomain)
    }
    fn create_qp(&mut self, qp: &mut ModelQp, _attr: &DirectQpAttr) -> Result<(), i32> {
        if qp.index >= self.model.config().qps as usize {
            // As libmlx5 when the device runs out of QPs.
            return Err(libc::ENOMEM);
        }
        self.step(qp.index, SetupStep::CreateQp)
    }
    fn init_obj_qp(&mut self, qp: &ModelQp) -> Result<sys::mlx5dv_qp, i32> {
        self.step(qp.index, SetupStep::InitObj)?;
        let mut dv = self.model.dv_qp_of(qp.index);
        if let Ok(recv) = self.model.recv_dv_qp(qp.index) {
            dv.rq = recv.rq;
        }
        if self.layout_broken(qp.index) {
            dv.sq.stride = 128;
        }
        Ok(dv)
    }
    fn init_obj_cq(&mut self) -> Result<sys::mlx5dv_cq, i32> {
        let cq = self.model.config().qps as usize;
        self.step(cq, SetupStep::InitObj)?;
        let mut dv = self.model.dv_cq();
        if self.layout_broken(cq) {
            dv.cqe_size = 256;
        }
        Ok(dv)
    }
    fn init_obj_recv_cq(&mut self) -> Option<Result<sys::mlx5dv_cq, i32>> {
        let at = self.model.config().qps as usize + 1;
        if let Err(e) = self.step(at, SetupStep::InitObj) {
            return Some(Err(e));
        }
        let mut dv = self.model.dv_cq();
        if self.layout_broken(at) {
            dv.cqe_size = 256;
        }
        Some(Ok(dv))
    }
    fn init_obj_srq(&mut self) -> Option<Result<sys::mlx5dv_srq, i32>> {
        let mut dv = self.model.recv_dv_srq().ok()?;
        let at = self.model.config().qps as usize + 2;
        if let Err(e) = self.step(at, SetupStep::InitObj) {
            return Some(Err(e));
        }
        if self.layout_broken(at) {
            dv.stride = 16;
        }
        Some(Ok(dv))
    }
}
