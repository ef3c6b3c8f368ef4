//! The rig for the direct path on the queue model (feature `model`): the
//! requester is a `DirectSq` + `DirectCq` on model memory, the peer's
//! receives a `DirectRq` on the model's real RQ ring, completing on the same
//! CQ (a shared CQ: the rig sorts send and receive completions), with
//! scatter-to-CQE on and, for UD, a GRH in front of each receive; the NIC
//! runs inline ([`Rig::progress`] steps it).
//! Recovery resets the model QP and builds a fresh SQ, as a QP moved
//! through RESET gets on a device. `drop_wqes` tells the model to lose
//! WQEs, for the test that a corrupted case fails.

use super::cases::Tr;
use super::exec::{BufRef, Rig};
use crate::mlx5::env::BfPolicy;
use crate::mlx5::prm::Syndrome;
use crate::mlx5::rq::DirectRq;
use crate::mlx5::{DirectCq, DirectSq};
use crate::model::recv::GRH_BYTES;
use crate::model::{
    Access, Model, ModelConfig, ModelMmio, ModelRecvMmio, ModelTransport, RecvSpec,
};
use crate::post::wc::poll_queued;
use crate::post::RecvQueue;
use crate::post::{Completion, CompletionQueue, Op, PostError, SendQueue, WcOpcode, WrDesc};
use std::collections::VecDeque;

const BUF: usize = 64 * 1024;
const PEER_QPN: u32 = 0x00ee_0001;
const QKEY: u32 = 0x1111_1111;

pub struct ModelRig {
    tr: Tr,
    // Drop order: the queues before the model, the model before the buffers.
    sq: Option<DirectSq<ModelMmio>>,
    cq: Option<DirectCq>,
    rq: Option<DirectRq<ModelRecvMmio>>,
    /// The shared CQ's completions, sorted by direction.
    sends: VecDeque<Completion>,
    recvs: Vec<Completion>,
    model: Model,
    local: Box<[u8]>,
    remote: Box<[u8]>,
    lkey: u32,
    rkey: u32,
    policy: BfPolicy,
}

impl ModelRig {
    /// RC or UD (the model has no UC: `Err`). `cqe_size` 64 or 128.
    pub fn new(tr: Tr, cqe_size: u32, policy: BfPolicy) -> Result<Self, String> {
        let transport = match tr {
            Tr::Rc => ModelTransport::Rc,
            Tr::Ud => ModelTransport::Ud {
                peer_qpn: PEER_QPN,
                qkey: QKEY,
            },
            Tr::Uc => return Err("the queue model has no UC transport".into()),
        };
        let model = Model::new(ModelConfig {
            wqe_cnt: 256,
            cqe_cnt: 8192,
            cqe_size,
            transport,
            // perftest's setting, as the tools': a SEND that meets no
            // receive waits (RNR) instead of failing (the late-receive case).
            rnr_retry: 7,
            record_history: false,
            // Room for the receives a case keeps posted (its WRs, up to twice the
            // send ring); the ring wraps several times over the cases.
            recv: Some(RecvSpec {
                slots: 1024,
                stride: 16,
                qpn: PEER_QPN,
                grh: tr == Tr::Ud,
                ..RecvSpec::default()
            }),
            ..ModelConfig::default()
        })?;
        let mut local: Box<[u8]> = vec![0u8; BUF].into();
        let mut remote: Box<[u8]> = vec![0u8; BUF].into();
        // SAFETY: both buffers are owned by the rig and dropped after the
        // model (field order).
        let (l, r) = unsafe {
            (
                model.register(local.as_mut_ptr(), BUF, Access::ALL),
                model.register(remote.as_mut_ptr(), BUF, Access::ALL),
            )
        };
        let (sq, mut cq) = model.pair()?;
        let rq = Self::fresh_rq(&model, &mut cq)?;
        let mut rig = ModelRig {
            tr,
            sq: Some(sq),
            cq: Some(cq),
            rq: Some(rq),
            sends: VecDeque::new(),
            recvs: Vec::new(),
            model,
            local,
            remote,
            lkey: l.lkey,
            rkey: r.rkey,
            policy,
        };
        rig.prepare_sq()?;
        Ok(rig)
    }

    /// The peer's RQ, fresh, attached to the CQ.
    /// Its record is stored through the model's recorder (the order checked).
    fn fresh_rq(model: &Model, cq: &mut DirectCq) -> Result<DirectRq<ModelRecvMmio>, String> {
        let dv = model.recv_dv_qp(0)?;
        let mmio = model.recv_mmio(0);
        // SAFETY: the ring is the model's, which outlives the RQ (field
        // order: queues before the model); nothing else posts to it.
        let rq =
            unsafe { DirectRq::from_dv(&dv, PEER_QPN, None, mmio) }.map_err(|e| e.to_string())?;
        cq.attach_recv(PEER_QPN, rq.ring());
        Ok(rq)
    }

    /// Everything the CQ holds, sorted into sends and receives.
    fn drain(&mut self) -> Result<(), PostError> {
        let Some(cq) = self.cq.as_mut() else {
            return Err(PostError::Unsupported);
        };
        let mut buf = [Completion::default(); 32];
        loop {
            let n = cq.poll(&mut buf)?;
            for c in &buf[..n] {
                if matches!(c.opcode, WcOpcode::RECV | WcOpcode::RECV_RDMA_WITH_IMM) {
                    self.recvs.push(*c);
                } else {
                    self.sends.push_back(*c);
                }
            }
            if n < buf.len() {
                return Ok(());
            }
        }
    }

    fn prepare_sq(&mut self) -> Result<(), String> {
        let sq = self.sq.as_mut().ok_or("no SQ")?;
        sq.set_bf_policy(self.policy);
        // SAFETY: the local buffer outlives the SQ (field order).
        unsafe { sq.allow_inline_source(self.local.as_ptr(), BUF) }.map_err(|e| e.to_string())
    }

    /// The next `n` WQEs complete without being executed (fault injection).
    pub fn drop_wqes(&self, n: u32) {
        self.model.drop_next_wqes(n);
    }

    /// Protocol violations the model noticed.
    pub fn violations(&self) -> Vec<String> {
        self.model.violations()
    }
}

impl Rig for ModelRig {
    fn tr(&self) -> Tr {
        self.tr
    }
    fn max_inline(&self) -> u32 {
        // One WQE of at most 4 WQEBBs less the ctrl (and raddr / UD AV)
        // segments and the inline header, as libmlx5 grants for BlueFlame.
        match self.tr {
            Tr::Ud => 256 - 16 - 48 - 4,
            _ => 256 - 16 - 16 - 4,
        }
    }
    fn sq_depth(&self) -> u32 {
        self.sq.as_ref().map_or(1, |s| s.capacity())
    }
    fn local(&self) -> BufRef {
        BufRef {
            addr: self.local.as_ptr() as u64,
            key: self.lkey,
            len: BUF,
        }
    }
    fn remote(&self) -> BufRef {
        BufRef {
            addr: self.remote.as_ptr() as u64,
            key: self.rkey,
            len: BUF,
        }
    }
    fn local_bytes(&mut self) -> &mut [u8] {
        &mut self.local
    }
    fn remote_bytes(&mut self) -> &mut [u8] {
        &mut self.remote
    }
    fn post(&mut self, op: Op, wrs: &[WrDesc]) -> Result<(), PostError> {
        match self.sq.as_mut() {
            Some(sq) => sq.post(op, wrs),
            None => Err(PostError::Unsupported),
        }
    }
    fn poll(&mut self, out: &mut [Completion]) -> Result<usize, PostError> {
        self.drain()?;
        Ok(poll_queued(&mut self.sends, out))
    }
    fn post_recv(&mut self, wr_id: u64, addr: u64, len: u32) -> Result<(), String> {
        let rkey = self.rkey;
        let rq = self.rq.as_mut().ok_or("no RQ")?;
        rq.post_recv(wr_id, addr, rkey, len)
            .map_err(|e| format!("posting a receive on the direct RQ: {e:?}"))
    }
    fn poll_recv(&mut self, out: &mut Vec<Completion>) -> Result<(), String> {
        self.drain()
            .map_err(|e| format!("polling the direct CQ: {e:?}"))?;
        out.append(&mut self.recvs);
        Ok(())
    }
    fn progress(&mut self) {
        self.model.step();
    }
    fn inject_drop(&mut self, n: u32) -> bool {
        self.drop_wqes(n);
        true
    }
    fn grh(&self) -> u32 {
        if self.tr == Tr::Ud {
            GRH_BYTES as u32
        } else {
            0
        }
    }
    fn recover(&mut self) -> Result<(), String> {
        self.sq = None;
        self.model.reset_qp(0);
        // SAFETY: the old SQ of QP 0 is dropped above, so the new one is the
        // ring's only producer.
        let sq = unsafe { self.model.extra_sq(0) }?;
        let cq = self.cq.as_mut().ok_or("no CQ")?;
        // Drain the flush CQEs of the old SQ before it is forgotten.
        let mut buf = [Completion::default(); 16];
        self.model.step();
        while cq.poll(&mut buf).unwrap_or(0) > 0 {}
        cq.reattach(sq.progress());
        self.sq = Some(sq);
        // The QP's RQ goes through RESET too: a fresh ring position.
        self.rq = None;
        self.model.reset_recv(0);
        let rq = Self::fresh_rq(&self.model, cq)?;
        self.rq = Some(rq);
        self.sends.clear();
        self.recvs.clear();
        self.prepare_sq()
    }
    fn describe_error(&self, c: &Completion) -> String {
        let s = Syndrome(c.syndrome);
        format!(
            "status {} ({}), mlx5 syndrome {:#04x} {}, vendor syndrome {:#04x}",
            c.status.name(),
            c.status.0,
            c.syndrome,
            s.name(),
            c.vendor_err
        )
    }
}
