//! One run of the raw Ethernet server on several QPs (`--server -q N`,
//! `run::raw_recv_qps`), as [`raw_recv_measure::receive`] runs one: the
//! clock from the first frame on any QP, the end at `-n` × `-q` frames
//! (perftest's `tot_iters`), `-D` seconds after the first frame, Ctrl-C, or
//! the quiet time without a frame on any QP; then the counts of every QP
//! together, and a line with each QP's frames.

use super::raw_recv_measure::{target, RecvEnd, RecvOutcome, Waits};
use crate::clock::{self, Clock};
use crate::post::{CompletionQueue, RecvQueue};
use crate::raw::params::RawParams;
use crate::run::raw_recv::{RawRecvCounts, RxClassify};
use crate::run::raw_recv_qps::{run_raw_recv_qps, total, RecvQp};

/// Receives on every QP of `qps`, each with every slot posted already
/// (`post_all`); the outcome's counts are all QPs' together, each QP's
/// own stay in `qps`.
pub fn receive_qps<R: RecvQueue, C: CompletionQueue, K: RxClassify>(
    p: &RawParams,
    qps: &mut [RecvQp<R, C>],
    clock: &Clock,
    waits: Waits,
) -> RecvOutcome {
    let until = target(p);
    let start = clock::now();
    let first_ticks = waits.first.map(|d| clock.cycles_for(d));
    let mut end = RecvEnd::Done;
    // The wait for the first frame, on any QP.
    let first = run_raw_recv_qps::<_, _, K>(qps, until.min(1), &mut |got| {
        got || end.first_over(first_ticks, start)
    });
    let t_first = if total(qps) > 0 { clock::now() } else { 0 };
    let mut last = t_first;
    let (deadline, quiet_ticks) = waits.after_first(p, clock, t_first);
    let rest = first.and_then(|()| {
        if t_first == 0 {
            return Ok(());
        }
        run_raw_recv_qps::<_, _, K>(qps, until, &mut |got| {
            let now = clock::now();
            if got {
                last = now;
            }
            end.stops(now, !got && now.wrapping_sub(last) > quiet_ticks, deadline)
        })
    });
    let mut counts = RawRecvCounts::default();
    for q in qps.iter() {
        counts.add(&q.counts);
    }
    RecvOutcome::closed(counts, t_first, (end, last), rest)
}

/// The report's line of frames per QP: " frames per QP: 500 (QP 0), 498 (QP 1)".
pub fn per_qp_line(counts: &[u64]) -> String {
    let each: Vec<String> = counts
        .iter()
        .enumerate()
        .map(|(i, n)| format!("{n} (QP {i})"))
        .collect();
    format!(" frames per QP: {}\n", each.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_names_each_qps_frames() {
        assert_eq!(
            per_qp_line(&[500, 498]),
            " frames per QP: 500 (QP 0), 498 (QP 1)\n"
        );
    }
}
