//! The legacy post method: `ibv_post_send` through the provider's function
//! pointer (`ctx->ops.post_send`, what the inline `ibv_post_send` calls),
//! over a linked list built in arrays allocated once at construction.

use std::os::raw::c_int;
use std::ptr;
use std::sync::Arc;

use super::{Op, PostError, SendQueue, WrDesc};
use crate::sys;
use crate::verbs::{Qp, QpType, UdDest, VerbsError};

type PostSendFn = unsafe extern "C" fn(
    *mut sys::ibv_qp,
    *mut sys::ibv_send_wr,
    *mut *mut sys::ibv_send_wr,
) -> c_int;

/// UD addressing in raw form, for the WR builders.
#[derive(Clone, Copy, Debug)]
pub struct UdAddr {
    pub ah: *mut sys::ibv_ah,
    pub remote_qpn: u32,
    pub remote_qkey: u32,
}

/// What a send queue checks every WR against.
#[derive(Clone, Copy, Debug)]
pub struct SendCfg {
    /// Some for UD QPs (then only SEND / SEND_IMM are valid).
    pub ud: Option<UdAddr>,
    /// The QP's granted max_inline_data.
    pub max_inline: u32,
}

/// `Op` → `IBV_WR_*`.
pub const fn wr_opcode(op: Op) -> sys::ibv_wr_opcode {
    match op {
        Op::Write => sys::IBV_WR_RDMA_WRITE,
        Op::WriteImm => sys::IBV_WR_RDMA_WRITE_WITH_IMM,
        Op::Send => sys::IBV_WR_SEND,
        Op::SendImm => sys::IBV_WR_SEND_WITH_IMM,
        Op::Read => sys::IBV_WR_RDMA_READ,
        Op::FetchAdd => sys::IBV_WR_ATOMIC_FETCH_AND_ADD,
        Op::CmpSwap => sys::IBV_WR_ATOMIC_CMP_AND_SWP,
    }
}

/// `IBV_SEND_*` flags of a WR.
#[inline(always)]
pub const fn send_flags(d: &WrDesc) -> u32 {
    let mut f = 0;
    if d.signaled {
        f |= sys::IBV_SEND_SIGNALED;
    }
    if d.inline {
        f |= sys::IBV_SEND_INLINE;
    }
    f
}

/// Rejects what no provider would accept: non-SEND ops on UD, inline on
/// READ/atomics, inline payload over the QP's max_inline_data.
#[inline(always)]
pub fn check_wr(op: Op, d: &WrDesc, cfg: &SendCfg) -> Result<(), PostError> {
    let is_send = matches!(op, Op::Send | Op::SendImm);
    if cfg.ud.is_some() && !is_send {
        return Err(PostError::Unsupported);
    }
    if d.inline {
        let data_from_local = matches!(op, Op::Write | Op::WriteImm | Op::Send | Op::SendImm);
        if !data_from_local || d.len > cfg.max_inline {
            return Err(PostError::Unsupported);
        }
    }
    Ok(())
}

/// Fills `wrs[..descs.len()]` (one SGE each, from `sges`) as a linked list
/// and returns its head (NULL for an empty list). No allocation; the list
/// points into `wrs`/`sges`, so it is valid until they are touched again.
/// Errors: more WRs than slots, or a WR `check_wr` rejects.
pub fn fill_send_wrs(
    wrs: &mut [sys::ibv_send_wr],
    sges: &mut [sys::ibv_sge],
    op: Op,
    descs: &[WrDesc],
    cfg: &SendCfg,
) -> Result<*mut sys::ibv_send_wr, PostError> {
    if descs.len() > wrs.len() || descs.len() > sges.len() {
        return Err(PostError::Unsupported);
    }
    let opcode = wr_opcode(op);
    let mut next: *mut sys::ibv_send_wr = ptr::null_mut();
    // Built back to front so each WR links to the one filled just before.
    for ((wr, sge), d) in wrs.iter_mut().zip(sges.iter_mut()).zip(descs).rev() {
        check_wr(op, d, cfg)?;
        *sge = sys::ibv_sge {
            addr: d.laddr,
            length: d.len,
            lkey: d.lkey,
        };
        wr.wr_id = d.wr_id;
        wr.next = next;
        wr.sg_list = sge;
        wr.num_sge = 1;
        wr.opcode = opcode;
        wr.send_flags = send_flags(d);
        wr.__bindgen_anon_1.imm_data = match op {
            Op::WriteImm | Op::SendImm => d.imm.to_be(),
            _ => 0,
        };
        match (op, cfg.ud) {
            (Op::Send | Op::SendImm, Some(ud)) => {
                wr.wr.ud = sys::ibv_send_wr__bindgen_ty_2__bindgen_ty_3 {
                    ah: ud.ah,
                    remote_qpn: ud.remote_qpn,
                    remote_qkey: ud.remote_qkey,
                };
            }
            (Op::Write | Op::WriteImm | Op::Read, _) => {
                wr.wr.rdma = sys::ibv_send_wr__bindgen_ty_2__bindgen_ty_1 {
                    remote_addr: d.raddr,
                    rkey: d.rkey,
                };
            }
            (Op::FetchAdd | Op::CmpSwap, _) => {
                let (compare_add, swap) = if op == Op::FetchAdd {
                    (d.swap_add, 0)
                } else {
                    (d.compare, d.swap_add)
                };
                wr.wr.atomic = sys::ibv_send_wr__bindgen_ty_2__bindgen_ty_2 {
                    remote_addr: d.raddr,
                    compare_add,
                    swap,
                    rkey: d.rkey,
                };
            }
            (Op::Send | Op::SendImm, None) => {}
        }
        next = wr;
    }
    Ok(next)
}

/// A send queue posting with `ibv_post_send` semantics. At most
/// `capacity()` WRs per `post` (perftest's post list, `-l`).
pub struct PostSendQueue {
    wrs: Box<[sys::ibv_send_wr]>,
    sges: Box<[sys::ibv_sge]>,
    post_fn: PostSendFn,
    qp_raw: *mut sys::ibv_qp,
    cfg: SendCfg,
    _ud: Option<UdDest>,
    _qp: Arc<Qp>,
}

// SAFETY: the arrays are owned; the raw pointers point into them, to the QP
// and to the AH, which the held Arcs keep alive; posting from one thread at a
// time is guaranteed by `&mut self`.
unsafe impl Send for PostSendQueue {}

/// The UD addressing of a queue, checked against the QP type.
pub(crate) fn ud_cfg(qp: &Qp, ud: Option<&UdDest>) -> Result<Option<UdAddr>, VerbsError> {
    match (qp.qp_type() == QpType::UD, ud) {
        (true, Some(u)) => Ok(Some(UdAddr {
            ah: u.ah.raw(),
            remote_qpn: u.remote_qpn,
            remote_qkey: u.remote_qkey,
        })),
        (false, None) => Ok(None),
        (true, None) => Err(VerbsError::new(
            "post queue",
            0,
            "a UD QP needs a destination (AH, remote QPN, Q_Key) to send to",
        )),
        (false, Some(_)) => Err(VerbsError::new(
            "post queue",
            0,
            format!(
                "a UD destination was given for a {} QP",
                qp.qp_type().name()
            ),
        )),
    }
}

impl PostSendQueue {
    /// `max_post_list` ≥ 1 WRs per post; `ud` is required for UD QPs.
    pub fn new(qp: &Arc<Qp>, max_post_list: usize, ud: Option<UdDest>) -> Result<Self, VerbsError> {
        let cfg = SendCfg {
            ud: ud_cfg(qp, ud.as_ref())?,
            max_inline: qp.caps().max_inline_data,
        };
        let n = max_post_list.max(1);
        // SAFETY: the QP is live; its context pointer and ops table are set
        // by libibverbs at open and never change.
        let post_fn = unsafe { (*(*qp.raw()).context).ops.post_send };
        let post_fn = VerbsError::provided(post_fn, "ibv_post_send", || {
            format!("the {} provider has no post_send", qp.context().name())
        })?;
        Ok(Self {
            wrs: vec![sys::ibv_send_wr::default(); n].into_boxed_slice(),
            sges: vec![sys::ibv_sge::default(); n].into_boxed_slice(),
            post_fn,
            qp_raw: qp.raw(),
            cfg,
            _ud: ud,
            _qp: Arc::clone(qp),
        })
    }

    /// The most WRs one `post` accepts.
    pub fn capacity(&self) -> usize {
        self.wrs.len()
    }
}

impl SendQueue for PostSendQueue {
    /// Posts `wrs` as one list. On `Errno`, WRs before the failing one may
    /// have been posted (as with `ibv_post_send`); treat the QP as broken.
    #[inline]
    fn post(&mut self, op: Op, wrs: &[WrDesc]) -> Result<(), PostError> {
        let head = fill_send_wrs(&mut self.wrs, &mut self.sges, op, wrs, &self.cfg)?;
        if head.is_null() {
            return Ok(());
        }
        let mut bad: *mut sys::ibv_send_wr = ptr::null_mut();
        // SAFETY: `head` is a well-formed list in our arrays (just built);
        // `qp_raw` is live (Arc held) and `post_fn` is its provider's post_send.
        let ret = unsafe { (self.post_fn)(self.qp_raw, head, &mut bad) };
        if ret != 0 {
            return Err(PostError::Errno(crate::verbs::error::errno_of(ret)));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desc(i: u64) -> WrDesc {
        WrDesc {
            wr_id: i,
            laddr: 0x1000 + i * 64,
            lkey: 0x11,
            len: 64,
            raddr: 0x9000 + i * 64,
            rkey: 0x22,
            imm: 0x0102_0304,
            swap_add: 5,
            compare: 6,
            signaled: i == 3,
            inline: false,
        }
    }

    fn arrays(n: usize) -> (Vec<sys::ibv_send_wr>, Vec<sys::ibv_sge>) {
        (
            vec![sys::ibv_send_wr::default(); n],
            vec![sys::ibv_sge::default(); n],
        )
    }

    const RC: SendCfg = SendCfg {
        ud: None,
        max_inline: 64,
    };

    /// Walks the list from `head` (test helper).
    fn walk(head: *mut sys::ibv_send_wr) -> Vec<sys::ibv_send_wr> {
        let mut out = Vec::new();
        let mut p = head;
        while !p.is_null() {
            // SAFETY: `p` points into the test's live WR array.
            let wr = unsafe { *p };
            out.push(wr);
            p = wr.next;
        }
        out
    }

    #[test]
    fn write_list_is_linked_in_order() {
        let (mut w, mut s) = arrays(8);
        let d: Vec<WrDesc> = (0..4).map(desc).collect();
        let head = fill_send_wrs(&mut w, &mut s, Op::Write, &d, &RC).unwrap();
        let list = walk(head);
        assert_eq!(list.len(), 4);
        for (i, wr) in list.iter().enumerate() {
            assert_eq!(wr.wr_id, i as u64);
            assert_eq!(wr.opcode, sys::IBV_WR_RDMA_WRITE);
            assert_eq!(wr.num_sge, 1);
            // SAFETY: sg_list points into the test's live SGE array.
            let sge = unsafe { *wr.sg_list };
            assert_eq!(
                (sge.addr, sge.length, sge.lkey),
                (0x1000 + i as u64 * 64, 64, 0x11)
            );
            // SAFETY: the rdma arm of the union was written for a WRITE.
            let r = unsafe { wr.wr.rdma };
            assert_eq!((r.remote_addr, r.rkey), (0x9000 + i as u64 * 64, 0x22));
            let signaled = wr.send_flags & sys::IBV_SEND_SIGNALED != 0;
            assert_eq!(signaled, i == 3);
        }
        // The unused tail of the array is left alone.
        assert_eq!(w[4].wr_id, 0);
    }

    #[test]
    fn empty_list_is_null_and_overflow_rejected() {
        let (mut w, mut s) = arrays(2);
        assert!(fill_send_wrs(&mut w, &mut s, Op::Write, &[], &RC)
            .unwrap()
            .is_null());
        let d: Vec<WrDesc> = (0..3).map(desc).collect();
        assert_eq!(
            fill_send_wrs(&mut w, &mut s, Op::Write, &d, &RC),
            Err(PostError::Unsupported)
        );
    }

    #[test]
    fn imm_is_big_endian_and_atomics_fill_operands() {
        let (mut w, mut s) = arrays(1);
        let d = [desc(0)];
        let head = fill_send_wrs(&mut w, &mut s, Op::SendImm, &d, &RC).unwrap();
        let wr = walk(head)[0];
        assert_eq!(wr.opcode, sys::IBV_WR_SEND_WITH_IMM);
        // SAFETY: imm_data is the written arm.
        let imm = unsafe { wr.__bindgen_anon_1.imm_data };
        assert_eq!(imm, 0x0102_0304u32.to_be());

        let head = fill_send_wrs(&mut w, &mut s, Op::FetchAdd, &d, &RC).unwrap();
        let wr = walk(head)[0];
        assert_eq!(wr.opcode, sys::IBV_WR_ATOMIC_FETCH_AND_ADD);
        // SAFETY: the atomic arm was written.
        let a = unsafe { wr.wr.atomic };
        assert_eq!(
            (a.remote_addr, a.compare_add, a.swap, a.rkey),
            (0x9000, 5, 0, 0x22)
        );

        let head = fill_send_wrs(&mut w, &mut s, Op::CmpSwap, &d, &RC).unwrap();
        // SAFETY: the atomic arm was written.
        let a = unsafe { walk(head)[0].wr.atomic };
        assert_eq!((a.compare_add, a.swap), (6, 5));
    }

    #[test]
    fn ud_send_gets_address_and_rejects_rdma() {
        let ud = SendCfg {
            ud: Some(UdAddr {
                ah: 0x1234 as *mut sys::ibv_ah,
                remote_qpn: 0x77,
                remote_qkey: 0x1111_1111,
            }),
            max_inline: 0,
        };
        let (mut w, mut s) = arrays(2);
        let d = [desc(0), desc(1)];
        let head = fill_send_wrs(&mut w, &mut s, Op::Send, &d, &ud).unwrap();
        for wr in walk(head) {
            // SAFETY: the ud arm was written for a UD SEND.
            let u = unsafe { wr.wr.ud };
            assert_eq!(
                (u.ah as usize, u.remote_qpn, u.remote_qkey),
                (0x1234, 0x77, 0x1111_1111)
            );
        }
        assert_eq!(
            fill_send_wrs(&mut w, &mut s, Op::Write, &d, &ud),
            Err(PostError::Unsupported)
        );
    }

    #[test]
    fn inline_rules() {
        let (mut w, mut s) = arrays(1);
        let mut d = desc(0);
        d.inline = true;
        let head = fill_send_wrs(&mut w, &mut s, Op::Write, &[d], &RC).unwrap();
        assert_ne!(walk(head)[0].send_flags & sys::IBV_SEND_INLINE, 0);
        d.len = 65; // over max_inline 64
        assert_eq!(
            fill_send_wrs(&mut w, &mut s, Op::Write, &[d], &RC),
            Err(PostError::Unsupported)
        );
        d.len = 8;
        assert_eq!(
            fill_send_wrs(&mut w, &mut s, Op::Read, &[d], &RC),
            Err(PostError::Unsupported)
        );
    }
}
