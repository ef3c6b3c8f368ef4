//! raw-eth-lat as the tool runs it (`tool::session::raw_lat_measure` over
//! `run::raw_lat`), client against server, on the queue model: each side
//! is a model host of its own (a raw QP 0 with its direct SQ, RQ and CQ,
//! and a flow table built from that side's command line by `raw::steer`,
//! as `ibv_create_flow` would install it), in its own thread. A side's
//! polls step its NIC, put what its port sent on the wire to the peer, and
//! deliver the peer's frames to its port (`Model::deliver`). Checked:
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
    use super::common::raw_steer_model::{self, CLIENT, SERVER};
    use std::cell::RefCell;
    use std::collections::VecDeque;
    use std::rc::Rc;
    use std::sync::mpsc::{channel, Receiver, Sender};
    use std::sync::{Arc, Mutex};
    use std::time::{Duration, Instant};

    use etherparse::{Ethernet2Header, Ipv4Header, UdpHeader};
    use rdmaperf::clock::Clock;
    use rdmaperf::mlx5::raw_sq::RawSqConfig;
    use rdmaperf::mlx5::DirectCq;
    use rdmaperf::model::{
        Access, FlowRule, Model, ModelConfig, ModelMmio, ModelTransport, RecvSpec,
    };
    use rdmaperf::post::{Completion, CompletionQueue, PostError, WcOpcode};
    use rdmaperf::raw::params::RawParams;
    use rdmaperf::raw::pcap::{self, PcapWriter};
    use rdmaperf::raw::slots::{self, Slots};
    use rdmaperf::raw::{frame, steer, tools::RawTool};
    use rdmaperf::run::lat::LatError;
    use rdmaperf::run::raw_bw::Direct;
    use rdmaperf::run::raw_lat::RxRing;
    use rdmaperf::tool::session::raw_lat_measure::{self as measure, RawLatRun};
    use rdmaperf::tool::setup::raw_lat_res::rx_depth;
    use rdmaperf::tool::setup::raw_recv_res::slot_stride;
    use rdmaperf::verbs::flow as vflow;

    const QPN: u32 = 0x123;
    const SEED: u32 = 0x5eed;

    fn params(cmd: &str) -> RawParams {
        raw_steer_model::params(RawTool::Lat, cmd)
    }

    /// One of `raw::steer`'s rules as the model's flow table holds it, on
    /// raw QP 0.
    fn model_rule(r: &vflow::FlowRule) -> FlowRule {
        raw_steer_model::model_rule(r, 0)
    }

    /// What crossed the wire: (from the client?, microseconds, frame).
    type Log = Arc<Mutex<Vec<(bool, u64, Vec<u8>)>>>;

    /// One host's port: its model, the wire both ways, and the CQ's
    /// completions sorted into sends and receives.
    struct Port {
        model: Model,
        cq: DirectCq,
        out: Sender<Vec<u8>>,
        inp: Receiver<Vec<u8>>,
        client: bool,
        /// Drop the `n`-th frame this port sends (1-based), if any.
        drop_nth: Option<u64>,
        sent: u64,
        log: Log,
        t0: Instant,
        sends: VecDeque<Completion>,
        recvs: VecDeque<Completion>,
    }

    impl Port {
        fn pump(&mut self) -> Result<(), PostError> {
            self.model.step();
            for f in self.model.take_wire() {
                self.sent += 1;
                let us = self.t0.elapsed().as_micros() as u64;
                self.log.lock().unwrap().push((self.client, us, f.clone()));
                if self.drop_nth != Some(self.sent) {
                    let _ = self.out.send(f);
                }
            }
            while let Ok(f) = self.inp.try_recv() {
                self.model.deliver(&f);
            }
            let mut wc = [Completion::default(); 8];
            let n = self.cq.poll(&mut wc)?;
            for c in &wc[..n] {
                if c.opcode == WcOpcode::RECV {
                    self.recvs.push_back(*c);
                } else {
                    self.sends.push_back(*c);
                }
            }
            Ok(())
        }
    }

    /// The send or the receive half of the port's one CQ.
    struct HalfCq(Rc<RefCell<Port>>, bool);
    impl CompletionQueue for HalfCq {
        fn poll(&mut self, out: &mut [Completion]) -> Result<usize, PostError> {
            let mut p = self.0.borrow_mut();
            p.pump()?;
            let q = if self.1 { &mut p.recvs } else { &mut p.sends };
            let n = out.len().min(q.len());
            for (o, c) in out.iter_mut().zip(q.drain(..n)) {
                *o = c;
            }
            Ok(n)
        }
    }

    /// What one side ran: the run, its table, its send buffer and layout.
    struct Side {
        run: RawLatRun,
        report: Result<String, String>,
        tx: Vec<u8>,
        slots: Slots,
        p: RawParams,
        no_match: u64,
    }

    /// One side, as the tool runs it, on a model host of its own.
    fn side(
        cmd: String,
        (out, inp): (Sender<Vec<u8>>, Receiver<Vec<u8>>),
        (log, t0): (Log, Instant),
        drop_nth: Option<u64>,
        stall: Duration,
    ) -> Side {
        let p = params(&cmd);
        let client = p.raw.side != Some(rdmaperf::raw::ctx::Side::Server);
        let slots = Slots::new(p.size, p.raw.flows, 1, 1, 4096);
        let posted = rx_depth(&p) as u32;
        let stride = slot_stride(p.size);
        // Declared before the model: registered memory outlives it.
        let mut tx = vec![0u8; slots.buffer_len()];
        slots::fill(&mut tx, &p.frame_spec(), &slots, SEED);
        let mut rx = vec![0u8; posted as usize * stride as usize];
        let model = Model::new(ModelConfig {
            qps: 1,
            wqe_cnt: 256,
            cqe_cnt: 4096,
            qpn: QPN,
            transport: ModelTransport::RawEth { min_inline: 0 },
            record_history: false,
            recv: Some(RecvSpec {
                slots: posted.next_power_of_two().max(2),
                qpn: QPN,
                ..RecvSpec::default()
            }),
            ..ModelConfig::default()
        })
        .unwrap();
        // SAFETY: both buffers outlive the model (declared before it).
        let (txk, rxk) = unsafe {
            (
                model.register(tx.as_mut_ptr(), tx.len(), Access::NONE),
                model.register(rx.as_mut_ptr(), rx.len(), Access::LOCAL_WRITE),
            )
        };
        let (mut sq, mut cq) = model.raw_pair(RawSqConfig::new(txk.lkey, 8)).unwrap();
        // SAFETY: as above.
        unsafe { sq.set_frame_source(tx.as_ptr(), tx.len()) };
        let mut rq = model.raw_rq(0).unwrap();
        cq.attach_recv(rq.qpn(), rq.ring());
        for r in steer::rules(&p) {
            model.add_flow(model_rule(&r)).unwrap();
        }
        let frames = measure::frames(tx.as_ptr() as u64, &slots);
        let ring = RxRing {
            base: rx.as_ptr() as u64,
            stride,
            room: stride,
            slots: posted,
            lkey: rxk.lkey,
        };
        let port = Rc::new(RefCell::new(Port {
            model,
            cq,
            out,
            inp,
            client,
            drop_nth,
            sent: 0,
            log,
            t0,
            sends: VecDeque::new(),
            recvs: VecDeque::new(),
        }));
        let (mut scq, mut rcq) = (HalfCq(port.clone(), false), HalfCq(port.clone(), true));
        let clock = Clock::calibrate();
        let mut post = Direct::<ModelMmio>(sq);
        let run = measure::measure(
            &p,
            (&mut post, &mut scq),
            (&mut rq, &mut rcq),
            (&frames, ring),
            (&clock, stall),
        )
        .unwrap();
        let report = measure::report(&p, &run, clock.hz());
        let port = port.borrow();
        assert!(
            port.model.violations().is_empty(),
            "{:?}",
            port.model.violations()
        );
        assert!(port.model.eth_rejected().is_empty());
        let no_match = port.model.raw_rx_stats().no_match;
        drop(port);
        drop(rx);
        Side {
            run,
            report,
            tx,
            slots,
            p,
            no_match,
        }
    }

    struct Pair {
        client: Side,
        server: Side,
        log: Vec<(bool, u64, Vec<u8>)>,
    }

    /// Client and server against each other, `extra` on both command
    /// lines; the client's `drop_nth` frame is lost on the wire.
    fn ping_pong(extra: &str, drop_nth: Option<u64>, stall: Duration) -> Pair {
        let (c2s, s_in) = channel();
        let (s2c, c_in) = channel();
        let log: Log = Arc::default();
        let t0 = Instant::now();
        let (sc, sl) = (format!("{SERVER} {extra}"), log.clone());
        let server = std::thread::spawn(move || side(sc, (s2c, s_in), (sl, t0), None, stall));
        let client = side(
            format!("{CLIENT} {extra}"),
            (c2s, c_in),
            (log.clone(), t0),
            drop_nth,
            stall,
        );
        let server = server.join().unwrap();
        let log = std::mem::take(&mut *log.lock().unwrap());
        Pair {
            client,
            server,
            log,
        }
    }

    /// The table's row: size, iterations and seven figures.
    fn row(s: &Side) -> Vec<String> {
        let r = s.report.as_ref().unwrap();
        let line = r
            .lines()
            .find(|l| l.trim_start().starts_with(&format!("{} ", s.p.size)))
            .unwrap_or_else(|| panic!("no row: {r}"));
        line.split_whitespace().map(String::from).collect()
    }

    /// A frame on the wire: the sender's slot for its flow, byte for byte,
    /// and its headers as etherparse reads them.
    fn check_frame(f: &[u8], from: &Side, flow: u64, at: &str) {
        let off = (flow * from.slots.flow_bytes) as usize;
        let len = from.slots.frame_len as usize;
        assert_eq!(f.len(), len, "{at}");
        assert_eq!(f, &from.tx[off..off + len], "{at}: not the slot's frame");
        let want = frame::frame(&from.p.frame_spec(), flow as u16, 0, SEED);
        assert_eq!(f[..42], want[..42], "{at}: not raw::frame's headers");
        let client = from.p.raw.side != Some(rdmaperf::raw::ctx::Side::Server);
        let (me, peer) = if client { (1, 2) } else { (2, 1) };
        let (eth, rest) = Ethernet2Header::from_slice(f).unwrap();
        assert_eq!(eth.source, [2, 0, 0, 0, 0, me], "{at}");
        assert_eq!(eth.destination, [2, 0, 0, 0, 0, peer], "{at}");
        let (ip, rest) = Ipv4Header::from_slice(rest).unwrap();
        assert_eq!(ip.header_checksum, ip.calc_header_checksum(), "{at}");
        assert_eq!(ip.source, [10, 0, 0, me], "{at}");
        assert_eq!(ip.destination, [10, 0, 0, peer], "{at}");
        let (udp, _) = UdpHeader::from_slice(rest).unwrap();
        let f16 = flow as u16;
        let ports = if client {
            (5000 + f16, 6000 + f16)
        } else {
            (6000 + f16, 5000 + f16)
        };
        assert_eq!((udp.source_port, udp.destination_port), ports, "{at}");
    }

    fn check_exact(extra: &str) -> Pair {
        let pair = ping_pong(extra, None, Duration::from_secs(5));
        let n = pair.client.p.raw.iters;
        let flows = pair.client.p.raw.flows.max(1) as u64;
        for s in [&pair.client, &pair.server] {
            let o = &s.run.outcome;
            assert_eq!(o.error, None, "{extra}");
            assert_eq!(o.iters, n, "{extra}: exactly -n sends");
            assert_eq!(s.run.tposted.len() as u64, n, "{extra}");
            assert_eq!(s.no_match, 0, "{extra}: every frame steered to the RQ");
            let cols = row(s);
            assert_eq!(cols.len(), 9, "{extra}: {cols:?}");
            assert_eq!(cols[1], n.to_string(), "{extra}");
            let figs: Vec<f64> = cols[2..].iter().map(|c| c.parse().unwrap()).collect();
            assert!(figs.iter().all(|v| *v > 0.0), "{extra}: {figs:?}");
            assert!(
                figs[0] <= figs[2] && figs[2] <= figs[1],
                "min ≤ typical ≤ max"
            );
            let r = s.report.as_ref().unwrap();
            assert!(r.contains("t_min[usec]") && r.contains("99.9"), "{r}");
        }
        let (mut from_client, mut from_server) = (0u64, 0u64);
        for (i, (client, _, f)) in pair.log.iter().enumerate() {
            let (side, k) = if *client {
                from_client += 1;
                (&pair.client, from_client - 1)
            } else {
                from_server += 1;
                (&pair.server, from_server - 1)
            };
            check_frame(f, side, k % flows, &format!("{extra}: frame {i}"));
        }
        assert_eq!((from_client, from_server), (n, n), "{extra}: -n each way");
        pair
    }

    #[test]
    fn a_ping_pong_makes_exactly_n_round_trips() {
        let pair = check_exact("-n 200");
        // The wire alternates: the client's frame, then the server's reply.
        for (i, (client, _, _)) in pair.log.iter().enumerate() {
            assert_eq!(*client, i % 2 == 0, "frame {i} out of turn");
        }
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        for (_, us, f) in &pair.log {
            w.record(*us, f).unwrap();
        }
        let bytes = w.finish().unwrap();
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("raw-lat-direct.pcap"), &bytes).unwrap();
        let (link, recs) = pcap::read(&bytes).unwrap();
        assert_eq!((link, recs.len()), (1, 400));
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
        let pair = ping_pong("-n 100", Some(37), Duration::from_millis(300));
        assert!(t.elapsed() < Duration::from_secs(20), "no hang");
        let c = &pair.client.run.outcome;
        let s = &pair.server.run.outcome;
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
        assert_eq!(row(&pair.client)[1], "37");
    }
    #[test]
    fn a_duration_run_counts_the_sample_window() {
        let pair = ping_pong("-D 1", None, Duration::from_secs(5));
        for s in [&pair.client, &pair.server] {
            let o = &s.run.outcome;
            assert_eq!(o.error, None);
            assert!(s.run.tposted.is_empty(), "no stamps under -D");
            assert!(o.measured > 0 && o.measured <= o.iters, "{o:?}");
            let cols = row(s);
            assert_eq!(cols.len(), 4, "{cols:?}");
            assert_eq!(cols[1], o.measured.to_string());
            let r = s.report.as_ref().unwrap();
            assert!(r.contains("tps average"), "{r}");
        }
        // The sides ran the same ping-pong: their sends differ by at most
        // the one in flight when the client's time ran out.
        let (c, s) = (pair.client.run.outcome.iters, pair.server.run.outcome.iters);
        assert!(c.abs_diff(s) <= 1, "client {c}, server {s}");
    }
    #[test]
    fn u_and_h_dump_the_samples_before_the_table() {
        let pair = check_exact("-n 50 -U -H");
        let r = pair.client.report.as_ref().unwrap();
        let parts: Vec<&str> = r.split("#, usec\n").collect();
        assert_eq!(parts.len(), 3, "two dumps: {r}");
        let lines = |t: &str| t.lines().take_while(|l| !l.starts_with("---")).count();
        assert_eq!(lines(parts[1]), 49, "-U: every sample, in order");
        assert_eq!(lines(parts[2]), 47, "-H: sorted, less the two largest");
        let v: Vec<f64> = parts[2]
            .lines()
            .take(47)
            .map(|l| l.split(", ").nth(1).unwrap().parse().unwrap())
            .collect();
        assert!(v.windows(2).all(|w| w[0] <= w[1]), "-H sorted: {v:?}");
        assert_eq!(r.matches("t_min[usec]").count(), 2, "the header again: {r}");
    }
}
