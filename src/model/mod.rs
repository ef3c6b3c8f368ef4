//! A PRM-faithful software model of mlx5 QPs' send queues and the CQ they
//! share, for tests and benches (cargo feature `model`; never offered as a
//! device).
//!
//! The model owns SQ, CQ, doorbell-record and UAR memory laid out as
//! `mlx5dv_qp` / `mlx5dv_cq` describe (`dv_qp()`, `dv_cq()`), so the direct
//! SQ/CQ are built by the very constructors used after `mlx5dv_init_obj`.
//! `ModelConfig::qps` QPs (QPNs `qpn`, `qpn + 1`, ...) each have their own
//! SQ ring, doorbell record and UAR page (as QPs on separate thread-domain
//! UARs do) and complete on one CQ: each CQE carries its QPN and that SQ's
//! WQE counter. The NIC serves the QPs round-robin (`nic.rs`).
//! Its NIC side ([`Model::step`] for deterministic tests, or a thread via
//! [`Model::start`]) follows the doorbell protocol from the stores recorded
//! by [`ModelMmio`], parses WQEs from the ring bytes with its own decoder
//! (`decode.rs`, sharing nothing with the encoder), executes WRITE,
//! WRITE_IMM, READ, SEND(_IMM), fetch-add and compare-swap between
//! registered regions (loopback: the "remote" side is this process; each
//! QP's peer has its own receive queue, see [`Model::post_peer_recv_on`]
//! and `nic.rs` for RNR back-pressure), and
//! writes CQEs honouring CQ_UPDATE, including error CQEs with the syndromes
//! hardware reports, then flush CQEs for everything after an error.
//!
//! ```
//! use rdmaperf::model::{Access, Model, ModelConfig};
//! use rdmaperf::post::{Completion, CompletionQueue, Op, SendQueue, WrDesc};
//!
//! let (mut src, mut dst) = (vec![7u8; 64], vec![0u8; 64]); // outlive the model
//! let model = Model::new(ModelConfig::default()).unwrap();
//! let (mut sq, mut cq) = model.pair().unwrap(); // DirectSq<ModelMmio>, DirectCq
//! // SAFETY: both buffers outlive the model.
//! let (l, r) = unsafe {
//!     (model.register(src.as_mut_ptr(), 64, Access::ALL),
//!      model.register(dst.as_mut_ptr(), 64, Access::ALL))
//! };
//! let wr = WrDesc { wr_id: 1, laddr: src.as_ptr() as u64, lkey: l.lkey, len: 64,
//!                   raddr: dst.as_ptr() as u64, rkey: r.rkey, signaled: true,
//!                   ..WrDesc::default() };
//! sq.post(Op::Write, &[wr]).unwrap(); // WQE + BlueFlame doorbell, recorded
//! assert_eq!(model.step(), 1);         // the NIC executes it and writes a CQE
//! let mut wc = [Completion::default(); 4];
//! assert_eq!(cq.poll(&mut wc).unwrap(), 1); // also retires the SQ slot
//! assert_eq!((wc[0].wr_id, &dst), (1, &src));
//! assert!(model.violations().is_empty());
//! ```
//!
//! For benches, `pair_with(HwMmio)` posts with the real stores into model
//! memory and [`Model::step_dbrec`] executes up to the doorbell record.

pub mod cq_arm;
mod decode;
mod mem;
mod mmio;
mod nic;
pub mod recv;
pub mod setup;
pub mod workers;

use std::any::Any;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

pub use mmio::{MmioEvent, ModelMmio};
pub use nic::NicStats;
pub use setup::{Inject, ModelSteps};

use crate::mlx5::prm::BF_OFFSET;
use crate::mlx5::seg::DatagramSeg;
use crate::mlx5::{DirectCq, DirectSq, Mmio, Transport};
use crate::sys;
use mem::Region;
use nic::{Mr, Nic, PeerRecv};
pub use recv::RecvSpec;
use recv::{RecvHw, RecvMem};

/// Which transport the modelled QP is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelTransport {
    /// RC: all operations; SENDs need a peer receive or fail with RNR.
    Rc,
    /// UD: SENDs only; delivered when the AV names `peer_qpn` with `qkey`
    /// and a peer receive is posted, silently dropped otherwise.
    Ud { peer_qpn: u32, qkey: u32 },
}

/// Shape of the modelled queues.
#[derive(Clone, Copy, Debug)]
pub struct ModelConfig {
    /// SQ size in WQEBBs (power of two, <= 32768).
    pub wqe_cnt: u32,
    /// CQ entries (power of two, >= 2).
    pub cqe_cnt: u32,
    /// Bytes per CQ entry: 64, or 128 (`MLX5_CQE_SIZE=128`: the 64-byte CQE
    /// is written in the second half, the first half stays as allocated).
    pub cqe_size: u32,
    /// BlueFlame half size: 0 (doorbells only) or a multiple of 64, <= 1024.
    pub bf_size: u32,
    /// QPN of the first QP; QP `i` has `qpn + i`.
    pub qpn: u32,
    /// Number of QPs (SQs) completing on the one CQ (1..=256).
    pub qps: u32,
    pub transport: ModelTransport,
    /// RC `rnr_retry` (as `ibv_qp_attr`): a SEND/WRITE_IMM without a peer
    /// receive is retried this many NIC steps before RNR_RETRY_EXC_ERR; 7
    /// retries forever (back-pressure, perftest's setting). Default 0.
    pub rnr_retry: u8,
    /// Keep every MMIO event for [`Model::history`] (turn off for long runs).
    pub record_history: bool,
    /// Real receive rings at the peers (RQ per QP, or one SRQ), posted by
    /// `mlx5::rq`/`mlx5::srq` and completed on the one CQ; `None`: the
    /// abstract peer queues of [`Model::post_peer_recv_on`].
    pub recv: Option<RecvSpec>,
}

impl Default for ModelConfig {
    fn default() -> Self {
        Self {
            wqe_cnt: 64,
            cqe_cnt: 64,
            cqe_size: 64,
            bf_size: 256,
            qpn: 0x000123,
            qps: 1,
            transport: ModelTransport::Rc,
            rnr_retry: 0,
            record_history: true,
            recv: None,
        }
    }
}

/// Memory-region access rights (values as `IBV_ACCESS_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access(pub u32);

impl Access {
    pub const LOCAL_WRITE: Self = Self(1);
    pub const REMOTE_WRITE: Self = Self(2);
    pub const REMOTE_READ: Self = Self(4);
    pub const REMOTE_ATOMIC: Self = Self(8);
    pub const ALL: Self = Self(15);
    /// Local read only (a gather source).
    pub const NONE: Self = Self(0);
}

/// Keys of a registered region (as on mlx5, lkey == rkey).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MrKeys {
    pub lkey: u32,
    pub rkey: u32,
}

/// A receive completed at the modelled peer (SEND, SEND_IMM, WRITE_IMM).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerCompletion {
    /// Index of the sending QP (0-based; its QPN is `qpn + qp`).
    pub qp: u32,
    pub wr_id: u64,
    pub byte_len: u32,
    /// The send opcode that consumed it.
    pub opcode: u8,
    /// Immediate data as on the wire.
    pub imm: Option<[u8; 4]>,
    /// False when the message did not fit.
    pub ok: bool,
}

/// One QP's memory: its SQ ring, doorbell record and UAR page.
pub(crate) struct QpMem {
    pub(crate) sq: Region,
    pub(crate) dbrec: Region,
    pub(crate) uar: Region,
}

pub(crate) struct Mem {
    pub(crate) qps: Vec<QpMem>,
    pub(crate) cq: Region,
    pub(crate) cq_dbrec: Region,
    /// The CQ's UAR (arm doorbells; the poller never arms).
    pub(crate) cq_uar: Region,
    /// The peers' receive rings (`ModelConfig::recv`): one per QP, or one SRQ.
    pub(crate) recv: Vec<RecvMem>,
}

struct Log {
    /// (QP index, event), in program order.
    pending: VecDeque<(usize, MmioEvent)>,
    history: Vec<(usize, MmioEvent)>,
    /// A peer receive was posted: a stalled (RNR) QP may proceed.
    kicked: bool,
}

/// State shared by the model handle, its MMIO recorders, its NIC thread and
/// (as keep-alive) the queues built on its memory.
pub struct Shared {
    cfg: ModelConfig,
    pub(crate) mem: Mem,
    log: Mutex<Log>,
    wake: Condvar,
    nic: Mutex<Nic>,
    stop: AtomicBool,
    queues_taken: AtomicBool,
    /// Completion events of an armed CQ (`cq_arm`).
    pub(crate) events_cv: Condvar,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Host-order value of a big-endian 32-bit record in model memory.
fn load_be32(p: *mut u8) -> u32 {
    // SAFETY: callers pass 4-aligned doorbell records inside model memory;
    // read atomically because a producer or poller may store concurrently.
    let raw = unsafe { AtomicU32::from_ptr(p.cast()) }.load(Ordering::Acquire);
    u32::from_be_bytes(raw.to_ne_bytes())
}

impl Shared {
    pub(crate) fn push(&self, q: usize, e: MmioEvent) {
        let mut log = lock(&self.log);
        log.pending.push_back((q, e));
        if self.cfg.record_history {
            log.history.push((q, e));
        }
        drop(log);
        self.wake.notify_one();
    }
    pub(crate) fn bf_reg(&self, q: usize) -> *mut u8 {
        self.mem.qps[q].uar.ptr().wrapping_add(BF_OFFSET)
    }
    fn kick(&self) {
        lock(&self.log).kicked = true;
        self.wake.notify_one();
    }
    fn step(&self) -> usize {
        let mut nic = lock(&self.nic);
        let events = {
            let mut log = lock(&self.log);
            log.kicked = false;
            std::mem::take(&mut log.pending)
        };
        for (q, e) in events {
            nic.event(&self.mem, &self.cfg, q, e);
        }
        let before = nic.events;
        let n = nic.schedule(&self.mem, &self.cfg);
        if nic.events != before {
            self.events_cv.notify_all();
        }
        n
    }

    /// The CQ's arm record (`dbrec[MLX5_CQ_ARM_DB]`), host order.
    pub(crate) fn cq_arm_record(&self) -> u32 {
        load_be32(self.mem.cq_dbrec.ptr().wrapping_add(4))
    }
}

/// The model: memory, NIC, and an optional NIC thread.
pub struct Model {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl Model {
    /// Allocates the queues. CQEs start as INVALID with owner 0, as libmlx5
    /// initialises them.
    pub fn new(cfg: ModelConfig) -> Result<Self, String> {
        if !cfg.wqe_cnt.is_power_of_two() || cfg.wqe_cnt > 1 << 15 {
            return Err(format!(
                "model: wqe_cnt {} must be a power of two <= 32768",
                cfg.wqe_cnt
            ));
        }
        if !cfg.cqe_cnt.is_power_of_two() || cfg.cqe_cnt < 2 || cfg.cqe_cnt > 1 << 22 {
            return Err(format!(
                "model: cqe_cnt {} must be a power of two >= 2",
                cfg.cqe_cnt
            ));
        }
        if !matches!(cfg.cqe_size, 64 | 128) {
            return Err(format!(
                "model: cqe_size {} must be 64 or 128",
                cfg.cqe_size
            ));
        }
        if cfg.bf_size % 64 != 0 || cfg.bf_size > 1024 {
            return Err(format!(
                "model: bf_size {} must be 0 or a multiple of 64 <= 1024",
                cfg.bf_size
            ));
        }
        if cfg.qps == 0 || cfg.qps > 256 {
            return Err(format!("model: qps {} must be 1..=256", cfg.qps));
        }
        if cfg
            .qpn
            .checked_add(cfg.qps - 1)
            .map_or(true, |q| q > 0x00ff_ffff)
        {
            return Err(format!(
                "model: qpn {:#x} + {} QPs exceeds 24 bits",
                cfg.qpn, cfg.qps
            ));
        }
        let mem = Mem {
            qps: (0..cfg.qps)
                .map(|_| QpMem {
                    sq: Region::new(cfg.wqe_cnt as usize * 64, 4096),
                    dbrec: Region::new(64, 64),
                    uar: Region::new(4096, 4096),
                })
                .collect(),
            cq: Region::new(cfg.cqe_cnt as usize * cfg.cqe_size as usize, 4096),
            cq_dbrec: Region::new(64, 64),
            cq_uar: Region::new(4096, 4096),
            recv: match cfg.recv {
                None => Vec::new(),
                Some(spec) => {
                    check_recv(&cfg, &spec)?;
                    let n = if spec.srq { 1 } else { cfg.qps };
                    (0..n).map(|_| RecvMem::new(&spec)).collect()
                }
            },
        };
        let size = cfg.cqe_size as usize;
        for i in 0..cfg.cqe_cnt as usize {
            // SAFETY: the last byte of entry i lies inside the CQ region;
            // nobody else has the memory yet. The first half of a 128-byte
            // entry gets a pattern a poller must never mistake for a CQE.
            unsafe {
                let e = mem.cq.ptr().add(i * size);
                if size == 128 {
                    std::ptr::write_bytes(e, 0xa5, 64);
                }
                e.add(size - 1).write(0xf0);
            }
        }
        let mut nic = Nic::new(cfg.qps as usize);
        nic.recv = mem.recv.iter().map(RecvHw::new).collect();
        let shared = Arc::new(Shared {
            cfg,
            mem,
            log: Mutex::new(Log {
                pending: VecDeque::new(),
                history: Vec::new(),
                kicked: false,
            }),
            wake: Condvar::new(),
            nic: Mutex::new(nic),
            stop: AtomicBool::new(false),
            queues_taken: AtomicBool::new(false),
            events_cv: Condvar::new(),
        });
        Ok(Self {
            shared,
            thread: None,
        })
    }

    pub fn config(&self) -> ModelConfig {
        self.shared.cfg
    }

    /// QP 0 as `mlx5dv_init_obj` would describe it (no RQ).
    pub fn dv_qp(&self) -> sys::mlx5dv_qp {
        self.dv_qp_of(0)
    }

    /// QP `q` (0-based, `< qps`) as `mlx5dv_init_obj` would describe it.
    /// Panics on an index out of range (test setup error).
    pub fn dv_qp_of(&self, q: usize) -> sys::mlx5dv_qp {
        let m = &self.shared.mem.qps[q];
        let mut qp = sys::mlx5dv_qp {
            dbrec: m.dbrec.ptr().cast(),
            ..Default::default()
        };
        qp.sq.buf = m.sq.ptr().cast();
        qp.sq.wqe_cnt = self.shared.cfg.wqe_cnt;
        qp.sq.stride = 64;
        qp.rq.buf = m.sq.ptr().cast();
        qp.bf.reg = self.shared.bf_reg(q).cast();
        qp.bf.size = self.shared.cfg.bf_size;
        qp
    }

    /// The receiving peer of QP `q` as `mlx5dv_init_obj` would describe its
    /// QP: `rq` and `dbrec` (word 0 the receive record). Needs
    /// `ModelConfig::recv` with RQs.
    pub fn recv_dv_qp(&self, q: usize) -> Result<sys::mlx5dv_qp, String> {
        let spec = self.recv_spec()?;
        let m = match self.shared.mem.recv.get(q) {
            Some(m) if !spec.srq => m,
            _ => {
                return Err(format!(
                    "model: no RQ for QP {q} (SRQ model, or out of range)"
                ))
            }
        };
        let mut qp = sys::mlx5dv_qp {
            dbrec: m.dbrec.ptr().cast(),
            ..Default::default()
        };
        qp.rq.buf = m.buf.ptr().cast();
        qp.rq.wqe_cnt = spec.slots;
        qp.rq.stride = spec.stride;
        Ok(qp)
    }

    /// The peers' SRQ as `mlx5dv_init_obj` would describe it (fresh:
    /// head 0, tail the last slot). Needs `ModelConfig::recv` with `srq`.
    pub fn recv_dv_srq(&self) -> Result<sys::mlx5dv_srq, String> {
        let spec = self.recv_spec()?;
        let m = match self.shared.mem.recv.first() {
            Some(m) if spec.srq => m,
            _ => return Err("model: no SRQ (the receive spec has RQs)".into()),
        };
        Ok(sys::mlx5dv_srq {
            buf: m.buf.ptr().cast(),
            dbrec: m.dbrec.ptr().cast(),
            stride: spec.stride,
            head: 0,
            tail: spec.slots - 1,
            ..Default::default()
        })
    }

    /// QPN of QP `q`'s receiving peer (`ModelConfig::recv`).
    pub fn recv_qpn(&self, q: usize) -> Option<u32> {
        self.shared.cfg.recv.map(|r| r.qpn + q as u32)
    }

    fn recv_spec(&self) -> Result<RecvSpec, String> {
        self.shared
            .cfg
            .recv
            .ok_or_else(|| "model: no receive rings (ModelConfig::recv is None)".into())
    }

    /// QPN of QP `q`.
    pub fn qpn_of(&self, q: usize) -> u32 {
        self.shared.cfg.qpn + q as u32
    }

    /// The CQ as `mlx5dv_init_obj` would describe it.
    pub fn dv_cq(&self) -> sys::mlx5dv_cq {
        let m = &self.shared.mem;
        sys::mlx5dv_cq {
            buf: m.cq.ptr().cast(),
            dbrec: m.cq_dbrec.ptr().cast(),
            cqe_cnt: self.shared.cfg.cqe_cnt,
            cqe_size: self.shared.cfg.cqe_size,
            cq_uar: m.cq_uar.ptr().cast(),
            cqn: 1,
            comp_mask: 0,
        }
    }

    /// A recorder of stores into QP 0's memory.
    pub fn mmio(&self) -> ModelMmio {
        self.mmio_of(0)
    }

    /// A recorder of stores into QP `q`'s memory (its doorbell record and UAR).
    pub fn mmio_of(&self, q: usize) -> ModelMmio {
        ModelMmio {
            shared: Arc::clone(&self.shared),
            qp: q,
        }
    }

    /// The direct SQ of QP 0 (recording MMIO) and the CQ (attached) on this
    /// model's queues. Once per model: a second SQ would post into the same
    /// ring.
    pub fn pair(&self) -> Result<(DirectSq<ModelMmio>, DirectCq), String> {
        self.pair_with(self.mmio())
    }

    /// Every QP's direct SQ (recording MMIO), in QP order, and the one CQ
    /// with all of them attached. Once per model (instead of `pair`).
    pub fn queues(&self) -> Result<(Vec<DirectSq<ModelMmio>>, DirectCq), String> {
        self.take_queues()?;
        let mut sqs = Vec::with_capacity(self.shared.cfg.qps as usize);
        for q in 0..self.shared.cfg.qps as usize {
            sqs.push(self.sq_of(q, self.mmio_of(q))?);
        }
        let mut cq = self.cq()?;
        for sq in &sqs {
            cq.attach(sq.progress());
        }
        Ok((sqs, cq))
    }

    /// As [`pair`](Self::pair) with any MMIO implementation (e.g. `HwMmio`
    /// for benches, then drive the NIC with [`step_dbrec`](Self::step_dbrec)).
    pub fn pair_with<M: Mmio>(&self, mmio: M) -> Result<(DirectSq<M>, DirectCq), String> {
        self.take_queues()?;
        let sq = self.sq_of(0, mmio)?;
        let mut dcq = self.cq()?;
        dcq.attach(sq.progress());
        Ok((sq, dcq))
    }

    /// As [`pair_with`](Self::pair_with) with the SQ's transport given (e.g.
    /// a UD address vector built as the tool builds it from an AH) instead
    /// of the one `ModelConfig::transport` implies.
    pub fn pair_with_transport<M: Mmio>(
        &self,
        mmio: M,
        transport: Transport,
    ) -> Result<(DirectSq<M>, DirectCq), String> {
        self.take_queues()?;
        let qp = self.dv_qp_of(0);
        // SAFETY: as in `sq_of`: model memory kept alive by the SQ, fresh
        // ring with this SQ as its only producer, QP 0's own UAR.
        let sq = unsafe { DirectSq::from_dv(&qp, self.qpn_of(0), transport, mmio, self.keep()) }
            .map_err(|e| e.to_string())?;
        let mut dcq = self.cq()?;
        dcq.attach(sq.progress());
        Ok((sq, dcq))
    }

    /// QP `q`'s SQ built outside `pair`/`queues` (e.g. a QP the poller is
    /// not told about: its CQEs are unknown to it).
    ///
    /// # Safety
    /// Once per QP, and not for a QP `pair`/`queues` built: a ring must have
    /// one producer.
    pub unsafe fn extra_sq(&self, q: usize) -> Result<DirectSq<ModelMmio>, String> {
        self.sq_of(q, self.mmio_of(q))
    }

    fn take_queues(&self) -> Result<(), String> {
        if self.shared.queues_taken.swap(true, Ordering::AcqRel) {
            return Err(
                "model: the SQ/CQ queues were already created (pair or queues, once per model)"
                    .into(),
            );
        }
        Ok(())
    }

    fn keep(&self) -> Option<Arc<dyn Any + Send + Sync>> {
        Some(Arc::clone(&self.shared) as Arc<dyn Any + Send + Sync>)
    }

    /// The CQ poller (call once, from `take_queues` callers).
    fn cq(&self) -> Result<DirectCq, String> {
        let cq = self.dv_cq();
        // SAFETY: the memory is owned by `shared`, which the poller keeps
        // alive; created once per model (`take_queues`).
        unsafe { DirectCq::from_dv(&cq, self.keep()) }.map_err(|e| e.to_string())
    }

    /// QP `q`'s SQ (call once per QP, from `take_queues` callers).
    fn sq_of<M: Mmio>(&self, q: usize, mmio: M) -> Result<DirectSq<M>, String> {
        let transport = match self.shared.cfg.transport {
            ModelTransport::Rc => Transport::Rc,
            ModelTransport::Ud { peer_qpn, qkey } => Transport::Ud(
                DatagramSeg::new(0, 0, 0, 0, 0, 0x0001, [0; 6], 0, 64, 0, [0; 16])
                    .with_ud_dest(peer_qpn, qkey),
            ),
        };
        let qp = self.dv_qp_of(q);
        // SAFETY: the memory is owned by `shared`, which the SQ keeps alive;
        // the ring is fresh and this SQ is its only producer (once per model,
        // `take_queues`); the BlueFlame register is on this QP's own UAR.
        unsafe { DirectSq::from_dv(&qp, self.qpn_of(q), transport, mmio, self.keep()) }
            .map_err(|e| e.to_string())
    }

    /// Registers `addr..addr+len` for the NIC; returns its keys.
    ///
    /// # Safety
    /// The range must stay valid (and, for write access, writable by the
    /// NIC side at any time, possibly from its thread) while the model lives.
    pub unsafe fn register(&self, addr: *mut u8, len: usize, access: Access) -> MrKeys {
        let mut nic = lock(&self.shared.nic);
        let key = ((nic.mrs.len() as u32 + 1) << 8) | 0x42;
        nic.mrs.push(Mr {
            addr: addr as u64,
            len: len as u64,
            key,
            access,
        });
        MrKeys {
            lkey: key,
            rkey: key,
        }
    }

    /// Posts a receive at QP 0's modelled peer (consumed by SEND, SEND_IMM
    /// and WRITE_IMM); the buffer must lie in a region registered with
    /// LOCAL_WRITE.
    pub fn post_peer_recv(&self, wr_id: u64, addr: *mut u8, len: u32, lkey: u32) {
        self.post_peer_recv_on(0, wr_id, addr, len, lkey);
    }

    /// Posts a receive at QP `q`'s peer (each RC QP has its own remote QP
    /// and receive queue, consumed in order) and wakes the NIC thread so an
    /// RNR-stalled QP retries.
    pub fn post_peer_recv_on(&self, q: usize, wr_id: u64, addr: *mut u8, len: u32, lkey: u32) {
        lock(&self.shared.nic).qps[q].peer_rq.push_back(PeerRecv {
            wr_id,
            addr: addr as u64,
            len,
            lkey,
        });
        self.shared.kick();
    }

    /// Receives completed at every peer so far (drained), in NIC order.
    pub fn take_peer_completions(&self) -> Vec<PeerCompletion> {
        std::mem::take(&mut lock(&self.shared.nic).peer_done)
    }

    /// Receives completed at QP `q`'s peer so far (drained; others kept).
    pub fn take_peer_completions_of(&self, q: usize) -> Vec<PeerCompletion> {
        let mut nic = lock(&self.shared.nic);
        let (mine, rest) = std::mem::take(&mut nic.peer_done)
            .into_iter()
            .partition(|c| c.qp as usize == q);
        nic.peer_done = rest;
        mine
    }

    /// Fault injection: the next `n` WQEs (any QP) complete without being
    /// executed, as if the NIC lost them.
    pub fn drop_next_wqes(&self, n: u32) {
        lock(&self.shared.nic).drop_wqes = n;
    }

    /// Fault injection: the next `n` receives taken from the SRQ
    /// (`ModelConfig::recv` with `srq`) hit an ODP page fault: the NIC
    /// drops the WQE with a RESP_ERR CQE (REMOTE_ABORTED, vendor syndrome
    /// 0x93) and RNR-NAKs the sender, which retries the message.
    pub fn fault_next_srq_receives(&self, n: u32) {
        lock(&self.shared.nic).odp_faults = n;
    }

    /// Moves QP `q` through RESET back to RTS: the NIC forgets its ring
    /// position and error state, the SQ doorbell record reads 0. Build its
    /// SQ again with [`extra_sq`](Self::extra_sq) and
    /// `DirectCq::reattach` it; stores of the old SQ not yet processed are
    /// discarded.
    pub fn reset_qp(&self, q: usize) {
        let mut nic = lock(&self.shared.nic);
        lock(&self.shared.log).pending.retain(|e| e.0 != q);
        nic.reset_qp(q);
        let rec = self.shared.mem.qps[q].dbrec.ptr().wrapping_add(4);
        // SAFETY: the SQ record lies in QP q's 64-byte dbrec region; stored
        // atomically as every record is (a poller may read it).
        unsafe { AtomicU32::from_ptr(rec.cast()) }.store(0, Ordering::Release);
    }

    /// QP `q`'s peer RQ through RESET (`ModelConfig::recv` with RQs): the
    /// NIC forgets its position and the receive record reads 0, as libmlx5
    /// zeroes both record words; build its `DirectRq` again. An SRQ is not
    /// the QP's and stays.
    pub fn reset_recv(&self, q: usize) {
        if !self.shared.cfg.recv.is_some_and(|r| !r.srq) {
            return;
        }
        let Some(m) = self.shared.mem.recv.get(q) else {
            return;
        };
        lock(&self.shared.nic).recv[q] = RecvHw::new(m);
        // SAFETY: word 0 of the ring's record region, stored atomically as
        // every record is.
        unsafe { AtomicU32::from_ptr(m.dbrec.ptr().cast()) }.store(0, Ordering::Release);
    }

    /// Processes every recorded store so far; returns WQEs executed.
    pub fn step(&self) -> usize {
        self.shared.step()
    }

    /// Executes WQEs up to each SQ's doorbell record, ignoring recorded
    /// stores (for producers that use the real `HwMmio` on model memory).
    pub fn step_dbrec(&self) -> usize {
        let pis: Vec<u16> = (0..self.shared.cfg.qps as usize)
            .map(|q| self.sq_dbrec_of(q) as u16)
            .collect();
        lock(&self.shared.nic).poll_dbrec(&self.shared.mem, &self.shared.cfg, &pis)
    }

    /// Runs the NIC on its own thread until [`stop`](Self::stop) or drop.
    pub fn start(&mut self) {
        if self.thread.is_some() {
            return;
        }
        self.shared.stop.store(false, Ordering::Release);
        let s = Arc::clone(&self.shared);
        // Each step is also one RNR timer tick, so an idle thread still
        // steps every few milliseconds (an RNR-stalled QP retries).
        self.thread = Some(std::thread::spawn(move || loop {
            {
                let log = lock(&s.log);
                if log.pending.is_empty() && !log.kicked && !s.stop.load(Ordering::Acquire) {
                    drop(s.wake.wait_timeout(log, Duration::from_millis(2)));
                }
            }
            s.step();
            if s.stop.load(Ordering::Acquire) {
                break;
            }
        }));
    }

    /// Stops the NIC thread (after it processed what was recorded).
    pub fn stop(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.wake.notify_all();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    /// Every MMIO event so far, all QPs interleaved (if `record_history`).
    pub fn history(&self) -> Vec<MmioEvent> {
        lock(&self.shared.log).history.iter().map(|e| e.1).collect()
    }
    /// QP `q`'s MMIO events so far (if `record_history`).
    pub fn history_of(&self, q: usize) -> Vec<MmioEvent> {
        let log = lock(&self.shared.log);
        log.history
            .iter()
            .filter(|e| e.0 == q)
            .map(|e| e.1)
            .collect()
    }
    pub fn clear_history(&self) {
        lock(&self.shared.log).history.clear();
    }
    /// Protocol violations and rejected WQEs the NIC noticed.
    pub fn violations(&self) -> Vec<String> {
        lock(&self.shared.nic).violations.clone()
    }
    /// True once a WQE of any QP failed (everything after it on that QP is
    /// flushed).
    pub fn qp_in_error(&self) -> bool {
        lock(&self.shared.nic).qp_in_error()
    }
    /// True once a WQE of QP `q` failed.
    pub fn qp_in_error_of(&self, q: usize) -> bool {
        lock(&self.shared.nic).qps[q].in_error()
    }
    /// Counters over all QPs.
    pub fn stats(&self) -> NicStats {
        lock(&self.shared.nic).stats
    }
    /// QP `q`'s counters.
    pub fn stats_of(&self, q: usize) -> NicStats {
        lock(&self.shared.nic).qps[q].stats
    }
    /// A copy of QP 0's SQ ring bytes (for tests; racy while the NIC thread runs).
    pub fn sq_bytes(&self) -> Vec<u8> {
        let r = &self.shared.mem.qps[0].sq;
        let mut v = vec![0u8; r.len()];
        // SAFETY: reads the whole region; callers use it when no producer runs.
        unsafe { std::ptr::copy_nonoverlapping(r.ptr(), v.as_mut_ptr(), r.len()) };
        v
    }
    /// QP 0's SQ doorbell record value (host order).
    pub fn sq_dbrec(&self) -> u32 {
        self.sq_dbrec_of(0)
    }
    /// QP `q`'s SQ doorbell record value (host order).
    pub fn sq_dbrec_of(&self, q: usize) -> u32 {
        load_be32(self.shared.mem.qps[q].dbrec.ptr().wrapping_add(4))
    }
    /// The CQ consumer-index record value (host order, 24 bits).
    pub fn cq_ci_record(&self) -> u32 {
        load_be32(self.shared.mem.cq_dbrec.ptr())
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The receive spec's own checks (a bad test set-up, said plainly).
fn check_recv(cfg: &ModelConfig, r: &RecvSpec) -> Result<(), String> {
    let min_stride = if r.srq { 32 } else { 16 };
    // An RQ may be described with 65536 slots, as a device would, so that
    // the direct path's refusal of it can be tested (`mlx5::rq`).
    let max_slots = if r.srq { 1 << 15 } else { 1 << 16 };
    if !r.slots.is_power_of_two() || r.slots < 2 || r.slots > max_slots {
        return Err(format!(
            "model: recv slots {} must be a power of two 2..={max_slots}",
            r.slots
        ));
    }
    if !r.stride.is_power_of_two() || r.stride < min_stride || r.stride > 1024 {
        return Err(format!(
            "model: recv stride {} must be a power of two {min_stride}..=1024",
            r.stride
        ));
    }
    if r.out_of_order && r.srq {
        return Err("model: out_of_order applies to RQs (an SRQ follows its links)".into());
    }
    if r.qpn
        .checked_add(cfg.qps - 1)
        .map_or(true, |q| q > 0x00ff_ffff)
    {
        return Err(format!(
            "model: recv qpn {:#x} + {} QPs exceeds 24 bits",
            r.qpn, cfg.qps
        ));
    }
    Ok(())
}
