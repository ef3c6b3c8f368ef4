//! raw-eth-bw `-b` (perftest's `run_iter_bi` on a raw packet QP): each
//! side sends its frames and receives the peer's in one loop. The sender is
//! [`super::raw_bw::RawBwLoop`]; this is what it runs beside it
//! ([`Beside`]): one poll of the receive CQ a pass, each frame counted
//! ([`super::raw_recv`]) and its slot posted again.
//!
//! As perftest, a server does not send before its first frame (so a client
//! is never flooded before it has started) and its clock starts there.
//! The loop ends when this side's frames are all completed and the peer's
//! `-n` have arrived. Silence on the receive CQ for `stall_ticks`, with
//! frames still owed, is a stall (frames a NIC dropped never come; a peer
//! run without `-b` sends none): counted from the start on a client, from
//! the first frame on a server (which waits for its client as long as it
//! takes, as one-way). Hot path: no allocation, lock, format, syscall or
//! panic.

use super::raw_bw::Beside;
use super::raw_recv::{recv_batch, RawRecvCfg, RawRecvCounts, RawRecvError, RxClassify};
use super::stop;
use crate::post::{Completion, CompletionQueue, RecvQueue};
use core::marker::PhantomData;

/// Why the receive side stopped the loop.
#[derive(Debug, PartialEq, Eq)]
pub enum DuplexRxError {
    Recv(RawRecvError),
    /// No frame for the stall time, `received` of `owed` in.
    Stalled {
        received: u64,
        owed: u64,
    },
}

/// The receive side of a duplex run, borrowed from the caller.
pub struct RecvSide<'a, R, C, K, F> {
    pub rq: &'a mut R,
    pub cq: &'a mut C,
    pub cfg: &'a RawRecvCfg,
    pub counts: &'a mut RawRecvCounts,
    /// Frames owed by the peer (`-n`).
    pub owed: u64,
    /// Hold the sends until the first frame (the server).
    pub wait_first: bool,
    pub stall_ticks: u64,
    /// Scratch for one poll.
    pub wc: &'a mut [Completion],
    pub now: F,
    /// The last poll that found a frame; the caller starts it at the
    /// loop's start (a client) or 0 (a server: no limit to the first wait).
    pub last: u64,
    pub error: Option<DuplexRxError>,
    pub classify: PhantomData<K>,
}

impl<R: RecvQueue, C: CompletionQueue, K: RxClassify, F: Fn() -> u64> Beside
    for RecvSide<'_, R, C, K, F>
{
    #[inline(always)]
    fn pass(&mut self) -> bool {
        if self.counts.packets >= self.owed {
            return true;
        }
        let n = match recv_batch::<_, _, K>(self.rq, self.cq, self.cfg, self.counts, self.wc) {
            Ok(n) => n,
            Err(e) => {
                self.error = Some(DuplexRxError::Recv(e));
                return false;
            }
        };
        if n > 0 {
            self.last = (self.now)();
            return true;
        }
        // A server's first wait has no limit (Ctrl-C ends it: the sender's
        // loop watches the stop flag).
        if self.last == 0 || stop::requested() {
            return true;
        }
        if (self.now)().wrapping_sub(self.last) <= self.stall_ticks {
            return true;
        }
        self.error = Some(DuplexRxError::Stalled {
            received: self.counts.packets,
            owed: self.owed,
        });
        false
    }

    #[inline(always)]
    fn may_send(&self) -> bool {
        !self.wait_first || self.counts.packets > 0
    }

    #[inline(always)]
    fn done(&self) -> bool {
        self.counts.packets >= self.owed
    }
}
