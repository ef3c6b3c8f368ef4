//! Real-device set-up for the direct path (control path; needs an mlx5 NIC,
//! so it compiles here but only runs on hardware):
//!
//! - selection: `--post auto` picks direct when `mlx5dv_is_supported(dev)`;
//!   `--post direct` on another device is a clear error ([`select`]);
//! - QP creation ([`create_direct_qp`]): a thread domain + parent domain per
//!   QP (a dedicated UAR, so the BlueFlame register and its toggle are the
//!   SQ's alone and need no lock), `mlx5dv_create_qp` with scatter-to-CQE
//!   disabled (small READ/atomic results must land in the user buffer, not
//!   in the CQE), `sq_sig_all = 0`, and explicit `send_ops_flags` so libmlx5
//!   does not size every WQE for MW/UMR (which inflates the SQ 4x);
//! - queues from ibv objects via `mlx5dv_init_obj` ([`sq_from_ibv_qp`],
//!   [`cq_from_ibv_cq`]). Never post or poll the same QP/CQ through libmlx5
//!   as well: its indices would go stale.

use core::ptr;
use std::ffi::CStr;

use super::cq::DirectCq;
use super::error::DirectError;
use super::mmio::HwMmio;
use super::seg::DatagramSeg;
use super::sq::{DirectSq, Transport};
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

/// QP type for [`create_direct_qp`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpKind {
    Rc,
    Uc,
    Ud,
}

/// Capacities for [`create_direct_qp`].
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
        // SAFETY: the three objects were created by create_direct_qp and are
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

/// Creates a QP for the direct path on `pd` (see the module doc).
///
/// # Safety
/// `ctx`, `pd`, `send_cq`, `recv_cq` must be valid objects of one context
/// and outlive the returned QP.
pub unsafe fn create_direct_qp(
    ctx: *mut sys::ibv_context,
    pd: *mut sys::ibv_pd,
    send_cq: *mut sys::ibv_cq,
    recv_cq: *mut sys::ibv_cq,
    attr: &DirectQpAttr,
) -> Result<DirectQp, DirectError> {
    // SAFETY: ctx is valid (caller contract).
    let dev = unsafe { device_name((*ctx).device) };
    let call = |call, errno, fix| DirectError::Call {
        call,
        device: dev.clone(),
        errno,
        fix,
    };
    let mut out = DirectQp {
        qp: ptr::null_mut(),
        parent: ptr::null_mut(),
        td: ptr::null_mut(),
    };
    let mut td_attr = sys::ibv_td_init_attr { comp_mask: 0 };
    // SAFETY: valid context and attribute struct.
    out.td = unsafe { sys::ibv_alloc_td(ctx, &mut td_attr) };
    if out.td.is_null() {
        return Err(call(
            "ibv_alloc_td",
            last_errno(),
            "use --post wr-api (this device/driver gives no thread domains)",
        ));
    }
    let mut pd_attr = sys::ibv_parent_domain_init_attr {
        pd,
        td: out.td,
        comp_mask: 0,
        alloc: None,
        free: None,
        pd_context: ptr::null_mut(),
    };
    // SAFETY: valid context, pd and td.
    out.parent = unsafe { sys::ibv_alloc_parent_domain(ctx, &mut pd_attr) };
    if out.parent.is_null() {
        return Err(call(
            "ibv_alloc_parent_domain",
            last_errno(),
            "use --post wr-api",
        ));
    }
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
    let mut qp_attr = sys::ibv_qp_init_attr_ex {
        send_cq,
        recv_cq,
        qp_type,
        sq_sig_all: 0,
        comp_mask: sys::IBV_QP_INIT_ATTR_PD | sys::IBV_QP_INIT_ATTR_SEND_OPS_FLAGS,
        pd: out.parent,
        send_ops_flags: ops,
        ..Default::default()
    };
    qp_attr.cap.max_send_wr = attr.max_send_wr;
    qp_attr.cap.max_recv_wr = attr.max_recv_wr;
    qp_attr.cap.max_send_sge = 1;
    qp_attr.cap.max_recv_sge = attr.max_recv_sge;
    qp_attr.cap.max_inline_data = attr.max_inline_data;
    let mut dv_attr = sys::mlx5dv_qp_init_attr {
        comp_mask: sys::MLX5DV_QP_INIT_ATTR_MASK_QP_CREATE_FLAGS as u64,
        create_flags: sys::MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE,
        ..Default::default()
    };
    // SAFETY: valid context and fully initialised attribute structs.
    out.qp = unsafe { sys::mlx5dv_create_qp(ctx, &mut qp_attr, &mut dv_attr) };
    if out.qp.is_null() {
        return Err(call(
            "mlx5dv_create_qp",
            last_errno(),
            "lower --tx-depth / --inline_size (the SQ may exceed max_send_wqebb), \
             or use --post wr-api",
        ));
    }
    Ok(out)
}

/// A direct SQ for a QP created by libmlx5 (e.g. [`create_direct_qp`]).
///
/// # Safety
/// `qp` must be a valid QP that outlives the SQ, fresh (nothing posted since
/// creation/RESET), never posted to through libmlx5 afterwards, and on a
/// dedicated UAR (thread-domain parent PD).
pub unsafe fn sq_from_ibv_qp(
    qp: *mut sys::ibv_qp,
    transport: Transport,
) -> Result<DirectSq<HwMmio>, DirectError> {
    let mut dv = sys::mlx5dv_qp::default(); // comp_mask is in/out: zero it
    let mut obj = sys::mlx5dv_obj::default();
    obj.qp.in_ = qp;
    obj.qp.out = &mut dv;
    // SAFETY: valid QP (caller), obj points to live out-structs.
    let rc = unsafe { sys::mlx5dv_init_obj(&mut obj, sys::MLX5DV_OBJ_QP as u64) };
    if rc != 0 {
        return Err(DirectError::InitObj {
            // SAFETY: valid QP → valid context and device.
            device: unsafe { device_name((*(*qp).context).device) },
            errno: rc.abs(),
        });
    }
    // SAFETY: dv was filled by mlx5dv_init_obj; the other requirements are
    // this function's own contract.
    unsafe { DirectSq::from_dv(&dv, (*qp).qp_num, transport, HwMmio, None) }
}

/// A direct poller for a CQ created by libmlx5 (`ibv_create_cq`/`_ex`).
///
/// # Safety
/// `cq` must be a valid, fresh CQ that outlives the poller and is never
/// polled through libibverbs afterwards.
pub unsafe fn cq_from_ibv_cq(cq: *mut sys::ibv_cq) -> Result<DirectCq, DirectError> {
    let mut dv = sys::mlx5dv_cq::default();
    let mut obj = sys::mlx5dv_obj::default();
    obj.cq.in_ = cq;
    obj.cq.out = &mut dv;
    // SAFETY: valid CQ (caller), obj points to live out-structs.
    let rc = unsafe { sys::mlx5dv_init_obj(&mut obj, sys::MLX5DV_OBJ_CQ as u64) };
    if rc != 0 {
        return Err(DirectError::InitObj {
            // SAFETY: valid CQ → valid context and device.
            device: unsafe { device_name((*(*cq).context).device) },
            errno: rc.abs(),
        });
    }
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
    let mut dv = sys::mlx5dv_ah::default();
    let mut obj = sys::mlx5dv_obj::default();
    obj.ah.in_ = ah;
    obj.ah.out = &mut dv;
    // SAFETY: valid AH (caller), obj points to live out-structs.
    let rc = unsafe { sys::mlx5dv_init_obj(&mut obj, sys::MLX5DV_OBJ_AH as u64) };
    if rc != 0 || dv.av.is_null() {
        return Err(DirectError::InitObj {
            // SAFETY: valid AH → valid context and device.
            device: unsafe { device_name((*(*ah).context).device) },
            errno: if rc != 0 { rc.abs() } else { libc::EINVAL },
        });
    }
    // SAFETY: mlx5dv_init_obj returned a pointer to the AH's 48-byte AV.
    let bytes = unsafe { dv.av.cast::<[u8; 48]>().read_unaligned() };
    Ok(DatagramSeg::from_bytes(bytes).with_ud_dest(remote_qpn, qkey))
}

#[cfg(test)]
mod tests {
    use super::*;

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
