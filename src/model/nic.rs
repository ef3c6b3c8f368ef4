//! The NIC side of the model: follows each QP's doorbell protocol from the
//! recorded stores, fetches WQEs from the ring bytes, executes them between
//! registered regions and writes CQEs into the one CQ all SQs share. Anything
//! a real NIC would reject or that breaks the protocol is recorded as a
//! violation (tests assert there are none).
//!
//! Scheduling: a doorbell only makes WQEs eligible (up to its producer
//! index); each [`Nic::schedule`] then serves the QPs round-robin, one WQE
//! per QP per pass, until none can progress — so a busy or stalled QP never
//! holds back another, as the NIC's send arbiter does.
//!
//! Receives (RC): a SEND or WRITE_IMM needs a receive posted at the peer QP.
//! When none is, the responder answers RNR NAK and the requester retries the
//! same message after its RNR timer; `rnr_retry` 7 retries forever (perftest's
//! setting), 0..6 that many times before the WQE completes with
//! RNR_RETRY_EXC_ERR and the QP enters the error state. The model has no
//! clock: each schedule (NIC step) is one RNR timer expiry, and a stalled
//! QP's later WQEs wait behind it (RC executes in order).

use std::collections::VecDeque;
use std::ptr;
use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};

use super::config::{Access, ModelConfig, ModelTransport, PeerCompletion};
use super::decode::{self, op, synd, vendor, CqeOut, Ctrl, Payload, Sge};
use super::eth_port::EthPort;
use super::event::MmioEvent;
use super::flow::EthRx;
use super::mem::Mem;
use super::recv::RecvHw;

/// Counters of what the NIC did (for the whole model or one QP).
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct NicStats {
    pub doorbells: u64,
    pub blueflame_doorbells: u64,
    pub wqes: u64,
    pub cqes: u64,
    pub error_cqes: u64,
    pub ud_dropped: u64,
    /// SEND/WRITE_IMM attempts answered with RNR NAK (no peer receive).
    pub rnr_naks: u64,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct Mr {
    pub addr: u64,
    pub len: u64,
    pub key: u32,
    pub access: Access,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct PeerRecv {
    pub wr_id: u64,
    pub addr: u64,
    pub len: u32,
    pub lkey: u32,
}

/// Where a QP's doorbell protocol stands.
#[derive(Debug)]
enum Db {
    Idle,
    /// `store_fence_dma` seen.
    Fenced,
    /// Doorbell record written.
    Recorded,
    /// `store_fence_wc` after the record: UAR stores may follow.
    Ready,
    Db8 {
        offset: isize,
        bytes: [u8; 8],
    },
    Bf {
        offset: isize,
        chunks: Vec<[u8; 64]>,
    },
}

type Fail = (u8, u8);

/// One message for QP `q`'s peer to receive: a SEND's or a WRITE_IMM's
/// bytes, opcode and immediate, and whether finding no receive posted is
/// an error (RC/UC: RNR) or a silent drop (UD).
#[derive(Clone, Copy)]
pub(crate) struct Msg<'a> {
    pub q: usize,
    pub data: &'a [u8],
    pub opcode: u8,
    pub imm: Option<[u8; 4]>,
    pub rnr_is_error: bool,
}

impl<'a> Msg<'a> {
    fn new(q: usize, data: &'a [u8], opcode: u8, imm: Option<[u8; 4]>, rnr_is_error: bool) -> Self {
        Self {
            q,
            data,
            opcode,
            imm,
            rnr_is_error,
        }
    }
}

/// A WQE the NIC cannot parse: a local QP operation error, vendor syndrome "malformed".
const MALFORMED: Result<u32, Fail> = Err((synd::LOCAL_QP_OP, vendor::MALFORMED));

/// One QP's send-side state.
pub(crate) struct Qp {
    /// Next WQEBB the NIC executes.
    exec_pi: u16,
    /// Producer index of the last complete doorbell: executable up to here.
    rung_pi: u16,
    error: bool,
    db: Db,
    last_dbrec: Option<u16>,
    bf_expect: u32,
    /// Consecutive RNR NAKs of the WQE at `exec_pi`.
    rnr_fails: u32,
    /// A malformed WQE reported at (exec_pi, rung_pi): not reported again.
    stuck_at: Option<(u16, u16)>,
    pub(crate) peer_rq: VecDeque<PeerRecv>,
    pub(crate) stats: NicStats,
}

impl Qp {
    fn new() -> Self {
        Self {
            exec_pi: 0,
            rung_pi: 0,
            error: false,
            db: Db::Idle,
            last_dbrec: None,
            bf_expect: 0,
            rnr_fails: 0,
            stuck_at: None,
            peer_rq: VecDeque::new(),
            stats: NicStats::default(),
        }
    }
    pub(crate) fn in_error(&self) -> bool {
        self.error
    }
}

/// What one attempt at a QP's next WQE did.
enum Attempt {
    Executed,
    /// Nothing more this schedule (RNR NAK, malformed, CQ full).
    Blocked,
}

/// A pending arm request (`cq_arm.rs` reads it from the UAR doorbell).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Arm {
    pub(crate) sn: u32,
    pub(crate) solicited: bool,
    pub(crate) ci: u32,
}

pub(crate) struct Nic {
    pub(crate) qps: Vec<Qp>,
    cq_pi: u32,
    cq_overrun: bool,
    pub(crate) mrs: Vec<Mr>,
    pub(crate) peer_done: Vec<PeerCompletion>,
    pub(crate) violations: Vec<String>,
    pub(crate) stats: NicStats,
    /// Fault injection: this many WQEs are consumed and completed without
    /// being executed (a NIC that loses them), for tests that must fail.
    pub(crate) drop_wqes: u32,
    /// Fault injection: this many SRQ receives hit an ODP page fault (the
    /// WQE dropped with a RESP_ERR CQE, the sender RNR-NAKed).
    pub(crate) odp_faults: u32,
    /// The peers' real receive rings (`ModelConfig::recv`).
    pub(crate) recv: Vec<RecvHw>,
    /// Responder CQEs of the WQE being executed, written before its own.
    pub(crate) resp_cqes: Vec<CqeOut>,
    /// The CQ's pending arm request, and events raised (`cq_arm`).
    pub(crate) armed: Option<Arm>,
    pub(crate) events: u32,
    /// Events handed to the application (`Model::wait_cq_event`): the arm
    /// sequence number each arm must carry (mod 4).
    pub(crate) events_taken: u32,
    /// A raw packet QP's Ethernet port (`ModelTransport::RawEth`).
    pub(crate) eth: EthPort,
    /// Its receive side: the flow table and counters (`eth_rx.rs`).
    pub(crate) eth_rx: EthRx,
}

impl Nic {
    pub(crate) fn new(qps: usize) -> Self {
        Self {
            qps: (0..qps).map(|_| Qp::new()).collect(),
            cq_pi: 0,
            cq_overrun: false,
            mrs: Vec::new(),
            peer_done: Vec::new(),
            violations: Vec::new(),
            stats: NicStats::default(),
            drop_wqes: 0,
            odp_faults: 0,
            recv: Vec::new(),
            resp_cqes: Vec::new(),
            armed: None,
            events: 0,
            events_taken: 0,
            eth: EthPort::default(),
            eth_rx: EthRx::default(),
        }
    }

    /// QP `q` back to a fresh state (RESET..RTS): nothing executed, not in
    /// error; its peer's receives and counters stay.
    pub(crate) fn reset_qp(&mut self, q: usize) {
        let fresh = Qp::new();
        let old = std::mem::replace(&mut self.qps[q], fresh);
        self.qps[q].peer_rq = old.peer_rq;
        self.qps[q].stats = old.stats;
    }

    pub(crate) fn qp_in_error(&self) -> bool {
        self.qps.iter().any(Qp::in_error)
    }

    /// Records a violation, naming the QP when the model has several.
    fn violation(&mut self, cfg: &ModelConfig, q: usize, s: String) {
        if cfg.qps > 1 {
            let qpn = cfg.qpn + q as u32;
            self.violations.push(format!("QP {qpn:#x}: {s}"));
        } else {
            self.violations.push(s);
        }
    }

    /// Counts `f` in the model's and QP `q`'s stats.
    fn count(&mut self, q: usize, f: impl Fn(&mut NicStats)) {
        f(&mut self.stats);
        f(&mut self.qps[q].stats);
    }

    /// Advances QP `q`'s protocol by one recorded store. A complete doorbell
    /// makes its WQEs eligible; [`schedule`](Self::schedule) executes them.
    pub(crate) fn event(&mut self, mem: &Mem, cfg: &ModelConfig, q: usize, e: MmioEvent) {
        let state = std::mem::replace(&mut self.qps[q].db, Db::Idle);
        let next = match (state, e) {
            (Db::Idle, MmioEvent::FenceDma) => Db::Fenced,
            // A repeated fence is harmless.
            (s @ (Db::Fenced | Db::Recorded | Db::Ready), MmioEvent::FenceDma) => s,
            (s @ (Db::Db8 { .. } | Db::Bf { .. }), MmioEvent::FenceDma) => {
                self.violation(
                    cfg,
                    q,
                    "doorbell not followed by store_fence_wc before the next post".into(),
                );
                self.ring(mem, cfg, q, s);
                Db::Fenced
            }
            (s, MmioEvent::Dbrec { offset, value }) => {
                if !matches!(s, Db::Fenced) {
                    self.violation(cfg, q, format!(
                        "doorbell record written without store_fence_dma after the WQE stores (state {s:?})"
                    ));
                }
                if offset != 4 {
                    self.violation(
                        cfg,
                        q,
                        format!(
                        "doorbell record store at dbrec+{offset}, the SQ record is dbrec[1] (+4)"
                    ),
                    );
                }
                if value > 0xffff {
                    self.violation(
                        cfg,
                        q,
                        format!("doorbell record value {value:#x} exceeds 16 bits"),
                    );
                }
                self.qps[q].last_dbrec = Some(value as u16);
                Db::Recorded
            }
            (Db::Recorded, MmioEvent::FenceWc) => Db::Ready,
            (s @ (Db::Db8 { .. } | Db::Bf { .. }), MmioEvent::FenceWc) => {
                self.ring(mem, cfg, q, s);
                Db::Idle
            }
            (s, MmioEvent::FenceWc) => s,
            (s, MmioEvent::Db64 { offset, bytes }) => {
                if !matches!(s, Db::Ready) {
                    self.violation(cfg, q, format!(
                        "8-byte doorbell without doorbell record + store_fence_wc before it (state {s:?})"
                    ));
                }
                Db::Db8 { offset, bytes }
            }
            (Db::Bf { offset, mut chunks }, MmioEvent::Bf64 { offset: o, bytes }) => {
                if o != offset + 64 * chunks.len() as isize {
                    self.violation(cfg, q, format!(
                        "BlueFlame chunk at +{o}, expected +{} (chunks must be written in ascending order)",
                        offset + 64 * chunks.len() as isize
                    ));
                }
                chunks.push(bytes);
                Db::Bf { offset, chunks }
            }
            (s, MmioEvent::Bf64 { offset, bytes }) => {
                if !matches!(s, Db::Ready) {
                    self.violation(cfg, q, format!(
                        "BlueFlame write without doorbell record + store_fence_wc before it (state {s:?})"
                    ));
                }
                Db::Bf {
                    offset,
                    chunks: vec![bytes],
                }
            }
        };
        self.qps[q].db = next;
    }

    /// A complete doorbell: check it against the ring, then make the WQEs
    /// up to the doorbell record eligible for execution.
    fn ring(&mut self, mem: &Mem, cfg: &ModelConfig, q: usize, db: Db) {
        self.count(q, |s| s.doorbells += 1);
        let offset = match &db {
            Db::Db8 { offset, .. } | Db::Bf { offset, .. } => *offset,
            _ => return,
        };
        self.check_bf_half(cfg, q, offset);
        let Some(pi) = self.qps[q].last_dbrec else {
            self.violation(cfg, q, "doorbell before any doorbell record".into());
            return;
        };
        let Some((n, last)) = self.announced(mem, cfg, q, pi) else {
            self.violation(cfg, q, "doorbell with no new WQE".into());
            return;
        };
        match db {
            Db::Db8 { bytes, .. } if bytes[..] != last[..8] => {
                self.violation(
                    cfg,
                    q,
                    format!(
                        "8-byte doorbell {bytes:02x?} is not the last WQE's first 8 bytes {:02x?}",
                        &last[..8]
                    ),
                );
            }
            Db::Bf { chunks, .. } => self.check_bf_copy(cfg, q, n, &last, &chunks),
            _ => {}
        }
    }

    /// The doorbell's BlueFlame half must alternate between the register's two halves.
    fn check_bf_half(&mut self, cfg: &ModelConfig, q: usize, offset: isize) {
        let expect = self.qps[q].bf_expect;
        if offset != expect as isize {
            self.violation(
                cfg,
                q,
                format!(
                    "doorbell at bf.reg+{offset}, expected +{expect}: the BlueFlame half must alternate"
                ),
            );
        }
        self.qps[q].bf_expect ^= cfg.bf_size;
    }

    /// The WQEs a doorbell at producer index `pi` announces: from the previous doorbell's
    /// producer index to this one (not executed yet, so not reused). Their count and the last
    /// one's bytes, `None` when there is none; an overrun of the SQ is a violation.
    fn announced(
        &mut self,
        mem: &Mem,
        cfg: &ModelConfig,
        q: usize,
        pi: u16,
    ) -> Option<(usize, Vec<u8>)> {
        let (exec_pi, from) = (self.qps[q].exec_pi, self.qps[q].rung_pi);
        let ahead = pi.wrapping_sub(exec_pi) as u32;
        if ahead > cfg.wqe_cnt {
            self.violation(cfg, q, format!(
                "SQ overrun: doorbell record {pi:#x} is {ahead} WQEBBs past the NIC's {exec_pi:#x} in a {}-WQEBB SQ",
                cfg.wqe_cnt
            ));
        }
        let (mut n, mut at, mut last) = (0usize, from, None);
        while at != pi && pi.wrapping_sub(at) as u32 <= cfg.wqe_cnt {
            let head = Self::read_ring(mem, cfg, q, at, 1);
            let nbb = decode::wqebbs(decode::ctrl(&head).ds);
            if nbb > pi.wrapping_sub(at) {
                break; // reported when executed
            }
            last = Some(Self::read_ring(mem, cfg, q, at, nbb));
            at = at.wrapping_add(nbb);
            n += 1;
        }
        self.qps[q].rung_pi = pi;
        last.map(|l| (n, l))
    }

    /// A BlueFlame doorbell: one WQE (no post list), within bf.size, as many 64-byte chunks
    /// as the WQE spans, and the same bytes as the WQE in the ring.
    fn check_bf_copy(
        &mut self,
        cfg: &ModelConfig,
        q: usize,
        n: usize,
        last: &[u8],
        chunks: &[[u8; 64]],
    ) {
        self.count(q, |s| s.blueflame_doorbells += 1);
        let ds = decode::ctrl(last).ds as usize;
        let want = (ds * 16).div_ceil(64);
        if n != 1 {
            self.violation(
                cfg,
                q,
                format!("BlueFlame used for a post list of {n} WQEs"),
            );
        }
        if cfg.bf_size == 0 || chunks.len() * 64 > cfg.bf_size as usize {
            self.violation(
                cfg,
                q,
                format!(
                    "BlueFlame copy of {} bytes exceeds bf.size {}",
                    chunks.len() * 64,
                    cfg.bf_size
                ),
            );
        }
        if chunks.len() != want {
            self.violation(
                cfg,
                q,
                format!(
                    "BlueFlame copy of {} chunks for a WQE of ds {ds} ({want} chunks)",
                    chunks.len()
                ),
            );
        }
        let bf: Vec<u8> = chunks.iter().flatten().copied().collect();
        let m = (ds * 16).min(bf.len()).min(last.len());
        if bf[..m] != last[..m] {
            self.violation(
                cfg,
                q,
                "BlueFlame bytes differ from the WQE in the ring".into(),
            );
        }
    }

    /// Makes every QP's WQEs up to its doorbell record (`pis[q]`) eligible,
    /// with no doorbell checks (for producers that write real, unrecorded
    /// stores), and executes them.
    pub(crate) fn poll_dbrec(&mut self, mem: &Mem, cfg: &ModelConfig, pis: &[u16]) -> usize {
        for (qp, &pi) in self.qps.iter_mut().zip(pis) {
            qp.rung_pi = pi;
        }
        self.schedule(mem, cfg)
    }

    fn read_ring(mem: &Mem, cfg: &ModelConfig, q: usize, bb: u16, nbb: u16) -> Vec<u8> {
        let sq = &mem.qps[q].sq;
        let mut w = vec![0u8; nbb as usize * 64];
        for i in 0..nbb as usize {
            let slot = (bb as usize + i) & (cfg.wqe_cnt as usize - 1);
            // SAFETY: slot < wqe_cnt, so the 64 bytes lie in the SQ region;
            // the producer does not write WQEBBs the NIC has not completed.
            unsafe {
                ptr::copy_nonoverlapping(sq.ptr().add(slot * 64), w.as_mut_ptr().add(i * 64), 64)
            };
        }
        w
    }

    /// Executes eligible WQEs, one per QP per round-robin pass, until no QP
    /// can progress; one call is one RNR timer tick. Returns WQEs executed.
    pub(crate) fn schedule(&mut self, mem: &Mem, cfg: &ModelConfig) -> usize {
        self.flush_errored_recvs(mem, cfg);
        let mut n = 0;
        let mut blocked = vec![false; self.qps.len()];
        loop {
            let mut progressed = false;
            for (q, blocked) in blocked.iter_mut().enumerate() {
                if self.cq_overrun {
                    return n;
                }
                if *blocked || self.qps[q].exec_pi == self.qps[q].rung_pi {
                    continue;
                }
                match self.attempt(mem, cfg, q) {
                    Attempt::Executed => {
                        n += 1;
                        progressed = true;
                    }
                    Attempt::Blocked => *blocked = true,
                }
            }
            if !progressed {
                return n;
            }
        }
    }

    /// Tries QP `q`'s next WQE.
    fn attempt(&mut self, mem: &Mem, cfg: &ModelConfig, q: usize) -> Attempt {
        let (start, pi) = (self.qps[q].exec_pi, self.qps[q].rung_pi);
        let head = Self::read_ring(mem, cfg, q, start, 1);
        let c = decode::ctrl(&head);
        let nbb = decode::wqebbs(c.ds);
        let avail = pi.wrapping_sub(start);
        if nbb > avail {
            if self.qps[q].stuck_at != Some((start, pi)) {
                self.qps[q].stuck_at = Some((start, pi));
                self.violation(cfg, q, format!(
                    "WQE at WQEBB {start:#x} has ds {} ({nbb} WQEBBs) but the doorbell record allows {avail}",
                    c.ds
                ));
            }
            return Attempt::Blocked;
        }
        let w = Self::read_ring(mem, cfg, q, start, nbb);
        let res = if self.qps[q].error {
            Err((synd::WR_FLUSH, vendor::FLUSH))
        } else if self.drop_wqes > 0 {
            self.drop_wqes -= 1;
            Ok(0)
        } else {
            self.exec(cfg, q, &w, start)
        };
        if !self.qps[q].error && res == Err((synd::RNR_RETRY_EXC, vendor::UNKNOWN)) {
            // RNR NAK: retry on a later tick unless the retries are spent.
            self.count(q, |s| s.rnr_naks += 1);
            self.qps[q].rnr_fails += 1;
            if cfg.rnr_retry >= 7 || self.qps[q].rnr_fails <= cfg.rnr_retry as u32 {
                // The receiver's CQEs of this attempt (an ODP fault) are
                // written now, not with the retry.
                for r in std::mem::take(&mut self.resp_cqes) {
                    if !self.write_cqe(mem, cfg, q, &r) {
                        break;
                    }
                }
                return Attempt::Blocked;
            }
        }
        self.qps[q].rnr_fails = 0;
        self.count(q, |s| s.wqes += 1);
        let qpn = cfg.qpn + q as u32;
        let out = match res {
            Ok(byte_cnt) => {
                (c.fm_ce_se & decode::CE_MASK == decode::CE_ALWAYS).then_some(CqeOut::Req {
                    wqe_opcode: c.opcode,
                    qpn,
                    counter: start,
                    byte_cnt,
                })
            }
            Err((syndrome, vendor)) => {
                // IB: every WQE completes with a CQE once in error.
                self.qps[q].error = true;
                self.count(q, |s| s.error_cqes += 1);
                Some(CqeOut::Err {
                    wqe_opcode: c.opcode,
                    qpn,
                    counter: start,
                    syndrome,
                    vendor,
                })
            }
        };
        // The receiver's completion comes first: it precedes the ACK.
        for r in std::mem::take(&mut self.resp_cqes) {
            if !self.write_cqe(mem, cfg, q, &r) {
                return Attempt::Blocked;
            }
        }
        if let Some(cqe) = out {
            if !self.write_cqe(mem, cfg, q, &cqe) {
                return Attempt::Blocked;
            }
        }
        self.qps[q].exec_pi = start.wrapping_add(nbb);
        Attempt::Executed
    }

    /// An arm request: an event at the next CQE, or now when CQEs past the
    /// consumer index it names are already written.
    pub(crate) fn arm(&mut self, a: Arm) {
        if !a.solicited && self.cq_pi.wrapping_sub(a.ci) & 0x00ff_ffff != 0 {
            self.events += 1;
        } else {
            self.armed = Some(a);
        }
    }

    pub(crate) fn write_cqe(&mut self, mem: &Mem, cfg: &ModelConfig, q: usize, c: &CqeOut) -> bool {
        // SAFETY: the CQ doorbell record is model memory, 4-aligned; the
        // poller stores it concurrently, hence the atomic load.
        let raw = unsafe { AtomicU32::from_ptr(mem.cq_dbrec.ptr().cast()) }.load(Ordering::Acquire);
        let ci = u32::from_be_bytes(raw.to_ne_bytes()) & 0x00ff_ffff;
        let used = self.cq_pi.wrapping_sub(ci) & 0x00ff_ffff;
        if used >= cfg.cqe_cnt {
            self.violations.push(format!(
                "CQ overrun: {used} CQEs not yet released (consumer index {ci:#x} in dbrec[0]) \
                 in a {}-entry CQ",
                cfg.cqe_cnt
            ));
            self.cq_overrun = true;
            self.qps[q].error = true;
            return false;
        }
        let idx = (self.cq_pi & (cfg.cqe_cnt - 1)) as usize;
        let owner = ((self.cq_pi >> cfg.cqe_cnt.trailing_zeros()) & 1) as u8;
        let (body, op_own, first_half) = c.compose(cfg.cqe_size == 128);
        // SAFETY: idx < cqe_cnt, so the CQE lies in the CQ region; the poller
        // does not read it until the owner byte below says so (release).
        unsafe {
            let size = cfg.cqe_size as usize;
            if let (Some(h), 128) = (first_half, size) {
                ptr::copy_nonoverlapping(h.as_ptr(), mem.cq.ptr().add(idx * size), 64);
            }
            let p = mem.cq.ptr().add(idx * size + size - 64);
            ptr::copy_nonoverlapping(body.as_ptr(), p, 63);
            AtomicU8::from_ptr(p.add(63)).store(op_own | owner, Ordering::Release);
        }
        self.cq_pi = self.cq_pi.wrapping_add(1);
        self.count(q, |s| s.cqes += 1);
        // An armed CQ raises one event at its next CQE; a solicited-only
        // arm (REQ_NOT_SOL) waits for a CQE with SE, which the model's WQEs
        // never ask for.
        if self.armed.is_some_and(|a| !a.solicited) {
            self.armed = None;
            self.events += 1;
        }
        true
    }

    pub(crate) fn mr(&self, key: u32, addr: u64, len: u64, need: u32) -> Option<&Mr> {
        self.mrs.iter().find(|m| {
            m.key == key
                && addr >= m.addr
                && addr.checked_add(len).is_some_and(|e| e <= m.addr + m.len)
                && m.access.0 & need == need
        })
    }

    fn gather(&self, p: &Payload) -> Result<Vec<u8>, Fail> {
        match p {
            Payload::Inline(v) => Ok(v.clone()),
            Payload::Sges(v) => {
                let mut out = Vec::new();
                for s in v {
                    if self.mr(s.key, s.addr, s.len as u64, 0).is_none() {
                        return Err((synd::LOCAL_PROT, vendor::LKEY));
                    }
                    let at = out.len();
                    out.resize(at + s.len as usize, 0);
                    // SAFETY: the range lies inside a registered region, which
                    // `register`'s contract keeps valid.
                    unsafe {
                        ptr::copy(
                            s.addr as *const u8,
                            out.as_mut_ptr().add(at),
                            s.len as usize,
                        )
                    };
                }
                Ok(out)
            }
        }
    }

    fn scatter(&self, sges: &[Sge], data: &[u8]) -> Result<(), Fail> {
        let mut at = 0usize;
        for s in sges {
            if self
                .mr(s.key, s.addr, s.len as u64, Access::LOCAL_WRITE.0)
                .is_none()
            {
                return Err((synd::LOCAL_PROT, vendor::LKEY));
            }
            let n = (s.len as usize).min(data.len() - at);
            // SAFETY: inside a registered, locally writable region.
            unsafe { ptr::copy(data.as_ptr().add(at), s.addr as *mut u8, n) };
            at += n;
        }
        Ok(())
    }

    fn remote(&self, rkey: u32, addr: u64, len: u64, need: Access) -> Result<*mut u8, Fail> {
        match self.mr(rkey, addr, len, need.0) {
            Some(_) => Ok(addr as *mut u8),
            None => Err((synd::REMOTE_ACCESS, vendor::RKEY)),
        }
    }

    /// A message found no receive posted at QP `q`'s peer: RC/UC answer
    /// RNR NAK (the caller retries or fails the WQE), UD drops it.
    pub(crate) fn no_receive(&mut self, q: usize, rnr_is_error: bool) -> Result<(), Fail> {
        if rnr_is_error {
            Err((synd::RNR_RETRY_EXC, vendor::UNKNOWN))
        } else {
            self.count(q, |s| s.ud_dropped += 1);
            Ok(())
        }
    }

    fn deliver(&mut self, cfg: &ModelConfig, m: Msg) -> Result<(), Fail> {
        if cfg.recv.is_some() {
            return self.deliver_direct(cfg, m);
        }
        let (q, data) = (m.q, m.data);
        let Some(r) = self.qps[q].peer_rq.pop_front() else {
            return self.no_receive(q, m.rnr_is_error);
        };
        let fits = data.len() as u64 <= r.len as u64;
        if fits
            && self
                .mr(r.lkey, r.addr, data.len() as u64, Access::LOCAL_WRITE.0)
                .is_none()
        {
            return Err((synd::REMOTE_OP, vendor::UNKNOWN));
        }
        if fits && m.opcode != op::RDMA_WRITE_IMM {
            // SAFETY: inside a registered, writable region (checked above).
            unsafe { ptr::copy(data.as_ptr(), r.addr as *mut u8, data.len()) };
        }
        self.peer_done.push(PeerCompletion {
            qp: q as u32,
            wr_id: r.wr_id,
            byte_len: data.len() as u32,
            opcode: m.opcode,
            imm: m.imm,
            ok: fits,
        });
        if fits {
            Ok(())
        } else {
            Err((synd::REMOTE_INVAL_REQ, vendor::REM_INV))
        }
    }

    /// Executes one WQE; Ok(byte count for the CQE) or Err((syndrome, vendor)).
    fn exec(&mut self, cfg: &ModelConfig, q: usize, w: &[u8], start: u16) -> Result<u32, Fail> {
        let c = decode::ctrl(w);
        if c.index != start {
            self.violation(
                cfg,
                q,
                format!("ctrl WQE index {:#x} at producer index {start:#x}", c.index),
            );
            return MALFORMED;
        }
        if c.qpn != cfg.qpn + q as u32 || c.ds == 0 {
            return MALFORMED;
        }
        if c.opmod != 0 {
            return Err((synd::LOCAL_QP_OP, vendor::BAD_OPCODE));
        }
        if let ModelTransport::RawEth { min_inline } = cfg.transport {
            let mut port = std::mem::take(&mut self.eth);
            let r = port.exec(w, &c, min_inline as usize, |k, a, l| {
                self.mr(k, a, l, 0).is_some()
            });
            self.eth = port;
            return r;
        }
        let ud = matches!(cfg.transport, ModelTransport::Ud { .. });
        match c.opcode {
            op::NOP => Ok(0),
            op::RDMA_WRITE | op::RDMA_WRITE_IMM | op::RDMA_READ if !ud => {
                self.exec_rdma(cfg, q, w, &c)
            }
            op::SEND | op::SEND_IMM => self.exec_send(cfg, q, w, &c),
            op::ATOMIC_CS | op::ATOMIC_FA if !ud => self.exec_atomic(w, c.opcode, c.ds as usize),
            _ => Err((synd::LOCAL_QP_OP, vendor::BAD_OPCODE)),
        }
    }

    /// RDMA WRITE (with immediate: delivered to the peer's receive queue too) or READ.
    fn exec_rdma(&mut self, cfg: &ModelConfig, q: usize, w: &[u8], c: &Ctrl) -> Result<u32, Fail> {
        let (opcode, imm, ds) = (c.opcode, c.imm, c.ds as usize);
        let raddr = decode::be64(w, 16);
        let rkey = decode::be32(w, 24);
        let Ok(p) = decode::payload(w, 2, ds) else {
            return MALFORMED;
        };
        let len = p.len();
        if opcode == op::RDMA_READ {
            let Payload::Sges(sges) = p else {
                return MALFORMED;
            };
            let src = self.remote(rkey, raddr, len, Access::REMOTE_READ)?;
            let mut data = vec![0u8; len as usize];
            // SAFETY: inside a registered, remotely readable region.
            unsafe { ptr::copy(src, data.as_mut_ptr(), len as usize) };
            self.scatter(&sges, &data)?;
        } else {
            let data = self.gather(&p)?;
            let dst = self.remote(rkey, raddr, len, Access::REMOTE_WRITE)?;
            if opcode == op::RDMA_WRITE_IMM {
                self.deliver(cfg, Msg::new(q, &data, opcode, Some(imm), true))?;
            }
            // SAFETY: inside a registered, remotely writable region.
            unsafe { ptr::copy(data.as_ptr(), dst, data.len()) };
        }
        Ok(len as u32)
    }

    /// SEND (with immediate) into the peer's receive queue; UD checks the Q_Key and the
    /// destination QP and drops what does not match, as a UD QP does.
    fn exec_send(&mut self, cfg: &ModelConfig, q: usize, w: &[u8], c: &Ctrl) -> Result<u32, Fail> {
        let (opcode, imm, ds) = (c.opcode, c.imm, c.ds as usize);
        let imm = (opcode == op::SEND_IMM).then_some(imm);
        let ud = matches!(cfg.transport, ModelTransport::Ud { .. });
        let Ok(p) = decode::payload(w, if ud { 4 } else { 1 }, ds) else {
            return MALFORMED;
        };
        let data = self.gather(&p)?;
        if let ModelTransport::Ud { peer_qpn, qkey } = cfg.transport {
            let got_qkey = decode::be32(w, 16);
            let dqp = decode::be32(w, 24) & 0x00ff_ffff;
            if got_qkey != qkey || dqp != peer_qpn {
                self.count(q, |s| s.ud_dropped += 1);
                return Ok(data.len() as u32);
            }
            self.deliver(cfg, Msg::new(q, &data, opcode, imm, false))?;
        } else {
            self.deliver(cfg, Msg::new(q, &data, opcode, imm, true))?;
        }
        Ok(data.len() as u32)
    }

    /// CMP_AND_SWAP or FETCH_AND_ADD on 8 aligned remote bytes; the old value lands locally.
    fn exec_atomic(&mut self, w: &[u8], opcode: u8, ds: usize) -> Result<u32, Fail> {
        let raddr = decode::be64(w, 16);
        let rkey = decode::be32(w, 24);
        let swap_add = decode::be64(w, 32);
        let compare = decode::be64(w, 40);
        let Ok(Payload::Sges(sges)) = decode::payload(w, 3, ds) else {
            return MALFORMED;
        };
        if sges.len() != 1 || sges[0].len != 8 {
            return MALFORMED;
        }
        if raddr % 8 != 0 {
            return Err((synd::REMOTE_INVAL_REQ, vendor::REM_INV));
        }
        let dst = self
            .remote(rkey, raddr, 8, Access::REMOTE_ATOMIC)?
            .cast::<u64>();
        if self
            .mr(sges[0].key, sges[0].addr, 8, Access::LOCAL_WRITE.0)
            .is_none()
        {
            return Err((synd::LOCAL_PROT, vendor::LKEY));
        }
        // SAFETY: 8 aligned bytes inside a registered atomic region.
        let old = unsafe { dst.read() };
        let new = if opcode == op::ATOMIC_FA {
            old.wrapping_add(swap_add)
        } else if old == compare {
            swap_add
        } else {
            old
        };
        // SAFETY: as above.
        unsafe { dst.write(new) };
        self.scatter(&sges, &old.to_ne_bytes())?;
        Ok(8)
    }
}
