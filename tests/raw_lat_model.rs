//! raw-eth-lat as the tool runs it (`tool::session::raw_lat_measure` over
//! `run::raw_lat`), client against server, on the queue model: each side
//! a model host of its own in its own thread (`common::raw_host`,
//! shared with raw_burst_lat_model). Checked:
//! exactly `-n` round trips on both sides, every frame on the wire equal to
//! the sender's slot and parsed with etherparse (the client's headers
//! `raw::frame`'s, the server's with MACs, IPs and ports swapped), the
//! printed table's row and columns, and a frame dropped on the wire named
//! as a stall at its round trip on both sides rather than a hang. The
//! wire is left at target/raw-lat-direct.pcap.

#[cfg(not(feature = "model"))]
#[test]
fn raw_lat_model_needs_the_model_feature() {
    println!("SKIPPED: the raw-eth-lat model tests need `--features model`");
}

#[cfg(feature = "model")]
mod common;

#[cfg(feature = "model")]
mod with_model {
    use super::common::raw_host::{self as host, Pair, Side};
    use std::time::{Duration, Instant};

    use rdmaperf::raw::tools::RawTool;
    use rdmaperf::run::lat::LatError;
    use rdmaperf::tool::session::raw_lat_measure::{self as measure, RawLatRun};

    /// The ping-pong a side ran.
    fn lat(s: &Side) -> &RawLatRun {
        s.run.lat.as_ref().unwrap()
    }

    fn check_exact(extra: &str) -> Pair {
        let pair = host::pair(RawTool::Lat, extra, None, Duration::from_secs(5));
        let n = pair.client.p.raw.iters;
        for s in [&pair.client, &pair.server] {
            let o = &lat(s).outcome;
            assert_eq!(o.error, None, "{extra}");
            assert_eq!(o.iters, n, "{extra}: exactly -n sends");
            assert_eq!(lat(s).tposted.len() as u64, n, "{extra}");
            assert_eq!(s.no_match, 0, "{extra}: every frame steered to the RQ");
            host::check_row(s, n, extra);
        }
        assert_eq!(
            host::check_log(&pair, extra),
            (n, n),
            "{extra}: -n each way"
        );
        pair
    }

    #[test]
    fn a_ping_pong_makes_exactly_n_round_trips() {
        let pair = check_exact("-n 200");
        // The wire alternates: the client's frame, then the server's reply.
        for (i, (client, _, _)) in pair.log.iter().enumerate() {
            assert_eq!(*client, i % 2 == 0, "frame {i} out of turn");
        }
        assert_eq!(host::write_pcap(&pair.log, "raw-lat-direct.pcap"), 400);
    }

    #[test]
    fn sizes_flows_moderation_and_a_small_rq() {
        check_exact("-n 64 -s 128");
        check_exact("-n 50 -s 1518");
        check_exact("-n 90 --flows 3");
        check_exact("-n 100 -t 8 -Q 4");
        check_exact("-n 300 -r 16");
    }

    #[test]
    fn a_lost_frame_is_named_as_a_stall() {
        let t = Instant::now();
        let pair = host::pair(RawTool::Lat, "-n 100", Some(37), Duration::from_millis(300));
        assert!(t.elapsed() < Duration::from_secs(20), "no hang");
        let c = &lat(&pair.client).outcome;
        let s = &lat(&pair.server).outcome;
        assert_eq!(c.error, Some(LatError::Stalled { at: 37 }), "client");
        assert_eq!(c.iters, 37, "the client sent the lost frame, then waited");
        assert_eq!(s.error, Some(LatError::Stalled { at: 37 }), "server");
        assert_eq!(s.iters, 36, "the server answered 36 frames");
        let words = measure::error_words(&c.error.unwrap(), c);
        assert!(
            words.contains("round trip 37") && words.contains("lost"),
            "{words}"
        );
        // What was measured before the loss is still a table.
        assert_eq!(host::row(&pair.client)[1], "37");
    }
    #[test]
    fn a_duration_run_counts_the_sample_window() {
        let pair = host::pair(RawTool::Lat, "-D 1", None, Duration::from_secs(5));
        for s in [&pair.client, &pair.server] {
            let o = &lat(s).outcome;
            assert_eq!(o.error, None);
            assert!(lat(s).tposted.is_empty(), "no stamps under -D");
            assert!(o.measured > 0 && o.measured <= o.iters, "{o:?}");
            let cols = host::row(s);
            assert_eq!(cols.len(), 4, "{cols:?}");
            assert_eq!(cols[1], o.measured.to_string());
            let r = s.run.report.as_ref().unwrap();
            assert!(r.contains("tps average"), "{r}");
        }
        // The sides ran the same ping-pong: their sends differ by at most
        // the one in flight when the client's time ran out.
        let (c, s) = (
            lat(&pair.client).outcome.iters,
            lat(&pair.server).outcome.iters,
        );
        assert!(c.abs_diff(s) <= 1, "client {c}, server {s}");
    }
    #[test]
    fn u_and_h_dump_the_samples_before_the_table() {
        let pair = check_exact("-n 50 -U -H");
        let (u, h) = host::dumps(&pair.client);
        assert_eq!(u.len(), 49, "-U: every sample, in order");
        assert_eq!(h.len(), 47, "-H: sorted, less the two largest");
        assert!(h.windows(2).all(|w| w[0] <= w[1]), "-H sorted: {h:?}");
    }
}
