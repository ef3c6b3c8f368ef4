//! A QP's receive queue posted directly (`mlx5_post_recv` without libmlx5):
//! data segments at the start of the QP buffer (the RQ comes first, the SQ
//! after it), one slot per WR in order, the invalid-lkey terminator where a
//! WR uses fewer segments than the stride holds, then the posted count into
//! the receive doorbell record (`dbrec[MLX5_RCV_DBR]`, 16 bits, big-endian).
//! No MMIO: the record is the whole receive doorbell.
//!
//! Memory ordering (rdma-core `mlx5_post_recv`): the WQE stores, then
//! `udma_to_device_barrier` ([`super::barrier::store_fence_dma`]), then the record,
//! so the NIC never sees a count that covers a WQE it cannot yet read.

use std::sync::Arc;

use super::error::DirectError;
use super::keepalive::KeepAlive;
use super::mmio::{HwMmio, Mmio};
use super::recv::{layout_error, RecvDoor, RecvKind, RecvRing, DATA_SEG};
use crate::post::{PostError, RecvList, RecvQueue};
use crate::sys::mlx5dv_qp;

/// Largest RQ stride libmlx5 creates (32 scatter entries).
const MAX_STRIDE: u32 = 512;
/// Most RQ slots: as the SQ, half the 16-bit posted count, so a full ring
/// never reads as an empty one.
pub const MAX_WQE_CNT: u32 = 1 << 15;

/// A directly posted RQ; its completions come through a
/// [`DirectCq`](super::cq::DirectCq) it is attached to. Its record is
/// stored through `M` ([`HwMmio`] on a device, the model's recorder in
/// tests).
pub struct DirectRq<M: Mmio = HwMmio> {
    /// The ring and `&dbrec[MLX5_RCV_DBR]`.
    door: RecvDoor<M>,
    /// WQEs posted (free-running).
    head: u32,
    qpn: u32,
}

/// The RQ layout checks alone: [`super::setup::set_up`] runs them on every
/// QP with an RQ before anything is connected (so `--post auto` can fall
/// back), and [`DirectRq::from_dv`] again when the RQ is opened.
pub fn check_rq_layout(qp: &mlx5dv_qp) -> Result<(), DirectError> {
    let layout = layout_error;
    let n = qp.rq.wqe_cnt;
    if n == 0 {
        return Err(DirectError::Config {
            problem: "the QP has no RQ of its own (it receives from an SRQ)",
            fix: "post its receives through the SRQ",
        });
    }
    if !n.is_power_of_two() {
        return Err(layout("rq.wqe_cnt", n as u64, "a power of two"));
    }
    if n > MAX_WQE_CNT {
        // The record holds the posted count in 16 bits: 65536 posted
        // receives read as none, so a full RQ of that size looks empty.
        return Err(DirectError::Layout {
            what: "rq.wqe_cnt",
            value: n as u64,
            expected: "<= 32768 (the receive doorbell record counts in 16 bits)",
            fix: "lower --rx-depth to 32768 or less, or use --post wr-api",
        });
    }
    let s = qp.rq.stride;
    if !s.is_power_of_two() || (s as usize) < DATA_SEG || s > MAX_STRIDE {
        return Err(layout("rq.stride", s as u64, "a power of two, 16..512"));
    }
    if qp.rq.buf.is_null() || qp.rq.buf as usize % DATA_SEG != 0 {
        return Err(layout(
            "rq.buf",
            qp.rq.buf as u64,
            "a 16-byte aligned buffer",
        ));
    }
    if qp.dbrec.is_null() || qp.dbrec as usize % 4 != 0 {
        return Err(layout("dbrec", qp.dbrec as u64, "a 4-byte aligned record"));
    }
    Ok(())
}

impl<M: Mmio> DirectRq<M> {
    /// Builds the RQ from what `mlx5dv_init_obj` returned for the QP,
    /// storing the record through `mmio` ([`HwMmio`] on a device, the
    /// model's recorder in tests).
    ///
    /// # Safety
    /// `qp`'s RQ buffer and record must stay valid while the RQ lives
    /// (`keepalive` may own them), the RQ must be fresh (nothing posted) and
    /// posted by nothing else (no `ibv_post_recv` on this QP).
    pub unsafe fn from_dv(
        qp: &mlx5dv_qp,
        qpn: u32,
        keepalive: KeepAlive,
        mmio: M,
    ) -> Result<Self, DirectError> {
        check_rq_layout(qp)?;
        let shift = qp.rq.stride.trailing_zeros();
        // SAFETY: the buffer holds wqe_cnt strides (checked layout; caller
        // contract for its lifetime and exclusive use), and so does the record.
        let door = unsafe {
            RecvDoor::new(
                (qp.rq.buf, qp.dbrec),
                "rq.buf/dbrec is null (internal: checked by check_rq_layout)",
                |buf| RecvRing::new(RecvKind::Rq, buf, shift, qp.rq.wqe_cnt, 0),
                keepalive,
                mmio,
            )
        }?;
        Ok(Self { door, head: 0, qpn })
    }

    /// The record the CQ poller completes from.
    pub fn ring(&self) -> &Arc<RecvRing> {
        &self.door.ring
    }
    /// The QP number whose receives these are.
    pub fn qpn(&self) -> u32 {
        self.qpn
    }
    /// WQEs posted so far (free-running).
    pub fn posted(&self) -> u32 {
        self.head
    }
    /// Slots free for new receives.
    #[inline(always)]
    pub fn room(&self) -> u32 {
        let ring = &self.door.ring;
        ring.slots() - self.head.wrapping_sub(ring.done())
    }

    #[inline(always)]
    fn doorbell(&self) {
        self.door.ring_at(self.head);
    }
}

impl<M: Mmio> RecvQueue for DirectRq<M> {
    #[inline]
    fn post_recv(&mut self, wr_id: u64, addr: u64, lkey: u32, len: u32) -> Result<(), PostError> {
        if self.room() == 0 {
            return Err(PostError::QueueFull);
        }
        self.door
            .ring
            .shape()
            .write(self.head, wr_id, addr, lkey, len);
        self.head = self.head.wrapping_add(1);
        self.doorbell();
        Ok(())
    }

    /// One doorbell record store for the whole list.
    #[inline]
    fn post_recv_list(&mut self, list: &RecvList<impl Fn(usize) -> u64>) -> Result<(), PostError> {
        let n = list.n;
        if n as u64 > self.room() as u64 {
            return Err(PostError::QueueFull);
        }
        let shape = self.door.ring.shape();
        for k in 0..n {
            let at = self.head.wrapping_add(k as u32);
            shape.write(at, list.wr_id, (list.addr)(k), list.lkey, list.len);
        }
        self.head = self.head.wrapping_add(n as u32);
        if n > 0 {
            self.doorbell();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dv(wqe_cnt: u32, buf: &mut [u64; 4]) -> mlx5dv_qp {
        let mut qp = mlx5dv_qp {
            dbrec: buf.as_mut_ptr().cast(),
            ..Default::default()
        };
        qp.rq.buf = buf.as_mut_ptr().cast();
        qp.rq.wqe_cnt = wqe_cnt;
        qp.rq.stride = 16;
        qp
    }

    /// 65536 slots: the 16-bit record would read a full RQ as empty, so
    /// it is refused with the flag to lower; 32768 is accepted.
    #[test]
    fn an_rq_of_65536_slots_is_refused_with_the_fix() {
        let mut buf = [0u64; 4];
        let e = check_rq_layout(&dv(1 << 16, &mut buf))
            .unwrap_err()
            .to_string();
        assert!(e.contains("rq.wqe_cnt = 0x10000"), "{e}");
        assert!(e.contains("16 bits") && e.contains("--rx-depth"), "{e}");
        assert!(check_rq_layout(&dv(1 << 15, &mut buf)).is_ok());
        assert!(check_rq_layout(&dv(3, &mut buf)).is_err());
    }
}
