//! raw-eth-bw `-b -q N` (perftest's `run_iter_bi` over several QPs), client
//! against server on two model hosts, each with `-q` raw QPs: one direct SQ
//! per QP on the host's one CQ (polled through `run::raw_qpn::ByQpn`, as
//! the tool's sender), each QP's direct RQ with `-r` receives, and
//! `raw::steer`'s rules for its side attached to every QP (as the tool,
//! and perftest, attach them). The session is the tool's
//! (`session::raw_measure::measure_beside` with `run::raw_duplex_qps`'s
//! receive side beside it, `tool::runs::raw_duplex`'s wait, report and
//! error words). The model gives a frame to every QP holding an equal rule
//! (mlx5 joins equal rules into one entry with a destination per QP;
//! unconfirmed on a ConnectX here), so each QP sees every peer frame and
//! the `-n` × `-q` owed are met from all QPs together.
//!
//! Checked: each side sends and completes `-n` per QP, counts `-n` × `-q`
//! of the peer's frames exactly (IPv4/UDP, checksums good), every QP
//! counting some; every wire frame is the next slot of exactly one of its
//! sender's QPs (each QP's buffer its own seed), `-n` per QP, with
//! etherparse headers; the row and the receive lines. Since every frame
//! reaches every QP, one lost frame is made up by its copies on the other
//! QPs and cannot stall anyone: what is tested is a client whose frames
//! stop reaching the server part way (from its 40th on), which ends the
//! server with a stall naming what came in, while the client completes.

#[cfg(not(feature = "model"))]
#[test]
fn raw_duplex_qps_model_needs_the_model_feature() {
    println!("SKIPPED: the raw-eth-bw -b -q model tests need `--features model`");
}

#[cfg(feature = "model")]
mod common;

#[cfg(feature = "model")]
mod with_model {
    use super::common::raw_steer_model::{self, CLIENT, SERVER};
    use std::cell::RefCell;
    use std::rc::Rc;
    use std::sync::mpsc::{channel, Receiver, Sender};
    use std::time::Duration;

    use etherparse::{Ethernet2Header, Ipv4Header, UdpHeader};
    use rdmaperf::clock::{self, Clock};
    use rdmaperf::mlx5::raw_sq::RawSqConfig;
    use rdmaperf::mlx5::rq::DirectRq;
    use rdmaperf::model::{Access, Model, ModelConfig, ModelMmio, ModelRecvMmio};
    use rdmaperf::post::Completion;
    use rdmaperf::raw::params::RawParams;
    use rdmaperf::raw::slots::{self, Slots};
    use rdmaperf::raw::{frame, steer, tools::RawTool};
    use rdmaperf::run::bw::BwOutcome;
    use rdmaperf::run::raw_bw::Direct;
    use rdmaperf::run::raw_duplex::DuplexRxError;
    use rdmaperf::run::raw_duplex_qps::RecvSideQps;
    use rdmaperf::run::raw_qpn::ByQpn;
    use rdmaperf::run::raw_recv::{DirectRx, RawRecvCfg, RawRecvCounts};
    use rdmaperf::run::raw_recv_qps::RecvQp;
    use rdmaperf::selfcheck::model_port::{PartCq, Port};
    use rdmaperf::tool::runs::raw_duplex::{self, Both};
    use rdmaperf::tool::session::{raw_measure, raw_recv_measure};
    use rdmaperf::tool::setup::raw_recv_res::slot_stride;

    const QPN: u32 = 0x123;
    const SEED: u32 = 0x5eed;

    /// What one side ran, its buffers, and its port's wire.
    struct Side {
        p: RawParams,
        out: BwOutcome,
        per_qp: Vec<RawRecvCounts>,
        error: Option<DuplexRxError>,
        report: String,
        tx: Vec<Vec<u8>>,
        slots: Slots,
        wire: Vec<Vec<u8>>,
        no_match: u64,
    }

    fn model_of(p: &RawParams, posted: u32) -> Model {
        let ring = posted.next_power_of_two().max(2);
        Model::new(ModelConfig::raw_eth_host(p.raw.qps as u32, QPN, ring)).unwrap()
    }

    /// One side of `-b -q N` on a model host of its own, as the tool runs it.
    fn side(
        p: RawParams,
        (out, inp): (Sender<Vec<u8>>, Receiver<Vec<u8>>),
        lost_from: Option<u64>,
        stall: Duration,
    ) -> Side {
        let n_qps = p.raw.qps as usize;
        let slots = Slots::new(p.size, p.raw.flows, p.raw.flows_burst, p.post_list, 4096);
        let posted = p.raw.rx_depth.max(1) as u32;
        let stride = slot_stride(p.size);
        // Declared before the model: registered memory outlives it.
        let mut tx: Vec<Vec<u8>> = (0..n_qps).map(|_| vec![0u8; slots.buffer_len()]).collect();
        for (q, b) in tx.iter_mut().enumerate() {
            slots::fill(b, &p.frame_spec(), &slots, SEED ^ q as u32);
        }
        let mut rx: Vec<Vec<u8>> = (0..n_qps)
            .map(|_| vec![0u8; posted as usize * stride as usize])
            .collect();
        let model = model_of(&p, posted);
        let (mut cfgs, mut rx_cfgs) = (Vec::new(), Vec::new());
        for (t, r) in tx.iter_mut().zip(&mut rx) {
            // SAFETY: the buffers outlive the model (declared before it).
            let (tk, rk) = unsafe {
                (
                    model.register(t.as_mut_ptr(), t.len(), Access::NONE),
                    model.register(r.as_mut_ptr(), r.len(), Access::LOCAL_WRITE),
                )
            };
            cfgs.push(RawSqConfig::new(tk.lkey, 8));
            // SAFETY: as above; only the model's NIC writes `r` meanwhile.
            rx_cfgs.push(unsafe { RawRecvCfg::new(r.as_ptr(), stride, stride, posted, rk.lkey) });
        }
        let (mut sqs, mut cq) = model.raw_queues(&cfgs).unwrap();
        for (sq, t) in sqs.iter_mut().zip(&tx) {
            // SAFETY: as above.
            unsafe { sq.set_frame_source(t.as_ptr(), t.len()) };
        }
        let mut rqs: Vec<DirectRq<ModelRecvMmio>> = Vec::new();
        for q in 0..n_qps {
            let rq = model.raw_rq(q).unwrap();
            cq.attach_recv(rq.qpn(), rq.ring());
            rqs.push(rq);
            for r in steer::rules(&p) {
                model.add_flow(raw_steer_model::model_rule(&r, q)).unwrap();
            }
        }
        let qpns: Vec<u32> = (0..n_qps).map(|q| model.qpn_of(q)).collect();
        // Every frame kept; those from the `lost_from`-th on (1-based) lost.
        let sent: Rc<RefCell<Vec<Vec<u8>>>> = Rc::default();
        let kept = sent.clone();
        let on_wire = move |f: &[u8]| {
            let mut s = kept.borrow_mut();
            s.push(f.to_vec());
            !lost_from.is_some_and(|k| s.len() as u64 >= k)
        };
        let port = Port::new((model, cq), (out, inp), n_qps, Box::new(on_wire));
        let mut qps: Vec<_> = rqs
            .into_iter()
            .zip(rx_cfgs)
            .enumerate()
            .map(|(q, (rq, cfg))| RecvQp {
                rq,
                cq: PartCq(port.clone(), Some(q)),
                cfg,
                counts: RawRecvCounts::default(),
            })
            .collect();
        for q in &mut qps {
            raw_recv_measure::post_receives(&mut q.rq, &q.cfg, "test").unwrap();
        }
        let mut posts: Vec<_> = sqs.into_iter().map(Direct::<ModelMmio>).collect();
        let mut scq = ByQpn::new(PartCq(port.clone(), None), &qpns);
        let bases: Vec<u64> = tx.iter().map(|t| t.as_ptr() as u64).collect();
        let clock = Clock::calibrate();
        let wait = raw_duplex::rx_wait(&p, &clock, stall);
        let mut wc = [Completion::default(); 16];
        let mut rside = RecvSideQps::<_, _, DirectRx, _>::new(&mut qps, &mut wc, wait, clock::now);
        let run = raw_measure::measure_beside(
            &p,
            (&mut posts, &mut scq),
            (&bases, slots),
            &clock,
            &mut rside,
        );
        let error = rside.error.take();
        let per_qp: Vec<RawRecvCounts> = qps.iter().map(|q| q.counts.clone()).collect();
        let mut counts = RawRecvCounts::default();
        per_qp.iter().for_each(|c| counts.add(c));
        let both = Both {
            sent: raw_measure::result(&p, &run, n_qps as u32, clock.hz()).unwrap(),
            counts,
            per_qp: per_qp.iter().map(|c| c.packets).collect(),
            error: None,
        };
        let report = raw_duplex::report(&p, &both, Some(100.0));
        drop(qps);
        let port = port.borrow();
        assert!(
            port.model.violations().is_empty(),
            "{:?}",
            port.model.violations()
        );
        assert!(port.model.eth_rejected().is_empty());
        let no_match = port.model.raw_rx_stats().no_match;
        let wire = sent.take();
        Side {
            p,
            out: run,
            per_qp,
            error,
            report,
            tx,
            slots,
            wire,
            no_match,
        }
    }

    /// Client and server with `extra` on both command lines, the server in
    /// a thread of its own; the client's frames from `lost_from` on lost.
    fn pair(extra: &str, lost_from: Option<u64>, stall: Duration) -> (Side, Side) {
        let params = |s: &str| raw_steer_model::params(RawTool::Bw, &format!("{s} {extra}"));
        let (cp, sp) = (params(CLIENT), params(SERVER));
        let (c2s, s_in) = channel();
        let (s2c, c_in) = channel();
        let server = std::thread::spawn(move || side(sp, (s2c, s_in), None, stall));
        let client = side(cp, (c2s, c_in), lost_from, stall);
        (client, server.join().unwrap())
    }

    /// Every frame `s` sent is the next slot of exactly one of its QPs'
    /// buffers, its headers `raw::frame`'s for its flow (etherparse: the
    /// MACs, IPs and ports of `s`'s side); the frames of each QP.
    fn check_wire(s: &Side, at: &str) -> Vec<u64> {
        let len = s.slots.frame_len as usize;
        let mut next = vec![0u64; s.tx.len()];
        let client = s.p.raw.side != Some(rdmaperf::raw::ctx::Side::Server);
        let (me, peer) = if client { (1, 2) } else { (2, 1) };
        let spec = s.p.frame_spec();
        for (i, w) in s.wire.iter().enumerate() {
            let hit = |q: usize| {
                let o = s.slots.offset(next[q]) as usize;
                w.as_slice() == &s.tx[q][o..o + len]
            };
            let qs: Vec<usize> = (0..s.tx.len()).filter(|&q| hit(q)).collect();
            assert_eq!(
                qs.len(),
                1,
                "{at}: frame {i} is the next slot of QPs {qs:?}"
            );
            let k = next[qs[0]];
            next[qs[0]] += 1;
            let flow = s.slots.flow_of(k) as u16;
            let want = frame::frame(&spec, flow, 0, SEED);
            assert_eq!(w[..42], want[..42], "{at}: frame {i}'s headers");
            let (eth, rest) = Ethernet2Header::from_slice(w).unwrap();
            assert_eq!(
                (eth.source, eth.destination),
                ([2, 0, 0, 0, 0, me], [2, 0, 0, 0, 0, peer])
            );
            let (ip, rest) = Ipv4Header::from_slice(rest).unwrap();
            assert_eq!(ip.header_checksum, ip.calc_header_checksum(), "{at}");
            assert_eq!(
                (ip.source, ip.destination),
                ([10, 0, 0, me], [10, 0, 0, peer]),
                "{at}"
            );
            let (udp, _) = UdpHeader::from_slice(rest).unwrap();
            let ports = (5000 + flow, 6000 + flow);
            let ports = if client { ports } else { (ports.1, ports.0) };
            assert_eq!(
                (udp.source_port, udp.destination_port),
                ports,
                "{at}: frame {i}"
            );
        }
        next
    }

    #[test]
    fn each_side_sends_n_per_qp_and_counts_n_times_q() {
        for extra in [
            "-b -q 2 -n 200",
            "-b -q 4 -n 100 -s 128 -Q 8",
            "-b -q 2 -n 100 -s 1518 -t 32",
        ] {
            let (client, server) = pair(extra, None, Duration::from_secs(5));
            for (who, s) in [("client", &client), ("server", &server)] {
                let at = format!("{extra} {who}");
                let all = s.p.raw.iters * s.p.raw.qps;
                assert_eq!((&s.error, s.out.error), (&None, None), "{at}");
                assert_eq!((s.out.posted, s.out.completed), (all, all), "{at}");
                let got: u64 = s.per_qp.iter().map(|c| c.packets).sum();
                assert_eq!(got, all, "{at}: the peer's -n × -q exactly");
                for (q, c) in s.per_qp.iter().enumerate() {
                    assert!(c.packets > 0, "{at}: QP {q} counted none");
                    let n = c.packets;
                    assert_eq!(
                        (c.ipv4, c.udp, c.csum_ok, c.csum_bad, c.errors),
                        (n, n, n, 0, 0),
                        "{at}: QP {q}"
                    );
                }
                assert_eq!(s.no_match, 0, "{at}");
                assert_eq!(s.wire.len() as u64, all, "{at}");
                let per = check_wire(s, &at);
                let n = s.p.raw.iters;
                assert!(per.iter().all(|&k| k == n), "{at}: frames per QP {per:?}");
                let row = s
                    .report
                    .lines()
                    .find(|l| l.trim_start().starts_with(&s.p.size.to_string()));
                let cols: Vec<&str> = row.expect(&at).split_whitespace().collect();
                assert_eq!(cols[1], all.to_string(), "{at}: #iterations");
                assert!(
                    s.report
                        .contains(&format!("received: {all} of the peer's {all} frames")),
                    "{at}: {}",
                    s.report
                );
                assert!(
                    s.report.contains(" frames per QP: ") && s.report.contains("(QP 1)"),
                    "{}",
                    s.report
                );
                println!("{at}:\n{}", s.report);
            }
        }
    }

    /// The client's frames stop reaching the server from its 40th on (of
    /// 200): the server has 39 on each of its 2 QPs, 78 of the 200 it
    /// waits for, and stops with a stall naming them; the client, which
    /// gets the server's frames, completes.
    #[test]
    fn a_peer_gone_quiet_is_a_stall_naming_what_came() {
        let t = std::time::Instant::now();
        let (client, server) = pair("-b -q 2 -n 100", Some(40), Duration::from_millis(300));
        assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
        assert_eq!((&client.error, client.out.error), (&None, None));
        assert_eq!(client.per_qp.iter().map(|c| c.packets).sum::<u64>(), 200);
        let want = DuplexRxError::Stalled {
            received: 78,
            owed: 200,
        };
        assert_eq!(server.error, Some(want));
        let per: Vec<u64> = server.per_qp.iter().map(|c| c.packets).collect();
        assert_eq!(per, [39, 39], "each QP a copy of each frame that came");
        let words = raw_duplex::error_words(server.error.as_ref().unwrap());
        assert!(words.contains("78 of 200"), "{words}");
        assert_eq!(server.out.error, None, "the server's own sends complete");
        assert_eq!(server.out.completed, 200);
    }

    /// `-b -q 2 -D 1`: each side runs about a second, sends on both QPs and
    /// receives on both, no error; the table's #iterations are the sends
    /// completed plus the frames received inside the window (no margins at
    /// 1 s: more than either alone, at most both).
    #[test]
    fn both_ways_on_two_qps_for_a_duration() {
        let t0 = std::time::Instant::now();
        let (client, server) = pair("-b -q 2 -D 1 -s 64", None, Duration::from_secs(5));
        let took = t0.elapsed();
        assert!(
            took >= Duration::from_secs(1) && took < Duration::from_secs(20),
            "{took:?}"
        );
        for (who, s) in [("client", &client), ("server", &server)] {
            assert_eq!((&s.error, s.out.error), (&None, None), "{who}");
            let (m, sent) = (s.out.measured, s.out.completed);
            let got: u64 = s.per_qp.iter().map(|c| c.packets).sum();
            println!(
                "{who}: {m} measured, {sent} sent, {got} received ({:?})",
                took
            );
            assert!(
                s.per_qp.iter().all(|c| c.packets > 0),
                "{who}: {:?}",
                s.per_qp
            );
            let per = check_wire(s, who);
            assert!(
                per.iter().all(|&k| k > 0),
                "{who}: frames sent per QP {per:?}"
            );
            assert!(
                m > sent.max(got) && m <= sent + got,
                "{who}: {m} of {sent} + {got}"
            );
            let row = s.report.lines().find(|l| l.trim_start().starts_with("64 "));
            let cols: Vec<&str> = row.expect(who).split_whitespace().collect();
            assert_eq!(cols[1], m.to_string(), "{who}: #iterations");
            let line = format!("received: {got} of the peer's frames in 1 s");
            assert!(s.report.contains(&line), "{who}: {}", s.report);
        }
    }
}
