//! `--post direct` in the tools.
//!
//! - the QPs themselves (`direct_qp::DirectQpHandle`, created at set-up) live in
//!   `direct_qp`, below `setup`; this module runs on built resources.
//! - [`open_queues`]: once per set of QPs, the [`DirectSq`]s and one
//!   [`DirectCq`] on the send CQ (all SQs attached). The CQ is then polled
//!   only by that poller, never by libmlx5.
//! - [`open_recv`]: once, before the first receive, every QP's RQ and one
//!   [`DirectCq`] on the receive CQ (all RQs attached).
//! - [`run_size`]: one message size over already-built direct queues; the
//!   tool calls it with hardware queues, the model tests with model queues.

use std::marker::PhantomData;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use super::bw_measure::measure_size;
use super::bw_result::SizeRun;
use crate::cli::params::Params;
use crate::clock::Clock;
use crate::mlx5::device::{cq_from_ibv_cq, sq_from_ibv_qp, srq_from_ibv_srq, ud_av_from_ibv_ah};
use crate::mlx5::recv_cq::RecvCq;
use crate::mlx5::{DirectCq, DirectSq, HwMmio, Mmio, Transport};
use crate::post::event_cq::{Arm, EventCq};
use crate::post::CompletionQueue;
use crate::run::bw::QpTarget;
use crate::run::geometry::Geometry;
use crate::tool::common::fail::Fail;
use crate::tool::setup::direct_qp::DirectRecv;
use crate::tool::setup::resources::Resources;
use crate::verbs::{Cq, QpType, UdDest, VerbsError};

/// The direct queues of one side, borrowing the resources they live in.
pub struct DirectQueues<'r> {
    pub sqs: Vec<DirectSq<HwMmio>>,
    /// The send CQ's direct poller, behind `-e`'s events (a pass-through
    /// without them).
    pub cq: EventCq<DirectCq>,
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
/// address vector libmlx5 built for its AH). With `events` (`-e`) the poller
/// sleeps on the CQ's channel, armed by the direct CQ itself. Once per
/// resources: the second call is an error.
pub fn open_queues<'r>(
    res: &'r Resources,
    uds: &[Option<UdDest>],
    events: bool,
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
    for i in 0..res.direct_qps.len() {
        let sq = open_sq(res, i, transport_of(res, i, uds)?)?;
        cq.attach(sq.progress());
        sqs.push(sq);
    }
    Ok(DirectQueues {
        sqs,
        cq: EventCq::new(cq, &res.cq, events).map_err(Fail::verbs)?,
        _res: PhantomData,
    })
}

/// `--threads`: worker `t`'s SQs (the QPs `qps`, RC/UC) and a direct
/// poller of its own CQ (`res.thread_cqs[t]`, which only those QPs send
/// on), built inside the worker. Each QP's SQ is handed out once.
pub fn open_thread_queues(
    res: &Resources,
    t: usize,
    qps: &[usize],
) -> Result<(Vec<DirectSq<HwMmio>>, DirectCq), Fail> {
    let tcq = res.thread_cqs.get(t).ok_or_else(|| {
        Fail::new(format!(
            "internal: no CQ for worker thread {t}; please report this"
        ))
    })?;
    for &q in qps {
        let h = res.direct_qps.get(q).ok_or_else(|| {
            Fail::new(format!(
                "internal: worker {t} names QP {q}, which has no direct QP"
            ))
        })?;
        if h.opened.swap(true, Ordering::AcqRel) {
            return Err(Fail::new(format!(
                "--post direct: QP {q}'s SQ was already opened (internal); use --post wr-api"
            )));
        }
    }
    // SAFETY: the thread CQ is live while `res` is (the caller's borrow
    // spans the worker); only worker t polls it, through this poller, and
    // nothing else was built on it (its QPs' SQs were unclaimed above).
    let mut cq = unsafe { cq_from_ibv_cq(tcq.raw()) }.map_err(|e| Fail::new(e.to_string()))?;
    let mut sqs = Vec::with_capacity(qps.len());
    for &q in qps {
        let sq = open_sq(res, q, Transport::Rc)?;
        cq.attach(sq.progress());
        sqs.push(sq);
    }
    Ok((sqs, cq))
}

/// How QP `i` addresses its peer: connected, or on UD the address vector
/// libmlx5 built for `uds[i]`'s AH.
fn transport_of(res: &Resources, i: usize, uds: &[Option<UdDest>]) -> Result<Transport, Fail> {
    match (res.direct_qps[i].qp_type == QpType::UD, uds.get(i)) {
        (false, _) => Ok(Transport::Rc),
        (true, Some(Some(ud))) => {
            // SAFETY: the AH is live (the UdDest holds it) and of this mlx5
            // context; its AV is copied into the SQ.
            let av = unsafe { ud_av_from_ibv_ah(ud.ah.raw(), ud.remote_qpn, ud.remote_qkey) }
                .map_err(|e| Fail::new(e.to_string()))?;
            Ok(Transport::Ud(av))
        }
        (true, _) => Err(Fail::new(format!(
            "--post direct: UD QP {i} has no destination (internal: open the queues after the \
             address handles); use --post wr-api"
        ))),
    }
}

/// QP `i`'s direct SQ, inline payload allowed from its own buffer. The
/// caller has claimed the QP's SQ (`opened`).
fn open_sq(res: &Resources, i: usize, transport: Transport) -> Result<DirectSq<HwMmio>, Fail> {
    let h = &res.direct_qps[i];
    // SAFETY: the QP lives as long as `res`, which the caller's borrow keeps for the SQ's
    // life; nothing was posted on it (fresh; claimed once, see `opened`), the handle has
    // no libmlx5 post path, and it sits on its own thread-domain UAR.
    let sq = unsafe { sq_from_ibv_qp(h.qp.qp(), transport) };
    let mut sq = sq.map_err(|e| Fail::new(e.to_string()))?;
    sq.set_bf_policy(h.bf_policy);
    // Inline payload comes from this QP's own buffer (its MR with
    // --mr_per_qp, else the shared one).
    let (mr, _) = res.qp_mem(i);
    // Device memory is never an inline source (GPU runs inline nothing:
    // inline 0, or an explicit -I below every size).
    if let Some(ptr) = mr.host_ptr() {
        // SAFETY: the MR's buffer is owned by `res` and outlives the SQ.
        unsafe { allow_buffer(&mut sq, ptr, mr.len())? };
    }
    Ok(sq)
}

/// The receive side of `--post direct`: each QP's RQ (or, with
/// `--use-srq`, its port on the one SRQ) posted directly, and one direct
/// poller on the receive CQ with every QP's receive ring attached.
pub struct DirectRx<'r> {
    pub rqs: Vec<DirectRecv<'r>>,
    /// Behind `-e`'s events, as [`DirectQueues::cq`]; with an SRQ it posts
    /// receives the NIC dropped on an ODP page fault again (`RecvCq`).
    pub cq: EventCq<RecvCq>,
}

/// The direct receive side of `res`'s direct QPs (SEND tests: the receive
/// CQ is apart from the send CQ, so each poller sees only its own kind of
/// CQE). `events`: as [`open_queues`]. Once per resources, before the first
/// receive is posted.
pub fn open_recv(res: &Resources, events: bool) -> Result<DirectRx<'_>, Fail> {
    if res.direct_qps.is_empty() {
        return Err(Fail::new(
            "--post direct: the QPs were not created for the direct path (internal: use \
             Resources::create_for); use --post wr-api",
        ));
    }
    if Arc::ptr_eq(&res.cq, &res.rcq) {
        return Err(Fail::new(
            "internal: --post direct receives need a receive CQ apart from the send CQ; \
             please report this, and use --post wr-api",
        ));
    }
    let (rqs, repost) = match &res.srq {
        None => (
            res.direct_qps
                .iter()
                .map(|h| h.direct_rq())
                .collect::<Result<Vec<_>, _>>()?,
            None,
        ),
        Some(srq) => {
            if res.direct_qps.iter().any(|h| h.rq_claimed()) {
                return Err(Fail::new(
                    "--post direct: the SRQ was already opened (internal); use --post wr-api",
                ));
            }
            // SAFETY: the SRQ lives in `res` (and each handle keeps it) as long as the
            // ports the borrow of `res` bounds; nothing was posted to it (no receive side
            // was claimed, checked above); rdmaperf posts to it only through these ports.
            let direct = unsafe { srq_from_ibv_srq(srq.raw()) };
            let direct = direct.map_err(|e| Fail::new(e.to_string()))?;
            // One port per QP, and one for the CQ's ODP reposts.
            let mut ports = direct.share(res.direct_qps.len() + 1);
            let repost = ports.pop();
            let rqs = res
                .direct_qps
                .iter()
                .zip(ports)
                .map(|(h, port)| h.on_srq(port))
                .collect::<Result<Vec<_>, _>>()?;
            (rqs, repost)
        }
    };
    // SAFETY: res.rcq is live while the borrow of `res` in the RQs is; it is fresh: only
    // this function builds a poller on it (the RQs above were opened once, so a second
    // call fails before here) and the tools build no verbs poller on it under direct.
    let mut cq = unsafe { cq_from_ibv_cq(res.rcq.raw()) }.map_err(|e| Fail::new(e.to_string()))?;
    for rq in &rqs {
        let (qpn, ring) = rq.binding();
        cq.attach_recv(qpn, ring);
    }
    let cq = EventCq::new(RecvCq::new(cq, repost), &res.rcq, events).map_err(Fail::verbs)?;
    Ok(DirectRx { rqs, cq })
}

/// `-e` on a direct CQ: the arm doorbell from its own consumer index and
/// arm sequence number (`DirectCq::arm` on the CQ's UAR page); libmlx5's
/// `ibv_req_notify_cq` would arm with its consumer index, which a direct
/// poller never advances.
impl Arm for DirectCq {
    fn arm(&mut self, _cq: &Cq) -> Result<(), VerbsError> {
        DirectCq::arm(self, &HwMmio, false)
            .map_err(|e| VerbsError::new("mlx5 CQ arm (direct)", 0, e.to_string()))
    }

    fn event_delivered(&mut self) {
        self.event_consumed();
    }
}

/// `-e` on the receive CQ: arms its direct poller.
impl Arm for RecvCq {
    fn arm(&mut self, cq: &Cq) -> Result<(), VerbsError> {
        Arm::arm(self.direct(), cq)
    }

    fn event_delivered(&mut self) {
        self.direct().event_consumed();
    }
}

/// One message size with the direct method: the bw loop over `sqs` (each
/// attached to `cq`), the outcome and the report row. The queues may be
/// reused for the next size (the loop drains them in iteration mode).
pub fn run_size<M: Mmio, C: CompletionQueue>(
    p: &Params,
    base: &Geometry,
    size: u64,
    targets: &[QpTarget],
    sqs: &mut [DirectSq<M>],
    cq: &mut C,
    clock: &Clock,
) -> Result<SizeRun, Fail> {
    measure_size::<DirectSq<M>, C>(p, base, size, targets, sqs, cq, clock, None)
}
