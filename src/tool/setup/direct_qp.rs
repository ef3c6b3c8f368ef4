//! The QPs of `--post direct`: [`DirectQpHandle`], a QP created through
//! mlx5dv ([`DirectQpHandle::create_all`]: own UAR via thread + parent
//! domain, scatter-to-CQE off so small READ/atomic results land in the
//! buffer, `sq_sig_all` 0), moved through INIT/RTR/RTS with the very
//! attribute builders verbs QPs use (`verbs::qp::build_*`). It has no post
//! method of its own: nothing can post on it (send or receive) through
//! libmlx5. Set-up
//! (`setup::Resources`) creates them; `direct` opens their queues.

use std::marker::PhantomData;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::cli::params::{Conn, Params, Verb};
use crate::mlx5::device::{rq_from_ibv_qp, DirectQp, HwSteps};
use crate::mlx5::env::{BfPolicy, Mlx5Env};
use crate::mlx5::recv::RecvRing;
use crate::mlx5::rq::DirectRq;
use crate::mlx5::setup::{set_up, DirectQpAttr, QpKind, SetupFailure};
use crate::mlx5::srq::SrqPort;
use crate::post::{PostError, RecvList, RecvQueue};
use crate::sys;
use crate::tool::common::fail::Fail;
use crate::verbs::error::errno_of;
use crate::verbs::qp::{build_init, build_rtr, build_rts, query_raw};
use crate::verbs::{CmQp, Cq, InitAttr, Pd, QpType, RtrAttr, RtsAttr, Srq, VerbsError};

/// A direct-path QP with what it was created on. Fields drop in order: the
/// QP (with its parent domain and thread domain) before PD and CQs.
pub struct DirectQpHandle {
    pub(crate) qp: DirectQp,
    pub(crate) qp_type: QpType,
    /// Set once its SQ was handed out ([`crate::tool::session::direct::open_queues`]): a second SQ would
    /// post into the same ring from index 0.
    pub(crate) opened: AtomicBool,
    /// Set once its RQ was handed out ([`DirectQpHandle::direct_rq`]).
    rq_opened: AtomicBool,
    /// How its doorbell rings (libmlx5's environment, read at set-up).
    pub(crate) bf_policy: BfPolicy,
    _send_cq: Arc<Cq>,
    _recv_cq: Arc<Cq>,
    _srq: Option<Arc<Srq>>,
    _pd: Arc<Pd>,
}

// SAFETY: the handle offers only QP control verbs (modify), which are
// thread-safe in libibverbs; posting goes through a DirectSq that
// `direct::open_queues` hands out once.
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
        (send_cqs, recv_cq): (&[Arc<Cq>], &Arc<Cq>),
        srq: Option<&Arc<Srq>>,
        p: &Params,
        env: &Mlx5Env,
    ) -> Result<Vec<DirectQpHandle>, SetupFailure> {
        // QP i sends on send_cqs[i % n]: one CQ, or one per --threads worker.
        let send_cq = &send_cqs[0];
        let attr = direct_attr(p);
        // SAFETY: context, PD, CQs and SRQ are live objects of one context;
        // every handle keeps them (Arcs) alive until after its QP is destroyed.
        let mut steps =
            unsafe { HwSteps::new(pd.context().raw(), pd.raw(), send_cq.raw(), recv_cq.raw()) };
        if let Some(srq) = srq {
            // SAFETY: as above.
            steps = unsafe { steps.with_srq(srq.raw()) };
        }
        if send_cqs.len() > 1 {
            let raw = send_cqs.iter().map(|c| c.raw()).collect();
            // SAFETY: as above; each handle keeps its own send CQ alive.
            steps = unsafe { steps.with_thread_cqs(raw) };
        }
        let done = set_up(&mut steps, p.num_qps as usize, &attr, env)?;
        Ok(done
            .qps
            .into_iter()
            .enumerate()
            .map(|(i, (qp, _dv))| DirectQpHandle {
                qp,
                qp_type: qp_type_of(p.conn),
                opened: AtomicBool::new(false),
                rq_opened: AtomicBool::new(false),
                bf_policy: env.bf_policy(),
                _send_cq: Arc::clone(&send_cqs[i % send_cqs.len()]),
                _recv_cq: Arc::clone(recv_cq),
                _srq: srq.cloned(),
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

    /// How the hints name this QP: "direct RC QP 0x000123".
    fn label(&self) -> String {
        format!("direct {} QP {:#08x}", self.qp_type.name(), self.qpn())
    }

    pub fn to_init(&self, a: &InitAttr) -> Result<(), VerbsError> {
        self.modify(
            "ibv_modify_qp(RESET->INIT)",
            build_init(self.qp_type, a),
            || {
                format!(
                    "{}: port {} must exist and pkey index {} be valid; check -i",
                    self.label(),
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
                    "{} to remote QPN {:#08x}: the MTU must not exceed the port's (-m) and on \
                     RoCE a valid GID index (-x) is required",
                    self.label(),
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
                    "{} with max_rd_atomic {}; lower -o/--outs or -u",
                    self.label(),
                    a.max_rd_atomic
                )
            },
        )
    }

    /// Its receive queue, posted directly (`mlx5::rq`), once: a second RQ
    /// would post into the same ring from slot 0. Its completions come
    /// through a direct poller of the receive CQ the RQ is attached to.
    pub fn direct_rq(&self) -> Result<DirectRecv<'_>, Fail> {
        self.claim_rq()?;
        // SAFETY: the QP is live while self is (the borrow in DirectRecv),
        // its RQ is fresh (handed out once, above) and nothing in rdmaperf
        // posts to a direct QP's RQ through libmlx5.
        let rq = unsafe { rq_from_ibv_qp(self.qp.qp()) }.map_err(|e| Fail::new(e.to_string()))?;
        Ok(DirectRecv {
            port: Port::Rq(rq),
            qpn: self.qpn(),
            _h: PhantomData,
        })
    }

    /// Its receives with `--use-srq`: `port` on the SRQ it was created on
    /// (`tool::session::direct::open_recv` opens the SRQ once for all).
    pub fn on_srq(&self, port: SrqPort) -> Result<DirectRecv<'_>, Fail> {
        self.claim_rq()?;
        Ok(DirectRecv {
            port: Port::Srq(port),
            qpn: self.qpn(),
            _h: PhantomData,
        })
    }

    /// Whether its receive side was handed out already.
    pub fn rq_claimed(&self) -> bool {
        self.rq_opened.load(Ordering::Acquire)
    }

    /// Marks its receive side handed out; the second time is an error.
    fn claim_rq(&self) -> Result<(), Fail> {
        if self.rq_opened.swap(true, Ordering::AcqRel) {
            return Err(Fail::new(format!(
                "--post direct: the receive queue of QP {:#08x} was already opened (internal); \
                 use --post wr-api",
                self.qpn()
            )));
        }
        Ok(())
    }

    /// `-g`: attaches the (UD) QP to multicast group `mgid`; destroying
    /// the QP detaches it.
    pub fn attach_mcast(&self, mgid: [u8; 16], mlid: u16) -> Result<(), VerbsError> {
        let gid = sys::ibv_gid { raw: mgid };
        // SAFETY: the QP is live while self is; `gid` is a valid ibv_gid the
        // call only reads.
        let ret = unsafe { sys::ibv_attach_mcast(self.qp.qp(), &gid, mlid) };
        if ret != 0 {
            return Err(VerbsError::new(
                "ibv_attach_mcast",
                errno_of(ret),
                format!(
                    "the device refused to attach direct UD QP {:#08x} to the multicast group",
                    self.qpn()
                ),
            ));
        }
        Ok(())
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

/// `-R`: the CM moves a direct QP to RTS like a verbs one (its attributes
/// applied by `ibv_modify_qp`, read back by `ibv_query_qp`).
impl CmQp for DirectQpHandle {
    fn qp_num(&self) -> u32 {
        self.qpn()
    }

    fn apply_attr(
        &self,
        verb: &'static str,
        attr: sys::ibv_qp_attr,
        mask: u32,
    ) -> Result<(), VerbsError> {
        self.modify(verb, (attr, mask), || {
            format!(
                "direct {} QP {:#08x}: the attributes came from the RDMA CM (mask {mask:#x}); \
                 check the route to the peer",
                self.qp_type.name(),
                self.qpn()
            )
        })
    }

    fn query_attr(&self, mask: u32) -> Result<sys::ibv_qp_attr, VerbsError> {
        // SAFETY: the QP is live while self is.
        unsafe { query_raw(self.qp.qp(), mask) }
    }
}

/// A direct-path QP's receive queue: its own RQ
/// ([`DirectQpHandle::direct_rq`]) or its port on the shared SRQ
/// ([`DirectQpHandle::on_srq`]), borrowing the QP it receives for.
pub struct DirectRecv<'h> {
    port: Port,
    qpn: u32,
    _h: PhantomData<&'h DirectQpHandle>,
}

/// Where a QP's receives go. RQ or SRQ is fixed per test; the match per
/// post is one predictable branch.
enum Port {
    Rq(DirectRq),
    Srq(SrqPort),
}

impl DirectRecv<'_> {
    /// The QP number and ring record a direct poller completes these
    /// receives from ([`crate::mlx5::DirectCq::attach_recv`]).
    pub fn binding(&self) -> (u32, &Arc<RecvRing>) {
        match &self.port {
            Port::Rq(rq) => (self.qpn, rq.ring()),
            Port::Srq(s) => (self.qpn, s.ring()),
        }
    }
}

impl RecvQueue for DirectRecv<'_> {
    #[inline(always)]
    fn post_recv(&mut self, wr_id: u64, addr: u64, lkey: u32, len: u32) -> Result<(), PostError> {
        match &mut self.port {
            Port::Rq(rq) => rq.post_recv(wr_id, addr, lkey, len),
            Port::Srq(s) => s.post_recv(wr_id, addr, lkey, len),
        }
    }
    #[inline(always)]
    fn post_recv_list(&mut self, list: &RecvList<impl Fn(usize) -> u64>) -> Result<(), PostError> {
        match &mut self.port {
            Port::Rq(rq) => rq.post_recv_list(list),
            Port::Srq(s) => s.post_recv_list(list),
        }
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
