//! raw-eth-bw's server on several QPs (`--server -q N`) as the tool runs
//! it (`tool::runs::raw_server::{post_every_receive, receive}` over
//! `session::raw_recv_qps_measure` and `run::raw_recv_qps`), on the queue
//! model: the tool's sender (direct SQ, `tool::session::raw_measure`) posts
//! on model raw QP 0; the wire is taken off the port (one frame can be
//! lost there) and delivered through the flow table, which holds the
//! server's rules (`raw::steer`, from its own command line) once per
//! server QP, as perftest attaches them to each QP, into raw QPs 1..=N,
//! each with its direct RQ and its own view of the CQ (the model has one;
//! the test hands each QP its completions, as a CQ of its own would).
//! The sender's QP holds no rule, so nothing comes back to it.
//!
//! The model copies a frame to every QP holding the rule it matched (mlx5
//! joins equal rules into one flow-table entry with a destination per QP).
//! So a client sending `-n` frames gives each of `-q` server QPs those
//! `-n` frames, and the server's target (perftest's `tot_iters`: `-n` ×
//! `-q`) is met exactly. Checked: every QP counts every frame (IPv4, UDP,
//! good checksums), each QP's slots hold the wire's frames byte for byte
//! (etherparse: MACs, IPv4 checksum and addresses, UDP ports per flow),
//! the report's row and per-QP line; a frame lost on the wire stops the
//! server with the frames each QP got named; every QP's rules are gone
//! once the run's resources are (the rules held as the tool holds them:
//! before their QP, dropped with it).

#[cfg(not(feature = "model"))]
#[test]
fn raw_server_qps_model_needs_the_model_feature() {
    println!("SKIPPED: the raw server model tests need `--features model`");
}

#[cfg(feature = "model")]
mod common;

#[cfg(feature = "model")]
mod with_model {
    use super::common::raw_steer_model::{self, CLIENT, SERVER};
    use std::cell::RefCell;
    use std::collections::VecDeque;
    use std::time::Duration;

    use etherparse::{Ethernet2Header, Ipv4Header, UdpHeader};
    use rdmaperf::clock::Clock;
    use rdmaperf::mlx5::raw_sq::RawSqConfig;
    use rdmaperf::mlx5::rq::DirectRq;
    use rdmaperf::mlx5::DirectCq;
    use rdmaperf::model::{Access, FlowRule, Model, ModelConfig, ModelMmio, ModelRecvMmio};
    use rdmaperf::post::{Completion, CompletionQueue, PostError};
    use rdmaperf::raw::params::RawParams;
    use rdmaperf::raw::slots::{self, Slots};
    use rdmaperf::raw::{frame, steer, tools::RawTool};
    use rdmaperf::run::raw_bw::Direct;
    use rdmaperf::run::raw_recv::{DirectRx, RawRecvCfg, RawRecvCounts};
    use rdmaperf::run::raw_recv_qps::RecvQp;
    use rdmaperf::tool::runs::raw_server::{post_every_receive, receive};
    use rdmaperf::tool::session::raw_measure;
    use rdmaperf::tool::session::raw_recv_measure::{self, RecvEnd, RecvOutcome, Waits};
    use rdmaperf::tool::session::raw_recv_qps_measure::per_qp_line;
    use rdmaperf::tool::setup::raw_recv_res::slot_stride;

    const QPN: u32 = 0x200;
    const SEED: u32 = 0x5eed;

    fn params(cmd: &str) -> RawParams {
        raw_steer_model::params(RawTool::Bw, cmd)
    }

    /// The port's wire and the model's one CQ, shared by the sender's view
    /// and each server QP's: every poll steps the NIC, delivers what was
    /// sent (but the frame `lose`), then sorts the CQEs by QP.
    struct Port<'m> {
        model: &'m Model,
        cq: DirectCq,
        lose: Option<usize>,
        wire: Vec<Vec<u8>>,
        sends: VecDeque<Completion>,
        recvs: Vec<VecDeque<Completion>>,
    }

    impl Port<'_> {
        fn pump(&mut self) -> Result<(), PostError> {
            self.model.step();
            for f in self.model.take_wire() {
                if self.lose != Some(self.wire.len()) {
                    self.model.deliver(&f);
                }
                self.wire.push(f);
            }
            let mut buf = [Completion::default(); 64];
            loop {
                let n = self.cq.poll(&mut buf)?;
                if n == 0 {
                    return Ok(());
                }
                for c in &buf[..n] {
                    match (c.qp_num - QPN) as usize {
                        0 => self.sends.push_back(*c),
                        q => self.recvs[q - 1].push_back(*c),
                    }
                }
            }
        }
    }

    fn take(q: &mut VecDeque<Completion>, out: &mut [Completion]) -> usize {
        let n = out.len().min(q.len());
        for (o, c) in out.iter_mut().zip(q.drain(..n)) {
            *o = c;
        }
        n
    }

    /// The sender's CQ (raw QP 0's completions).
    struct SendCq<'a, 'm>(&'a RefCell<Port<'m>>);
    impl CompletionQueue for SendCq<'_, '_> {
        fn poll(&mut self, out: &mut [Completion]) -> Result<usize, PostError> {
            let mut p = self.0.borrow_mut();
            p.pump()?;
            Ok(take(&mut p.sends, out))
        }
    }

    /// Server QP `.1`'s CQ.
    struct QpCq<'a, 'm>(&'a RefCell<Port<'m>>, usize);
    impl CompletionQueue for QpCq<'_, '_> {
        fn poll(&mut self, out: &mut [Completion]) -> Result<usize, PostError> {
            let mut p = self.0.borrow_mut();
            if p.recvs[self.1].is_empty() {
                p.pump()?;
            }
            Ok(take(&mut p.recvs[self.1], out))
        }
    }

    /// One QP's steering rules in the model's table, removed when dropped
    /// (as `verbs::Flow` destroys its rule).
    struct Rules<'m> {
        model: &'m Model,
        rules: Vec<FlowRule>,
    }
    impl Drop for Rules<'_> {
        fn drop(&mut self) {
            for r in &self.rules {
                assert!(self.model.remove_flow(r), "rule {r:?} was not in the table");
            }
        }
    }

    /// `raw::steer`'s rules for `ps` on raw QP `ring`, as the tool attaches
    /// them to each of its QPs.
    fn attach<'m>(model: &'m Model, ps: &RawParams, ring: usize) -> Rules<'m> {
        let rules: Vec<FlowRule> = steer::rules(ps)
            .iter()
            .map(|r| raw_steer_model::model_rule(r, ring))
            .collect();
        for r in &rules {
            model.add_flow(*r).unwrap();
        }
        Rules { model, rules }
    }

    struct Served {
        out: RecvOutcome,
        per_qp: Vec<u64>,
        /// Each QP's counts.
        qp_counts: Vec<RawRecvCounts>,
        /// Each QP's receive buffer after the run.
        rx: Vec<Vec<u8>>,
        /// Frames on the wire, in order (the lost one too).
        wire: Vec<Vec<u8>>,
        tx: Vec<u8>,
        slots: Slots,
        client: RawParams,
        server: RawParams,
        report: String,
        /// The model's rules after the run's resources went.
        rules_after: Vec<FlowRule>,
        /// ... and while they were held.
        rules_during: usize,
    }

    /// The client (`client_extra`) sends with the direct SQ; the server
    /// (`server_extra`, with its `-q`) receives on that many QPs; wire
    /// frame `lose` (0-based) never arrives.
    fn serve(client_extra: &str, server_extra: &str, lose: Option<usize>) -> Served {
        serve_with(client_extra, server_extra, lose, Duration::from_millis(300))
    }

    /// As `serve`, the server giving up after `quiet` without a frame.
    fn serve_with(
        client_extra: &str,
        server_extra: &str,
        lose: Option<usize>,
        quiet: Duration,
    ) -> Served {
        let pc = params(&format!("{CLIENT} {client_extra}"));
        let ps = params(&format!("{SERVER} {server_extra}"));
        let nq = ps.raw.qps as usize;
        let slots = Slots::new(
            pc.size,
            pc.raw.flows,
            pc.raw.flows_burst,
            pc.post_list,
            4096,
        );
        let rx_slots = ps.raw.rx_depth as u32;
        let stride = slot_stride(ps.size);
        // Declared before the model: registered memory outlives it.
        let mut tx = vec![0u8; slots.buffer_len()];
        slots::fill(&mut tx, &pc.frame_spec(), &slots, SEED);
        let mut rx = vec![vec![0u8; rx_slots as usize * stride as usize]; nq];
        let model = Model::new(ModelConfig::raw_eth_host(1 + nq as u32, QPN, rx_slots)).unwrap();
        // SAFETY: the buffers outlive the model (declared before it).
        let txk = unsafe { model.register(tx.as_mut_ptr(), tx.len(), Access::NONE) };
        let (sq, mut cq) = model.raw_pair(RawSqConfig::new(txk.lkey, 8)).unwrap();
        let mut sq = sq;
        // SAFETY: as above.
        unsafe { sq.set_frame_source(tx.as_ptr(), tx.len()) };
        // The server's QPs, each with its rules first (dropped before it).
        let mut server: Vec<(Rules, DirectRq<ModelRecvMmio>, RawRecvCfg)> = Vec::new();
        for (q, buf) in rx.iter_mut().enumerate() {
            // SAFETY: as above.
            let k = unsafe { model.register(buf.as_mut_ptr(), buf.len(), Access::LOCAL_WRITE) };
            let rq = model.raw_rq(1 + q).unwrap();
            cq.attach_recv(rq.qpn(), rq.ring());
            // SAFETY: `buf` holds `rx_slots` strides, registered, and
            // outlives every loop over it.
            let cfg = unsafe { RawRecvCfg::new(buf.as_ptr(), stride, stride, rx_slots, k.lkey) };
            server.push((attach(&model, &ps, 1 + q), rq, cfg));
        }
        let rules_during = model.flow_rules().len();
        let port = RefCell::new(Port {
            model: &model,
            cq,
            lose,
            wire: Vec::new(),
            sends: VecDeque::new(),
            recvs: vec![VecDeque::new(); nq],
        });
        let (mut guards, mut qps) = (Vec::new(), Vec::new());
        for (q, (rules, rq, cfg)) in server.into_iter().enumerate() {
            guards.push(rules);
            qps.push(RecvQp {
                rq,
                cq: QpCq(&port, q),
                cfg,
                counts: RawRecvCounts::default(),
            });
        }
        // Every receive posted before the client starts, as a server started first.
        post_every_receive(&mut qps).unwrap();
        let base = [tx.as_ptr() as u64];
        let sent = raw_measure::measure(
            &pc,
            &mut [Direct::<ModelMmio>(sq)],
            &mut SendCq(&port),
            &base,
            slots,
            &Clock::fixed(1e9),
        );
        assert_eq!(sent.error, None, "{client_extra}");
        assert_eq!(sent.completed, pc.raw.iters, "{client_extra}");
        let clock = Clock::calibrate();
        let waits = Waits {
            first: Some(Duration::from_secs(2)),
            quiet,
        };
        let (mut out, per_qp) = receive::<_, _, DirectRx>(&ps, &mut qps, &clock, waits);
        out.counts.rq_dry = Some(model.raw_rx_stats().out_of_buffer.iter().sum());
        assert!(model.violations().is_empty(), "{:?}", model.violations());
        let mut report = raw_recv_measure::report(&ps, &out, clock.hz(), Some(100.0));
        report.push_str(&per_qp_line(&per_qp));
        let qp_counts = qps.iter().map(|q| q.counts.clone()).collect();
        // The run's resources go: each QP's rules with it.
        drop(qps);
        drop(guards);
        let wire = std::mem::take(&mut port.borrow_mut().wire);
        let rules_after = model.flow_rules();
        drop(port);
        drop(model);
        Served {
            out,
            per_qp,
            qp_counts,
            rx,
            wire,
            tx,
            slots,
            client: pc,
            server: ps,
            report,
            rules_after,
            rules_during,
        }
    }

    /// Wire frame `k` (flow `k % --flows`): the sender's slot byte for
    /// byte, `raw::frame`'s headers, and etherparse's reading of them.
    fn check_wire_frame(s: &Served, k: u64, at: &str) {
        let f = &s.wire[k as usize];
        let len = s.slots.frame_len as usize;
        let off = s.slots.offset(k) as usize;
        assert_eq!(f.len(), len, "{at}");
        assert_eq!(&f[..], &s.tx[off..off + len], "{at}: not the slot's frame");
        let flow = k % s.client.raw.flows.max(1) as u64;
        let want = frame::frame(&s.client.frame_spec(), flow as u16, 0, SEED);
        assert_eq!(f[..42], want[..42], "{at}: not raw::frame's headers");
        let (eth, rest) = Ethernet2Header::from_slice(f).unwrap();
        assert_eq!(eth.source, [2, 0, 0, 0, 0, 1], "{at}");
        assert_eq!(eth.destination, [2, 0, 0, 0, 0, 2], "{at}");
        let (ip, rest) = Ipv4Header::from_slice(rest).unwrap();
        assert_eq!(ip.header_checksum, ip.calc_header_checksum(), "{at}");
        assert_eq!((ip.source, ip.destination), ([10, 0, 0, 1], [10, 0, 0, 2]));
        let (udp, _) = UdpHeader::from_slice(rest).unwrap();
        let f16 = flow as u16;
        assert_eq!(
            (udp.source_port, udp.destination_port),
            (5000 + f16, 6000 + f16),
            "{at}"
        );
    }

    /// QP `q`'s `i`-th frame: in its slot `i` (every frame landed before
    /// a receive went back), the wire's frame `k` byte for byte.
    fn check_landed(s: &Served, q: usize, i: u64, k: u64, at: &str) {
        let stride = slot_stride(s.server.size) as usize;
        let len = s.slots.frame_len as usize;
        let at_slot = &s.rx[q][i as usize * stride..][..len];
        assert_eq!(at_slot, &s.wire[k as usize][..], "{at}: QP {q} frame {i}");
    }

    /// The printed row's `#iterations`.
    fn row_iters(s: &Served) -> String {
        let row = s
            .report
            .lines()
            .find(|l| l.trim_start().starts_with(&s.server.size.to_string()))
            .unwrap_or_else(|| panic!("no row: {}", s.report));
        row.split_whitespace().nth(1).unwrap().to_string()
    }

    /// Every frame of the client reaches every server QP and is counted
    /// there: `-n` per QP, `-n` × `-q` in all.
    fn check_every_qp_counts_every_frame(client: &str, server: &str) {
        let s = serve(client, server, None);
        let at = format!("client {client}, server {server}");
        let (n, nq) = (s.client.raw.iters, s.server.raw.qps);
        let frame_len = s.client.size - 4;
        assert_eq!(s.out.error, None, "{at}");
        assert_eq!(s.out.end, RecvEnd::Done, "{at}: {}", s.report);
        assert_eq!(s.per_qp, vec![n; nq as usize], "{at}");
        for (q, c) in s.qp_counts.iter().enumerate() {
            assert_eq!((c.packets, c.bytes), (n, n * frame_len), "{at}: QP {q}");
            assert_eq!((c.ipv4, c.udp, c.csum_ok), (n, n, n), "{at}: QP {q}");
            assert_eq!((c.csum_bad, c.too_long, c.errors), (0, 0, 0), "{at}");
        }
        let c = &s.out.counts;
        assert_eq!((c.packets, c.csum_ok, c.rq_dry), (n * nq, n * nq, Some(0)));
        assert_eq!(s.wire.len() as u64, n, "{at}");
        for k in 0..n {
            check_wire_frame(&s, k, &at);
            for q in 0..nq as usize {
                check_landed(&s, q, k, k, &at);
            }
        }
        assert_eq!(row_iters(&s), (n * nq).to_string(), "{}", s.report);
        let each: Vec<String> = (0..nq).map(|q| format!("{n} (QP {q})")).collect();
        assert!(
            s.report
                .contains(&format!(" frames per QP: {}\n", each.join(", "))),
            "{}",
            s.report
        );
        assert!(s.report.contains("line rate for"), "{}", s.report);
        assert!(!s.report.contains("finding:"), "{}", s.report);
        let rules = steer::rules(&s.server).len();
        assert_eq!(
            s.rules_during,
            rules * nq as usize,
            "{at}: rules on every QP"
        );
        assert!(s.rules_after.is_empty(), "{at}: {:?}", s.rules_after);
    }

    #[test]
    fn two_qps_each_count_every_frame() {
        check_every_qp_counts_every_frame("-n 300", "-n 300 -q 2 -r 512");
        check_every_qp_counts_every_frame(
            "-n 240 -s 128 --flows 4 --flows_burst 1",
            "-n 240 -s 128 --flows 4 -q 2 -r 256",
        );
    }

    #[test]
    fn four_qps_each_count_every_frame() {
        check_every_qp_counts_every_frame("-n 200 -s 64 -Q 7", "-n 200 -s 64 -q 4 -r 256");
        check_every_qp_counts_every_frame("-n 100 -s 1518", "-n 100 -s 1518 -q 4 -r 128");
    }

    /// A `-q 2` client's wire: each of its QPs sends the same `-n` frames
    /// (perftest builds every QP's buffer alike), so the wire holds `-n`
    /// × 2 of them; each server QP gets a copy of each, and the server
    /// stops at its target, `-n` × 2, with frames from both QPs.
    #[test]
    fn a_q2_clients_frames_meet_the_target() {
        let s = serve("-n 400", "-n 200 -q 2 -r 512", None);
        assert_eq!(s.out.end, RecvEnd::Done, "{}", s.report);
        assert_eq!(s.out.counts.packets, 400);
        assert_eq!(s.per_qp.iter().sum::<u64>(), 400);
        assert!(s.per_qp.iter().all(|&n| n > 0), "{:?}", s.per_qp);
        for (q, &n) in s.per_qp.iter().enumerate() {
            for i in 0..n {
                check_landed(&s, q, i, i, "q2 client");
            }
        }
        assert!(s.rules_after.is_empty());
    }

    /// Client frame 50 of 100 lost on the wire: each QP gets 99, the
    /// server waits for 200, stops when no more come, and says what
    /// arrived on each QP; the rules go all the same.
    #[test]
    fn a_lost_frame_stalls_naming_what_each_qp_got() {
        for nq in [2u64, 4] {
            let s = serve("-n 100", &format!("-n 100 -q {nq} -r 128"), Some(49));
            assert_eq!(s.out.end, RecvEnd::Quiet, "{}", s.report);
            assert_eq!(s.per_qp, vec![99; nq as usize]);
            let (got, want) = (99 * nq, 100 * nq);
            assert!(
                s.report.contains(&format!(
                    "stopped: no more frames came after {got} of {want} ({nq} did not arrive)"
                )),
                "{}",
                s.report
            );
            assert!(s.report.contains(" frames per QP: 99 (QP 0), 99 (QP 1)"));
            for q in 0..nq as usize {
                for i in 0..99 {
                    let k = if i < 49 { i } else { i + 1 };
                    check_landed(&s, q, i, k, "lost frame");
                }
            }
            assert!(s.rules_after.is_empty(), "{:?}", s.rules_after);
        }
    }

    /// `-D 1 -q 2`: every frame counted on both QPs, then the run waits
    /// out the second from the first frame and ends (not for want of
    /// frames: the quiet time is longer).
    #[test]
    fn a_duration_server_on_two_qps_ends_after_d_seconds() {
        let t = std::time::Instant::now();
        let s = serve_with(
            "-n 200 -s 64",
            "-D 1 -s 64 -q 2 -r 256",
            None,
            Duration::from_secs(5),
        );
        assert_eq!(s.out.end, RecvEnd::Done, "{}", s.report);
        assert_eq!(s.per_qp, vec![200, 200]);
        assert!(t.elapsed() >= Duration::from_secs(1), "{:?}", t.elapsed());
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        assert!(s.report.contains("MsgRate[Mpps]"), "{}", s.report);
        assert!(!s.report.contains("stopped"), "{}", s.report);
        assert!(s.rules_after.is_empty());
    }
}
