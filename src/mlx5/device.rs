//! Real-device set-up for the direct path (control path; needs an mlx5 NIC,
//! so it compiles here but only runs on hardware):
//!
//! - selection: `--post auto` picks direct when `mlx5dv_is_supported(dev)`;
//!   `--post direct` on another device is a clear error ([`select`]);
//! - QP creation ([`HwSteps`], driven by `super::setup::set_up`): a thread domain + parent domain per
//!   QP (a dedicated UAR, so the BlueFlame register and its toggle are the
//!   SQ's alone and need no lock), `mlx5dv_create_qp` with scatter-to-CQE
//!   disabled (small READ/atomic results must land in the user buffer, not
//!   in the CQE), `sq_sig_all = 0`, and explicit `send_ops_flags` so libmlx5
//!   does not size every WQE for MW/UMR (which inflates the SQ 4x);
//! - queues from ibv objects via `mlx5dv_init_obj` ([`sq_from_ibv_qp`],
//!   [`rq_from_ibv_qp`], [`srq_from_ibv_srq`], [`cq_from_ibv_cq`]). Never post or poll the same QP/CQ through libmlx5
//!   as well: its indices would go stale.

use core::ptr;
use std::ffi::CStr;

use super::cq::DirectCq;
use super::error::DirectError;
use super::mmio::HwMmio;
use super::rq::DirectRq;
use super::seg::DatagramSeg;
use super::sq::{DirectSq, Transport};
use super::srq::DirectSrq;
use crate::sys;

/// How the user asked for the direct path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DirectRequest {
    /// `--post auto`: direct if the device supports it, else another method.
    Auto,
    /// `--post direct`: direct or a clear error.
    Required,
}

/// Decides whether to use the direct path on `device` (whose
/// `mlx5dv_is_supported` result is `supported`): `Ok(true)` direct,
/// `Ok(false)` fall back, `Err` when direct was required but is unavailable.
pub fn select(request: DirectRequest, device: &str, supported: bool) -> Result<bool, DirectError> {
    match (request, supported) {
        (_, true) => Ok(true),
        (DirectRequest::Auto, false) => Ok(false),
        (DirectRequest::Required, false) => Err(DirectError::NotMlx5 {
            device: device.to_owned(),
        }),
    }
}

/// The device's name, for messages.
///
/// # Safety
/// `dev` must be a valid `ibv_device` (or null).
pub unsafe fn device_name(dev: *mut sys::ibv_device) -> String {
    if dev.is_null() {
        return "<unknown device>".to_owned();
    }
    // SAFETY: dev is valid (caller); the name is a NUL-terminated string
    // owned by libibverbs for the device's lifetime.
    unsafe {
        let p = sys::ibv_get_device_name(dev);
        if p.is_null() {
            "<unnamed device>".to_owned()
        } else {
            CStr::from_ptr(p).to_string_lossy().into_owned()
        }
    }
}

/// [`select`] for a real device.
///
/// # Safety
/// `dev` must be a valid `ibv_device`.
pub unsafe fn select_for_device(
    request: DirectRequest,
    dev: *mut sys::ibv_device,
) -> Result<bool, DirectError> {
    // SAFETY: dev is valid (caller contract).
    let supported = unsafe { sys::mlx5dv_is_supported(dev) };
    // SAFETY: as above.
    select(request, &unsafe { device_name(dev) }, supported)
}

fn last_errno() -> i32 {
    std::io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

pub use super::setup::{DirectQpAttr, QpKind};

/// A QP created for the direct path, with the thread domain and parent
/// domain that give it a dedicated UAR. Destroys all three on drop.
pub struct DirectQp {
    qp: *mut sys::ibv_qp,
    parent: *mut sys::ibv_pd,
    td: *mut sys::ibv_td,
}

impl DirectQp {
    /// The QP (modify it to RTS with the usual verbs).
    pub fn qp(&self) -> *mut sys::ibv_qp {
        self.qp
    }
    /// The parent-domain PD the QP was created on.
    pub fn parent_pd(&self) -> *mut sys::ibv_pd {
        self.parent
    }
}

impl Drop for DirectQp {
    fn drop(&mut self) {
        // SAFETY: the three objects were created by the HwSteps set-up and are
        // destroyed once, children first; null ones are skipped.
        unsafe {
            if !self.qp.is_null() {
                sys::ibv_destroy_qp(self.qp);
            }
            if !self.parent.is_null() {
                sys::ibv_dealloc_pd(self.parent);
            }
            if !self.td.is_null() {
                sys::ibv_dealloc_td(self.td);
            }
        }
    }
}

/// The set-up steps on a real device (see `super::setup`): a thread domain
/// and parent domain per QP over `pd`, `mlx5dv_create_qp` on the CQs, and
/// `mlx5dv_init_obj` for each QP and the send CQ.
pub struct HwSteps {
    ctx: *mut sys::ibv_context,
    pd: *mut sys::ibv_pd,
    send_cq: *mut sys::ibv_cq,
    recv_cq: *mut sys::ibv_cq,
    /// `--use-srq`: the QPs receive from it (null: each has its RQ).
    srq: *mut sys::ibv_srq,
    /// `--threads`: QP i sends on `thread_cqs[i % len]` (empty: on `send_cq`).
    thread_cqs: Vec<*mut sys::ibv_cq>,
    /// QPs created so far (which thread CQ the next one takes).
    created: usize,
}

impl HwSteps {
    /// # Safety
    /// `ctx`, `pd`, `send_cq`, `recv_cq` must be valid objects of one
    /// context and outlive every QP the steps create.
    pub unsafe fn new(
        ctx: *mut sys::ibv_context,
        pd: *mut sys::ibv_pd,
        send_cq: *mut sys::ibv_cq,
        recv_cq: *mut sys::ibv_cq,
    ) -> Self {
        Self {
            ctx,
            pd,
            send_cq,
            recv_cq,
            srq: ptr::null_mut(),
            thread_cqs: Vec::new(),
            created: 0,
        }
    }

    /// `--threads`: QP i sends on `cqs[i % cqs.len()]` (one CQ per worker
    /// thread, each polled by that thread alone).
    ///
    /// # Safety
    /// Every CQ must be a valid CQ of the same context that outlives every
    /// QP the steps create.
    pub unsafe fn with_thread_cqs(self, cqs: Vec<*mut sys::ibv_cq>) -> Self {
        Self {
            thread_cqs: cqs,
            ..self
        }
    }

    /// The send CQ of the next QP.
    fn next_send_cq(&self) -> *mut sys::ibv_cq {
        match self.thread_cqs.len() {
            0 => self.send_cq,
            n => self.thread_cqs[self.created % n],
        }
    }

    /// The QPs receive from `srq` instead of an RQ of their own.
    ///
    /// # Safety
    /// `srq` must be a valid SRQ of the same context that outlives every
    /// QP the steps create.
    pub unsafe fn with_srq(self, srq: *mut sys::ibv_srq) -> Self {
        Self { srq, ..self }
    }
}

/// `errno` after a verbs call returned NULL, never 0 (a provider that
/// forgot to set it still reads as a failure).
fn null_errno() -> i32 {
    match last_errno() {
        0 => libc::EIO,
        e => e,
    }
}

/// `send_ops_flags` and the ibv QP type for `attr` (explicit flags keep
/// libmlx5 from sizing every WQE for MW/UMR, which inflates the SQ 4x).
fn qp_ops(attr: &DirectQpAttr) -> (u64, u32) {
    let mut ops = (sys::IBV_QP_EX_WITH_SEND | sys::IBV_QP_EX_WITH_SEND_WITH_IMM) as u64;
    let qp_type = match attr.kind {
        QpKind::Rc | QpKind::Uc => {
            ops |=
                (sys::IBV_QP_EX_WITH_RDMA_WRITE | sys::IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM) as u64;
            if attr.kind == QpKind::Rc {
                ops |= sys::IBV_QP_EX_WITH_RDMA_READ as u64;
                if attr.atomics {
                    ops |= (sys::IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP
                        | sys::IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD)
                        as u64;
                }
                sys::IBV_QPT_RC
            } else {
                sys::IBV_QPT_UC
            }
        }
        QpKind::Ud => sys::IBV_QPT_UD,
    };
    (ops, qp_type)
}

impl super::setup::DirectSteps for HwSteps {
    type Qp = DirectQp;

    fn begin(&mut self) -> DirectQp {
        DirectQp {
            qp: ptr::null_mut(),
            parent: ptr::null_mut(),
            td: ptr::null_mut(),
        }
    }

    fn alloc_td(&mut self, out: &mut DirectQp) -> Result<(), i32> {
        let mut td_attr = sys::ibv_td_init_attr { comp_mask: 0 };
        // SAFETY: valid context (constructor contract) and attribute struct.
        out.td = unsafe { sys::ibv_alloc_td(self.ctx, &mut td_attr) };
        if out.td.is_null() {
            return Err(null_errno());
        }
        Ok(())
    }

    fn alloc_parent_domain(&mut self, out: &mut DirectQp) -> Result<(), i32> {
        let mut pd_attr = sys::ibv_parent_domain_init_attr {
            pd: self.pd,
            td: out.td,
            comp_mask: 0,
            alloc: None,
            free: None,
            pd_context: ptr::null_mut(),
        };
        // SAFETY: valid context and pd (contract), td allocated just before.
        out.parent = unsafe { sys::ibv_alloc_parent_domain(self.ctx, &mut pd_attr) };
        if out.parent.is_null() {
            return Err(null_errno());
        }
        Ok(())
    }

    fn create_qp(&mut self, out: &mut DirectQp, attr: &DirectQpAttr) -> Result<(), i32> {
        let (ops, qp_type) = qp_ops(attr);
        let mut qp_attr = sys::ibv_qp_init_attr_ex {
            send_cq: self.next_send_cq(),
            recv_cq: self.recv_cq,
            qp_type,
            sq_sig_all: 0,
            comp_mask: sys::IBV_QP_INIT_ATTR_PD | sys::IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
            pd: out.parent,
            send_ops_flags: ops,
            srq: self.srq,
            ..Default::default()
        };
        // With an SRQ the QP has no RQ of its own (libmlx5 sizes none).
        let own_rq = self.srq.is_null();
        qp_attr.cap.max_send_wr = attr.max_send_wr;
        qp_attr.cap.max_recv_wr = if own_rq { attr.max_recv_wr } else { 0 };
        qp_attr.cap.max_send_sge = 1;
        qp_attr.cap.max_recv_sge = if own_rq { attr.max_recv_sge } else { 0 };
        qp_attr.cap.max_inline_data = attr.max_inline_data;
        // Scatter-to-CQE off: small READ/atomic results and received SENDs
        // must land in the buffers, not in the CQE this poller ignores.
        let mut dv_attr = sys::mlx5dv_qp_init_attr {
            comp_mask: sys::MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS as u64,
            create_flags: sys::MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE,
            ..Default::default()
        };
        // SAFETY: valid context (contract) and fully initialised attributes;
        // the parent domain was allocated by the previous step.
        out.qp = unsafe { sys::mlx5dv_create_qp(self.ctx, &mut qp_attr, &mut dv_attr) };
        if out.qp.is_null() {
            return Err(null_errno());
        }
        self.created += 1;
        Ok(())
    }

    fn init_obj_qp(&mut self, qp: &DirectQp) -> Result<sys::mlx5dv_qp, i32> {
        // SAFETY: the QP was created by the previous step.
        unsafe { dv_of(qp.qp, sys::mlx5dv_qp::default()) }
    }

    fn init_obj_cq(&mut self) -> Result<sys::mlx5dv_cq, i32> {
        // SAFETY: valid CQ (constructor contract).
        unsafe { dv_of(self.send_cq, sys::mlx5dv_cq::default()) }
    }

    fn init_obj_recv_cq(&mut self) -> Option<Result<sys::mlx5dv_cq, i32>> {
        let cq = self.recv_cq;
        // SAFETY: valid CQ (constructor contract).
        (cq != self.send_cq).then(|| unsafe { dv_of(cq, sys::mlx5dv_cq::default()) })
    }

    fn init_obj_srq(&mut self) -> Option<Result<sys::mlx5dv_srq, i32>> {
        let srq = self.srq;
        // SAFETY: valid SRQ (`with_srq` contract). Only reads libmlx5's
        // state (head, tail, stride).
        (!srq.is_null()).then(|| unsafe { dv_of(srq, sys::mlx5dv_srq::default()) })
    }
}

/// An object `mlx5dv_init_obj` describes: its out-struct (`Self`), the
/// verbs object it describes (`In`), and where both go in `mlx5dv_obj`.
trait DvObj {
    type In;
    const KIND: sys::mlx5dv_obj_type;
    fn link(obj: &mut sys::mlx5dv_obj, obj_in: *mut Self::In, out: &mut Self);
}

/// The four kinds used here; each links its own field of `mlx5dv_obj`.
macro_rules! dv_obj {
    ($($out:ident for $in:ident at $field:ident, $kind:ident;)*) => {$(
        impl DvObj for sys::$out {
            type In = sys::$in;
            const KIND: sys::mlx5dv_obj_type = sys::$kind;
            fn link(obj: &mut sys::mlx5dv_obj, obj_in: *mut sys::$in, out: &mut Self) {
                obj.$field.in_ = obj_in;
                obj.$field.out = out;
            }
        }
    )*};
}

dv_obj! {
    mlx5dv_qp for ibv_qp at qp, MLX5DV_OBJ_QP;
    mlx5dv_cq for ibv_cq at cq, MLX5DV_OBJ_CQ;
    mlx5dv_srq for ibv_srq at srq, MLX5DV_OBJ_SRQ;
    mlx5dv_ah for ibv_ah at ah, MLX5DV_OBJ_AH;
}

/// `mlx5dv_init_obj` for one object into `dv` (its `comp_mask` is in/out:
/// zero, or the optional fields asked for); the errno on failure.
///
/// # Safety
/// `obj_in` must be a valid object of its kind.
unsafe fn dv_of<T: DvObj>(obj_in: *mut T::In, mut dv: T) -> Result<T, i32> {
    let mut obj = sys::mlx5dv_obj::default();
    T::link(&mut obj, obj_in, &mut dv);
    // SAFETY: a valid object (caller); obj points to `dv`, live across the call.
    let rc = unsafe { sys::mlx5dv_init_obj(&mut obj, T::KIND as u64) };
    if rc != 0 {
        return Err(rc.abs());
    }
    Ok(dv)
}

/// `mlx5dv_init_obj` failed with `errno` on an object of context `ctx`.
///
/// # Safety
/// `ctx` must be a valid context (a valid object's).
unsafe fn init_obj_failed(ctx: *mut sys::ibv_context, errno: i32) -> DirectError {
    DirectError::InitObj {
        // SAFETY: a valid context has a valid device.
        device: unsafe { device_name((*ctx).device) },
        errno,
    }
}

/// A direct SQ for a QP whose `mlx5dv_init_obj` description is `dv` (from
/// [`super::setup::set_up`]).
///
/// # Safety
/// As [`sq_from_ibv_qp`]; `dv` must describe `qp`.
pub unsafe fn sq_from_dv(
    qp: *mut sys::ibv_qp,
    dv: &sys::mlx5dv_qp,
    transport: Transport,
) -> Result<DirectSq<HwMmio>, DirectError> {
    // SAFETY: the caller's contract.
    unsafe { DirectSq::from_dv(dv, (*qp).qp_num, transport, HwMmio, None) }
}

/// A direct SQ for a QP created by libmlx5 (e.g. through [`HwSteps`]).
///
/// # Safety
/// `qp` must be a valid QP that outlives the SQ, fresh (nothing posted since
/// creation/RESET), never posted to through libmlx5 afterwards, and on a
/// dedicated UAR (thread-domain parent PD).
pub unsafe fn sq_from_ibv_qp(
    qp: *mut sys::ibv_qp,
    transport: Transport,
) -> Result<DirectSq<HwMmio>, DirectError> {
    // SAFETY: the caller's contract (a valid QP).
    let dv = unsafe { qp_dv(qp) }?;
    // SAFETY: dv was filled by mlx5dv_init_obj; the other requirements are
    // this function's own contract.
    unsafe { DirectSq::from_dv(&dv, (*qp).qp_num, transport, HwMmio, None) }
}

/// A direct RQ for a QP created by libmlx5 without an SRQ.
///
/// # Safety
/// `qp` must be a valid QP that outlives the RQ, with nothing posted to its
/// RQ yet and nothing posted through `ibv_post_recv` afterwards.
pub unsafe fn rq_from_ibv_qp(qp: *mut sys::ibv_qp) -> Result<DirectRq, DirectError> {
    // SAFETY: the caller's contract (a valid QP).
    let dv = unsafe { qp_dv(qp) }?;
    // SAFETY: dv describes qp's RQ; lifetime and exclusive posting are the
    // caller's contract.
    unsafe { DirectRq::from_dv(&dv, (*qp).qp_num, None, HwMmio) }
}

/// A direct SRQ for an SRQ created by libmlx5 (`ibv_create_srq`).
///
/// # Safety
/// `srq` must be a valid SRQ that outlives the result, with nothing posted
/// yet and nothing posted through `ibv_post_srq_recv` afterwards.
pub unsafe fn srq_from_ibv_srq(srq: *mut sys::ibv_srq) -> Result<DirectSrq, DirectError> {
    let ask = sys::mlx5dv_srq {
        comp_mask: sys::MLX5DV_SRQ_MASK_SRQN as u64,
        ..Default::default()
    };
    // SAFETY: valid SRQ (caller), so its context is valid too.
    let dv = unsafe { dv_of(srq, ask).map_err(|e| init_obj_failed((*srq).context, e)) }?;
    if dv.comp_mask & sys::MLX5DV_SRQ_MASK_SRQN as u64 == 0 {
        return Err(DirectError::Config {
            problem: "mlx5dv_init_obj gave no SRQ number (rdma-core older than v21)",
            fix: "use --post wr-api with --use-srq on this rdma-core",
        });
    }
    // SAFETY: dv describes srq; the rest is the caller's contract.
    unsafe { DirectSrq::from_dv(&dv, dv.srqn, None, HwMmio) }
}

/// `mlx5dv_init_obj` for one QP.
///
/// # Safety
/// `qp` must be a valid QP.
unsafe fn qp_dv(qp: *mut sys::ibv_qp) -> Result<sys::mlx5dv_qp, DirectError> {
    // SAFETY: valid QP (caller), so its context is valid too.
    unsafe { dv_of(qp, sys::mlx5dv_qp::default()).map_err(|e| init_obj_failed((*qp).context, e)) }
}

/// A direct poller for a CQ created by libmlx5 (`ibv_create_cq`/`_ex`).
///
/// # Safety
/// `cq` must be a valid, fresh CQ that outlives the poller and is never
/// polled through libibverbs afterwards.
pub unsafe fn cq_from_ibv_cq(cq: *mut sys::ibv_cq) -> Result<DirectCq, DirectError> {
    // SAFETY: valid CQ (caller), so its context is valid too.
    let dv = unsafe {
        dv_of(cq, sys::mlx5dv_cq::default()).map_err(|e| init_obj_failed((*cq).context, e))
    }?;
    // SAFETY: dv was filled by mlx5dv_init_obj; the rest is the contract.
    unsafe { DirectCq::from_dv(&dv, None) }
}

/// The UD datagram segment for an address handle: libmlx5's AV with the
/// destination QPN (extended-AV flag set) and qkey filled in.
///
/// # Safety
/// `ah` must be a valid address handle of an mlx5 context.
pub unsafe fn ud_av_from_ibv_ah(
    ah: *mut sys::ibv_ah,
    remote_qpn: u32,
    qkey: u32,
) -> Result<DatagramSeg, DirectError> {
    // SAFETY: valid AH (caller).
    let dv = unsafe { dv_of(ah, sys::mlx5dv_ah::default()) }.and_then(|dv| {
        if dv.av.is_null() {
            Err(libc::EINVAL)
        } else {
            Ok(dv)
        }
    });
    // SAFETY: valid AH (caller), so its context is valid too.
    let dv = dv.map_err(|e| unsafe { init_obj_failed((*ah).context, e) })?;
    // SAFETY: mlx5dv_init_obj returned a pointer to the AH's 48-byte AV.
    let bytes = unsafe { dv.av.cast::<[u8; 48]>().read_unaligned() };
    Ok(ud_av(bytes, remote_qpn, qkey))
}

/// The datagram segment from the 48-byte AV libmlx5 built for an AH
/// (`MLX5DV_OBJ_AH`), with the destination QPN (extended-AV flag) and qkey.
pub fn ud_av(libmlx5_av: [u8; 48], remote_qpn: u32, qkey: u32) -> DatagramSeg {
    DatagramSeg::from_bytes(libmlx5_av).with_ud_dest(remote_qpn, qkey)
}

/// Whether `mlx5dv_query_device` reports `MLX5DV_CONTEXT_FLAGS_ENHANCED_MPW`
/// (false where the query fails: the raw sender then keeps to one SEND per
/// frame).
///
/// # Safety
/// `ctx` must be an open mlx5 context.
pub unsafe fn enhanced_mpw(ctx: *mut sys::ibv_context) -> bool {
    let mut dv = sys::mlx5dv_context::default();
    // SAFETY: an open context (caller); `dv` is ours, with comp_mask 0 (the
    // fixed fields only).
    let rc = unsafe { sys::mlx5dv_query_device(ctx, &mut dv) };
    rc == 0 && dv.flags & sys::MLX5DV_CONTEXT_FLAGS_ENHANCED_MPW as u64 != 0
}

/// A direct raw SQ ([`RawSq`](super::raw_sq::RawSq)) for a raw packet QP
/// created by libmlx5.
///
/// # Safety
/// As [`sq_from_ibv_qp`]: `qp` is valid, outlives the SQ, fresh, never
/// posted to through libmlx5, and nothing else writes its BlueFlame
/// register.
pub unsafe fn raw_sq_from_ibv_qp(
    qp: *mut sys::ibv_qp,
    cfg: super::raw_sq::RawSqConfig,
) -> Result<super::raw_sq::RawSq<HwMmio>, DirectError> {
    // SAFETY: the caller's contract (a valid QP).
    let dv = unsafe { qp_dv(qp) }?;
    // SAFETY: dv was filled by mlx5dv_init_obj for qp; the rest is the
    // caller's contract.
    unsafe { super::raw_sq::RawSq::from_dv(&dv, (*qp).qp_num, cfg, HwMmio, None) }
}

/// The BlueFlame register libmlx5 gave raw packet QP `qp` (`bf.reg`).
/// Two QPs with the same register share one bfreg: libmlx5 locks it and
/// keeps one BlueFlame toggle for both, which two direct SQs, each with
/// its own toggle, would not (see [`shared_bf_reg`]).
///
/// # Safety
/// `qp` is a valid mlx5 QP.
pub unsafe fn bf_reg_of(qp: *mut sys::ibv_qp) -> Result<usize, DirectError> {
    // SAFETY: the caller's contract (a valid QP).
    let dv = unsafe { qp_dv(qp) }?;
    Ok(dv.bf.reg as usize)
}

/// The first two of `regs` (QPs' BlueFlame registers, [`bf_reg_of`]) that
/// are the same register, by index.
pub fn shared_bf_reg(regs: &[usize]) -> Option<(usize, usize)> {
    regs.iter().enumerate().find_map(|(j, r)| {
        let i = regs[..j].iter().position(|x| x == r)?;
        Some((i, j))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_bf_reg_names_the_first_pair() {
        assert_eq!(shared_bf_reg(&[]), None);
        assert_eq!(shared_bf_reg(&[0x1800]), None);
        assert_eq!(shared_bf_reg(&[0x1800, 0x1a00, 0x2800]), None);
        assert_eq!(
            shared_bf_reg(&[0x1800, 0x1a00, 0x1a00, 0x1800]),
            Some((1, 2))
        );
        assert_eq!(shared_bf_reg(&[0x1800, 0x2800, 0x1800]), Some((0, 2)));
    }

    #[test]
    fn auto_falls_back_and_required_errors_with_fix() {
        assert_eq!(select(DirectRequest::Auto, "mlx5_0", true), Ok(true));
        assert_eq!(select(DirectRequest::Required, "mlx5_0", true), Ok(true));
        assert_eq!(select(DirectRequest::Auto, "rxe0", false), Ok(false));
        let e = select(DirectRequest::Required, "rxe0", false)
            .unwrap_err()
            .to_string();
        assert!(e.contains("rxe0") && e.contains("--post wr-api"), "{e}");
    }
}
