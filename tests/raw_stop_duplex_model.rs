//! Ctrl-C in raw-eth-bw `-b` as the tool runs it, client against server on
//! two model hosts (`common::raw_host`, `common::raw_duplex_session`): a
//! SIGINT mid-run (the handler the tools install, process-wide, so both
//! sides see it, as two tools on one host would each see their own) ends
//! both sides' loops promptly, each saying it was interrupted, with the
//! frames it sent and counted until then in its table; the exit is 130.
//! One test in this binary: the stop flag is the process's.

#[cfg(not(feature = "model"))]
#[test]
fn raw_stop_duplex_model_needs_the_model_feature() {
    println!(
        "SKIPPED: the raw-eth-bw -b Ctrl-C tests drive the queue model: need `--features model`"
    );
}

#[cfg(feature = "model")]
mod common;

#[cfg(feature = "model")]
mod with_model {
    use super::common::raw_duplex_session::duplex;
    use super::common::raw_host as host;
    use std::time::{Duration, Instant};

    use rdmaperf::raw::tools::RawTool;
    use rdmaperf::run::bw::RunError;
    use rdmaperf::run::stop;
    use rdmaperf::tool::runs::raw_bw;

    /// `-b -D 20` on both sides, SIGINT a second in: both loops end within
    /// two seconds of it (not at 20), interrupted, having sent, completed
    /// and counted frames; each table's row counts what its window saw.
    #[test]
    fn both_sides_of_b_stop_on_ctrl_c() {
        stop::install();
        stop::clear();
        let raiser = std::thread::spawn(|| {
            std::thread::sleep(Duration::from_secs(1));
            // SAFETY: raise(3) sends SIGINT to this thread; the handler
            // (`stop::install`) only stores to atomics.
            assert_eq!(unsafe { libc::raise(libc::SIGINT) }, 0);
            Instant::now()
        });
        let t0 = Instant::now();
        let pair = host::pair_with(
            RawTool::Bw,
            ("-b -D 20 -s 64", None),
            Duration::from_secs(30),
            duplex,
        );
        let raised = raiser.join().unwrap();
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "ran {:?}",
            t0.elapsed()
        );
        let after = raised.elapsed();
        assert!(
            after < Duration::from_secs(2),
            "ended {after:?} after the signal"
        );
        for (who, s) in [("client", &pair.client), ("server", &pair.server)] {
            let r = &s.run;
            assert_eq!(
                r.out.error,
                Some(RunError::Interrupted),
                "{who}: {:?}",
                r.out
            );
            assert_eq!(r.error, None, "{who}: the receive side saw no fault");
            assert!(
                r.out.completed > 0 && r.out.posted >= r.out.completed,
                "{who}: {:?}",
                r.out
            );
            assert!(
                r.counts.packets > 0,
                "{who} counted none of the peer's frames"
            );
            assert_eq!(r.counts.csum_bad + r.counts.errors, 0, "{who}");
            let said = format!(
                "received: {} of the peer's frames until interrupted (of a 20 s run)",
                r.counts.packets
            );
            assert!(r.report.contains(&said), "{who}: {}", r.report);
        }
        assert!(stop::requested(), "the handler set the stop flag");
        let (status, line) = raw_bw::ending(RawTool::Bw, Ok(()), stop::exit_status());
        assert_eq!(status, 130, "SIGINT's exit status");
        assert!(
            line.unwrap()
                .starts_with("rdmaperf raw-eth-bw: interrupted by signal 2"),
            "the line naming the interruption"
        );
        stop::clear();
    }
}
