//! raw-eth-burst-lat as the tool runs it (`tool::session::
//! raw_burst_lat_measure` over `run::raw_burst_lat`), client against
//! server, on the queue model: each side a model host of its own in its
//! own thread (`common::raw_host`, shared with raw_lat_model).
//! Checked: exactly `-n` frames from the client and `-n / --reply_every`
//! replies from the server, every frame on the wire equal to the sender's
//! slot and parsed with etherparse, the client's table row and the
//! server's bare header, `-U`/`-H`, and a frame dropped on the wire named
//! as a stall on both sides (the reply, the frame awaited) within the
//! watchdog. The wire is left at target/raw-burst-lat-direct.pcap.

#[cfg(not(feature = "model"))]
#[test]
fn raw_burst_lat_model_needs_the_model_feature() {
    println!("SKIPPED: the raw-eth-burst-lat model tests need `--features model`");
}

#[cfg(feature = "model")]
mod common;

#[cfg(feature = "model")]
mod with_model {
    use super::common::raw_host::{self as host, Pair, Side};
    use std::time::{Duration, Instant};

    use rdmaperf::raw::tools::RawTool;
    use rdmaperf::run::lat::LatError;
    use rdmaperf::tool::session::raw_burst_lat_measure::{self as measure, BurstLatRun};

    const BURST: RawTool = RawTool::BurstLat;

    /// The burst loop a side ran.
    fn burst(s: &Side) -> &BurstLatRun {
        s.run.bursts.as_ref().unwrap()
    }

    fn check_exact(extra: &str) -> Pair {
        let pair = host::pair(BURST, extra, None, Duration::from_secs(5));
        let (c, s) = (&pair.client, &pair.server);
        let n = c.p.raw.iters;
        let replies = n / u64::from(c.p.reply_every);
        for side in [c, s] {
            assert_eq!(
                burst(side).outcome.error,
                None,
                "{extra}: {:?} {:?}",
                burst(c).counts,
                burst(s).counts
            );
            assert_eq!(side.no_match, 0, "{extra}: every frame steered to the RQ");
        }
        let (cn, sn) = (burst(c).counts, burst(s).counts);
        assert_eq!(
            (cn.sent, cn.completed, cn.received),
            (n, n, replies),
            "{extra}: client"
        );
        assert_eq!(
            (sn.received, sn.sent, sn.completed),
            (n, replies, replies),
            "{extra}: server"
        );
        assert_eq!(
            host::check_log(&pair, extra),
            (n, replies),
            "{extra}: frames each way"
        );
        // Each sample: a reply after the post of the frame it answers.
        let (tp, tc) = (&burst(c).stamps.posted, &burst(c).stamps.completed);
        assert_eq!((tp.len() as u64, tc.len() as u64), (replies, replies));
        assert!(tp.iter().zip(tc).all(|(p, c)| *p > 0 && c > p), "{extra}");
        host::check_row(c, n, extra);
        // The server prints the header and the closing line, no row.
        let r = s.run.report.as_ref().unwrap();
        assert!(r.contains("t_min[usec]"), "{r}");
        assert_eq!(r.lines().count(), 3, "{r}");
        pair
    }

    #[test]
    fn bursts_send_n_and_take_n_over_reply_every() {
        let pair = check_exact("-n 200 --burst_size 16 --reply_every 4");
        assert_eq!(
            host::write_pcap(&pair.log, "raw-burst-lat-direct.pcap"),
            250
        );
    }

    #[test]
    fn defaults_sizes_flows_and_moderation() {
        check_exact("-n 100");
        check_exact("-n 64 -s 128 --burst_size 8 --reply_every 2");
        check_exact("-n 60 -s 1518 --burst_size 5 --reply_every 3");
        check_exact("-n 90 --flows 3 --burst_size 9 --reply_every 3");
        check_exact("-n 96 -t 8 -Q 4 --burst_size 32 --reply_every 8");
    }

    #[test]
    fn a_lost_frame_is_named_as_a_stall_on_both_sides() {
        let t = Instant::now();
        let stall = Duration::from_millis(300);
        let pair = host::pair(
            BURST,
            "-n 100 --burst_size 10 --reply_every 4",
            Some(37),
            stall,
        );
        assert!(t.elapsed() < Duration::from_secs(20), "no hang");
        let (c, s) = (burst(&pair.client), burst(&pair.server));
        // The server counts 99 frames and answers 24; the client waits
        // for reply 25, the server for frame 100.
        assert_eq!(
            c.outcome.error,
            Some(LatError::Stalled { at: 25 }),
            "client"
        );
        assert_eq!((c.counts.sent, c.counts.received), (100, 24));
        assert_eq!(
            s.outcome.error,
            Some(LatError::Stalled { at: 100 }),
            "server"
        );
        assert_eq!((s.counts.received, s.counts.sent), (99, 24));
        let words = |client, r: &BurstLatRun| {
            measure::error_words(client, &r.outcome.error.unwrap(), &r.outcome)
        };
        let (cw, sw) = (words(true, c), words(false, s));
        assert!(cw.contains("reply 25") && cw.contains("lost"), "{cw}");
        assert!(sw.contains("frame 100"), "{sw}");
        // What was measured before the loss is still a table: 24 samples.
        assert_eq!(c.stamps.completed.len(), 24);
        let cols = host::row(&pair.client);
        assert_eq!(cols[1], "100");
    }

    #[test]
    fn u_and_h_dump_the_samples_before_the_table() {
        let pair = check_exact("-n 50 --burst_size 5 -U -H");
        let (u, h) = host::dumps(&pair.client);
        // -U: each reply's arrival less its frame's post, in order, in
        // one unit (%g prints six digits).
        let st = &burst(&pair.client).stamps;
        let d: Vec<f64> = st
            .completed
            .iter()
            .zip(&st.posted)
            .map(|(c, p)| (c - p) as f64)
            .collect();
        let k = u[0] / d[0];
        assert!(
            u.iter()
                .zip(&d)
                .all(|(u, d)| (u / d / k - 1.0).abs() < 1e-4),
            "{u:?} {d:?}"
        );
        assert_eq!(u.len(), 50, "-U: every sample, in order");
        assert_eq!(h.len(), 48, "-H: sorted, less the two largest");
        assert!(h.windows(2).all(|w| w[0] <= w[1]), "-H sorted: {h:?}");
    }
}
