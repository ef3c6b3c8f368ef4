//! perftest's TCP control protocol, byte for byte.
//!
//! - [`wire`]: pure codecs for every message (version, sysdata, MTU, key
//!   message, bw report).
//! - [`channel`]: the TCP connection: listen/accept or connect with retry,
//!   whole-message reads with per-step timeouts, lock-step exchange.
//! - [`session`]: the protocol steps as methods (`exchange_versions`, ...,
//!   `hand_shake`, `exchange_bw_report`, `close`).
//! - [`choreo`]: which steps each tool runs, in which order, per role and mode.
//! - [`compare_ext`]: what two `rdmaperf compare` sides tell each other
//!   after each run (an rdmaperf-only extension).
//! - [`link`]: the seam under the steps (TCP, rdma_cm, or another byte stream
//!   such as the fabric mode's MPI link).
//!
//! We advertise version "6.27-rs" (`atof` reads 6.27), so stock perftest 4.5 (6.06) and master (6.29)
//! both speak the 4.5 protocol with us (no master parameter negotiation).

pub mod after_run;
pub mod bound_connect;
pub mod channel;
pub mod choreo;
pub mod cm_link;
pub mod compare_ext;
pub mod error;
pub mod link;
pub mod session;
pub mod stream_link;
pub mod wire;

pub use channel::{Channel, ConnectHow, Listener, Role, DEFAULT_PORT};
pub use choreo::{choreography, Entry, Message, Mode, Scenario, Step, Tool};
pub use error::CtrlError;
pub use session::Session;
pub use wire::{BwReport, Dest, PeerVersion, PerPortReport, WireError};
