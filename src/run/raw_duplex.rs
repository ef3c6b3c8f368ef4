//! raw-eth-bw `-b` (perftest's `run_iter_bi` on a raw packet QP): each
//! side sends its frames and receives the peer's in one loop. The sender is
//! [`super::raw_bw::RawBwLoop`]; this is what it runs beside it
//! ([`Beside`]): one poll of the receive CQ a pass, each frame counted
//! ([`super::raw_recv`]) and its slot posted again.
//!
//! As perftest, a server does not send before its first frame (so a client
//! is never flooded before it has started) and its clock starts there.
//! The loop ends when this side's frames are all completed and the peer's
//! `-n` have arrived (with `-D`, at the window's end: the frames counted
//! in its sample are measured with the sends, [`Beside::counted`]). Silence on the receive CQ for `stall_ticks`, with
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

/// What the receive side waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RxWait {
    /// Frames owed by the peer (`-n`; with `-D`, `u64::MAX`: the peer
    /// sends until the window ends).
    pub owed: u64,
    /// Hold the sends until the first frame (the server).
    pub wait_first: bool,
    /// Silence this long, frames still owed, is a stall.
    pub stall_ticks: u64,
}

impl RxWait {
    /// After a pass that found nothing (`received` so far, the last frame
    /// at `last`, 0 before the first): `Err` once the silence is a stall.
    /// A server's first wait has no limit (Ctrl-C ends it: the sender's
    /// loop watches the stop flag); `now` is read only past that.
    #[inline(always)]
    pub fn idle(
        &self,
        last: u64,
        now: impl Fn() -> u64,
        received: u64,
    ) -> Result<(), DuplexRxError> {
        if last == 0 || stop::requested() || now().wrapping_sub(last) <= self.stall_ticks {
            return Ok(());
        }
        Err(DuplexRxError::Stalled {
            received,
            owed: self.owed,
        })
    }
}

/// The receive side of a duplex run, borrowed from the caller.
pub struct RecvSide<'a, R, C, K, F> {
    rq: &'a mut R,
    cq: &'a mut C,
    cfg: &'a RawRecvCfg,
    counts: &'a mut RawRecvCounts,
    wait: RxWait,
    /// Scratch for one poll.
    wc: &'a mut [Completion],
    now: F,
    /// The last poll that found a frame: from the start on a client, 0 on
    /// a server (no limit to its first wait).
    last: u64,
    pub error: Option<DuplexRxError>,
    classify: PhantomData<K>,
}

impl<'a, R, C, K, F: Fn() -> u64> RecvSide<'a, R, C, K, F> {
    /// A side receiving on `rq`/`cq` into `cfg`'s buffer, counting into
    /// `counts` with `wc` as its poll scratch; a client's silence counts
    /// from now, a server's from its first frame.
    pub fn new(
        (rq, cq): (&'a mut R, &'a mut C),
        cfg: &'a RawRecvCfg,
        (counts, wc): (&'a mut RawRecvCounts, &'a mut [Completion]),
        wait: RxWait,
        now: F,
    ) -> Self {
        let last = if wait.wait_first { 0 } else { now() };
        RecvSide {
            rq,
            cq,
            cfg,
            counts,
            wait,
            wc,
            now,
            last,
            error: None,
            classify: PhantomData,
        }
    }
}

impl<R: RecvQueue, C: CompletionQueue, K: RxClassify, F: Fn() -> u64> Beside
    for RecvSide<'_, R, C, K, F>
{
    #[inline(always)]
    fn pass(&mut self) -> bool {
        if self.counts.packets >= self.wait.owed {
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
        let idle = self.wait.idle(self.last, &self.now, self.counts.packets);
        // Only a stall sets the error (a pass never clears one).
        idle.map_err(|e| self.error = Some(e)).is_ok()
    }

    #[inline(always)]
    fn may_send(&self) -> bool {
        !self.wait.wait_first || self.counts.packets > 0
    }

    #[inline(always)]
    fn done(&self) -> bool {
        self.counts.packets >= self.wait.owed
    }

    #[inline(always)]
    fn counted(&self) -> u64 {
        self.counts.packets
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::post::WcStatus;
    use crate::run::raw_recv::VerbsRx;
    use crate::run::raw_recv_tests::{recv, Cq, Rq};
    use std::cell::Cell;

    const OWED: u64 = 3;

    /// A side on scripted completions `wcs`, its clock one tick a reading
    /// (a client's silence counts from the first reading, 1).
    fn with_side<T>(
        wcs: Vec<Completion>,
        wait_first: bool,
        f: impl FnOnce(&mut RecvSide<'_, Rq, Cq, VerbsRx, &dyn Fn() -> u64>) -> T,
    ) -> (T, Rq, RawRecvCounts) {
        let buf = vec![0u8; 4 * 64];
        // SAFETY: `buf` holds 4 slots of 64 bytes and outlives the side.
        let cfg = unsafe { RawRecvCfg::new(buf.as_ptr(), 64, 64, 4, 7) };
        let (mut rq, mut cq) = (Rq::default(), Cq(wcs.into()));
        let mut counts = RawRecvCounts::default();
        let mut wc = [Completion::default(); 4];
        let t = Cell::new(0u64);
        let now = || {
            t.set(t.get() + 1);
            t.get()
        };
        let wait = RxWait {
            owed: OWED,
            wait_first,
            stall_ticks: 10,
        };
        let scratch = (&mut counts, &mut wc[..]);
        let now = &now as &dyn Fn() -> u64;
        let mut side = RecvSide::new((&mut rq, &mut cq), &cfg, scratch, wait, now);
        let out = f(&mut side);
        (out, rq, counts)
    }

    #[test]
    fn a_server_sends_after_its_first_frame_and_is_done_at_n() {
        let wcs = (0..OWED).map(|s| recv(s, 60, 0, 0)).collect();
        let ((before, after, done), rq, counts) = with_side(wcs, true, |s| {
            let before = s.may_send();
            while !s.done() {
                assert!(s.pass(), "{:?}", s.error);
            }
            (before, s.may_send(), s.done())
        });
        assert!(!before && after && done);
        assert_eq!(counts.packets, OWED);
        // Each frame's slot went back to the RQ.
        assert_eq!(rq.posted.iter().map(|p| p.0).collect::<Vec<_>>(), [0, 1, 2]);
    }

    #[test]
    fn a_server_waits_for_its_first_frame_without_limit() {
        let (passes, _, _) = with_side(Vec::new(), true, |s| {
            (0..1000).all(|_| s.pass()) && s.error.is_none() && !s.may_send()
        });
        assert!(passes);
    }

    #[test]
    fn silence_from_the_start_stalls_a_client() {
        let (err, _, counts) = with_side(vec![recv(0, 60, 0, 0)], false, |s| {
            assert!(s.may_send(), "a client sends at once");
            let ended = (0..100).find(|_| !s.pass());
            assert!(ended.is_some(), "no stall in 100 passes");
            s.error.take()
        });
        assert_eq!(counts.packets, 1);
        assert_eq!(
            err,
            Some(DuplexRxError::Stalled {
                received: 1,
                owed: OWED
            })
        );
    }

    #[test]
    fn a_flushed_receive_ends_the_run() {
        let flushed = Completion {
            status: WcStatus::WR_FLUSH_ERR,
            ..recv(0, 0, 0, 0)
        };
        let (err, _, _) = with_side(vec![flushed], false, |s| {
            assert!(!s.pass());
            s.error.take()
        });
        assert_eq!(err, Some(DuplexRxError::Recv(RawRecvError::Flushed)));
    }
}
