//! raw-eth-bw's direct sender on several QPs (`--client -q N --post
//! direct|direct-mpw`) as the tool runs it (`tool::session::raw_measure`
//! over one raw SQ per QP, all on the one CQ, polled through
//! `run::raw_qpn::ByQpn`), on the queue model's Ethernet port
//! (`Model::raw_queues`). Each QP's buffer is filled with its own seed (as
//! the tool fills them), so every wire frame tells which QP sent it.
//! Checked: `-n` frames per QP, each QP's frames on the wire in its order
//! and each its slot byte for byte (etherparse: MACs, IPv4 checksum, UDP
//! ports per flow), every frame completed on its own QP, the row's
//! `#iterations` (`-n` × `-q`, perftest's `tot_iters`) and the message rate over every QP's frames.

#[cfg(not(feature = "model"))]
#[test]
fn raw_send_qps_model_needs_the_model_feature() {
    println!("SKIPPED: the raw send QPs model tests need `--features model`");
}

#[cfg(feature = "model")]
mod common;

#[cfg(feature = "model")]
mod with_model {
    use super::common::model_env::Stepping;
    use super::common::raw_eth::assert_model_clean;
    use super::common::raw_loop::{client, measure, Method, RawLoop};
    use etherparse::{Ethernet2Header, Ipv4Header, UdpHeader};
    use rdmaperf::raw::frame;
    use rdmaperf::raw::params::RawParams;
    use rdmaperf::raw::slots::Slots;
    use rdmaperf::run::bw::{BwOutcome, RunError};
    use rdmaperf::run::raw_qpn::ByQpn;
    use rdmaperf::tool::session::raw_measure::{self, Stamps};

    struct Run {
        out: BwOutcome,
        wire: Vec<Vec<u8>>,
        bufs: Vec<Vec<u8>>,
        slots: Slots,
    }

    /// One run of `p` on `p.raw.qps` QPs of one model; `qpns` (None: the
    /// model's) are the QP numbers the poller is told.
    fn run(m: Method, p: &RawParams, stamps: &mut Stamps, qpns: Option<&[u32]>) -> Run {
        let n_qps = p.raw.qps as usize;
        // Declared before the SQs and the CQ: they are dropped first.
        let (mut rig, sqs, cq) = RawLoop::new(p, n_qps);
        let model = &rig.model;
        let own: Vec<u32> = (0..n_qps).map(|q| model.qpn_of(q)).collect();
        let mut cq = ByQpn::new(Stepping { cq, model }, qpns.unwrap_or(&own));
        let slots = rig.slots;
        let out = measure((m, p), sqs, &mut cq, (&rig.bases(), slots), stamps);
        assert_model_clean(&rig.model);
        Run {
            out,
            wire: rig.model.take_wire(),
            bufs: std::mem::take(&mut rig.bufs),
            slots,
        }
    }

    /// Which QP sent each wire frame, in order: the frame must be the next
    /// slot of exactly one QP's buffer (the payloads differ by seed).
    fn senders(r: &Run, ctx: &str) -> Vec<usize> {
        let len = r.slots.frame_len as usize;
        let mut next = vec![0u64; r.bufs.len()];
        let mut who = Vec::new();
        for (i, w) in r.wire.iter().enumerate() {
            let is_next = |q: usize| {
                let at = r.slots.offset(next[q]) as usize;
                w.as_slice() == &r.bufs[q][at..at + len]
            };
            let qs: Vec<usize> = (0..r.bufs.len()).filter(|&q| is_next(q)).collect();
            assert_eq!(
                qs.len(),
                1,
                "{ctx}: wire frame {i} is the next slot of QPs {qs:?}"
            );
            next[qs[0]] += 1;
            who.push(qs[0]);
        }
        who
    }

    /// Every check of one run of `extra` (which holds `-q`), `n` per QP.
    fn check(m: Method, extra: &str, n: u64) {
        let p = client(extra);
        let q = p.raw.qps;
        let mut stamps = Stamps::for_run(&p, q as usize);
        let r = run(m, &p, &mut stamps, None);
        let ctx = format!("{m:?} {extra}");
        assert_eq!(r.out.error, None, "{ctx}");
        let all = n * q;
        assert_eq!((r.out.posted, r.out.completed), (all, all), "{ctx}");
        assert_eq!(r.wire.len() as u64, all, "{ctx}: frames on the wire");
        let who = senders(&r, &ctx);
        for qp in 0..q as usize {
            let sent = who.iter().filter(|&&w| w == qp).count() as u64;
            assert_eq!(sent, n, "{ctx}: QP {qp}'s frames on the wire");
        }
        let spec = p.frame_spec();
        let hl = spec.header_len();
        let mut k_of = vec![0u64; q as usize];
        for (w, &qp) in r.wire.iter().zip(&who) {
            let k = k_of[qp];
            k_of[qp] += 1;
            let flow = r.slots.flow_of(k) as u16;
            let want = frame::frame(&spec, flow, 0, 1);
            assert_eq!(&w[..hl], &want[..hl], "{ctx}: QP {qp} frame {k}'s headers");
            let (eth, rest) = Ethernet2Header::from_slice(w).unwrap();
            assert_eq!(
                (eth.source, eth.destination),
                ([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2])
            );
            let (ip, rest) = Ipv4Header::from_slice(rest).unwrap();
            assert_eq!(ip.header_checksum, ip.calc_header_checksum(), "{ctx}");
            let (udp, _) = UdpHeader::from_slice(rest).unwrap();
            assert_eq!(
                (udp.source_port, udp.destination_port),
                (5000 + flow, 6000 + flow),
                "{ctx}: QP {qp} frame {k}"
            );
        }
        // The QPs take turns: no QP's frames all go before another's start
        // (the window is per QP, -t each).
        let firsts: Vec<usize> = (0..q as usize)
            .map(|qp| who.iter().position(|&w| w == qp).unwrap())
            .collect();
        let lasts: Vec<usize> = (0..q as usize)
            .map(|qp| who.iter().rposition(|&w| w == qp).unwrap())
            .collect();
        assert!(
            firsts.iter().max() < lasts.iter().min(),
            "{ctx}: QPs in turn: first frames {firsts:?}, last {lasts:?}"
        );
        let res = raw_measure::result_stamped(&p, &r.out, &stamps, q as u32, 1e9).unwrap();
        // perftest's tot_iters: -n on each QP.
        assert_eq!((res.size, res.iters), (p.size, all), "{ctx}");
        // The average over the run's ends (no stamps) counts every QP's frames.
        let plain = raw_measure::result(&p, &r.out, q as u32, 1e9).unwrap();
        let secs = (r.out.t_end - r.out.t_start) as f64 / 1e9;
        let want = all as f64 / secs / 1e6;
        assert!(
            (plain.msg_rate - want).abs() <= want * 1e-9,
            "{ctx}: MsgRate {} Mpps, {all} frames in {secs} s is {want}",
            plain.msg_rate
        );
        assert!(
            res.bw_peak.is_finite() && res.bw_peak >= res.bw_avg && res.bw_avg > 0.0,
            "{ctx}: {res:?}"
        );
        let text = raw_measure::report(&p, &res, Some(100.0));
        let row = text
            .lines()
            .find(|l| l.trim_start().starts_with(&p.size.to_string()))
            .unwrap();
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cols[1], all.to_string(), "{ctx}: {row}");
        assert!(text.contains("line rate for"), "{text}");
        println!("{ctx}: {row}");
    }

    #[test]
    fn direct_sends_n_frames_on_each_qp() {
        for (extra, n) in [
            ("-q 2 -n 300", 300),
            ("-q 2 -n 240 -s 128 --flows 4 --flows_burst 3", 240),
            ("-q 4 -n 333 -s 64 -Q 7 -t 32", 333),
            ("-q 4 -n 200 -s 65 -l 8 -Q 4 -t 64", 200),
        ] {
            check(Method::Direct, extra, n);
        }
    }

    #[test]
    fn direct_mpw_sends_n_frames_on_each_qp() {
        for (extra, n) in [
            ("-q 2 -n 1024 -l 32", 1024),
            ("-q 2 -n 100 -s 1518", 100),
            ("-q 4 -n 320 -s 64 -l 16 -Q 8", 320),
            ("-q 4 -n 240 -s 128 --flows 4 -l 8", 240),
        ] {
            check(Method::DirectMpw, extra, n);
        }
    }

    /// A completion whose QPN the poller was not told of ends the run with
    /// a completion error (not a count on another QP).
    #[test]
    fn a_completion_of_an_unknown_qp_ends_the_run() {
        let p = client("-q 2 -n 100");
        let r = run(
            Method::Direct,
            &p,
            &mut Stamps::default(),
            Some(&[0x999, 0x998]),
        );
        match r.out.error {
            Some(RunError::Completion { qp, .. }) => assert_eq!(qp, 2, "past the last QP"),
            e => panic!("{e:?}"),
        }
        assert!(r.out.completed < 200, "{:?}", r.out);
    }
}
