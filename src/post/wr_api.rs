//! The WR API post method (`ibv_wr_*` over `ibv_qp_ex`): one `wr_start`, per
//! WR the op builder + UD address + SGE or inline data, one `wr_complete`
//! (one doorbell per list). Calls go straight through the provider's
//! function pointers in `ibv_qp_ex`, as the inline `ibv_wr_*` do.

use std::os::raw::c_void;
use std::sync::Arc;

use super::post_send::{check_wr, send_flags, ud_cfg, SendCfg};
use super::{Op, PostError, SendQueue, WrDesc};
use crate::sys;
use crate::verbs::{Context, Cq, Pd, Qp, QpInit, QpType, UdDest, VerbsError};

/// The `IBV_QP_EX_WITH_*` flag an op needs at QP creation.
pub const fn send_ops_flag(op: Op) -> u64 {
    (match op {
        Op::Write => sys::IBV_QP_EX_WITH_RDMA_WRITE,
        Op::WriteImm => sys::IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM,
        Op::Send => sys::IBV_QP_EX_WITH_SEND,
        Op::SendImm => sys::IBV_QP_EX_WITH_SEND_WITH_IMM,
        Op::Read => sys::IBV_QP_EX_WITH_RDMA_READ,
        Op::FetchAdd => sys::IBV_QP_EX_WITH_ATOMIC_FETCH_AND_ADD,
        Op::CmpSwap => sys::IBV_QP_EX_WITH_ATOMIC_CMP_AND_SWP,
    }) as u64
}

/// The flags for a set of ops (perftest asks for exactly the ones it uses).
pub fn send_ops_flags(ops: &[Op]) -> u64 {
    ops.iter().fold(0, |f, &op| f | send_ops_flag(op))
}

type QpxFn = unsafe extern "C" fn(*mut sys::ibv_qp_ex);

/// The provider's WR API entry points, resolved once.
#[derive(Clone, Copy)]
struct WrFns {
    start: QpxFn,
    complete: unsafe extern "C" fn(*mut sys::ibv_qp_ex) -> i32,
    abort: QpxFn,
    set_sge: unsafe extern "C" fn(*mut sys::ibv_qp_ex, u32, u64, u32),
    set_inline: unsafe extern "C" fn(*mut sys::ibv_qp_ex, *mut c_void, usize),
    set_ud_addr: Option<unsafe extern "C" fn(*mut sys::ibv_qp_ex, *mut sys::ibv_ah, u32, u32)>,
    write: Option<unsafe extern "C" fn(*mut sys::ibv_qp_ex, u32, u64)>,
    write_imm: Option<unsafe extern "C" fn(*mut sys::ibv_qp_ex, u32, u64, u32)>,
    send: Option<QpxFn>,
    send_imm: Option<unsafe extern "C" fn(*mut sys::ibv_qp_ex, u32)>,
    read: Option<unsafe extern "C" fn(*mut sys::ibv_qp_ex, u32, u64)>,
    fetch_add: Option<unsafe extern "C" fn(*mut sys::ibv_qp_ex, u32, u64, u64)>,
    cmp_swp: Option<unsafe extern "C" fn(*mut sys::ibv_qp_ex, u32, u64, u64, u64)>,
}

/// `ibv_qp_to_qp_ex` + the function pointers, with a reason when missing.
fn resolve(qp: &Qp) -> Result<(*mut sys::ibv_qp_ex, WrFns, u64), VerbsError> {
    let missing = |what: &str| {
        VerbsError::new(
            "ibv_qp_to_qp_ex",
            libc::EOPNOTSUPP,
            format!(
                "{what} on {}: the provider does not support the WR API (ibv_wr_*); use the \
                 ibv_post_send method",
                qp.context().name()
            ),
        )
    };
    let Some(flags) = qp.send_ops_flags() else {
        return Err(VerbsError::new(
            "ibv_qp_to_qp_ex",
            0,
            "the QP was created without send_ops_flags; create it with \
             QpInit.send_ops_flags = Some(send_ops_flags(&[op])) for the WR API",
        ));
    };
    // SAFETY: the QP is live (borrowed).
    let qpx = unsafe { sys::ibv_qp_to_qp_ex(qp.raw()) };
    if qpx.is_null() {
        return Err(missing("ibv_qp_to_qp_ex returned NULL"));
    }
    // SAFETY: non-NULL `ibv_qp_ex` of a live QP; the provider filled its
    // function pointers at creation and never changes them.
    let x = unsafe { &*qpx };
    let fns = WrFns {
        start: x.wr_start.ok_or_else(|| missing("no wr_start"))?,
        complete: x.wr_complete.ok_or_else(|| missing("no wr_complete"))?,
        abort: x.wr_abort.ok_or_else(|| missing("no wr_abort"))?,
        set_sge: x.wr_set_sge.ok_or_else(|| missing("no wr_set_sge"))?,
        set_inline: x
            .wr_set_inline_data
            .ok_or_else(|| missing("no wr_set_inline_data"))?,
        set_ud_addr: x.wr_set_ud_addr,
        write: x.wr_rdma_write,
        write_imm: x.wr_rdma_write_imm,
        send: x.wr_send,
        send_imm: x.wr_send_imm,
        read: x.wr_rdma_read,
        fetch_add: x.wr_atomic_fetch_add,
        cmp_swp: x.wr_atomic_cmp_swp,
    };
    if qp.qp_type() == QpType::UD && fns.set_ud_addr.is_none() {
        return Err(missing("no wr_set_ud_addr"));
    }
    for op in Op::ALL {
        if flags & send_ops_flag(op) != 0 && !fns.has(op) {
            return Err(missing(&format!("no builder for {op:?}")));
        }
    }
    Ok((qpx, fns, flags))
}

impl WrFns {
    fn has(&self, op: Op) -> bool {
        match op {
            Op::Write => self.write.is_some(),
            Op::WriteImm => self.write_imm.is_some(),
            Op::Send => self.send.is_some(),
            Op::SendImm => self.send_imm.is_some(),
            Op::Read => self.read.is_some(),
            Op::FetchAdd => self.fetch_add.is_some(),
            Op::CmpSwap => self.cmp_swp.is_some(),
        }
    }
}

/// A send queue posting through the WR API. The QP must have been created
/// with `QpInit.send_ops_flags` covering every op posted.
pub struct WrApiQueue {
    qpx: *mut sys::ibv_qp_ex,
    fns: WrFns,
    ops_flags: u64,
    cfg: SendCfg,
    _ud: Option<UdDest>,
    _qp: Arc<Qp>,
}

// SAFETY: `qpx` belongs to the QP kept alive by the held Arc, the AH by the
// held UdDest; `&mut self` serialises posting.
unsafe impl Send for WrApiQueue {}

impl WrApiQueue {
    /// `ud` is required for UD QPs.
    pub fn new(qp: &Arc<Qp>, ud: Option<UdDest>) -> Result<Self, VerbsError> {
        let cfg = SendCfg {
            ud: ud_cfg(qp, ud.as_ref())?,
            max_inline: qp.caps().max_inline_data,
        };
        let (qpx, fns, ops_flags) = resolve(qp)?;
        Ok(Self {
            qpx,
            fns,
            ops_flags,
            cfg,
            _ud: ud,
            _qp: Arc::clone(qp),
        })
    }
}

impl SendQueue for WrApiQueue {
    #[inline]
    fn post(&mut self, op: Op, wrs: &[WrDesc]) -> Result<(), PostError> {
        if wrs.is_empty() {
            return Ok(());
        }
        if self.ops_flags & send_ops_flag(op) == 0 || !self.fns.has(op) {
            return Err(PostError::Unsupported);
        }
        let q = self.qpx;
        let f = &self.fns;
        // Invariant for every unsafe block below: `q` is the live QP's
        // ibv_qp_ex (Arc held) and every pointer called was resolved from
        // it; the op's builder exists (checked above, `has(op)`), set_ud_addr
        // exists for UD (checked in `resolve`); inline data points at `len`
        // caller bytes that the provider copies before returning.
        // SAFETY: see the invariant above; opens the WR batch.
        unsafe { (f.start)(q) };
        for d in wrs {
            if let Err(e) = check_wr(op, d, &self.cfg) {
                // SAFETY: see the invariant above; discards the WRs built since wr_start.
                unsafe { (f.abort)(q) };
                return Err(e);
            }
            // SAFETY: see the invariant above; wr_id/wr_flags are plain fields read by the
            // next builder call.
            unsafe {
                (*q).wr_id = d.wr_id;
                (*q).wr_flags = send_flags(d);
                match op {
                    Op::Write => {
                        if let Some(g) = f.write {
                            g(q, d.rkey, d.raddr)
                        }
                    }
                    Op::WriteImm => {
                        if let Some(g) = f.write_imm {
                            g(q, d.rkey, d.raddr, d.imm.to_be())
                        }
                    }
                    Op::Send => {
                        if let Some(g) = f.send {
                            g(q)
                        }
                    }
                    Op::SendImm => {
                        if let Some(g) = f.send_imm {
                            g(q, d.imm.to_be())
                        }
                    }
                    Op::Read => {
                        if let Some(g) = f.read {
                            g(q, d.rkey, d.raddr)
                        }
                    }
                    Op::FetchAdd => {
                        if let Some(g) = f.fetch_add {
                            g(q, d.rkey, d.raddr, d.swap_add)
                        }
                    }
                    Op::CmpSwap => {
                        if let Some(g) = f.cmp_swp {
                            g(q, d.rkey, d.raddr, d.compare, d.swap_add)
                        }
                    }
                }
                if let (Some(ud), Some(g)) = (self.cfg.ud, f.set_ud_addr) {
                    g(q, ud.ah, ud.remote_qpn, ud.remote_qkey);
                }
                if d.inline {
                    (f.set_inline)(q, d.laddr as *mut c_void, d.len as usize);
                } else {
                    (f.set_sge)(q, d.lkey, d.laddr, d.len);
                }
            }
        }
        // SAFETY: see the invariant above; rings the doorbell for the whole list.
        let ret = unsafe { (f.complete)(q) };
        if ret != 0 {
            return Err(PostError::Errno(crate::verbs::error::errno_of(ret)));
        }
        Ok(())
    }
}

/// Whether `ctx`'s provider creates `qp_type` QPs with these send_ops_flags
/// and fills the WR API: probes with a throw-away PD, CQ and QP.
pub fn wr_api_probe(ctx: &Arc<Context>, qp_type: QpType, ops_flags: u64) -> Result<(), VerbsError> {
    let pd = Pd::new(ctx)?;
    let cq = Cq::new(ctx, 2, false)?;
    let init = QpInit {
        max_send_wr: 1,
        max_recv_wr: 1,
        send_ops_flags: Some(ops_flags),
        ..QpInit::new(qp_type)
    };
    let qp = Qp::create(&pd, &cq, &cq, &init)?;
    resolve(&qp).map(|_| ())
}

/// [`wr_api_probe`] as a yes/no.
pub fn wr_api_supported(ctx: &Arc<Context>, qp_type: QpType, ops_flags: u64) -> bool {
    wr_api_probe(ctx, qp_type, ops_flags).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ops_flags_cover_each_op_once() {
        let f = send_ops_flags(&Op::ALL);
        assert_eq!(f.count_ones(), 7);
        assert_eq!(send_ops_flag(Op::Write), 1);
        assert_eq!(send_ops_flag(Op::Read), 16);
        assert_eq!(
            send_ops_flags(&[Op::Write, Op::Write]),
            sys::IBV_QP_EX_WITH_RDMA_WRITE as u64
        );
    }
}
