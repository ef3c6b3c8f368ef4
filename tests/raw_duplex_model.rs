//! raw-eth-bw `-b` as the tool runs it (`session::raw_measure::measure_beside`:
//! the sender's loop with `run::raw_duplex`'s receive side beside it),
//! client against server on two model hosts (`common::raw_host`), each
//! with its own flow table from its command line (`raw::steer`, a client's
//! rule too). Checked: each side sends `-n` frames and counts the peer's
//! `-n` (IPv4/UDP, checksums good), every frame on the wire its sender's
//! slot with etherparse headers (the server's the other way), the server's
//! first frame after the client's first, the printed table and receive
//! lines; a client frame lost on the wire ends the server with a stall
//! naming what came in, while the client completes. The wire is left at
//! target/raw-bw-duplex.pcap.

#[cfg(not(feature = "model"))]
#[test]
fn raw_duplex_model_needs_the_model_feature() {
    println!("SKIPPED: the raw-eth-bw -b model tests need `--features model`");
}

#[cfg(feature = "model")]
mod common;

#[cfg(feature = "model")]
mod with_model {
    use super::common::raw_duplex_session::{duplex, Ran};
    use super::common::raw_host::{self as host, Pair};
    use std::time::Duration;

    use rdmaperf::raw::tools::RawTool;
    use rdmaperf::run::raw_duplex::DuplexRxError;

    fn run(extra: &str, drop_nth: Option<u64>, stall: Duration) -> Pair<Ran> {
        host::pair_with(RawTool::Bw, (extra, drop_nth), stall, duplex)
    }

    #[test]
    fn each_side_sends_n_and_counts_the_peers_n() {
        for extra in [
            "-b -n 300",
            "-b -n 200 -s 128 -Q 8",
            "-b -n 100 -s 1518 -t 32",
        ] {
            let pair = run(extra, None, Duration::from_secs(5));
            let n = pair.client.p.raw.iters;
            for (who, s) in [("client", &pair.client), ("server", &pair.server)] {
                let (r, at) = (&s.run, format!("{extra} {who}"));
                assert_eq!(r.error, None, "{at}");
                assert_eq!(r.out.error, None, "{at}");
                assert_eq!((r.out.posted, r.out.completed), (n, n), "{at}");
                let c = &r.counts;
                assert_eq!((c.packets, c.ipv4, c.udp, c.csum_ok), (n, n, n, n), "{at}");
                assert_eq!((c.csum_bad, c.errors, s.no_match), (0, 0, 0), "{at}");
                let row = r
                    .report
                    .lines()
                    .find(|l| l.trim_start().starts_with(&s.p.size.to_string()));
                let cols: Vec<&str> = row.expect(&at).split_whitespace().collect();
                assert_eq!(cols[1], n.to_string(), "{at}: #iterations");
                assert!(
                    r.report
                        .contains(&format!("received: {n} of the peer's {n} frames")),
                    "{at}: {}",
                    r.report
                );
            }
            let mut sent = [0u64; 2];
            for (i, (client, _, f)) in pair.log.iter().enumerate() {
                let side = if *client { &pair.client } else { &pair.server };
                let k = &mut sent[*client as usize];
                let at = (side.slots.flow_of(*k), side.slots.offset(*k));
                host::check_frame_at(f, side, at, &format!("{extra}: frame {i}"));
                *k += 1;
            }
            assert_eq!(
                sent,
                [n, n],
                "{extra}: frames each way (server's, client's)"
            );
            let first_server = pair.log.iter().position(|(client, _, _)| !client);
            assert!(
                first_server > Some(0),
                "{extra}: the server sent before the client's first frame"
            );
            if extra == "-b -n 300" {
                assert_eq!(host::write_pcap(&pair.log, "raw-bw-duplex.pcap"), 600);
            }
        }
    }

    /// Client frame 50 of 100 lost: the server counts 99 and stops with a
    /// stall naming them; the client gets the server's 100 and completes.
    #[test]
    fn a_lost_frame_stalls_the_side_that_waits_for_it() {
        let pair = run("-b -n 100", Some(50), Duration::from_millis(300));
        let (c, s) = (&pair.client.run, &pair.server.run);
        assert_eq!((c.error.as_ref(), c.counts.packets), (None, 100));
        assert_eq!(
            s.error,
            Some(DuplexRxError::Stalled {
                received: 99,
                owed: 100
            })
        );
        assert_eq!(
            (s.out.posted, s.out.completed),
            (100, 100),
            "its sends all went"
        );
        let words = rdmaperf::tool::runs::raw_duplex::error_words(s.error.as_ref().unwrap());
        assert!(
            words.contains("99 of 100 in") && words.contains("-b"),
            "{words}"
        );
    }

    /// `-b -D 1`: each side runs about a second (a server's from its first
    /// frame), both send and receive, no error; the table's #iterations
    /// are the sends completed plus the frames received inside the sample
    /// window (perftest's `run_iter_bi`): with no margins at 1 s, more
    /// than either alone, at most all of both.
    #[test]
    fn both_ways_for_a_duration() {
        let t0 = std::time::Instant::now();
        let pair = host::pair_with(
            RawTool::Bw,
            ("-b -D 1 -s 64", None),
            Duration::from_secs(5),
            duplex,
        );
        let took = t0.elapsed();
        let last = |client: bool| {
            let f = pair.log.iter().rev().find(|(c, _, _)| *c == client);
            Duration::from_micros(f.expect("frames each way").1)
        };
        let first_client = Duration::from_micros(pair.log[0].1);
        println!(
            "-b -D 1: {took:?} in all; the client's last frame at {:?}, the server's at {:?}, \
             {} frames on the wire",
            last(true),
            last(false),
            pair.log.len()
        );
        assert!(took >= Duration::from_secs(1) && took < Duration::from_secs(20));
        assert!(last(true) >= Duration::from_millis(900), "{:?}", last(true));
        assert!(
            last(false) >= first_client + Duration::from_millis(900),
            "the server's window runs from its first frame"
        );
        for (who, s) in [("client", &pair.client), ("server", &pair.server)] {
            let r = &s.run;
            assert_eq!((r.error.as_ref(), r.out.error), (None, None), "{who}");
            let (m, sent, got) = (r.out.measured, r.out.completed, r.counts.packets);
            assert!(sent > 0 && got > 0, "{who}: {sent} sent, {got} received");
            println!("{who}: {m} measured, {sent} sent, {got} received");
            // -D 1 has no margins (D/4 = 0 s): the window is the whole run.
            let at = format!("{who}: {m} measured of {sent} + {got}");
            assert!(m > sent.max(got) && m <= sent + got, "{at}");
            let row = r
                .report
                .lines()
                .find(|l| l.trim_start().starts_with("64 "))
                .unwrap_or_else(|| panic!("{who}: {}", r.report));
            let cols: Vec<&str> = row.split_whitespace().collect();
            assert_eq!(cols[1], m.to_string(), "{who}: #iterations");
            assert!(cols[3].parse::<f64>().unwrap() > 0.0, "{who}: {row}");
            assert!(
                r.report
                    .contains(&format!("received: {got} of the peer's frames in 1 s")),
                "{who}: {}",
                r.report
            );
        }
    }
}
