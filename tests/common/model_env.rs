//! The queue model with its direct queues and two registered buffers: the
//! rig the model tests post through (feature `model`).

use super::mlx5::libmlx5_av;
use rdmaperf::mlx5::device::ud_av;
use rdmaperf::mlx5::{DirectCq, DirectSq, Mmio, Transport};
use rdmaperf::model::{Access, MmioEvent, Model, ModelConfig, ModelMmio, ModelTransport, MrKeys};
use rdmaperf::post::{Completion, CompletionQueue, PostError, WrDesc};

/// Bytes in each buffer.
pub const BUF: usize = 1 << 16;

/// Model + direct send queue(s) `Q` (one `DirectSq`, or one per QP) + CQ +
/// one local and one remote buffer, registered. Field order is drop order:
/// the model (and its thread) goes first.
pub struct Env<Q = DirectSq<ModelMmio>> {
    pub model: Model,
    pub sq: Q,
    pub cq: DirectCq,
    pub local: Box<[u8]>,
    pub remote: Box<[u8]>,
    pub lk: MrKeys,
    pub rk: MrKeys,
}

/// The env around `model` and its queues: a patterned local buffer and a
/// zeroed remote one, both registered for all access.
pub fn with_bufs<Q>(model: Model, sq: Q, cq: DirectCq) -> Env<Q> {
    let mut local: Box<[u8]> = (0..BUF).map(|i| (i * 7 + 3) as u8).collect();
    let mut remote: Box<[u8]> = vec![0u8; BUF].into_boxed_slice();
    // SAFETY: both boxes live in the Env, after the model in drop order,
    // and are only read by the test between NIC steps.
    let (lk, rk) = unsafe { register_pair(&model, &mut local, &mut remote) };
    Env {
        model,
        sq,
        cq,
        local,
        remote,
        lk,
        rk,
    }
}

/// [`with_bufs`] for one SQ, the local buffer also its inline source.
pub fn finish<M: Mmio>(model: Model, sq: DirectSq<M>, cq: DirectCq) -> Env<DirectSq<M>> {
    let mut e = with_bufs(model, sq, cq);
    // SAFETY: `local` outlives the SQ (same Env, dropped later).
    unsafe { e.sq.allow_inline_source(e.local.as_ptr(), BUF) }.unwrap();
    e
}

impl<Q> Env<Q> {
    /// A signaled WR of `len` bytes from `local + loff` to `remote + roff`.
    pub fn wr(&self, id: u64, loff: usize, roff: usize, len: u32) -> WrDesc {
        let laddr = self.local.as_ptr() as u64 + loff as u64;
        let raddr = self.remote.as_ptr() as u64 + roff as u64;
        signaled_wr(id, (laddr, self.lk.lkey), (raddr, self.rk.rkey), len)
    }
}

/// `local` and `remote`, whole, registered with `model` for all access.
///
/// # Safety
/// Both buffers must stay in place until the model is gone (its NIC reads
/// and writes them).
pub unsafe fn register_pair(
    model: &Model,
    local: &mut [u8],
    remote: &mut [u8],
) -> (MrKeys, MrKeys) {
    // SAFETY: the caller keeps both buffers alive for the model.
    unsafe {
        (
            model.register(local.as_mut_ptr(), local.len(), Access::ALL),
            model.register(remote.as_mut_ptr(), remote.len(), Access::ALL),
        )
    }
}

/// A signaled WR of `len` bytes from `(laddr, lkey)` to `(raddr, rkey)`.
pub fn signaled_wr(
    wr_id: u64,
    (laddr, lkey): (u64, u32),
    (raddr, rkey): (u64, u32),
    len: u32,
) -> WrDesc {
    WrDesc {
        wr_id,
        laddr,
        lkey,
        len,
        raddr,
        rkey,
        signaled: true,
        ..WrDesc::default()
    }
}

/// The Q_Key of the UD tests' queue pairs (perftest's `DEF_QKEY`).
pub const QKEY: u32 = 0x1111_1111;

/// A model whose QP is UD to `peer_qpn` with `qkey` (the rest from `cfg`),
/// and its direct SQ/CQ, the SQ sending with the AV libmlx5 builds for an AH
/// to `peer_qpn` and `av_qkey` (the peer's `qkey`, or another to be dropped).
pub fn ud_model(
    cfg: ModelConfig,
    peer_qpn: u32,
    qkey: u32,
    av_qkey: u32,
) -> (Model, DirectSq<ModelMmio>, DirectCq) {
    let model = Model::new(ModelConfig {
        transport: ModelTransport::Ud { peer_qpn, qkey },
        ..cfg
    })
    .unwrap();
    let transport = Transport::Ud(ud_av(libmlx5_av(), peer_qpn, av_qkey));
    let (sq, cq) = model.pair_with_transport(model.mmio(), transport).unwrap();
    (model, sq, cq)
}

/// The doorbell stores in a model's MMIO record `h`: (8-byte doorbells,
/// BlueFlame chunks).
pub fn doorbell_kinds(h: &[MmioEvent]) -> (usize, usize) {
    let count = |kind: fn(&MmioEvent) -> bool| h.iter().filter(|e| kind(e)).count();
    (
        count(|e| matches!(e, MmioEvent::Db64 { .. })),
        count(|e| matches!(e, MmioEvent::Bf64 { .. })),
    )
}

/// A raw Ethernet model of two QPs from QPN `qpn` (no minimum inline, no history) whose
/// RQs hold `slots` receives each: the raw receive tests' NIC.
pub fn raw_recv_model(qpn: u32, cqe_cnt: u32, slots: u32) -> Model {
    Model::new(ModelConfig {
        cqe_cnt,
        ..ModelConfig::raw_eth_host(2, qpn, slots)
    })
    .unwrap()
}

/// `rx` registered for the NIC to write into, `tx` for it to read frames from.
///
/// # Safety
/// Both buffers must stay in place until the model is gone.
pub unsafe fn register_rx_tx(model: &Model, rx: &mut [u8], tx: &mut [u8]) -> (MrKeys, MrKeys) {
    // SAFETY: the caller keeps both buffers alive for the model.
    unsafe {
        (
            model.register(rx.as_mut_ptr(), rx.len(), Access::LOCAL_WRITE),
            model.register(tx.as_mut_ptr(), tx.len(), Access::NONE),
        )
    }
}

/// The model's CQ, stepping its NIC before each poll (as the worker CQ of
/// the threads engine does).
pub struct Stepping<'a> {
    pub cq: DirectCq,
    pub model: &'a Model,
}

impl CompletionQueue for Stepping<'_> {
    fn poll(&mut self, out: &mut [Completion]) -> Result<usize, PostError> {
        self.model.step();
        self.cq.poll(out)
    }
}
