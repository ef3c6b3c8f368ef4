//! A model host's Ethernet port joined to a peer's by two channels, and
//! its one CQ split into views: what the raw pair model (and the raw
//! tools' client-against-server model tests) run each side on. Every poll
//! of a view steps the NIC, hands what the port sent to `on_wire` (which
//! says whether it goes on to the peer), delivers the peer's frames, then
//! sorts the CQEs into the sends and each QP's receives. Control path:
//! allocation is fine.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::sync::mpsc::{Receiver, Sender};

use super::model_flow;
use crate::mlx5::raw_sq::{RawSq, RawSqConfig};
use crate::mlx5::rq::DirectRq;
use crate::mlx5::DirectCq;
use crate::model::{Access, Model, ModelConfig, ModelMmio, ModelRecvMmio};
use crate::post::{Completion, CompletionQueue, PostError, WcOpcode};
use crate::raw::params::{RawParams, Side};
use crate::raw::steer;

/// What a port does with a frame it sent: `true` passes it to the peer.
pub type OnWire = Box<dyn FnMut(&[u8]) -> bool>;

/// One host's port: its model, the wire both ways, and the CQ's
/// completions sorted into sends and each QP's receives.
pub struct Port {
    pub model: Model,
    cq: DirectCq,
    out: Sender<Vec<u8>>,
    inp: Receiver<Vec<u8>>,
    on_wire: OnWire,
    first_qpn: u32,
    sends: VecDeque<Completion>,
    recvs: Vec<VecDeque<Completion>>,
}

impl Port {
    /// The port of `model` (receives on `qps` QPs) completing on `cq`,
    /// sending on `out` and receiving from `inp`.
    pub fn new(
        (model, cq): (Model, DirectCq),
        (out, inp): (Sender<Vec<u8>>, Receiver<Vec<u8>>),
        qps: usize,
        on_wire: OnWire,
    ) -> Rc<RefCell<Self>> {
        Rc::new(RefCell::new(Self {
            first_qpn: model.qpn_of(0),
            model,
            cq,
            out,
            inp,
            on_wire,
            sends: VecDeque::new(),
            recvs: vec![VecDeque::new(); qps],
        }))
    }

    fn pump(&mut self) -> Result<(), PostError> {
        self.model.step();
        for f in self.model.take_wire() {
            if (self.on_wire)(&f) {
                let _ = self.out.send(f);
            }
        }
        while let Ok(f) = self.inp.try_recv() {
            self.model.deliver(&f);
        }
        let mut wc = [Completion::default(); 16];
        let n = self.cq.poll(&mut wc)?;
        for c in &wc[..n] {
            if c.opcode == WcOpcode::RECV {
                self.recvs[(c.qp_num - self.first_qpn) as usize].push_back(*c);
            } else {
                self.sends.push_back(*c);
            }
        }
        Ok(())
    }
}

/// The sends (`None`) or QP `q`'s receives of a port's one CQ.
pub struct PartCq(pub Rc<RefCell<Port>>, pub Option<usize>);

impl CompletionQueue for PartCq {
    fn poll(&mut self, out: &mut [Completion]) -> Result<usize, PostError> {
        let mut p = self.0.borrow_mut();
        p.pump()?;
        let q = match self.1 {
            Some(q) => &mut p.recvs[q],
            None => &mut p.sends,
        };
        let n = out.len().min(q.len());
        for (o, c) in out.iter_mut().zip(q.drain(..n)) {
            *o = c;
        }
        Ok(n)
    }
}

/// A side's raw QP 0 on a model host of its own (`ModelConfig::raw_eth_host`):
/// its direct SQ, its RQ attached to the one CQ, the flow table built from
/// the side's command line by `raw::steer`, and the receive buffer's key.
pub struct RawSide {
    pub sq: RawSq<ModelMmio>,
    pub cq: DirectCq,
    pub rq: DirectRq<ModelRecvMmio>,
    pub model: Model,
    pub rx_lkey: u32,
}

impl RawSide {
    /// The side of `p` from QPN `qpn`, its RQ a ring for `slots` receives
    /// (a power of two, at least 2): `tx`
    /// registered for the NIC to read and `rx` to write; the SQ sends from
    /// `tx`, or from `rx` on a forwarder (`--server -v`, as
    /// `tool::runs::raw_fw` sets its SQ up).
    ///
    /// # Safety
    /// Both buffers must stay in place and outlive the model and its queues.
    pub unsafe fn new(
        p: &RawParams,
        (tx, rx): (&mut [u8], &mut [u8]),
        (qpn, slots): (u32, u32),
    ) -> Result<Self, String> {
        let ring = slots.next_power_of_two().max(2);
        let model = Model::new(ModelConfig::raw_eth_host(1, qpn, ring))?;
        // SAFETY: the caller keeps both buffers in place for the model.
        let (txk, rxk) = unsafe {
            (
                model.register(tx.as_mut_ptr(), tx.len(), Access::NONE),
                model.register(rx.as_mut_ptr(), rx.len(), Access::LOCAL_WRITE),
            )
        };
        let fwd = p.raw.mac_fwd && p.raw.side == Some(Side::Server);
        let (lkey, src) = if fwd { (rxk.lkey, rx) } else { (txk.lkey, tx) };
        let (mut sq, mut cq) = model.raw_pair(RawSqConfig::new(lkey, 8))?;
        // SAFETY: as above: the buffer is registered and outlives the SQ.
        unsafe { sq.set_frame_source(src.as_ptr(), src.len()) };
        let rq = model.raw_rq(0)?;
        cq.attach_recv(rq.qpn(), rq.ring());
        for r in steer::rules(p) {
            model.add_flow(model_flow::model_rule(&r, 0)?)?;
        }
        Ok(Self {
            sq,
            cq,
            rq,
            model,
            rx_lkey: rxk.lkey,
        })
    }
}
