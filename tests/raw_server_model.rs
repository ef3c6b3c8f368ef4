//! raw-eth-bw's server as the tool runs it (`tool::session::raw_recv_measure`
//! over `run::raw_recv`), on the queue model: the tool's sender (direct and
//! direct-mpw, `tool::session::raw_measure`) posts on model raw QP 0, the
//! wire loops back (`Model::loop_back`) through the model's flow table,
//! built from the SERVER's command line (`raw::steer`'s rules translated to
//! the model's `FlowRule`), into raw QP 1's RQ, which the server posted
//! (`post_all`, `-r` receives of `setup::raw_recv_res::slot_stride`) and
//! counts with the direct RQ and CQ. The server's receives are posted
//! before the sender starts and reposted only once the sender has finished
//! (the receive loop runs after it): with `-r` at least `-n` every frame
//! lands; with a smaller RQ the rest is dropped, counted by the port and
//! reported as the finding. Checked: exactly `-n` frames and bytes, IPv4,
//! UDP, good checksums, no drops, the printed table; a frame with a broken
//! IPv4 header checksum is counted bad and named.

#[cfg(not(feature = "model"))]
#[test]
fn raw_server_model_needs_the_model_feature() {
    println!("SKIPPED: the raw server model tests need `--features model`");
}

#[cfg(feature = "model")]
mod common;

#[cfg(feature = "model")]
mod with_model {
    use super::common::model_env::{raw_recv_model, register_rx_tx};
    use super::common::raw_eth::assert_one_bad_checksum;
    use super::common::raw_steer_model::{self, CLIENT, SERVER};
    use std::collections::VecDeque;
    use std::time::Duration;

    use rdmaperf::clock::Clock;
    use rdmaperf::mlx5::raw_sq::RawSqConfig;
    use rdmaperf::mlx5::DirectCq;
    use rdmaperf::model::{FlowRule, Model, ModelMmio};
    use rdmaperf::post::rx_offload::{RxOffload, WC_IP_CSUM_OK};
    use rdmaperf::post::{Completion, CompletionQueue, PostError, WcOpcode};
    use rdmaperf::raw::params::RawParams;
    use rdmaperf::raw::slots::{self, Slots};
    use rdmaperf::raw::{frame, steer, tools::RawTool};
    use rdmaperf::run::raw_bw::{Direct, DirectMpw};
    use rdmaperf::run::raw_recv::{post_all, DirectRx, RawRecvCfg, VerbsRx};
    use rdmaperf::tool::session::raw_measure;
    use rdmaperf::tool::session::raw_recv_measure::{self, RecvEnd, RecvOutcome, Waits};
    use rdmaperf::tool::setup::raw_recv_res::slot_stride;
    use rdmaperf::verbs::flow as vflow;

    const QPN: u32 = 0x123;
    /// The server's RQ is raw QP 1.
    const RING: usize = 1;

    fn params(cmd: &str) -> RawParams {
        raw_steer_model::params(RawTool::Bw, cmd)
    }

    /// One of `raw::steer`'s rules as the model's flow table holds it.
    fn model_rule(r: &vflow::FlowRule) -> FlowRule {
        raw_steer_model::model_rule(r, RING)
    }

    /// The sender's CQ: steps the NIC and loops the wire back before each
    /// poll; the server's receive completions on the shared CQ are kept
    /// for the server's loop, the sends go to the sender.
    struct SenderCq<'a> {
        cq: &'a mut DirectCq,
        model: &'a Model,
        for_server: &'a mut VecDeque<Completion>,
    }
    impl CompletionQueue for SenderCq<'_> {
        fn poll(&mut self, out: &mut [Completion]) -> Result<usize, PostError> {
            self.model.step();
            self.model.loop_back();
            let n = self.cq.poll(out)?;
            let mut k = 0;
            for i in 0..n {
                if out[i].opcode == WcOpcode::RECV {
                    self.for_server.push_back(out[i]);
                } else {
                    out[k] = out[i];
                    k += 1;
                }
            }
            Ok(k)
        }
    }

    /// The server's CQ: what the sender's polls took for it first, then
    /// the model's CQ (the NIC stepped, the wire looped back).
    struct ServerCq<'a> {
        cq: &'a mut DirectCq,
        model: &'a Model,
        kept: VecDeque<Completion>,
        /// Through the verbs receive path's eyes (`VerbsRx`).
        verbs: bool,
    }
    impl CompletionQueue for ServerCq<'_> {
        fn poll(&mut self, out: &mut [Completion]) -> Result<usize, PostError> {
            let n = if !self.kept.is_empty() {
                let n = out.len().min(self.kept.len());
                for (o, c) in out.iter_mut().zip(self.kept.drain(..n)) {
                    *o = c;
                }
                n
            } else {
                self.model.step();
                self.model.loop_back();
                self.cq.poll(out)?
            };
            if self.verbs {
                // libmlx5's view (cq.c handle_responder): the CQE's bits
                // folded into IBV_WC_IP_CSUM_OK, the rest not in ibv_wc.
                for c in &mut out[..n] {
                    c.wc_flags |= if c.rx.ip_csum_ok() { WC_IP_CSUM_OK } else { 0 };
                    c.rx = RxOffload::NONE;
                }
            }
            Ok(n)
        }
    }

    #[derive(Clone, Copy, Debug)]
    enum Method {
        Direct,
        DirectMpw,
    }

    struct Served {
        out: RecvOutcome,
        /// Frames the flow table took for no QP.
        no_match: u64,
        client: RawParams,
        server: RawParams,
        report: String,
    }

    /// The client (`client_extra`) sends with `m`; the server
    /// (`server_extra`) receives; `extra` frames are delivered to the port
    /// after the sender's (hand-made ones).
    fn serve(m: Method, client_extra: &str, server_extra: &str, extra: &[Vec<u8>]) -> Served {
        serve_with(
            m,
            (client_extra, server_extra),
            extra,
            (Duration::from_millis(300), false),
        )
    }

    /// As `serve`, the server's quiet time given, and its receive path:
    /// the direct RQ and CQ (`DirectRx`), or with `verbs` the classifier of
    /// the verbs path (`VerbsRx`) over libmlx5's view of the completions.
    fn serve_with(
        m: Method,
        (client_extra, server_extra): (&str, &str),
        extra: &[Vec<u8>],
        (quiet, verbs): (Duration, bool),
    ) -> Served {
        let pc = params(&format!("{CLIENT} {client_extra}"));
        let ps = params(&format!("{SERVER} {server_extra}"));
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
        slots::fill(&mut tx, &pc.frame_spec(), &slots, 0x5eed);
        let mut rx = vec![0u8; rx_slots as usize * stride as usize];
        let model = raw_recv_model(QPN, 4096, rx_slots);
        // SAFETY: both buffers outlive the model (declared before it).
        let (rxk, txk) = unsafe { register_rx_tx(&model, &mut rx, &mut tx) };
        let (mut sq, mut cq) = model.raw_pair(RawSqConfig::new(txk.lkey, 8)).unwrap();
        // SAFETY: as above.
        unsafe { sq.set_frame_source(tx.as_ptr(), tx.len()) };
        let mut rq = model.raw_rq(RING).unwrap();
        cq.attach_recv(rq.qpn(), rq.ring());
        for r in steer::rules(&ps) {
            model.add_flow(model_rule(&r)).unwrap();
        }
        // --raw_mcast: the QP's group membership (`ibv_attach_mcast` of the
        // MGID holding the group's MAC) steers the group's frames to it.
        if let Some(g) = ps.mgid() {
            let mac: [u8; 6] = g[10..].try_into().unwrap();
            model.add_flow(FlowRule::mac(RING, mac)).unwrap();
        }
        // SAFETY: `rx` holds `rx_slots` strides, registered, and outlives
        // every loop over it.
        let cfg = unsafe { RawRecvCfg::new(rx.as_ptr(), stride, stride, rx_slots, rxk.lkey) };
        post_all(&mut rq, &cfg).unwrap();

        let mut kept = VecDeque::new();
        let mut scq = SenderCq {
            cq: &mut cq,
            model: &model,
            for_server: &mut kept,
        };
        let base = [tx.as_ptr() as u64];
        let fixed = Clock::fixed(1e9);
        let sent = match m {
            Method::Direct => raw_measure::measure(
                &pc,
                &mut [Direct::<ModelMmio>(sq)],
                &mut scq,
                &base,
                slots,
                &fixed,
            ),
            Method::DirectMpw => raw_measure::measure(
                &pc,
                &mut [DirectMpw::<ModelMmio>(sq)],
                &mut scq,
                &base,
                slots,
                &fixed,
            ),
        };
        assert_eq!(sent.error, None, "{m:?} {client_extra}");
        assert_eq!(sent.completed, pc.raw.iters, "{m:?} {client_extra}");
        for f in extra {
            model.deliver(f);
        }

        let clock = Clock::calibrate();
        let mut server_cq = ServerCq {
            cq: &mut cq,
            model: &model,
            kept,
            verbs,
        };
        let waits = Waits {
            first: Some(Duration::from_secs(2)),
            quiet,
        };
        let queues = (&mut rq, &mut server_cq);
        let mut out = if verbs {
            raw_recv_measure::receive::<_, _, VerbsRx>(&ps, queues, &cfg, &clock, waits)
        } else {
            raw_recv_measure::receive::<_, _, DirectRx>(&ps, queues, &cfg, &clock, waits)
        };
        let stats = model.raw_rx_stats();
        out.counts.rq_dry = stats.out_of_buffer.get(RING).copied();
        assert!(model.violations().is_empty(), "{:?}", model.violations());
        let report = raw_recv_measure::report(&ps, &out, clock.hz(), Some(100.0));
        Served {
            out,
            no_match: stats.no_match,
            client: pc,
            server: ps,
            report,
        }
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

    fn check_exact(m: Method, client_extra: &str, server_extra: &str) {
        let s = serve(m, client_extra, server_extra, &[]);
        let at = format!("{m:?} client {client_extra} server {server_extra}");
        let n = s.client.raw.iters;
        let c = &s.out.counts;
        assert_eq!(s.out.error, None, "{at}");
        assert_eq!(s.out.end, RecvEnd::Done, "{at}");
        let frame_len = s.client.size - 4;
        assert_eq!((c.packets, c.bytes), (n, n * frame_len), "{at}");
        assert_eq!((c.ipv4, c.udp, c.csum_ok), (n, n, n), "{at}");
        assert_eq!((c.csum_bad, c.too_long, c.errors), (0, 0, 0), "{at}");
        assert_eq!(c.rq_dry, Some(0), "{at}");
        assert!(c.findings(s.server.size as u32).is_empty(), "{at}");
        assert_eq!(row_iters(&s), n.to_string(), "{at}: {}", s.report);
        assert!(s.report.contains("MsgRate[Mpps]"), "{}", s.report);
        assert!(s.report.contains("line rate for"), "{}", s.report);
        assert!(
            s.report
                .contains(&format!("received {n} frames, {} bytes", n * frame_len)),
            "{}",
            s.report
        );
        assert!(!s.report.contains("finding:"), "{}", s.report);
    }

    #[test]
    fn the_server_counts_exactly_what_the_direct_sender_sent() {
        check_exact(Method::Direct, "-n 1000", "-n 1000 -r 1024");
        check_exact(Method::Direct, "-n 333 -s 64 -Q 7", "-n 333 -s 64 -r 512");
        check_exact(
            Method::Direct,
            "-n 240 -s 128 --flows 4 --flows_burst 3",
            "-n 240 -s 128 --flows 4 -r 256",
        );
    }

    #[test]
    fn the_server_counts_exactly_what_the_direct_mpw_sender_sent() {
        check_exact(Method::DirectMpw, "-n 1024 -l 32", "-n 1024 -r 1024");
        check_exact(
            Method::DirectMpw,
            "-n 240 -s 128 --flows 4 -l 8",
            "-n 240 -s 128 --flows 4 -r 256",
        );
        check_exact(Method::DirectMpw, "-n 100 -s 1518", "-n 100 -s 1518 -r 128");
    }

    /// The verbs receive path's classifier (frame headers, the checksum
    /// from `IBV_WC_IP_CSUM_OK`) counts the same, and names a bad checksum.
    #[test]
    fn the_verbs_view_counts_the_same() {
        let pc = params(&format!("{CLIENT} -n 300 -s 128"));
        let mut bad = frame::frame(&pc.frame_spec(), 0, 0, 7);
        bad[14 + 8] ^= 0x01;
        for m in [Method::Direct, Method::DirectMpw] {
            let s = serve_with(
                m,
                ("-n 296 -s 128 -l 8", "-n 297 -s 128 -r 512"),
                &[bad.clone()],
                (Duration::from_millis(300), true),
            );
            let c = &s.out.counts;
            assert_eq!(s.out.end, RecvEnd::Done, "{m:?}");
            assert_eq!((c.packets, c.bytes), (297, 297 * 124), "{m:?}");
            assert_eq!((c.ipv4, c.udp), (297, 297), "{m:?}");
            assert_eq!(
                (c.csum_ok, c.csum_bad, c.rq_dry),
                (296, 1, Some(0)),
                "{m:?}"
            );
            assert!(s.report.contains(" finding: 1 of 297"), "{}", s.report);
        }
    }

    /// Flows the server has no rule for are not its frames: with
    /// `--flows 4` on the sender and none on the server, only flow 0's
    /// ports match, the rest is dropped by the flow table (not the RQ);
    /// a server on another port gets nothing and says so.
    #[test]
    fn the_servers_rules_take_only_its_flows() {
        let s = serve(
            Method::Direct,
            "-n 240 -s 128 --flows 4",
            "-n 240 -s 128 -r 256",
            &[],
        );
        let c = &s.out.counts;
        assert_eq!((c.packets, c.csum_ok, c.rq_dry), (60, 60, Some(0)), "{c:?}");
        assert_eq!((s.no_match, s.out.end), (180, RecvEnd::Quiet));
        let s = serve(
            Method::Direct,
            "-n 100 -s 128",
            "-n 100 -s 128 -r 128 -K 6001",
            &[],
        );
        assert_eq!((s.out.counts.packets, s.no_match), (0, 100));
        assert!(
            s.report.contains("BW: not measured: 0 frames arrived"),
            "{}",
            s.report
        );
    }

    /// `--raw_mcast`: the client sends to the group of `-J` (MAC
    /// 01:00:5e:00:00:05 for 224.0.0.5, source port 0: no reply port), the
    /// server attaches no rule and joins the group (MGID: zeros, then that
    /// MAC); every frame arrives through the membership.
    #[test]
    fn raw_mcast_frames_reach_the_groups_member() {
        let mcast = "-n 200 -s 128 -J 224.0.0.5 --raw_mcast";
        let s = serve(Method::Direct, mcast, &format!("{mcast} -r 256"), &[]);
        assert!(
            steer::rules(&s.server).is_empty(),
            "no rule with --raw_mcast"
        );
        let group = [0x01, 0x00, 0x5e, 0x00, 0x00, 0x05];
        assert_eq!(s.client.frame_spec().dst_mac, group);
        assert_eq!(s.server.mgid().map(|g| g[10..] == group), Some(true));
        let c = &s.out.counts;
        assert_eq!((c.packets, c.ipv4, c.udp, c.csum_ok), (200, 200, 200, 200));
        assert_eq!((s.no_match, s.out.end), (0, RecvEnd::Done));
        let l4 = s.client.frame_spec().l4.unwrap();
        assert_eq!((l4.src_port, l4.dst_port), (0, 6000));
    }

    /// `-D 1` on the server: every frame counted, then the run waits out
    /// the second from the first frame and ends (not for want of frames).
    #[test]
    fn a_duration_server_ends_after_d_seconds() {
        let s = serve_with(
            Method::Direct,
            ("-n 200 -s 64", "-D 1 -s 64 -r 256"),
            &[],
            (Duration::from_secs(5), false),
        );
        assert_eq!(s.out.end, RecvEnd::Done);
        assert_eq!(s.out.counts.packets, 200);
        assert!(s.report.contains("MsgRate[Mpps]"), "{}", s.report);
        assert!(!s.report.contains("stopped"), "{}", s.report);
    }

    /// A 64-receive RQ, 500 frames and no repost while they come: 64
    /// land, 436 are dropped by the port for want of a receive, the run
    /// stops when no more come, and the finding names the drops.
    #[test]
    fn an_rq_too_small_for_the_burst_reports_the_drops() {
        for m in [Method::Direct, Method::DirectMpw] {
            let s = serve(m, "-n 500 -s 64", "-n 500 -s 64 -r 64", &[]);
            println!("{m:?}:\n{}", s.report);
            let c = &s.out.counts;
            assert_eq!(s.out.end, RecvEnd::Quiet, "{m:?}");
            assert_eq!((c.packets, c.rq_dry), (64, Some(436)), "{m:?}: {c:?}");
            let f = c.findings(64);
            assert_eq!(f.len(), 1, "{f:?}");
            assert!(
                f[0].starts_with("one RQ did not keep up at this frame size (64 B): 436 frames"),
                "{f:?}"
            );
            assert!(
                s.report.contains("after 64 of 500 (436 did not arrive)"),
                "{}",
                s.report
            );
            assert!(
                s.report.contains(" finding: one RQ did not keep up"),
                "{}",
                s.report
            );
            assert_eq!(row_iters(&s), "64", "{}", s.report);
        }
    }

    /// One frame of the sender's own kind, its IPv4 TTL changed after the
    /// header checksum was computed: counted bad, named as a finding.
    #[test]
    fn a_bad_ipv4_checksum_is_a_finding() {
        let pc = params(&format!("{CLIENT} -n 200 -s 64"));
        let mut bad = frame::frame(&pc.frame_spec(), 0, 0, 7);
        bad[14 + 8] ^= 0x01;
        let s = serve(
            Method::DirectMpw,
            "-n 200 -s 64",
            "-n 201 -s 64 -r 256",
            &[bad],
        );
        let c = &s.out.counts;
        assert_one_bad_checksum(c, 201);
        assert!(s.report.contains(" finding: 1 of 201"), "{}", s.report);
    }
}
