//! raw-eth-bw `-b -q N` (perftest's `run_iter_bi` over several QPs): the
//! receive side beside the sender's loop ([`Beside`]) over every QP's RQ
//! and CQ ([`RecvQp`]), one poll of each a pass, each frame counted on the
//! QP it came on and its slot posted again there. What is owed is
//! perftest's `tot_iters`, `-n` × `-q`, all QPs' frames together; a poll
//! takes no more than is still owed, so the total stops at it exactly.
//! The rest is [`super::raw_duplex::RecvSide`]'s: a server holds its sends
//! until its first frame on any QP, silence with frames owed is a stall
//! (from the start on a client, from the first frame on a server). Hot
//! path: no allocation, lock, format, syscall or panic.

use super::raw_bw::Beside;
use super::raw_duplex::{DuplexRxError, RxWait};
use super::raw_recv::{recv_batch, RxClassify};
use super::raw_recv_qps::{total, RecvQp};
use crate::post::{Completion, CompletionQueue, RecvQueue};
use core::marker::PhantomData;

/// The receive side of a duplex run on several QPs, borrowed from the
/// caller (each QP's counts stay in `qps`).
pub struct RecvSideQps<'a, R, C, K, F> {
    qps: &'a mut [RecvQp<R, C>],
    wait: RxWait,
    /// Scratch for one poll.
    wc: &'a mut [Completion],
    now: F,
    /// The frames of every QP so far.
    got: u64,
    /// The last poll that found a frame (0 on a server before its first).
    last: u64,
    pub error: Option<DuplexRxError>,
    classify: PhantomData<K>,
}

impl<'a, R, C, K, F: Fn() -> u64> RecvSideQps<'a, R, C, K, F> {
    /// A side receiving on every QP of `qps` (each with its slots posted),
    /// `wc` its poll scratch; a client's silence counts from now.
    pub fn new(
        qps: &'a mut [RecvQp<R, C>],
        wc: &'a mut [Completion],
        wait: RxWait,
        now: F,
    ) -> Self {
        let last = if wait.wait_first { 0 } else { now() };
        let got = total(qps);
        RecvSideQps {
            qps,
            wait,
            wc,
            now,
            got,
            last,
            error: None,
            classify: PhantomData,
        }
    }
}

impl<R: RecvQueue, C: CompletionQueue, K: RxClassify, F: Fn() -> u64> Beside
    for RecvSideQps<'_, R, C, K, F>
{
    #[inline(always)]
    fn pass(&mut self) -> bool {
        let mut found = 0;
        for q in self.qps.iter_mut() {
            let room = self
                .wait
                .owed
                .saturating_sub(self.got)
                .min(self.wc.len() as u64);
            if room == 0 {
                return true;
            }
            let wc = &mut self.wc[..room as usize];
            let before = q.counts.packets;
            match recv_batch::<_, _, K>(&mut q.rq, &mut q.cq, &q.cfg, &mut q.counts, wc) {
                Ok(n) => found += n,
                Err(e) => {
                    self.error = Some(DuplexRxError::Recv(e));
                    return false;
                }
            }
            self.got += q.counts.packets - before;
        }
        if found > 0 {
            self.last = (self.now)();
            return true;
        }
        let idle = self.wait.idle(self.last, &self.now, self.got);
        // Only a stall sets the error (a pass never clears one).
        idle.map_err(|e| self.error = Some(e)).is_ok()
    }

    #[inline(always)]
    fn may_send(&self) -> bool {
        !self.wait.wait_first || self.got > 0
    }

    #[inline(always)]
    fn done(&self) -> bool {
        self.got >= self.wait.owed
    }

    #[inline(always)]
    fn counted(&self) -> u64 {
        self.got
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::raw_recv::{DirectRx, RawRecvCfg, RawRecvCounts};
    use crate::run::raw_recv_tests::{recv, Cq, Rq};
    use std::cell::Cell;

    const STRIDE: u32 = 64;

    fn qp(buf: &[u8], frames: u64) -> RecvQp<Rq, Cq> {
        // SAFETY: `buf` holds 4 slots of STRIDE bytes and outlives the loop.
        let cfg = unsafe { RawRecvCfg::new(buf.as_ptr(), STRIDE, STRIDE, 4, 7) };
        RecvQp {
            rq: Rq::default(),
            cq: Cq((0..frames).map(|k| recv(k % 4, 60, 0, 0)).collect()),
            cfg,
            counts: RawRecvCounts::default(),
        }
    }

    /// Passes until done or an error (at most 1000), one tick a reading.
    fn passes(qps: &mut [RecvQp<Rq, Cq>], wait: RxWait) -> (bool, Option<DuplexRxError>, u64) {
        let t = Cell::new(0u64);
        let now = || {
            t.set(t.get() + 1);
            t.get()
        };
        let mut wc = [Completion::default(); 4];
        let mut side = RecvSideQps::<_, _, DirectRx, _>::new(qps, &mut wc, wait, now);
        let held = !side.may_send();
        for _ in 0..1000 {
            if side.done() || !side.pass() {
                break;
            }
        }
        (held && side.may_send(), side.error.take(), side.counted())
    }

    #[test]
    fn every_qps_frames_count_toward_n_times_q_and_stop_there() {
        let bufs = [vec![0u8; 4 * 64], vec![0u8; 4 * 64]];
        let mut qps = [qp(&bufs[0], 30), qp(&bufs[1], 30)];
        let wait = RxWait {
            owed: 2 * 20,
            wait_first: true,
            stall_ticks: 10,
        };
        let (opened, err, got) = passes(&mut qps, wait);
        assert!(opened, "a server's sends held until its first frame");
        assert_eq!((err, got), (None, 40));
        let per: Vec<u64> = qps.iter().map(|q| q.counts.packets).collect();
        assert_eq!(per.iter().sum::<u64>(), 40, "exactly the target: {per:?}");
        assert!(per.iter().all(|&n| n > 0), "{per:?}");
        for (q, b) in qps.iter().zip(&bufs) {
            assert_eq!(
                q.rq.posted.len() as u64,
                q.counts.packets,
                "reposted on its QP"
            );
            assert!(q
                .rq
                .posted
                .iter()
                .all(|&(s, a, _)| a == b.as_ptr() as u64 + s * 64));
        }
    }

    #[test]
    fn frames_short_of_the_target_stall_naming_the_total() {
        let bufs = [vec![0u8; 4 * 64], vec![0u8; 4 * 64]];
        let mut qps = [qp(&bufs[0], 7), qp(&bufs[1], 5)];
        let wait = RxWait {
            owed: 20,
            wait_first: false,
            stall_ticks: 10,
        };
        let (_, err, got) = passes(&mut qps, wait);
        assert_eq!(got, 12);
        assert_eq!(
            err,
            Some(DuplexRxError::Stalled {
                received: 12,
                owed: 20
            })
        );
    }
}
