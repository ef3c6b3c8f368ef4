//! `--post direct` in the tools.
//!
//! - [`DirectQpHandle`]: a QP created through mlx5dv
//!   ([`DirectQpHandle::create_all`]: own UAR via thread + parent domain, scatter-to-CQE
//!   off so small READ/atomic results land in the buffer, `sq_sig_all` 0),
//!   moved through INIT/RTR/RTS with the very attribute builders verbs QPs
//!   use (`verbs::qp::build_*`). It has no post method of its own: nothing
//!   can post on it through libmlx5.
//! - [`open_queues`]: once per set of QPs, the [`DirectSq`]s and one
//!   [`DirectCq`] on the send CQ (all SQs attached). The CQ is then polled
//!   only by that poller, never by libmlx5.
//! - [`run_size`]: one message size over already-built direct queues; the
//!   tool calls it with hardware queues, the model tests with model queues.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::rdma_bw::{measure_size, SizeRun};
use super::setup::Resources;
use super::Fail;
use crate::cli::params::{Conn, Params, Verb};
use crate::clock::Clock;
use crate::mlx5::device::{cq_from_ibv_cq, sq_from_ibv_qp, ud_av_from_ibv_ah, DirectQp, HwSteps};
use crate::mlx5::env::{BfPolicy, Mlx5Env};
use crate::mlx5::setup::{set_up, DirectQpAttr, QpKind, SetupFailure};
use crate::mlx5::{DirectCq, DirectSq, HwMmio, Mmio, Transport};
use crate::post::verbs_cq::VerbsRecv;
use crate::post::{PostError, RecvQueue};
use crate::run::bw::QpTarget;
use crate::run::geometry::Geometry;
use crate::sys;
use crate::verbs::error::errno_of;
use crate::verbs::qp::{build_init, build_rtr, build_rts};
use crate::verbs::{Cq, InitAttr, Pd, QpType, RtrAttr, RtsAttr, UdDest, VerbsError};

/// A direct-path QP with what it was created on. Fields drop in order: the
/// QP (with its parent domain and thread domain) before PD and CQs.
pub struct DirectQpHandle {
    qp: DirectQp,
    qp_type: QpType,
    /// Set once its SQ was handed out ([`open_queues`]): a second SQ would
    /// post into the same ring from index 0.
    opened: AtomicBool,
    /// How its doorbell rings (libmlx5's environment, read at set-up).
    bf_policy: BfPolicy,
    _send_cq: Arc<Cq>,
    _recv_cq: Arc<Cq>,
    _pd: Arc<Pd>,
}

// SAFETY: the handle offers only QP control verbs (modify), which are
// thread-safe in libibverbs; posting goes through a DirectSq that
// `open_queues` hands out once.
unsafe impl Send for DirectQpHandle {}
// SAFETY: as above; `&DirectQpHandle` offers only thread-safe verbs and an
// atomic flag.
unsafe impl Sync for DirectQpHandle {}

impl DirectQpHandle {
    /// Creates `p.num_qps` QPs for `p` (perftest's capacities) on `pd` with
    /// the given CQs, walking every set-up step (`mlx5::setup::set_up`:
    /// thread domain, parent domain, QP, `mlx5dv_init_obj`, layout checks,
    /// then the send CQ's) before any QP is used; the first failure says
    /// which step failed and why, and what was created is destroyed.
    pub fn create_all(
        pd: &Arc<Pd>,
        send_cq: &Arc<Cq>,
        recv_cq: &Arc<Cq>,
        p: &Params,
        env: &Mlx5Env,
    ) -> Result<Vec<DirectQpHandle>, SetupFailure> {
        let attr = direct_attr(p);
        // SAFETY: context, PD and CQs are live objects of one context; every
        // handle keeps PD and CQs (Arcs) alive until after its QP is destroyed.
        let mut steps =
            unsafe { HwSteps::new(pd.context().raw(), pd.raw(), send_cq.raw(), recv_cq.raw()) };
        let done = set_up(&mut steps, p.num_qps as usize, &attr, env)?;
        Ok(done
            .qps
            .into_iter()
            .map(|(qp, _dv)| DirectQpHandle {
                qp,
                qp_type: qp_type_of(p.conn),
                opened: AtomicBool::new(false),
                bf_policy: env.bf_policy(),
                _send_cq: Arc::clone(send_cq),
                _recv_cq: Arc::clone(recv_cq),
                _pd: Arc::clone(pd),
            })
            .collect())
    }

    pub fn qpn(&self) -> u32 {
        // SAFETY: the QP is live while self is; qp_num is fixed at creation.
        unsafe { (*self.qp.qp()).qp_num }
    }

    fn modify(
        &self,
        verb: &'static str,
        (mut attr, mask): (sys::ibv_qp_attr, u32),
        hint: impl FnOnce() -> String,
    ) -> Result<(), VerbsError> {
        // SAFETY: the QP is live; `attr` is initialised and `mask` names only
        // the fields the builder set.
        let ret = unsafe { sys::ibv_modify_qp(self.qp.qp(), &mut attr, mask as i32) };
        if ret != 0 {
            return Err(VerbsError::new(verb, errno_of(ret), hint()));
        }
        Ok(())
    }

    pub fn to_init(&self, a: &InitAttr) -> Result<(), VerbsError> {
        self.modify(
            "ibv_modify_qp(RESET->INIT)",
            build_init(self.qp_type, a),
            || {
                format!(
                    "direct {} QP {:#08x}: port {} must exist and pkey index {} be valid; check -i",
                    self.qp_type.name(),
                    self.qpn(),
                    a.port,
                    a.pkey_index
                )
            },
        )
    }

    pub fn to_rtr(&self, a: &RtrAttr) -> Result<(), VerbsError> {
        self.modify(
            "ibv_modify_qp(INIT->RTR)",
            build_rtr(self.qp_type, a),
            || {
                format!(
                    "direct {} QP {:#08x} to remote QPN {:#08x}: the MTU must not exceed the \
                     port's (-m) and on RoCE a valid GID index (-x) is required",
                    self.qp_type.name(),
                    self.qpn(),
                    a.dest_qpn
                )
            },
        )
    }

    pub fn to_rts(&self, a: &RtsAttr) -> Result<(), VerbsError> {
        self.modify(
            "ibv_modify_qp(RTR->RTS)",
            build_rts(self.qp_type, a),
            || {
                format!(
                    "direct {} QP {:#08x} with max_rd_atomic {}; lower -o/--outs or -u",
                    self.qp_type.name(),
                    self.qpn(),
                    a.max_rd_atomic
                )
            },
        )
    }

    /// Its receive queue, posted through libmlx5's `post_recv`: only the SQ
    /// is written directly, the RQ and its (separate) receive CQ stay
    /// libmlx5's (send-lat).
    pub fn recv_queue(&self) -> Result<DirectRecv<'_>, Fail> {
        // SAFETY: the QP is live while self is, and the borrow in the
        // returned value keeps self alive as long as it is used.
        let inner = unsafe { VerbsRecv::from_raw(self.qp.qp()) }.map_err(Fail::verbs)?;
        Ok(DirectRecv {
            inner,
            _h: PhantomData,
        })
    }

    /// Moves to ERR: the NIC flushes outstanding WQEs (teardown).
    pub fn to_err(&self) -> Result<(), VerbsError> {
        let attr = sys::ibv_qp_attr {
            qp_state: sys::IBV_QPS_ERR,
            ..Default::default()
        };
        self.modify("ibv_modify_qp(->ERR)", (attr, sys::IBV_QP_STATE), || {
            format!("direct {} QP {:#08x}", self.qp_type.name(), self.qpn())
        })
    }
}

/// Receives on a direct-path QP ([`DirectQpHandle::recv_queue`]).
pub struct DirectRecv<'h> {
    inner: VerbsRecv,
    _h: PhantomData<&'h DirectQpHandle>,
}

impl RecvQueue for DirectRecv<'_> {
    #[inline]
    fn post_recv(&mut self, wr_id: u64, addr: u64, lkey: u32, len: u32) -> Result<(), PostError> {
        self.inner.post_recv(wr_id, addr, lkey, len)
    }
}

fn qp_type_of(c: Conn) -> QpType {
    match c {
        Conn::Rc => QpType::RC,
        Conn::Uc => QpType::UC,
        Conn::Ud => QpType::UD,
    }
}

/// The direct QP capacities for `p` (perftest's).
pub fn direct_attr(p: &Params) -> DirectQpAttr {
    DirectQpAttr {
        kind: match p.conn {
            Conn::Rc => QpKind::Rc,
            Conn::Uc => QpKind::Uc,
            Conn::Ud => QpKind::Ud,
        },
        max_send_wr: p.tx_depth,
        max_recv_wr: p.rx_depth.max(1),
        max_recv_sge: 1,
        max_inline_data: p.inline_size,
        atomics: p.tool.verb == Verb::Atomic,
    }
}

/// The direct queues of one side, borrowing the resources they live in.
pub struct DirectQueues<'r> {
    pub sqs: Vec<DirectSq<HwMmio>>,
    pub cq: DirectCq,
    _res: PhantomData<&'r Resources>,
}

/// Lets `sq` take inline payload from `addr..addr+len` (the registered buffer).
///
/// # Safety
/// The range must stay readable while the SQ lives.
pub unsafe fn allow_buffer<M: Mmio>(
    sq: &mut DirectSq<M>,
    addr: *const u8,
    len: usize,
) -> Result<(), Fail> {
    // SAFETY: the caller's contract.
    unsafe { sq.allow_inline_source(addr, len) }.map_err(|e| Fail::new(e.to_string()))
}

/// The SQs of `res.direct_qps` (inline allowed from the MR) and one poller on
/// the send CQ with every SQ attached; on UD, QP i sends to `uds[i]` (the
/// address vector libmlx5 built for its AH). Once per resources: the second
/// call is an error.
pub fn open_queues<'r>(
    res: &'r Resources,
    uds: &[Option<UdDest>],
) -> Result<DirectQueues<'r>, Fail> {
    if res.direct_qps.is_empty() {
        return Err(Fail::new(
            "--post direct: the QPs were not created for the direct path (internal: use \
             Resources::create_for); use --post wr-api",
        ));
    }
    if res
        .direct_qps
        .iter()
        .any(|h| h.opened.swap(true, Ordering::AcqRel))
    {
        return Err(Fail::new(
            "--post direct: the direct queues of these QPs were already opened (internal); \
             use --post wr-api",
        ));
    }
    // SAFETY: res.cq is live for 'r (borrowed); it is fresh — only this
    // function, once per resources (flags above), builds a poller on it and
    // the tools build no verbs poller on it when the method is direct.
    let mut cq = unsafe { cq_from_ibv_cq(res.cq.raw()) }.map_err(|e| Fail::new(e.to_string()))?;
    let mut sqs = Vec::with_capacity(res.direct_qps.len());
    for (i, h) in res.direct_qps.iter().enumerate() {
        let transport = match (h.qp_type == QpType::UD, uds.get(i)) {
            (false, _) => Transport::Rc,
            (true, Some(Some(ud))) => {
                // SAFETY: the AH is live (the UdDest holds it) and of this
                // mlx5 context; its AV is copied into the SQ.
                let av = unsafe { ud_av_from_ibv_ah(ud.ah.raw(), ud.remote_qpn, ud.remote_qkey) }
                    .map_err(|e| Fail::new(e.to_string()))?;
                Transport::Ud(av)
            }
            (true, _) => {
                return Err(Fail::new(format!(
                    "--post direct: UD QP {i} has no destination (internal: open the queues \
                     after the address handles); use --post wr-api"
                )))
            }
        };
        // SAFETY: the QP lives as long as `res` ('r); nothing was posted on
        // it (fresh; handed out once, see `opened`), the handle has no
        // libmlx5 post path, and it sits on its own thread-domain UAR.
        let mut sq = unsafe { sq_from_ibv_qp(h.qp.qp(), transport) }
            .map_err(|e| Fail::new(e.to_string()))?;
        sq.set_bf_policy(h.bf_policy);
        // SAFETY: the MR's buffer is owned by `res` and outlives the SQ ('r).
        unsafe { allow_buffer(&mut sq, res.mr.as_ptr(), res.mr.len())? };
        cq.attach(&sq);
        sqs.push(sq);
    }
    Ok(DirectQueues {
        sqs,
        cq,
        _res: PhantomData,
    })
}

/// One message size with the direct method: the bw loop over `sqs` (each
/// attached to `cq`), the outcome and the report row. The queues may be
/// reused for the next size (the loop drains them in iteration mode).
pub fn run_size<M: Mmio>(
    p: &Params,
    base: &Geometry,
    size: u64,
    targets: &[QpTarget],
    sqs: &mut [DirectSq<M>],
    cq: &mut DirectCq,
    clock: &Clock,
) -> Result<SizeRun, Fail> {
    measure_size::<DirectSq<M>, DirectCq>(p, base, size, targets, sqs, cq, clock)
}
