//! Ctrl-C in the raw tools' loops, on the queue model: SIGINT raised in
//! the process mid-run (the tool's handler, `run::stop::install`, takes
//! it as a user's Ctrl-C) while raw-eth-bw's sender runs by iterations and
//! by `-D`, while its server's receive loop counts a stream that never
//! lets its CQ run empty, and while raw-eth-lat and raw-eth-burst-lat ping
//! on the two-host model (`common::raw_host`). Checked for each: the loop
//! stops within a few polls of the signal, its outcome says interrupted,
//! the partial result is a table of what was done until then (as the
//! other tools print it), and the tool's ending (`raw_bw::ending`) is exit
//! 130 with a line naming the interruption.
//!
//! The stop flag is process-wide, so the tests take turns (`SERIAL`) and
//! each forgets the stop before and after (`stop::clear`).

#[cfg(not(feature = "model"))]
#[test]
fn raw_stop_model_needs_the_model_feature() {
    println!("SKIPPED: the raw Ctrl-C model tests need `--features model`");
}

#[cfg(feature = "model")]
mod common;

#[cfg(feature = "model")]
mod with_model {
    use super::common::model_env::{raw_recv_model, register_rx_tx, Stepping};
    use super::common::raw_eth::assert_model_clean;
    use super::common::raw_host::{self as host, Host, Lat};
    use super::common::raw_loop::RawLoop;
    use super::common::raw_steer_model::{self, model_rule, CLIENT, SERVER};
    use std::sync::{Mutex, MutexGuard};
    use std::time::{Duration, Instant};

    use rdmaperf::clock::{self, Clock};
    use rdmaperf::mlx5::raw_sq::{RawPkt, RawSqConfig};
    use rdmaperf::model::{Model, ModelMmio};
    use rdmaperf::post::{Completion, CompletionQueue, PostError};
    use rdmaperf::raw::params::RawParams;
    use rdmaperf::raw::slots::{self, Slots};
    use rdmaperf::raw::{steer, tools::RawTool};
    use rdmaperf::run::bw::{BwOutcome, RunError};
    use rdmaperf::run::lat::LatError;
    use rdmaperf::run::raw_bw::{Alone, Direct};
    use rdmaperf::run::raw_lat::RawQp;
    use rdmaperf::run::raw_recv::{DirectRx, RawRecvCfg};
    use rdmaperf::run::stop;
    use rdmaperf::tool::runs::{raw_bw, raw_send};
    use rdmaperf::tool::session::raw_measure::{self, Stamps};
    use rdmaperf::tool::session::raw_recv_measure::{self as recv, RecvEnd, Waits};
    use rdmaperf::tool::setup::raw_method::RawMethod;

    /// Polls a loop may take after the signal before it counts as not
    /// stopping (each poll of the model steps its NIC: microseconds).
    const PROMPT_POLLS: u64 = 10_000;

    static SERIAL: Mutex<()> = Mutex::new(());

    /// One test's turn: the handler installed, no stop pending; the stop
    /// forgotten again when it ends.
    struct Turn(#[allow(dead_code)] MutexGuard<'static, ()>);

    impl Drop for Turn {
        fn drop(&mut self) {
            stop::clear();
        }
    }

    fn turn() -> Turn {
        let g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        stop::install();
        stop::clear();
        Turn(g)
    }

    /// Ctrl-C, as the terminal delivers it: SIGINT to this process.
    fn sigint() {
        // SAFETY: raise(3) only sends a signal to this thread; the
        // handler installed (`stop::install`) touches atomics only.
        let rc = unsafe { libc::raise(libc::SIGINT) };
        assert_eq!(rc, 0);
    }

    /// A CQ that raises SIGINT once `when` says so (given the completions
    /// seen and the time since the first poll), then fails the test if the
    /// loop goes on polling for more than [`PROMPT_POLLS`].
    struct Interrupting<C, W> {
        cq: C,
        when: W,
        seen: u64,
        t0: Option<Instant>,
        raised: Option<Instant>,
        after: u64,
    }

    impl<C, W: FnMut(u64, Duration) -> bool> Interrupting<C, W> {
        fn new(cq: C, when: W) -> Self {
            Interrupting {
                cq,
                when,
                seen: 0,
                t0: None,
                raised: None,
                after: 0,
            }
        }
    }

    impl<C: CompletionQueue, W: FnMut(u64, Duration) -> bool> CompletionQueue for Interrupting<C, W> {
        fn poll(&mut self, out: &mut [Completion]) -> Result<usize, PostError> {
            let t0 = *self.t0.get_or_insert_with(Instant::now);
            if self.raised.is_some() {
                self.after += 1;
                assert!(
                    self.after <= PROMPT_POLLS,
                    "the loop polled {} times after Ctrl-C",
                    self.after
                );
            } else if (self.when)(self.seen, t0.elapsed()) {
                sigint();
                self.raised = Some(Instant::now());
            }
            let n = self.cq.poll(out)?;
            self.seen += n as u64;
            Ok(n)
        }
    }

    /// A CQ borrowed (the host's receive half).
    struct ByRef<'a, C>(&'a mut C);

    impl<C: CompletionQueue> CompletionQueue for ByRef<'_, C> {
        fn poll(&mut self, out: &mut [Completion]) -> Result<usize, PostError> {
            self.0.poll(out)
        }
    }

    /// The tool's ending after the run: exit 130 and the line naming it.
    fn assert_ends_interrupted(tool: RawTool) {
        assert!(stop::requested(), "the handler set the stop flag");
        let (status, line) = raw_bw::ending(tool, Ok(()), stop::exit_status());
        assert_eq!(status, 130, "SIGINT's exit status");
        let line = line.unwrap();
        assert!(
            line.starts_with(&format!(
                "rdmaperf {}: interrupted by signal 2",
                tool.name()
            )),
            "{line}"
        );
    }

    fn bw_params(extra: &str) -> RawParams {
        raw_steer_model::params(RawTool::Bw, &format!("{CLIENT} {extra}"))
    }

    /// raw-eth-bw's sender (direct) on a loop-back model, its CQ raising
    /// SIGINT when `when` says: the outcome, its numbers' table (or why
    /// none), the frames that reached the wire, and the time from the
    /// signal to the loop's end.
    fn send_interrupted(
        p: &RawParams,
        when: impl FnMut(u64, Duration) -> bool,
    ) -> (BwOutcome, Result<String, String>, usize, Duration) {
        // Declared before the SQ and the CQ: they are dropped first.
        let (rig, sqs, cq) = RawLoop::new(p, 1);
        let model = &rig.model;
        let mut cq = Interrupting::new(Stepping { cq, model }, when);
        let clock = Clock::calibrate();
        let mut stamps = Stamps::for_run(p, 1);
        let posts: &mut [_] = &mut sqs.into_iter().map(Direct::<ModelMmio>).collect::<Vec<_>>();
        let out = raw_measure::measure_stamped(
            p,
            (posts, &mut cq),
            (&rig.bases(), rig.slots),
            &clock,
            (&mut Alone, &mut stamps),
        );
        let since = cq.raised.expect("the signal was raised").elapsed();
        let table = raw_send::finish(p, RawMethod::Direct, (&out, &stamps), 1, clock.hz())
            .map(|r| raw_measure::report(p, &r, None))
            .map_err(|f| f.msg);
        model.step();
        assert_model_clean(model);
        (out, table, model.take_wire().len(), since)
    }

    /// The table's row: the line starting with `-s`.
    fn bw_row(p: &RawParams, table: &str) -> Vec<String> {
        let line = table
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{} ", p.size)))
            .unwrap_or_else(|| panic!("no row: {table}"));
        line.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn the_sender_stops_on_ctrl_c_with_the_frames_completed_so_far() {
        let _t = turn();
        let p = bw_params("-n 200000 -s 64");
        let (out, table, wire, since) = send_interrupted(&p, |seen, _| seen >= 2000);
        assert_eq!(out.error, Some(RunError::Interrupted), "{out:?}");
        assert!(since < Duration::from_secs(1), "stopped {since:?} after");
        assert!(out.completed >= 2000 && out.completed < 200_000, "{out:?}");
        assert!(out.posted >= out.completed && wire as u64 <= out.posted);
        assert!(wire as u64 >= out.completed, "every completed frame left");
        let table = table.unwrap();
        let row = bw_row(&p, &table);
        assert_eq!(
            row[1],
            out.measured.to_string(),
            "#iterations: the frames completed until Ctrl-C: {table}"
        );
        assert!(row[3].parse::<f64>().unwrap() > 0.0, "{table}");
        assert_ends_interrupted(RawTool::Bw);
    }

    #[test]
    fn a_duration_sender_stops_on_ctrl_c_inside_its_sample_window() {
        let _t = turn();
        // -D 2: warm-up to 0.5 s, the sample to 1.5 s; Ctrl-C at 0.9 s.
        let p = bw_params("-D 2 -s 64");
        let at = Duration::from_millis(900);
        let (out, table, _, since) = send_interrupted(&p, |_, t| t >= at);
        // Interrupted (a run that reached its end would have no error),
        // well before the window's 1.1 s left.
        assert!(
            since < Duration::from_millis(500),
            "stopped {since:?} after"
        );
        assert_eq!(out.error, Some(RunError::Interrupted), "{out:?}");
        // As the other tools' loops (`run::bw`'s window): a run stopped
        // early reports every frame completed since the loop's start.
        assert!(out.measured > 0 && out.measured == out.completed, "{out:?}");
        let table = table.unwrap();
        assert_eq!(bw_row(&p, &table)[1], out.measured.to_string(), "{table}");
        assert_ends_interrupted(RawTool::Bw);
    }

    /// Frames from a client's buffer posted in lists of 16 on QP 0 before
    /// every poll and looped back into QP 1's RQ: the server's CQ is never
    /// empty.
    struct Flood<'a> {
        model: &'a Model,
        sq: rdmaperf::mlx5::raw_sq::RawSq<ModelMmio>,
        cq: rdmaperf::mlx5::DirectCq,
        list: Vec<RawPkt>,
    }

    impl CompletionQueue for Flood<'_> {
        fn poll(&mut self, out: &mut [Completion]) -> Result<usize, PostError> {
            match self.sq.post_send(&self.list) {
                Ok(()) | Err(PostError::QueueFull) => {}
                Err(e) => return Err(e),
            }
            self.model.step();
            self.model.loop_back();
            self.cq.poll(out)
        }
    }

    /// raw-eth-bw's server (`extra` on its command line) counting what
    /// [`Flood`] sends, its CQ raising SIGINT when `when` says: the
    /// outcome, its report, and when the signal was raised (if it was).
    fn serve_flood(
        extra: &str,
        when: impl FnMut(u64, Duration) -> bool,
    ) -> (recv::RecvOutcome, String, Option<Instant>) {
        let sp = raw_steer_model::params(RawTool::Bw, &format!("{SERVER} -r 64 {extra}"));
        let cp = bw_params("-s 64");
        let slots = Slots::new(cp.size, cp.raw.flows, cp.raw.flows_burst, 16, 4096);
        let stride = 2048usize;
        let n_rx = 64u32;
        // Declared before the model: registered memory outlives it.
        let mut rx = vec![0u8; n_rx as usize * stride];
        let mut tx = vec![0u8; slots.buffer_len()];
        slots::fill(&mut tx, &cp.frame_spec(), &slots, 0x5eed);
        let model = raw_recv_model(0x123, 4096, n_rx);
        // SAFETY: both buffers outlive the model (declared before it).
        let (rxk, txk) = unsafe { register_rx_tx(&model, &mut rx, &mut tx) };
        let (mut sq, mut cq) = model.raw_pair(RawSqConfig::new(txk.lkey, 4)).unwrap();
        // SAFETY: as above.
        unsafe { sq.set_frame_source(tx.as_ptr(), tx.len()) };
        let mut rq = model.raw_rq(1).unwrap();
        cq.attach_recv(rq.qpn(), rq.ring());
        for r in steer::rules(&sp) {
            model.add_flow(model_rule(&r, 1)).unwrap();
        }
        let list = (0..16)
            .map(|k| RawPkt {
                addr: tx.as_ptr() as u64 + slots.offset(k),
                len: slots.frame_len,
            })
            .collect();
        let flood = Flood {
            model: &model,
            sq,
            cq,
            list,
        };
        let mut cq = Interrupting::new(flood, when);
        // SAFETY: `rx` holds `n_rx` strides, registered, and outlives the
        // loop.
        let cfg =
            unsafe { RawRecvCfg::new(rx.as_ptr(), stride as u32, stride as u32, n_rx, rxk.lkey) };
        recv::post_receives(&mut rq, &cfg, "test").unwrap();
        let clock = Clock::calibrate();
        let waits = Waits {
            first: Some(Duration::from_secs(5)),
            quiet: Duration::from_secs(5),
        };
        let out = recv::receive::<_, _, DirectRx>(&sp, (&mut rq, &mut cq), &cfg, &clock, waits);
        let report = recv::report(&sp, &out, clock.hz(), None);
        let raised = cq.raised;
        drop(cq);
        assert!(model.violations().is_empty(), "{:?}", model.violations());
        assert!(out.counts.packets > 0 && out.t_end > out.t_first, "{out:?}");
        let row = bw_row(&sp, &report);
        assert_eq!(row[1], out.counts.packets.to_string(), "{report}");
        (out, report, raised)
    }

    #[test]
    fn the_server_stops_on_ctrl_c_under_a_stream_that_never_pauses() {
        let _t = turn();
        let (out, report, raised) = serve_flood("-n 100000000", |seen, _| seen >= 3000);
        let since = raised.expect("the signal was raised").elapsed();
        assert!(since < Duration::from_secs(1), "stopped {since:?} after");
        assert_eq!(out.end, RecvEnd::Interrupted, "{out:?}");
        assert_eq!(out.error, None, "{out:?}");
        assert!(
            report.contains(" interrupted: the frames counted so far"),
            "{report}"
        );
        assert!(clock::now() > out.t_end);
        assert_ends_interrupted(RawTool::Bw);
    }

    /// The same stream without Ctrl-C: `-D 1` still ends the run.
    #[test]
    fn the_servers_duration_ends_under_a_stream_that_never_pauses() {
        let _t = turn();
        let t = Instant::now();
        let (out, report, raised) = serve_flood("-D 1", |_, _| false);
        assert!(raised.is_none());
        assert!(t.elapsed() < Duration::from_secs(4), "{:?}", t.elapsed());
        assert_eq!((out.end, &out.error), (RecvEnd::Done, &None), "{out:?}");
        assert!(!report.contains("interrupted"), "{report}");
        assert!(!stop::requested());
    }

    /// A latency side's session (`raw_host::lat_on`), the
    /// client's receive CQ raising SIGINT after 300 of the server's
    /// replies.
    fn lat_interrupted(p: &RawParams, h: Host<'_>, stall: Duration) -> Lat {
        let client = p.raw.side != Some(rdmaperf::raw::ctx::Side::Server);
        let mut rcq = Interrupting::new(ByRef(h.rcq), move |seen, _| client && seen >= 300);
        let qp = RawQp::new((h.post, h.scq), (h.rq, &mut rcq), (h.frames, h.ring));
        host::lat_on(p, qp, stall)
    }

    #[test]
    fn raw_eth_lat_stops_on_ctrl_c_on_both_sides() {
        let _t = turn();
        let t = Instant::now();
        let n = 1_000_000;
        let pair = host::pair_with(
            RawTool::Lat,
            (&format!("-n {n}"), None),
            Duration::from_secs(5),
            lat_interrupted,
        );
        assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
        for s in [&pair.client, &pair.server] {
            let o = &s.run.lat.as_ref().unwrap().outcome;
            assert_eq!(o.error, Some(LatError::Interrupted), "{o:?}");
            assert!(o.iters >= 300 && o.iters < n, "{o:?}");
        }
        // The partial table: the round trips made until Ctrl-C.
        let c = &pair.client.run.lat.as_ref().unwrap().outcome;
        assert_eq!(host::row(&pair.client)[1], c.iters.to_string());
        assert_ends_interrupted(RawTool::Lat);
    }

    #[test]
    fn raw_eth_burst_lat_stops_on_ctrl_c_on_both_sides() {
        let _t = turn();
        let t = Instant::now();
        let pair = host::pair_with(
            RawTool::BurstLat,
            ("-n 1000000", None),
            Duration::from_secs(5),
            lat_interrupted,
        );
        assert!(t.elapsed() < Duration::from_secs(20), "{:?}", t.elapsed());
        for s in [&pair.client, &pair.server] {
            let o = &s.run.bursts.as_ref().unwrap().outcome;
            assert_eq!(o.error, Some(LatError::Interrupted), "{o:?}");
        }
        let report = pair.client.run.report.as_ref().unwrap();
        assert!(report.contains("t_min[usec]"), "{report}");
        assert_ends_interrupted(RawTool::BurstLat);
    }
}
