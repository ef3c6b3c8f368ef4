//! The Ethernet port's receive side: a frame from the wire goes through the
//! flow table (`flow.rs`) into raw QPs' RQs (the real rings `recv.rs`
//! reads, posted by `mlx5::rq`), each copy landing through the next posted
//! WQE's data segments and completing with a responder CQE in the real
//! format: SEND, the byte count, the WQE counter, and what the NIC read of
//! the headers (`hds_ip_ext`, `l4_hdr_type_etc`). Steering as a NIC does
//! it: every sniffer rule's QP gets a copy; then the first normal rule that
//! matches takes the frame, or else the first ALL_DEFAULT (promiscuous)
//! rule; a frame nobody takes is dropped and counted. A matched QP with no
//! receive posted drops the frame and counts it for that QP (the
//! `rx_discards`-style "out of buffer" counter a ConnectX keeps).

use super::config::ModelConfig;
use super::decode::{synd, vendor, CqeOut};
use super::flow::{FlowKind, FlowRule, Headers};
use super::mem::Mem;
use super::nic::Nic;
use super::recv::LOCAL_LENGTH;

/// What the port's receive side has done, since the model was made.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RawRxStats {
    /// Frames offered (`Model::deliver`).
    pub frames: u64,
    /// Receives completed successfully (a sniffer's copy counts too).
    pub delivered: u64,
    /// Frames no rule took: dropped.
    pub no_match: u64,
    /// Per raw QP: frames its rule took while no receive was posted
    /// (dropped: the RQ ran dry).
    pub out_of_buffer: Vec<u64>,
    /// Receives completed with a local length error (the frame was longer
    /// than the WQE's buffers).
    pub too_long: u64,
    /// Receives completed with another error (a bad lkey).
    pub errors: u64,
    /// CQEs not written: the CQ was full (the model's overrun).
    pub cq_full: u64,
}

/// The port's flow table and counters.
#[derive(Default, Debug)]
pub(crate) struct EthRx {
    pub(crate) rules: Vec<FlowRule>,
    pub(crate) stats: RawRxStats,
    /// RQs handed out by `Model::raw_rq` (each once).
    pub(crate) rq_taken: Vec<usize>,
}

impl EthRx {
    /// The raw QPs (receive rings) frame `h` goes to, in order.
    fn targets(&self, h: &Headers) -> Vec<usize> {
        let mut v: Vec<usize> = Vec::new();
        let mut push = |r: usize| {
            if !v.contains(&r) {
                v.push(r);
            }
        };
        for r in self.rules.iter().filter(|r| r.kind == FlowKind::Sniffer) {
            push(r.ring);
        }
        let normal = self
            .rules
            .iter()
            .find(|r| r.kind == FlowKind::Normal && r.matches(h));
        let chosen = normal.or_else(|| self.rules.iter().find(|r| r.kind == FlowKind::AllDefault));
        if let Some(r) = chosen {
            push(r.ring);
        }
        v
    }
}

impl Nic {
    /// Steers `frame` and lands it in each target QP's RQ. Returns how many
    /// receives completed successfully.
    pub(crate) fn deliver_raw(&mut self, mem: &Mem, cfg: &ModelConfig, frame: &[u8]) -> usize {
        let h = Headers::parse(frame);
        self.eth_rx.stats.frames += 1;
        let targets = self.eth_rx.targets(&h);
        if targets.is_empty() {
            self.eth_rx.stats.no_match += 1;
            return 0;
        }
        let rx = h.cqe_bytes();
        targets
            .into_iter()
            .filter(|&r| self.land_raw(mem, cfg, r, frame, rx))
            .count()
    }

    /// One copy of `frame` into raw QP `r`'s RQ; true when it completed
    /// successfully.
    fn land_raw(
        &mut self,
        mem: &Mem,
        cfg: &ModelConfig,
        r: usize,
        frame: &[u8],
        rx: [u8; 2],
    ) -> bool {
        let Some(spec) = cfg.recv.filter(|s| !s.srq) else {
            return false;
        };
        let stats = &mut self.eth_rx.stats;
        if stats.out_of_buffer.len() <= r {
            stats.out_of_buffer.resize(r + 1, 0);
        }
        let idx = match self.recv.get_mut(r) {
            Some(ring) if !ring.error => ring.take(&spec),
            _ => None,
        };
        let Some(idx) = idx else {
            self.eth_rx.stats.out_of_buffer[r] += 1;
            return false;
        };
        let qpn = spec.qpn + r as u32;
        let w = self.recv[r].wqe(&spec, idx as u32);
        let (cqe, ok) = match self.land(&spec, &w, frame) {
            Ok(()) => (
                CqeOut::Resp {
                    opcode: 2, // SEND
                    qpn,
                    counter: idx,
                    byte_cnt: frame.len() as u32,
                    imm: [0; 4],
                    flags_rqpn: 0,
                    inline: None,
                    format1: false,
                    rx,
                },
                true,
            ),
            Err((syndrome, vend, _)) => {
                if syndrome == LOCAL_LENGTH {
                    self.eth_rx.stats.too_long += 1;
                } else {
                    self.eth_rx.stats.errors += 1;
                }
                let vendor = if syndrome == synd::LOCAL_PROT {
                    vendor::LKEY
                } else {
                    vend
                };
                (
                    CqeOut::RespErr {
                        qpn,
                        counter: idx,
                        syndrome,
                        vendor,
                    },
                    false,
                )
            }
        };
        let q = r.min(self.qps.len() - 1);
        if !self.write_cqe(mem, cfg, q, &cqe) {
            self.eth_rx.stats.cq_full += 1;
            return false;
        }
        if ok {
            self.eth_rx.stats.delivered += 1;
        }
        ok
    }
}
