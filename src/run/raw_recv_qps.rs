//! The raw Ethernet receive loop over several QPs (raw-eth-bw `--server
//! -q N`, perftest's `run_iter_bw_server` with `num_of_qps` above 1): each
//! QP with its RQ, its CQ and its receive slots ([`RecvQp`]), polled in
//! turn, every frame counted for the QP it arrived on and its slot posted
//! again on that QP, until the frames of all QPs together reach the target
//! (perftest's `tot_iters`: `-n` × `-q`).
//!
//! perftest polls one receive CQ shared by the QPs and tells them apart by
//! the `wr_id`; here each QP completes on a CQ of its own (a direct CQ
//! poller serves one RQ), which counts the same frames per QP. A poll takes
//! no more completions than the target still needs, so the total stops at
//! it exactly. Like [`run_raw_recv`](super::raw_recv::run_raw_recv), the
//! loop allocates, locks, formats and calls the system not at all.

use super::raw_recv::{recv_batch, RawRecvCfg, RawRecvCounts, RawRecvError, RxClassify};
use crate::post::{Completion, CompletionQueue, RecvQueue};

/// Completions taken per poll of one QP's CQ.
const BATCH: usize = 16;

/// One QP's receive side and what arrived on it.
pub struct RecvQp<R, C> {
    pub rq: R,
    pub cq: C,
    /// Its receive slots (every one posted before the loop: `post_all`).
    pub cfg: RawRecvCfg,
    pub counts: RawRecvCounts,
}

/// The frames counted on every QP together.
pub fn total<R, C>(qps: &[RecvQp<R, C>]) -> u64 {
    qps.iter().map(|q| q.counts.packets).sum()
}

/// Receives on every QP of `qps` in turn until their frames together reach
/// `until`, or `pass` says stop: it is called after each round over the
/// QPs with whether that round found completions.
pub fn run_raw_recv_qps<R: RecvQueue, C: CompletionQueue, K: RxClassify>(
    qps: &mut [RecvQp<R, C>],
    until: u64,
    pass: &mut impl FnMut(bool) -> bool,
) -> Result<(), RawRecvError> {
    let mut wc = [Completion::default(); BATCH];
    let mut have = total(qps);
    while have < until {
        let mut got = 0;
        for q in qps.iter_mut() {
            let room = (until - have).min(BATCH as u64) as usize;
            if room == 0 {
                break;
            }
            let before = q.counts.packets;
            got += recv_batch::<_, _, K>(
                &mut q.rq,
                &mut q.cq,
                &q.cfg,
                &mut q.counts,
                &mut wc[..room],
            )?;
            have += q.counts.packets - before;
        }
        if pass(got > 0) {
            return Ok(());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::super::raw_recv::DirectRx;
    use super::super::raw_recv_tests::{recv, Cq, Rq};
    use super::*;

    const STRIDE: u32 = 128;

    fn qp(buf: &[u8], frames: u64) -> RecvQp<Rq, Cq> {
        // SAFETY: `buf` holds 4 slots of STRIDE bytes and outlives the loop.
        let cfg = unsafe { RawRecvCfg::new(buf.as_ptr(), STRIDE, STRIDE, 4, 7) };
        let wcs = (0..frames).map(|k| recv(k % 4, 60, 0, 0)).collect();
        RecvQp {
            rq: Rq::default(),
            cq: Cq(wcs),
            cfg,
            counts: RawRecvCounts::default(),
        }
    }

    #[test]
    fn each_frame_is_counted_on_its_qp_and_the_total_stops_at_the_target() {
        let bufs = [
            vec![0u8; 4 * STRIDE as usize],
            vec![0u8; 4 * STRIDE as usize],
        ];
        let mut qps = [qp(&bufs[0], 40), qp(&bufs[1], 5)];
        let mut rounds = 0;
        let r = run_raw_recv_qps::<_, _, DirectRx>(&mut qps, 30, &mut |_| {
            rounds += 1;
            false
        });
        assert_eq!(r, Ok(()));
        assert_eq!(total(&qps), 30, "exactly the target, not a batch past it");
        assert_eq!((qps[0].counts.packets, qps[1].counts.packets), (25, 5));
        assert_eq!(rounds, 2, "16 + 5, then 9 + 0");
        // Each receive goes back on its own QP, into its own buffer.
        for (q, b) in qps.iter().zip(&bufs) {
            assert_eq!(q.rq.posted.len() as u64, q.counts.packets);
            for &(slot, addr, len) in &q.rq.posted {
                assert_eq!(addr, b.as_ptr() as u64 + slot * STRIDE as u64);
                assert_eq!(len, STRIDE);
            }
        }
    }

    #[test]
    fn an_empty_round_asks_whether_to_stop() {
        let bufs = [
            vec![0u8; 4 * STRIDE as usize],
            vec![0u8; 4 * STRIDE as usize],
        ];
        let mut qps = [qp(&bufs[0], 3), qp(&bufs[1], 4)];
        let mut seen = Vec::new();
        let r = run_raw_recv_qps::<_, _, DirectRx>(&mut qps, 100, &mut |got| {
            seen.push(got);
            !got
        });
        assert_eq!(r, Ok(()));
        assert_eq!(seen, [true, false]);
        assert_eq!((qps[0].counts.packets, qps[1].counts.packets), (3, 4));
    }
}
