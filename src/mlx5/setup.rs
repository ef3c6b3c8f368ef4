//! The direct path's set-up as a sequence of steps that can each fail:
//! libmlx5's environment, thread domain, parent domain, QP creation, `mlx5dv_init_obj`, layout
//! checks (per QP: its SQ, and its RQ when it has one), then `mlx5dv_init_obj` and layout
//! checks for the send CQ, the receive CQ (when apart) and the SRQ (with `--use-srq`).
//!
//! [`set_up`] walks the steps for every QP of a test before anything is
//! connected, so `--post auto` can fall back to the WR API with the reason
//! ([`SetupFailure`]) and `--post direct` can fail with the same reason.
//! The steps are a trait ([`DirectSteps`]): `device::HwSteps` calls libmlx5,
//! the queue model (`crate::model::ModelSteps`) stands in for it in tests
//! and can be told to fail any step.

use core::fmt;

use super::cq::check_cq_layout;
use super::env::Mlx5Env;
use super::error::{errno_name, DirectError};
use super::rq::check_rq_layout;
use super::sq::check_qp_layout;
use super::srq::check_srq_layout;
use crate::sys;

/// QP type for the direct path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpKind {
    Rc,
    Uc,
    Ud,
}

/// Capacities of a direct QP.
#[derive(Clone, Copy, Debug)]
pub struct DirectQpAttr {
    pub kind: QpKind,
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
    /// Ask for atomics in `send_ops_flags` (RC only; needs device atomic cap).
    pub atomics: bool,
}

impl DirectQpAttr {
    /// An RC QP sending up to `max_send_wr` WRs (no inline data) that
    /// receives one WR of one SGE: the set-up's smallest whole case.
    pub const fn rc(max_send_wr: u32, atomics: bool) -> Self {
        Self {
            kind: QpKind::Rc,
            max_send_wr,
            max_recv_wr: 1,
            max_recv_sge: 1,
            max_inline_data: 0,
            atomics,
        }
    }
}

/// One step of the set-up, in the order [`set_up`] runs them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetupStep {
    /// libmlx5's environment (`super::env`): `MLX5_QP_SIGNATURE` refuses.
    Environment,
    ThreadDomain,
    ParentDomain,
    CreateQp,
    InitObj,
    Layout,
}

impl SetupStep {
    pub const ALL: [SetupStep; 6] = [
        SetupStep::Environment,
        SetupStep::ThreadDomain,
        SetupStep::ParentDomain,
        SetupStep::CreateQp,
        SetupStep::InitObj,
        SetupStep::Layout,
    ];

    /// The call that failed in this step (for messages).
    pub fn call(self) -> &'static str {
        match self {
            SetupStep::Environment => "environment",
            SetupStep::ThreadDomain => "ibv_alloc_td",
            SetupStep::ParentDomain => "ibv_alloc_parent_domain",
            SetupStep::CreateQp => "mlx5dv_create_qp",
            SetupStep::InitObj => "mlx5dv_init_obj",
            SetupStep::Layout => "layout check",
        }
    }
}

/// Why the direct path could not be set up: the step, its errno (none for a
/// layout refusal) and what it means here. Displayed as
/// `ibv_alloc_td: ENOSPC — no dedicated UAR left for 512 QPs (at QP 300)`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetupFailure {
    pub step: SetupStep,
    pub errno: Option<i32>,
    /// The object (e.g. "QP 3 of 8", "the CQ").
    pub object: String,
    pub meaning: String,
}

impl fmt::Display for SetupFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.errno {
            Some(e) => write!(f, "{}: {}", self.step.call(), errno_label(e))?,
            None => write!(f, "{}", self.step.call())?,
        }
        write!(f, " — {} ({})", self.meaning, self.object)
    }
}

/// `ENOSPC`, or `errno 71` for names [`errno_name`] does not know.
fn errno_label(e: i32) -> String {
    match (e, errno_name(e)) {
        (libc::ENOSPC, _) => "ENOSPC".into(),
        (libc::EBUSY, _) => "EBUSY".into(),
        (_, "errno") => format!("errno {e}"),
        (_, n) => n.into(),
    }
}

/// What a failed step means, from its errno.
fn meaning(step: SetupStep, errno: i32, n_qps: usize, attr: &DirectQpAttr) -> String {
    match (step, errno) {
        (SetupStep::ThreadDomain, libc::ENOSPC) => {
            format!("no dedicated UAR left for {n_qps} QPs")
        }
        (SetupStep::ThreadDomain, _) => {
            "the device gives no thread domain (no write-combining and \
             no non-cached UAR: older kernel or a virtual function)"
                .into()
        }
        (SetupStep::ParentDomain, _) => {
            "libmlx5 refused a parent domain over the thread domain".into()
        }
        (SetupStep::CreateQp, libc::EOPNOTSUPP) if attr.atomics => {
            "the device has no RDMA atomics (ibv_devinfo -v: atomic_cap ATOMIC_NONE); \
             atomic tests cannot run on it with any post method"
                .into()
        }
        (SetupStep::CreateQp, _) => format!(
            "libmlx5 refused a {:?} QP with {} send WRs and {} B inline (the SQ may exceed \
             max_send_wqebb: lower -t or -I)",
            attr.kind, attr.max_send_wr, attr.max_inline_data
        ),
        (SetupStep::InitObj, libc::EOPNOTSUPP) => {
            "the queue is not driven by the mlx5 provider".into()
        }
        (SetupStep::InitObj, _) => "libmlx5 did not describe the queue".into(),
        (SetupStep::Layout, _) => "the queue layout is one this path cannot drive".into(),
        (SetupStep::Environment, _) => "libmlx5's environment".into(),
    }
}

/// The set-up steps on one device (or its stand-in). Errors are errno values.
pub trait DirectSteps {
    /// What was created for one QP so far; dropping it destroys that.
    type Qp;
    fn begin(&mut self) -> Self::Qp;
    fn alloc_td(&mut self, qp: &mut Self::Qp) -> Result<(), i32>;
    fn alloc_parent_domain(&mut self, qp: &mut Self::Qp) -> Result<(), i32>;
    fn create_qp(&mut self, qp: &mut Self::Qp, attr: &DirectQpAttr) -> Result<(), i32>;
    /// `mlx5dv_init_obj(MLX5DV_OBJ_QP)` on the created QP.
    fn init_obj_qp(&mut self, qp: &Self::Qp) -> Result<sys::mlx5dv_qp, i32>;
    /// `mlx5dv_init_obj(MLX5DV_OBJ_CQ)` on the send CQ.
    fn init_obj_cq(&mut self) -> Result<sys::mlx5dv_cq, i32>;
    /// The same on the receive CQ; `None` when it is the send CQ.
    fn init_obj_recv_cq(&mut self) -> Option<Result<sys::mlx5dv_cq, i32>>;
    /// `mlx5dv_init_obj(MLX5DV_OBJ_SRQ)` on the SRQ; `None` without one.
    fn init_obj_srq(&mut self) -> Option<Result<sys::mlx5dv_srq, i32>>;
}

/// The QPs (each with what `mlx5dv_init_obj` reported, layout checked) and
/// the CQ's description.
pub struct SetUp<Q> {
    pub qps: Vec<(Q, sys::mlx5dv_qp)>,
    pub cq: sys::mlx5dv_cq,
}

/// Checks `env` (read once by the caller), then runs every step for `n_qps`
/// QPs, then for the CQ; the first failure stops it (what was created is
/// dropped) and says which step failed.
pub fn set_up<S: DirectSteps>(
    s: &mut S,
    n_qps: usize,
    attr: &DirectQpAttr,
    env: &Mlx5Env,
) -> Result<SetUp<S::Qp>, SetupFailure> {
    if let Some(why) = env.refusal() {
        return Err(SetupFailure {
            step: SetupStep::Environment,
            errno: None,
            object: "before any QP".into(),
            meaning: why,
        });
    }
    let fail = |step, errno: i32, object: String| SetupFailure {
        step,
        errno: Some(errno),
        object,
        meaning: meaning(step, errno, n_qps, attr),
    };
    let layout = |e: DirectError, object: String| SetupFailure {
        step: SetupStep::Layout,
        errno: None,
        object,
        meaning: e.to_string(),
    };
    let mut qps = Vec::with_capacity(n_qps);
    for i in 0..n_qps {
        let object = format!("QP {} of {n_qps}", i + 1);
        let mut qp = s.begin();
        s.alloc_td(&mut qp)
            .map_err(|e| fail(SetupStep::ThreadDomain, e, object.clone()))?;
        s.alloc_parent_domain(&mut qp)
            .map_err(|e| fail(SetupStep::ParentDomain, e, object.clone()))?;
        s.create_qp(&mut qp, attr)
            .map_err(|e| fail(SetupStep::CreateQp, e, object.clone()))?;
        let dv = s
            .init_obj_qp(&qp)
            .map_err(|e| fail(SetupStep::InitObj, e, object.clone()))?;
        check_qp_layout(&dv).map_err(|e| layout(e, object.clone()))?;
        if dv.rq.wqe_cnt != 0 {
            // Its own RQ (none on an SRQ): refused here, before anything
            // is connected, so `--post auto` can still fall back.
            check_rq_layout(&dv).map_err(|e| layout(e, object))?;
        }
        qps.push((qp, dv));
    }
    let object = "the send CQ".to_string();
    let cq = s
        .init_obj_cq()
        .map_err(|e| fail(SetupStep::InitObj, e, object.clone()))?;
    check_cq_layout(&cq).map_err(|e| layout(e, object))?;
    if let Some(rcq) = s.init_obj_recv_cq() {
        let object = "the receive CQ".to_string();
        let rcq = rcq.map_err(|e| fail(SetupStep::InitObj, e, object.clone()))?;
        check_cq_layout(&rcq).map_err(|e| layout(e, object))?;
    }
    if let Some(srq) = s.init_obj_srq() {
        let object = "the SRQ".to_string();
        let srq = srq.map_err(|e| fail(SetupStep::InitObj, e, object.clone()))?;
        check_srq_layout(&srq).map_err(|e| layout(e, object))?;
    }
    Ok(SetUp { qps, cq })
}

#[cfg(test)]
mod tests {
    use super::*;

    const ATTR: DirectQpAttr = DirectQpAttr::rc(128, false);

    #[test]
    fn enospc_on_the_thread_domain_names_the_qp_count() {
        let f = SetupFailure {
            step: SetupStep::ThreadDomain,
            errno: Some(libc::ENOSPC),
            object: "QP 300 of 512".into(),
            meaning: meaning(SetupStep::ThreadDomain, libc::ENOSPC, 512, &ATTR),
        };
        assert_eq!(
            f.to_string(),
            "ibv_alloc_td: ENOSPC — no dedicated UAR left for 512 QPs (QP 300 of 512)"
        );
    }

    #[test]
    fn atomics_eopnotsupp_says_the_device_has_no_atomics_not_lower_tx_depth() {
        let a = DirectQpAttr::rc(128, true);
        let m = meaning(SetupStep::CreateQp, libc::EOPNOTSUPP, 1, &a);
        assert!(m.contains("no RDMA atomics") && !m.contains("-t"), "{m}");
        let m = meaning(SetupStep::CreateQp, libc::ENOMEM, 1, &ATTR);
        assert!(m.contains("max_send_wqebb"), "{m}");
    }
}
