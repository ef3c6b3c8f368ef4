//! The rig for the direct path on the queue model (feature `model`): the
//! requester is a `DirectSq` + `DirectCq` on model memory, the peer the
//! model's receive queue; the NIC runs inline ([`Rig::progress`] steps it).
//! Recovery resets the model QP and builds a fresh SQ, as a QP moved
//! through RESET gets on a device. `drop_wqes` tells the model to lose
//! WQEs, for the test that a corrupted case fails.

use super::cases::Tr;
use super::exec::{BufRef, Rig};
use crate::mlx5::env::BfPolicy;
use crate::mlx5::prm::Syndrome;
use crate::mlx5::{DirectCq, DirectSq};
use crate::model::{Access, Model, ModelConfig, ModelMmio, ModelTransport};
use crate::post::{
    Completion, CompletionQueue, Op, PostError, SendQueue, WcOpcode, WcStatus, WrDesc,
};

const BUF: usize = 64 * 1024;
const PEER_QPN: u32 = 0x00ee_0001;
const QKEY: u32 = 0x1111_1111;

pub struct ModelRig {
    tr: Tr,
    // Drop order: the queues before the model, the model before the buffers.
    sq: Option<DirectSq<ModelMmio>>,
    cq: Option<DirectCq>,
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
            cqe_cnt: 512,
            cqe_size,
            transport,
            record_history: false,
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
        let (sq, cq) = model.pair()?;
        let mut rig = ModelRig {
            tr,
            sq: Some(sq),
            cq: Some(cq),
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
        match self.cq.as_mut() {
            Some(cq) => cq.poll(out),
            None => Err(PostError::Unsupported),
        }
    }
    fn post_recv(&mut self, wr_id: u64, addr: u64, len: u32) -> Result<(), String> {
        self.model
            .post_peer_recv(wr_id, addr as *mut u8, len, self.rkey);
        Ok(())
    }
    fn poll_recv(&mut self, out: &mut Vec<Completion>) -> Result<(), String> {
        for c in self.model.take_peer_completions() {
            out.push(Completion {
                wr_id: c.wr_id,
                status: if c.ok {
                    WcStatus::SUCCESS
                } else {
                    WcStatus::LOC_LEN_ERR
                },
                opcode: if c.opcode == crate::mlx5::prm::Opcode::RDMA_WRITE_IMM.0 {
                    WcOpcode::RECV_RDMA_WITH_IMM
                } else {
                    WcOpcode::RECV
                },
                byte_len: c.byte_len,
                imm: c.imm.map_or(0, u32::from_ne_bytes),
                ..Completion::default()
            });
        }
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
        0
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
