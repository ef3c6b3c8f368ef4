//! The NIC side of the model: follows the doorbell protocol from the recorded
//! stores, fetches WQEs from the ring bytes, executes them between registered
//! regions and writes CQEs. Anything a real NIC would reject or that breaks
//! the protocol is recorded as a violation (tests assert there are none).

use std::collections::VecDeque;
use std::ptr;
use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};

use super::decode::{self, op, synd, vendor, CqeOut, Payload, Sge};
use super::mmio::MmioEvent;
use super::{Access, Mem, ModelConfig, ModelTransport, PeerCompletion};

/// Counters of what the NIC did.
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
pub struct NicStats {
    pub doorbells: u64,
    pub blueflame_doorbells: u64,
    pub wqes: u64,
    pub cqes: u64,
    pub error_cqes: u64,
    pub ud_dropped: u64,
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

/// Where the doorbell protocol stands.
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

pub(crate) struct Nic {
    exec_pi: u16,
    cq_pi: u32,
    error: bool,
    cq_overrun: bool,
    db: Db,
    last_dbrec: Option<u16>,
    bf_expect: u32,
    pub(crate) mrs: Vec<Mr>,
    pub(crate) peer_rq: VecDeque<PeerRecv>,
    pub(crate) peer_done: Vec<PeerCompletion>,
    pub(crate) violations: Vec<String>,
    pub(crate) stats: NicStats,
}

impl Nic {
    pub(crate) fn new() -> Self {
        Self {
            exec_pi: 0,
            cq_pi: 0,
            error: false,
            cq_overrun: false,
            db: Db::Idle,
            last_dbrec: None,
            bf_expect: 0,
            mrs: Vec::new(),
            peer_rq: VecDeque::new(),
            peer_done: Vec::new(),
            violations: Vec::new(),
            stats: NicStats::default(),
        }
    }

    pub(crate) fn qp_in_error(&self) -> bool {
        self.error
    }

    fn violation(&mut self, s: String) {
        self.violations.push(s);
    }

    /// Advances the protocol by one recorded store; returns WQEs executed.
    pub(crate) fn event(&mut self, mem: &Mem, cfg: &ModelConfig, e: MmioEvent) -> usize {
        let state = std::mem::replace(&mut self.db, Db::Idle);
        match (state, e) {
            (Db::Idle, MmioEvent::FenceDma) => self.db = Db::Fenced,
            (s @ (Db::Fenced | Db::Recorded | Db::Ready), MmioEvent::FenceDma) => {
                // A repeated fence is harmless.
                self.db = s;
            }
            (s @ (Db::Db8 { .. } | Db::Bf { .. }), MmioEvent::FenceDma) => {
                self.violation(
                    "doorbell not followed by store_fence_wc before the next post".into(),
                );
                let n = self.ring(mem, cfg, s);
                self.db = Db::Fenced;
                return n;
            }
            (s, MmioEvent::Dbrec { offset, value }) => {
                if !matches!(s, Db::Fenced) {
                    self.violation(format!(
                        "doorbell record written without store_fence_dma after the WQE stores (state {s:?})"
                    ));
                }
                if offset != 4 {
                    self.violation(format!(
                        "doorbell record store at dbrec+{offset}, the SQ record is dbrec[1] (+4)"
                    ));
                }
                if value > 0xffff {
                    self.violation(format!("doorbell record value {value:#x} exceeds 16 bits"));
                }
                self.last_dbrec = Some(value as u16);
                self.db = Db::Recorded;
            }
            (Db::Recorded, MmioEvent::FenceWc) => self.db = Db::Ready,
            (s @ (Db::Db8 { .. } | Db::Bf { .. }), MmioEvent::FenceWc) => {
                return self.ring(mem, cfg, s);
            }
            (s, MmioEvent::FenceWc) => self.db = s,
            (s, MmioEvent::Db64 { offset, bytes }) => {
                if !matches!(s, Db::Ready) {
                    self.violation(format!(
                        "8-byte doorbell without doorbell record + store_fence_wc before it (state {s:?})"
                    ));
                }
                self.db = Db::Db8 { offset, bytes };
            }
            (Db::Bf { offset, mut chunks }, MmioEvent::Bf64 { offset: o, bytes }) => {
                if o != offset + 64 * chunks.len() as isize {
                    self.violation(format!(
                        "BlueFlame chunk at +{o}, expected +{} (chunks must be written in ascending order)",
                        offset + 64 * chunks.len() as isize
                    ));
                }
                chunks.push(bytes);
                self.db = Db::Bf { offset, chunks };
            }
            (s, MmioEvent::Bf64 { offset, bytes }) => {
                if !matches!(s, Db::Ready) {
                    self.violation(format!(
                        "BlueFlame write without doorbell record + store_fence_wc before it (state {s:?})"
                    ));
                }
                self.db = Db::Bf {
                    offset,
                    chunks: vec![bytes],
                };
            }
        }
        0
    }

    /// A complete doorbell: check it against the ring and execute.
    fn ring(&mut self, mem: &Mem, cfg: &ModelConfig, db: Db) -> usize {
        self.stats.doorbells += 1;
        let offset = match &db {
            Db::Db8 { offset, .. } | Db::Bf { offset, .. } => *offset,
            _ => return 0,
        };
        if offset != self.bf_expect as isize {
            self.violation(format!(
                "doorbell at bf.reg+{offset}, expected +{}: the BlueFlame half must alternate",
                self.bf_expect
            ));
        }
        self.bf_expect ^= cfg.bf_size;
        let Some(pi) = self.last_dbrec else {
            self.violation("doorbell before any doorbell record".into());
            return 0;
        };
        let ahead = pi.wrapping_sub(self.exec_pi) as u32;
        if ahead > cfg.wqe_cnt {
            self.violation(format!(
                "SQ overrun: doorbell record {pi:#x} is {ahead} WQEBBs past the NIC's {:#x} in a {}-WQEBB SQ",
                self.exec_pi, cfg.wqe_cnt
            ));
        }
        let (n, last) = self.execute_up_to(mem, cfg, pi);
        let Some(last) = last else {
            self.violation("doorbell with no new WQE".into());
            return 0;
        };
        match db {
            Db::Db8 { bytes, .. } if bytes[..] != last[..8] => {
                self.violation(format!(
                    "8-byte doorbell {bytes:02x?} is not the last WQE's first 8 bytes {:02x?}",
                    &last[..8]
                ));
            }
            Db::Bf { chunks, .. } => {
                self.stats.blueflame_doorbells += 1;
                let ds = decode::ctrl(&last).ds as usize;
                let want = (ds * 16).div_ceil(64);
                if n != 1 {
                    self.violation(format!("BlueFlame used for a post list of {n} WQEs"));
                }
                if cfg.bf_size == 0 || chunks.len() * 64 > cfg.bf_size as usize {
                    self.violation(format!(
                        "BlueFlame copy of {} bytes exceeds bf.size {}",
                        chunks.len() * 64,
                        cfg.bf_size
                    ));
                }
                if chunks.len() != want {
                    self.violation(format!(
                        "BlueFlame copy of {} chunks for a WQE of ds {ds} ({want} chunks)",
                        chunks.len()
                    ));
                }
                let bf: Vec<u8> = chunks.iter().flatten().copied().collect();
                let m = (ds * 16).min(bf.len()).min(last.len());
                if bf[..m] != last[..m] {
                    self.violation("BlueFlame bytes differ from the WQE in the ring".into());
                }
            }
            _ => {}
        }
        n
    }

    /// Executes up to producer index `pi` (the doorbell record) alone, with
    /// no doorbell checks: for a producer that writes real, unrecorded stores.
    pub(crate) fn poll_dbrec(&mut self, mem: &Mem, cfg: &ModelConfig, pi: u16) -> usize {
        self.execute_up_to(mem, cfg, pi).0
    }

    fn read_ring(mem: &Mem, cfg: &ModelConfig, bb: u16, nbb: u16) -> Vec<u8> {
        let mut w = vec![0u8; nbb as usize * 64];
        for i in 0..nbb as usize {
            let slot = (bb as usize + i) & (cfg.wqe_cnt as usize - 1);
            // SAFETY: slot < wqe_cnt, so the 64 bytes lie in the SQ region;
            // the producer does not write WQEBBs the NIC has not completed.
            unsafe {
                ptr::copy_nonoverlapping(
                    mem.sq.ptr().add(slot * 64),
                    w.as_mut_ptr().add(i * 64),
                    64,
                )
            };
        }
        w
    }

    fn execute_up_to(&mut self, mem: &Mem, cfg: &ModelConfig, pi: u16) -> (usize, Option<Vec<u8>>) {
        let mut n = 0;
        let mut last = None;
        while self.exec_pi != pi && !self.cq_overrun {
            let start = self.exec_pi;
            let head = Self::read_ring(mem, cfg, start, 1);
            let c = decode::ctrl(&head);
            let nbb = decode::wqebbs(c.ds);
            let avail = pi.wrapping_sub(start);
            if nbb > avail {
                self.violation(format!(
                    "WQE at WQEBB {start:#x} has ds {} ({nbb} WQEBBs) but the doorbell record allows {avail}",
                    c.ds
                ));
                break;
            }
            let w = Self::read_ring(mem, cfg, start, nbb);
            let res = if self.error {
                Err((synd::WR_FLUSH, vendor::FLUSH))
            } else {
                self.exec(mem, cfg, &w, start)
            };
            self.stats.wqes += 1;
            let out = match res {
                Ok(byte_cnt) => {
                    (c.fm_ce_se & decode::CE_MASK == decode::CE_ALWAYS).then_some(CqeOut::Req {
                        wqe_opcode: c.opcode,
                        qpn: cfg.qpn,
                        counter: start,
                        byte_cnt,
                    })
                }
                Err((syndrome, vendor)) => {
                    // IB: every WQE completes with a CQE once in error.
                    self.error = true;
                    self.stats.error_cqes += 1;
                    Some(CqeOut::Err {
                        wqe_opcode: c.opcode,
                        qpn: cfg.qpn,
                        counter: start,
                        syndrome,
                        vendor,
                    })
                }
            };
            if let Some(cqe) = out {
                if !self.write_cqe(mem, cfg, &cqe) {
                    break;
                }
            }
            self.exec_pi = start.wrapping_add(nbb);
            n += 1;
            last = Some(w);
        }
        (n, last)
    }

    fn write_cqe(&mut self, mem: &Mem, cfg: &ModelConfig, c: &CqeOut) -> bool {
        // SAFETY: the CQ doorbell record is model memory, 4-aligned; the
        // poller stores it concurrently, hence the atomic load.
        let raw = unsafe { AtomicU32::from_ptr(mem.cq_dbrec.ptr().cast()) }.load(Ordering::Acquire);
        let ci = u32::from_be_bytes(raw.to_ne_bytes()) & 0x00ff_ffff;
        let used = self.cq_pi.wrapping_sub(ci) & 0x00ff_ffff;
        if used >= cfg.cqe_cnt {
            self.violation(format!(
                "CQ overrun: {used} CQEs not yet released (consumer index {ci:#x} in dbrec[0]) \
                 in a {}-entry CQ",
                cfg.cqe_cnt
            ));
            self.cq_overrun = true;
            self.error = true;
            return false;
        }
        let idx = (self.cq_pi & (cfg.cqe_cnt - 1)) as usize;
        let owner = ((self.cq_pi >> cfg.cqe_cnt.trailing_zeros()) & 1) as u8;
        let (body, op_own) = c.compose();
        // SAFETY: idx < cqe_cnt, so the CQE lies in the CQ region; the poller
        // does not read it until the owner byte below says so (release).
        unsafe {
            let p = mem.cq.ptr().add(idx * 64);
            ptr::copy_nonoverlapping(body.as_ptr(), p, 63);
            AtomicU8::from_ptr(p.add(63)).store(op_own | owner, Ordering::Release);
        }
        self.cq_pi = self.cq_pi.wrapping_add(1);
        self.stats.cqes += 1;
        true
    }

    fn mr(&self, key: u32, addr: u64, len: u64, need: u32) -> Option<&Mr> {
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

    fn deliver(
        &mut self,
        data: &[u8],
        opcode: u8,
        imm: Option<[u8; 4]>,
        rnr_is_error: bool,
    ) -> Result<(), Fail> {
        let Some(r) = self.peer_rq.pop_front() else {
            return if rnr_is_error {
                Err((synd::RNR_RETRY_EXC, vendor::UNKNOWN))
            } else {
                self.stats.ud_dropped += 1;
                Ok(())
            };
        };
        let fits = data.len() as u64 <= r.len as u64;
        if fits
            && self
                .mr(r.lkey, r.addr, data.len() as u64, Access::LOCAL_WRITE.0)
                .is_none()
        {
            return Err((synd::REMOTE_OP, vendor::UNKNOWN));
        }
        if fits && opcode != op::RDMA_WRITE_IMM {
            // SAFETY: inside a registered, writable region (checked above).
            unsafe { ptr::copy(data.as_ptr(), r.addr as *mut u8, data.len()) };
        }
        self.peer_done.push(PeerCompletion {
            wr_id: r.wr_id,
            byte_len: data.len() as u32,
            opcode,
            imm,
            ok: fits,
        });
        if fits {
            Ok(())
        } else {
            Err((synd::REMOTE_INVAL_REQ, vendor::REM_INV))
        }
    }

    /// Executes one WQE; Ok(byte count for the CQE) or Err((syndrome, vendor)).
    fn exec(&mut self, _mem: &Mem, cfg: &ModelConfig, w: &[u8], start: u16) -> Result<u32, Fail> {
        let c = decode::ctrl(w);
        let malformed = Err((synd::LOCAL_QP_OP, vendor::MALFORMED));
        if c.index != start {
            self.violation(format!(
                "ctrl WQE index {:#x} at producer index {start:#x}",
                c.index
            ));
            return malformed;
        }
        if c.qpn != cfg.qpn || c.ds == 0 {
            return malformed;
        }
        if c.opmod != 0 {
            return Err((synd::LOCAL_QP_OP, vendor::BAD_OPCODE));
        }
        let ud = matches!(cfg.transport, ModelTransport::Ud { .. });
        let ds = c.ds as usize;
        let imm = matches!(c.opcode, op::RDMA_WRITE_IMM | op::SEND_IMM).then_some(c.imm);
        match c.opcode {
            op::NOP => Ok(0),
            op::RDMA_WRITE | op::RDMA_WRITE_IMM | op::RDMA_READ if !ud => {
                let raddr = decode::be64(w, 16);
                let rkey = decode::be32(w, 24);
                let Ok(p) = decode::payload(w, 2, ds) else {
                    return malformed;
                };
                let len = p.len();
                if c.opcode == op::RDMA_READ {
                    let Payload::Sges(sges) = p else {
                        return malformed;
                    };
                    let src = self.remote(rkey, raddr, len, Access::REMOTE_READ)?;
                    let mut data = vec![0u8; len as usize];
                    // SAFETY: inside a registered, remotely readable region.
                    unsafe { ptr::copy(src, data.as_mut_ptr(), len as usize) };
                    self.scatter(&sges, &data)?;
                } else {
                    let data = self.gather(&p)?;
                    let dst = self.remote(rkey, raddr, len, Access::REMOTE_WRITE)?;
                    if c.opcode == op::RDMA_WRITE_IMM {
                        self.deliver(&data, c.opcode, imm, true)?;
                    }
                    // SAFETY: inside a registered, remotely writable region.
                    unsafe { ptr::copy(data.as_ptr(), dst, data.len()) };
                }
                Ok(len as u32)
            }
            op::SEND | op::SEND_IMM => {
                let from = if ud { 4 } else { 1 };
                let Ok(p) = decode::payload(w, from, ds) else {
                    return malformed;
                };
                let data = self.gather(&p)?;
                if let ModelTransport::Ud { peer_qpn, qkey } = cfg.transport {
                    let q = decode::be32(w, 16);
                    let dqp = decode::be32(w, 24) & 0x00ff_ffff;
                    if q != qkey || dqp != peer_qpn {
                        self.stats.ud_dropped += 1;
                        return Ok(data.len() as u32);
                    }
                    self.deliver(&data, c.opcode, imm, false)?;
                } else {
                    self.deliver(&data, c.opcode, imm, true)?;
                }
                Ok(data.len() as u32)
            }
            op::ATOMIC_CS | op::ATOMIC_FA if !ud => {
                let raddr = decode::be64(w, 16);
                let rkey = decode::be32(w, 24);
                let swap_add = decode::be64(w, 32);
                let compare = decode::be64(w, 40);
                let Ok(Payload::Sges(sges)) = decode::payload(w, 3, ds) else {
                    return malformed;
                };
                if sges.len() != 1 || sges[0].len != 8 {
                    return malformed;
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
                let new = if c.opcode == op::ATOMIC_FA {
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
            _ => Err((synd::LOCAL_QP_OP, vendor::BAD_OPCODE)),
        }
    }
}
