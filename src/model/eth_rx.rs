//! The Ethernet port's receive side: a frame from the wire goes through the
//! flow table (`flow.rs`) into raw QPs' RQs (the real rings `recv.rs`
//! reads, posted by `mlx5::rq`), each copy landing through the next posted
//! WQE's data segments and completing with a responder CQE in the real
//! format: SEND, the byte count, the WQE counter, and what the NIC read of
//! the headers (`hds_ip_ext`, `l4_hdr_type_etc`). Steering as a NIC does
//! it: every sniffer rule's QP gets a copy; then the first normal rule that
//! matches takes the frame, or else the first ALL_DEFAULT (promiscuous)
//! rule, each with every rule of the same kind and specs on other QPs (one
//! flow-table entry with a destination per QP: each gets a copy); a frame
//! nobody takes is dropped and counted. A matched QP with no
//! receive posted drops the frame and counts it for that QP (the
//! `rx_discards`-style "out of buffer" counter a ConnectX keeps).

use super::config::ModelConfig;
use super::decode::{synd, vendor, CqeOut};
use super::headers::Headers;
use super::mem::Mem;
use super::nic::Nic;
use super::recv::LOCAL_LENGTH;

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
