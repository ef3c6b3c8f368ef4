//! Verbs-backed completion polling (`ctx->ops.poll_cq` into a fixed `ibv_wc`
//! array) and receive posting (`ctx->ops.post_recv`).

use std::os::raw::c_int;
use std::sync::Arc;

use super::rx_offload::RxOffload;
use super::{Completion, CompletionQueue, PostError, RecvList, RecvQueue, WcOpcode, WcStatus};
use crate::sys;
use crate::verbs::{Cq, Qp, Srq, VerbsError};

type PollFn = unsafe extern "C" fn(*mut sys::ibv_cq, c_int, *mut sys::ibv_wc) -> c_int;
type PostRecvFn = unsafe extern "C" fn(
    *mut sys::ibv_qp,
    *mut sys::ibv_recv_wr,
    *mut *mut sys::ibv_recv_wr,
) -> c_int;

/// `ibv_wc` → [`Completion`]. `imm` is copied raw (network order); it is
/// meaningful only for *_WITH_IMM receives.
#[inline(always)]
pub fn completion_from_wc(w: &sys::ibv_wc) -> Completion {
    Completion {
        wr_id: w.wr_id,
        status: WcStatus(w.status),
        opcode: WcOpcode(w.opcode),
        vendor_err: w.vendor_err,
        syndrome: 0,
        byte_len: w.byte_len,
        qp_num: w.qp_num,
        imm: if w.wc_flags & sys::IBV_WC_WITH_IMM != 0 {
            // SAFETY: with IBV_WC_WITH_IMM set the union holds imm_data; both
            // arms are plain u32 anyway.
            unsafe { w.__bindgen_anon_1.imm_data }
        } else {
            0
        },
        src_qp: w.src_qp,
        wc_flags: w.wc_flags,
        // ibv_wc has no L3/L4 types; its checksum bit is in wc_flags.
        rx: RxOffload::NONE,
    }
}

/// Polls a CQ through the provider's `poll_cq`, up to `batch` entries a call.
pub struct VerbsCq {
    wc: Box<[sys::ibv_wc]>,
    poll_fn: PollFn,
    cq_raw: *mut sys::ibv_cq,
    _cq: Arc<Cq>,
}

// SAFETY: the wc array is owned, the CQ kept alive by the Arc; `&mut self`
// serialises polling.
unsafe impl Send for VerbsCq {}

impl VerbsCq {
    /// `batch` ≥ 1: the most completions one `poll` returns (perftest 4.5
    /// uses 16).
    pub fn new(cq: &Arc<Cq>, batch: usize) -> Result<Self, VerbsError> {
        // SAFETY: the CQ is live; its context's ops table is fixed at open.
        let poll_fn = unsafe { (*(*cq.raw()).context).ops.poll_cq };
        let poll_fn = VerbsError::provided(poll_fn, "ibv_poll_cq", || {
            format!("the {} provider has no poll_cq", cq.context().name())
        })?;
        Ok(Self {
            wc: vec![sys::ibv_wc::default(); batch.max(1)].into_boxed_slice(),
            poll_fn,
            cq_raw: cq.raw(),
            _cq: Arc::clone(cq),
        })
    }

    pub fn batch(&self) -> usize {
        self.wc.len()
    }
}

impl CompletionQueue for VerbsCq {
    #[inline]
    fn poll(&mut self, out: &mut [Completion]) -> Result<usize, PostError> {
        let n = out.len().min(self.wc.len()) as c_int;
        if n == 0 {
            return Ok(0);
        }
        // SAFETY: `cq_raw` is live (Arc held), `poll_fn` is its provider's
        // poll_cq, and `wc` has room for `n` entries.
        let got = unsafe { (self.poll_fn)(self.cq_raw, n, self.wc.as_mut_ptr()) };
        if got < 0 {
            // Providers return a negative value on a CQ error (not always an errno).
            return Err(PostError::Errno(got.saturating_neg()));
        }
        let got = got as usize;
        for (o, w) in out.iter_mut().zip(self.wc.iter()).take(got) {
            *o = completion_from_wc(w);
        }
        Ok(got.min(out.len()))
    }
}

/// Posts receives through the provider's `post_recv` (one SGE a WR; one
/// WR a call, or a chain of up to [`VerbsRecv::with_list`]'s length).
pub struct VerbsRecv {
    post_fn: PostRecvFn,
    qp_raw: *mut sys::ibv_qp,
    /// Scratch for one receive post list, chained at post time.
    list_wr: Box<[sys::ibv_recv_wr]>,
    list_sge: Box<[sys::ibv_sge]>,
    /// Keeps a verbs QP alive; `None` for a QP whose owner outlives this
    /// (a direct-path QP: [`VerbsRecv::from_raw`]).
    _qp: Option<Arc<Qp>>,
    /// `--use-srq`: receives go to this SRQ (through `srq_fn`) instead.
    srq: Option<(Arc<Srq>, PostSrqRecvFn)>,
}

type PostSrqRecvFn = unsafe extern "C" fn(
    *mut sys::ibv_srq,
    *mut sys::ibv_recv_wr,
    *mut *mut sys::ibv_recv_wr,
) -> std::os::raw::c_int;

// SAFETY: the QP is kept alive by the Arc (or by its owner, `from_raw`'s
// contract); `&mut self` serialises posting.
unsafe impl Send for VerbsRecv {}

impl VerbsRecv {
    pub fn new(qp: &Arc<Qp>) -> Result<Self, VerbsError> {
        // SAFETY: the QP is live (the Arc) for the whole call and after.
        let mut r = unsafe { Self::from_raw(qp.raw()) }?;
        r._qp = Some(Arc::clone(qp));
        Ok(r)
    }

    /// Receives on a QP not owned through [`Qp`] (one created through
    /// mlx5dv for the direct path: its RQ stays libmlx5's, only the SQ is
    /// written directly).
    ///
    /// # Safety
    /// `qp` must be a live QP that outlives the returned value.
    pub unsafe fn from_raw(qp: *mut sys::ibv_qp) -> Result<Self, VerbsError> {
        // SAFETY: the caller's contract (live QP); its context's ops table
        // is fixed at open.
        let post_fn = unsafe { (*(*qp).context).ops.post_recv };
        let post_fn = VerbsError::provided(post_fn, "ibv_post_recv", || {
            "the provider has no post_recv".to_string()
        })?;
        Ok(Self {
            post_fn,
            qp_raw: qp,
            list_wr: Box::default(),
            list_sge: Box::default(),
            _qp: None,
            srq: None,
        })
    }

    /// Room for receive post lists of up to `n` WRs (allocated here, once).
    pub fn with_list(mut self, n: usize) -> Self {
        self.list_wr = vec![sys::ibv_recv_wr::default(); n].into_boxed_slice();
        self.list_sge = vec![sys::ibv_sge::default(); n].into_boxed_slice();
        self
    }

    /// Receives posted to `srq` (`--use-srq`; its QPs hold it too) through
    /// the provider's `post_srq_recv`.
    pub fn srq(qp: &Arc<Qp>, srq: &Arc<Srq>) -> Result<Self, VerbsError> {
        let mut r = Self::new(qp)?;
        // SAFETY: the QP (and so its context) is live; the ops table is
        // fixed at open.
        let f = unsafe { (*(*qp.raw()).context).ops.post_srq_recv };
        let f = VerbsError::provided(f, "ibv_post_srq_recv", || {
            "--use-srq: the provider has no post_srq_recv; drop --use-srq".to_string()
        })?;
        r.srq = Some((Arc::clone(srq), f));
        Ok(r)
    }
}

impl RecvQueue for VerbsRecv {
    #[inline]
    fn post_recv(&mut self, wr_id: u64, addr: u64, lkey: u32, len: u32) -> Result<(), PostError> {
        let mut sge = sys::ibv_sge {
            addr,
            length: len,
            lkey,
        };
        let mut wr = sys::ibv_recv_wr {
            wr_id,
            next: std::ptr::null_mut(),
            sg_list: &mut sge,
            num_sge: 1,
        };
        let mut bad: *mut sys::ibv_recv_wr = std::ptr::null_mut();
        let ret = match &self.srq {
            // SAFETY: the SRQ is live (Arc held); `wr`/`sge` as below.
            Some((srq, f)) => unsafe { f(srq.raw(), &mut wr, &mut bad) },
            // SAFETY: `qp_raw` is live (Arc held); `wr`/`sge` live on this stack
            // frame for the whole call (the provider copies them into the RQ).
            None => unsafe { (self.post_fn)(self.qp_raw, &mut wr, &mut bad) },
        };
        if ret != 0 {
            return Err(PostError::Errno(crate::verbs::error::errno_of(ret)));
        }
        Ok(())
    }

    /// One `post_recv` call with the `n` WRs chained.
    #[inline]
    fn post_recv_list(&mut self, list: &RecvList<impl Fn(usize) -> u64>) -> Result<(), PostError> {
        let n = list.n;
        if n == 0 {
            return Ok(());
        }
        if n > self.list_wr.len() {
            return Err(PostError::Unsupported);
        }
        let wrs = self.list_wr.as_mut_ptr();
        let sges = self.list_sge.as_mut_ptr();
        for k in 0..n {
            self.list_sge[k] = sys::ibv_sge {
                addr: (list.addr)(k),
                length: list.len,
                lkey: list.lkey,
            };
            self.list_wr[k] = sys::ibv_recv_wr {
                wr_id: list.wr_id,
                next: if k + 1 < n {
                    wrs.wrapping_add(k + 1)
                } else {
                    std::ptr::null_mut()
                },
                sg_list: sges.wrapping_add(k),
                num_sge: 1,
            };
        }
        let mut bad: *mut sys::ibv_recv_wr = std::ptr::null_mut();
        let ret = match &self.srq {
            // SAFETY: the SRQ is live (Arc held); the chain as below.
            Some((srq, f)) => unsafe { f(srq.raw(), wrs, &mut bad) },
            // SAFETY: `qp_raw` is live (Arc held, or the owner's contract); the
            // chain's WRs and SGEs are `self`'s boxed slices, at least `n` long and
            // untouched during the call (the provider copies them into the RQ).
            None => unsafe { (self.post_fn)(self.qp_raw, wrs, &mut bad) },
        };
        if ret != 0 {
            return Err(PostError::Errno(crate::verbs::error::errno_of(ret)));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wc_maps_to_completion() {
        let mut w = sys::ibv_wc {
            wr_id: 77,
            status: 12,
            opcode: sys::IBV_WC_RECV_RDMA_WITH_IMM,
            vendor_err: 0x81,
            byte_len: 4096,
            qp_num: 0x1234,
            wc_flags: sys::IBV_WC_WITH_IMM,
            ..Default::default()
        };
        w.__bindgen_anon_1.imm_data = 0xdead_beef;
        let c = completion_from_wc(&w);
        assert_eq!(c.wr_id, 77);
        assert_eq!(c.status, WcStatus::RETRY_EXC_ERR);
        assert_eq!(c.opcode, WcOpcode::RECV_RDMA_WITH_IMM);
        assert_eq!((c.vendor_err, c.byte_len, c.qp_num), (0x81, 4096, 0x1234));
        assert_eq!(c.imm, 0xdead_beef);
        assert_eq!(c.syndrome, 0);
        w.wc_flags = 0;
        assert_eq!(completion_from_wc(&w).imm, 0);
    }
}
