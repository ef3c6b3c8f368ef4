//! The post methods behind one interface. The run loops are generic over
//! [`SendQueue`] / [`CompletionQueue`] and are monomorphised per method, so the
//! method is chosen once, outside the loop.
//!
//! - `ibv_post_send` (legacy verbs) and the WR API (`ibv_wr_*`): `verbs`-backed.
//! - `direct`: WQEs written into the mlx5 SQ ring by `crate::mlx5`.

pub mod event_cq;
pub mod post_send;
pub mod rx_offload;
pub mod verbs_cq;
pub mod wc;
pub mod wr_api;

pub use wc::{Completion, WcOpcode, WcStatus};

/// The operation a send WR performs. Chosen by us, never read from a device.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Op {
    Write,
    WriteImm,
    Send,
    SendImm,
    Read,
    FetchAdd,
    CmpSwap,
}

impl Op {
    /// Every operation, once each.
    pub const ALL: [Op; 7] = [
        Op::Write,
        Op::WriteImm,
        Op::Send,
        Op::SendImm,
        Op::Read,
        Op::FetchAdd,
        Op::CmpSwap,
    ];
}

/// One send work request, in the form every post method consumes.
/// `repr(C)`: the direct path reads `laddr, lkey, len` and `raddr, rkey`
/// as 16-byte units (`mlx5::segwr`).
#[derive(Clone, Copy, Default, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct WrDesc {
    pub wr_id: u64,
    /// Local buffer (source for WRITE/SEND, destination for READ/atomics).
    pub laddr: u64,
    pub lkey: u32,
    pub len: u32,
    /// Remote address/key (WRITE/READ/atomics); ignored for SEND.
    pub raddr: u64,
    pub rkey: u32,
    /// Immediate data (host order; encoders convert) for *_IMM ops.
    pub imm: u32,
    /// Atomic operands: add value (fetch-add) or swap (cmp-swap), and compare.
    pub swap_add: u64,
    pub compare: u64,
    /// Generate a completion for this WR.
    pub signaled: bool,
    /// Copy the payload into the WQE instead of gathering it.
    pub inline: bool,
}

/// Why a post failed. A small `Copy` value so the hot path never allocates.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum PostError {
    /// The provider returned this errno (ibv_post_send / ibv_wr_complete).
    Errno(i32),
    /// Not enough free slots in the send queue for the whole list.
    QueueFull,
    /// The WR cannot be encoded (e.g. inline payload too large for one WQE).
    Unsupported,
}

/// A send queue with a fixed post method. `post` posts the whole slice as one
/// post list (one doorbell where the method allows it).
pub trait SendQueue {
    fn post(&mut self, op: Op, wrs: &[WrDesc]) -> Result<(), PostError>;
}

/// `n` receives posted in one call (perftest `--recv_post_list`): the k-th
/// at `addr(k)`, each of `len` bytes under `lkey`, all with `wr_id`. The
/// caller builds it on its stack per call (scalars and a closure: nothing
/// allocated), and every queue reads the same fields.
#[derive(Clone, Copy)]
pub struct RecvList<A> {
    pub n: usize,
    pub wr_id: u64,
    pub lkey: u32,
    pub len: u32,
    pub addr: A,
}

impl<A: Fn(usize) -> u64> RecvList<A> {
    /// Posts the list to `rq` one receive at a time (a queue with no list
    /// post of its own); stops at the first refusal.
    #[inline]
    pub fn post_each(&self, rq: &mut (impl RecvQueue + ?Sized)) -> Result<(), PostError> {
        for k in 0..self.n {
            rq.post_recv(self.wr_id, (self.addr)(k), self.lkey, self.len)?;
        }
        Ok(())
    }
}

/// A receive queue (SEND tests).
pub trait RecvQueue {
    /// Post one receive of `len` bytes at `addr`.
    fn post_recv(&mut self, wr_id: u64, addr: u64, lkey: u32, len: u32) -> Result<(), PostError>;

    /// Post `list` in one call where the queue can. The default posts its
    /// receives one by one.
    #[inline]
    fn post_recv_list(&mut self, list: &RecvList<impl Fn(usize) -> u64>) -> Result<(), PostError> {
        list.post_each(self)
    }
}

/// A completion queue. `poll` fills `out` and returns how many it filled; it
/// never blocks.
pub trait CompletionQueue {
    fn poll(&mut self, out: &mut [Completion]) -> Result<usize, PostError>;
    /// CQEs dropped because they named a QP this poller does not know
    /// (the direct poller; libibverbs pollers report none). Control path.
    fn unknown_qpn_cqes(&self) -> u64 {
        0
    }
}
