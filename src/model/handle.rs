//! The model handle ([`Model`]) and the state it shares with its MMIO
//! recorders, its NIC thread and (as keep-alive) the queues built on its
//! memory ([`Shared`]): creation, the `mlx5dv_*` descriptions of its queues,
//! registration, fault injection, stepping the NIC and what tests read back.
//! The queues themselves are built in `queues.rs`.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use super::config::{check_recv, Access, ModelConfig, MrKeys, PeerCompletion, RecvSpec};
use super::event::MmioEvent;
use super::mem::{Mem, QpMem, RecvMem, Region};
use super::nic::{Mr, Nic, NicStats, PeerRecv};
use super::recv::RecvHw;
use crate::mlx5::prm::BF_OFFSET;
use crate::sys;

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
    pub(crate) cfg: ModelConfig,
    pub(crate) mem: Mem,
    log: Mutex<Log>,
    wake: Condvar,
    pub(crate) nic: Mutex<Nic>,
    stop: AtomicBool,
    pub(crate) queues_taken: AtomicBool,
    /// Completion events of an armed CQ (`cq_arm`).
    pub(crate) events_cv: Condvar,
    /// Stores to the receive rings' records (`recv_mmio`).
    pub(crate) recv_log: Mutex<RecvLog>,
}

/// What the receive records' recorder saw: the last event per ring (the
/// order check) and, with `record_history`, every one.
#[derive(Default)]
pub(crate) struct RecvLog {
    pub(crate) last: Vec<Option<MmioEvent>>,
    pub(crate) history: Vec<(usize, MmioEvent)>,
}

/// The events of queue `i` (a QP, a receive ring) in a recorded `history`, in order.
pub(crate) fn events_of(history: &[(usize, MmioEvent)], i: usize) -> Vec<MmioEvent> {
    history.iter().filter(|e| e.0 == i).map(|e| e.1).collect()
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
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
    pub(crate) shared: Arc<Shared>,
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
            recv_log: Mutex::new(RecvLog::default()),
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

    pub(crate) fn recv_spec(&self) -> Result<RecvSpec, String> {
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

    /// Moves QP `q`'s receiving peer to the error state (`ModelConfig::recv`
    /// with RQs): every receive posted to its RQ completes with a flush CQE
    /// (RESP_ERR, WR_FLUSH), now and whenever more are posted; a message
    /// sent to it is not answered (the sender's retries run out). Returns
    /// the flush CQEs written now.
    pub fn recv_to_error(&self, q: usize) -> usize {
        let mut nic = lock(&self.shared.nic);
        let n = nic.flush_recv(&self.shared.mem, &self.shared.cfg, q);
        drop(nic);
        self.shared.events_cv.notify_all();
        n
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
        events_of(&lock(&self.shared.log).history, q)
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
