//! The NIC's responder side on real receive rings (`ModelConfig::recv`):
//! a SEND or WRITE_IMM takes a WQE from its peer's RQ or the SRQ
//! (`recv.rs` reads the rings), lands through the WQE's data segments or in
//! the CQE, and leaves a responder CQE for the attempt to write before the
//! requester's.

use super::config::{Access, ModelConfig, ModelTransport, RecvSpec};
use super::decode::{op, synd, vendor, CqeOut};
use super::mem::Mem;
use super::nic::{Msg, Nic};
use super::recv::{segs, GRH_BYTES, LOCAL_LENGTH};

impl Nic {
    /// Delivers one message to QP `q`'s peer through its real receive ring.
    /// `Err` is what the requester's CQE reports.
    pub(crate) fn deliver_direct(&mut self, cfg: &ModelConfig, m: Msg) -> Result<(), (u8, u8)> {
        let Msg {
            q,
            data,
            opcode,
            imm,
            rnr_is_error,
        } = m;
        let Some(spec) = cfg.recv.as_ref() else {
            return Err((synd::LOCAL_QP_OP, vendor::UNKNOWN));
        };
        let r = if spec.srq { 0 } else { q };
        if self.recv[r].error {
            // A responder in the error state answers nothing: the
            // requester's retries run out.
            return Err((synd::RETRY_EXC, vendor::UNKNOWN));
        }
        let Some(idx) = self.recv[r].take(spec) else {
            return self.no_receive(q, rnr_is_error);
        };
        let qpn = spec.qpn + q as u32;
        if spec.srq && self.odp_faults > 0 {
            // An ODP page fault on the receive buffer: the NIC drops the
            // SRQ WQE it took, says so in a RESP_ERR CQE, and answers the
            // sender with an RNR NAK (it retries the message).
            self.odp_faults -= 1;
            self.resp_cqes.push(CqeOut::RespErr {
                qpn,
                counter: idx,
                syndrome: synd::REMOTE_ABORTED,
                vendor: vendor::ODP_PAGE_FAULT,
            });
            return self.no_receive(q, rnr_is_error);
        }
        let w = self.recv[r].wqe(spec, idx as u32);
        let ud = matches!(cfg.transport, ModelTransport::Ud { .. });
        let send = opcode != op::RDMA_WRITE_IMM;
        let mut payload = Vec::with_capacity(data.len() + GRH_BYTES);
        if ud && spec.grh {
            payload.push(0x60); // IPv6 version nibble; the rest zero
            payload.resize(GRH_BYTES, 0);
        }
        payload.extend_from_slice(data);
        let err = |syndrome, vendor| CqeOut::RespErr {
            qpn,
            counter: idx,
            syndrome,
            vendor,
        };
        let limit = if cfg.cqe_size == 128 { 64 } else { 32 };
        let in_cqe = send && !ud && spec.scatter_to_cqe && payload.len() <= limit;
        if send && !in_cqe {
            if let Err((syndrome, vend, requester)) = self.land(spec, &w, &payload) {
                self.resp_cqes.push(err(syndrome, vend));
                // UD has no response: the sender sees success.
                return if ud { Ok(()) } else { Err(requester) };
            }
        }
        let flags_rqpn = if ud {
            (cfg.qpn + q as u32) | if spec.grh { 1 << 28 } else { 0 }
        } else {
            0
        };
        self.respond(
            spec,
            r,
            CqeOut::Resp {
                opcode: match opcode {
                    op::RDMA_WRITE_IMM => 1,
                    op::SEND_IMM => 3,
                    _ => 2,
                },
                qpn,
                counter: idx,
                byte_cnt: payload.len() as u32,
                imm: imm.unwrap_or_default(),
                flags_rqpn,
                inline: in_cqe.then_some(payload),
                format1: spec.format1_in_128,
                rx: [0; 2],
            },
        );
        Ok(())
    }

    /// Scatters `payload` through the data segments of WQE `w`, checking
    /// each lkey. `Err`: the responder's syndrome and vendor syndrome, and
    /// what an RC requester's CQE reports.
    pub(crate) fn land(
        &self,
        spec: &RecvSpec,
        w: &[u8],
        payload: &[u8],
    ) -> Result<(), (u8, u8, (u8, u8))> {
        let sg = segs(spec, w);
        let room: u64 = sg.iter().map(|s| s.len as u64).sum();
        if payload.len() as u64 > room {
            return Err((
                LOCAL_LENGTH,
                vendor::UNKNOWN,
                (synd::REMOTE_INVAL_REQ, vendor::REM_INV),
            ));
        }
        let mut at = 0usize;
        for s in &sg {
            let n = (s.len as usize).min(payload.len() - at);
            if n == 0 {
                break;
            }
            if self
                .mr(s.lkey, s.addr, n as u64, Access::LOCAL_WRITE.0)
                .is_none()
            {
                return Err((
                    synd::LOCAL_PROT,
                    vendor::LKEY,
                    (synd::REMOTE_OP, vendor::UNKNOWN),
                ));
            }
            // SAFETY: inside a registered, locally writable region.
            unsafe { std::ptr::copy(payload.as_ptr().add(at), s.addr as *mut u8, n) };
            at += n;
        }
        Ok(())
    }

    /// Queues a receive's CQE; an SRQ completing out of order holds every
    /// other one back until the next, so WQEs are freed 1, 0, 3, 2, ...
    fn respond(&mut self, spec: &RecvSpec, r: usize, cqe: CqeOut) {
        if !(spec.srq && spec.out_of_order) {
            self.resp_cqes.push(cqe);
            return;
        }
        match self.recv[r].held.take() {
            None => self.recv[r].held = Some(cqe),
            Some(first) => {
                self.resp_cqes.push(cqe);
                self.resp_cqes.push(first);
            }
        }
    }

    /// QP `q`'s peer moved to the error state with receives posted: each
    /// posted WQE completes, in order, with a flush CQE (RESP_ERR,
    /// WR_FLUSH); so do receives posted later. RQs only (an SRQ is not the
    /// QP's to flush). Returns the CQEs written.
    pub(crate) fn flush_recv(&mut self, mem: &Mem, cfg: &ModelConfig, q: usize) -> usize {
        let Some(spec) = cfg.recv.filter(|s| !s.srq) else {
            return 0;
        };
        self.recv[q].error = true;
        let qpn = spec.qpn + q as u32;
        let mut n = 0;
        while let Some(counter) = self.recv[q].take(&spec) {
            let c = CqeOut::RespErr {
                qpn,
                counter,
                syndrome: synd::WR_FLUSH,
                vendor: vendor::FLUSH,
            };
            if !self.write_cqe(mem, cfg, q, &c) {
                break;
            }
            n += 1;
        }
        n
    }

    /// Flushes what was posted since to every RQ in error.
    pub(crate) fn flush_errored_recvs(&mut self, mem: &Mem, cfg: &ModelConfig) {
        for q in 0..self.recv.len() {
            if self.recv[q].error {
                self.flush_recv(mem, cfg, q);
            }
        }
    }
}
