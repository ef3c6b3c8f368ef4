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

use crate::mlx5::DirectCq;
use crate::model::Model;
use crate::post::{Completion, CompletionQueue, PostError, WcOpcode};

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
