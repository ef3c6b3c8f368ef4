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
//!
//! Files, bottom first (none imports this `mod.rs`; `tests/module_layers.rs`
//! keeps `model/` free of import circles): `config` (what the user states),
//! `event` (a recorded store), `mem` (aligned regions), `decode` (WQE
//! parsing, CQE composing), `recv` (the receive rings as the NIC reads
//! them), `headers` (a frame's headers as the NIC reads them, the CQE's
//! L3/L4 bits, checksum offload), `flow` (the raw port's steering rules),
//! `eth_port` (raw WQEs to frames), `nic` (the NIC's send side and CQ),
//! `eth_rx` (the raw port's receive side), `respond` (its responder side
//! on real receive rings), `handle` ([`Model`], [`Shared`]), then what
//! stands on the handle: `mmio` (the recorder), `recv_mmio` (the receive records' recorder), `queues` (the direct queues
//! on model memory), `raw_queues` (a raw packet SQ and RQs on it, the wire that
//! `eth_port`, the NIC's Ethernet port, sends to, and the frames `eth_rx`
//! steers through the `flow` table into the RQs), `cq_arm`, `setup`, `workers`.

pub mod config;
pub mod cq_arm;
mod decode;
mod eth_port;
mod eth_rx;
mod event;
pub mod flow;
mod handle;
mod headers;
mod mem;
mod mmio;
mod nic;
mod queues;
mod raw_queues;
pub mod recv;
mod recv_mmio;
mod respond;
pub mod setup;
pub mod workers;

pub use config::{Access, ModelConfig, ModelTransport, MrKeys, PeerCompletion, RecvSpec};
pub use event::MmioEvent;
pub use flow::{FlowKind, FlowRule, IpMatch, L4Match, RawRxStats};
pub use handle::{Model, Shared};
pub use mmio::ModelMmio;
pub use nic::NicStats;
pub use recv_mmio::ModelRecvMmio;
pub use setup::{Inject, ModelSteps};
