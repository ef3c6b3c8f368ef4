//! raw-eth-bw's sender as the tool runs it (`tool::session::raw_measure`:
//! the loop's numbers from a command line, `run::raw_bw`'s loop, perftest's
//! table and the line-rate line), with the direct and direct-mpw posts on
//! the queue model's Ethernet port (`Model::raw_pair`). Checked: `-n`
//! frames on the wire, each equal to the buffer's slot perftest would send
//! (its headers `raw::frame`'s for its flow, parsed by etherparse), the
//! loop's counts, the printed row; a pcap per method is left at
//! target/raw-bw-<method>.pcap. The SW rate limiter spaces its bursts.

#[cfg(not(feature = "model"))]
#[test]
fn raw_run_model_needs_the_model_feature() {
    println!("SKIPPED: the raw run model tests need `--features model`");
}

#[cfg(feature = "model")]
mod common;

#[cfg(feature = "model")]
mod with_model {
    use super::common::model_env::Stepping;
    use super::common::raw_eth::assert_model_clean;
    use super::common::raw_loop::{client, measure, Method, RawLoop};
    use etherparse::{Ethernet2Header, Ipv4Header, UdpHeader};
    use rdmaperf::clock::Clock;
    use rdmaperf::raw::frame;
    use rdmaperf::raw::params::RawParams;
    use rdmaperf::raw::pcap::{self, PcapWriter};
    use rdmaperf::raw::slots::Slots;
    use rdmaperf::run::bw::BwOutcome;
    use rdmaperf::tool::session::raw_measure::{self, Stamps};

    struct Run {
        out: BwOutcome,
        wire: Vec<Vec<u8>>,
        buf: Vec<u8>,
        slots: Slots,
    }

    fn run(m: Method, p: &RawParams) -> Run {
        run_with(m, p, &mut Stamps::default())
    }

    /// [`run`] keeping `stamps` for the peak.
    fn run_with(m: Method, p: &RawParams, stamps: &mut Stamps) -> Run {
        // Declared before the SQ and the CQ: they are dropped first.
        let (mut rig, sqs, cq) = RawLoop::new(p, 1);
        let slots = rig.slots;
        let mut cq = Stepping {
            cq,
            model: &rig.model,
        };
        let out = measure((m, p), sqs, &mut cq, (&rig.bases(), slots), stamps);
        assert_model_clean(&rig.model);
        Run {
            out,
            wire: rig.model.take_wire(),
            buf: std::mem::take(&mut rig.bufs[0]),
            slots,
        }
    }

    /// Every check of one run; returns the wire for the pcap.
    fn check(m: Method, extra: &str, n: u64) -> Vec<Vec<u8>> {
        let p = client(extra);
        let r = run(m, &p);
        let ctx = format!("{m:?} {extra}");
        assert_eq!(r.out.error, None, "{ctx}");
        assert_eq!(
            (r.out.posted, r.out.completed, r.out.measured),
            (n, n, n),
            "{ctx}"
        );
        assert_eq!(r.wire.len() as u64, n, "{ctx}: frames on the wire");
        let spec = p.frame_spec();
        let hl = spec.header_len();
        for (k, w) in r.wire.iter().enumerate() {
            let k = k as u64;
            let at = (r.slots.offset(k)) as usize;
            assert_eq!(
                w.as_slice(),
                &r.buf[at..at + r.slots.frame_len as usize],
                "{ctx}: frame {k}"
            );
            let flow = r.slots.flow_of(k) as u16;
            let want = frame::frame(&spec, flow, 0, 1);
            assert_eq!(
                &w[..hl],
                &want[..hl],
                "{ctx}: frame {k}'s headers (flow {flow})"
            );
            let (eth, rest) = Ethernet2Header::from_slice(w).unwrap();
            assert_eq!(eth.destination, [2, 0, 0, 0, 0, 2]);
            let (ip, rest) = Ipv4Header::from_slice(rest).unwrap();
            assert_eq!(ip.header_checksum, ip.calc_header_checksum());
            let (udp, _) = UdpHeader::from_slice(rest).unwrap();
            assert_eq!(
                (udp.source_port, udp.destination_port),
                (5000 + flow, 6000 + flow),
                "{ctx}"
            );
        }
        let res = raw_measure::result(&p, &r.out, 1, 1e9).unwrap();
        assert_eq!((res.size, res.iters), (p.size, n), "{ctx}");
        assert!(res.msg_rate > 0.0 && res.bw_avg > 0.0, "{ctx}: {res:?}");
        let text = raw_measure::report(&p, &res, Some(100.0));
        let row = text
            .lines()
            .find(|l| l.trim_start().starts_with(&p.size.to_string()))
            .unwrap();
        let cols: Vec<&str> = row.split_whitespace().collect();
        assert_eq!(cols[1], n.to_string(), "{ctx}: {row}");
        assert!(text.contains("MsgRate[Mpps]"), "{text}");
        assert!(
            text.contains("line rate for") && text.contains("at 100 Gb/s"),
            "{text}"
        );
        r.wire
    }

    fn pcap_of(name: &str, wire: &[Vec<u8>]) {
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        for (i, f) in wire.iter().enumerate() {
            w.record(i as u64, f).unwrap();
        }
        let bytes = w.finish().unwrap();
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(name), &bytes).unwrap();
        let (link, recs) = pcap::read(&bytes).unwrap();
        assert_eq!((link, recs.len()), (1, wire.len()));
    }

    /// Each command-line tail in `runs` with `method` sends its `-n` frames of every flow;
    /// the wire of them all goes to `pcap`.
    fn sends_every_run(method: Method, runs: &[(&str, u64)], pcap: &str) {
        let mut all = Vec::new();
        for &(extra, n) in runs {
            all.extend(check(method, extra, n));
        }
        pcap_of(pcap, &all);
    }

    #[test]
    fn direct_sends_n_frames_of_every_flow() {
        let runs = [
            ("-n 1000", 1000),
            ("-n 333 -s 64 -Q 7", 333),
            ("-n 240 -s 128 --flows 4 --flows_burst 3", 240),
            ("-n 500 -s 65 -l 4 -Q 2 -t 64", 500),
        ];
        sends_every_run(Method::Direct, &runs, "raw-bw-direct.pcap");
    }

    /// `--rate_limit_type=SW`: 8 frames every 5 ms (1600 frames/s), so 64
    /// frames are 8 bursts and the last starts 7 gaps after the first; every
    /// frame still goes out as unpaced (`check`).
    #[test]
    fn sw_rate_limit_spaces_the_bursts() {
        let extra =
            "-n 64 -t 64 --rate_limit=1600 --rate_units=p --rate_limit_type=SW --burst_size=8";
        let gap = Clock::fixed(1e9).cycles_for(std::time::Duration::from_millis(5));
        for m in [Method::Direct, Method::DirectMpw] {
            check(m, extra, 64);
            let r = run(m, &client(extra));
            let took = r.out.t_end - r.out.t_start;
            assert!(
                took >= 7 * gap,
                "{m:?}: 64 frames in {took} ticks, under 7 gaps of {gap}"
            );
        }
        let unpaced = run(Method::Direct, &client("-n 64 -t 64"));
        println!(
            "unpaced: 64 frames in {} ticks (paced: at least {})",
            unpaced.out.t_end - unpaced.out.t_start,
            7 * gap
        );
    }

    #[test]
    fn direct_mpw_sends_n_frames_of_every_flow() {
        let runs = [
            ("-n 1024 -l 32", 1024),
            ("-n 336 -s 64 -l 16 -Q 8", 336),
            ("-n 240 -s 128 --flows 4 -l 8", 240),
            ("-n 100 -s 1518", 100),
        ];
        sends_every_run(Method::DirectMpw, &runs, "raw-bw-direct-mpw.pcap");
    }

    /// The printed row's BW peak and BW average columns.
    fn peak_and_avg(p: &RawParams, out: &BwOutcome, stamps: &Stamps) -> (f64, f64) {
        let res = raw_measure::result_stamped(p, out, stamps, 1, 1e9).unwrap();
        let text = raw_measure::report(p, &res, None);
        let row = text
            .lines()
            .find(|l| l.trim_start().starts_with(&p.size.to_string()))
            .unwrap();
        let cols: Vec<f64> = row.split_whitespace().map(|c| c.parse().unwrap()).collect();
        (cols[2], cols[3])
    }

    /// The peak from perftest's per-frame stamps: `tposted` at each list's
    /// first frame, `tcompleted` at each completion (the last frame's
    /// among them); the row's peak a finite positive number at least the
    /// average (perftest's search includes the whole run's window). `-N`
    /// keeps no stamps and prints a peak of 0.
    #[test]
    fn peak_from_per_frame_stamps_and_none_with_no_peak() {
        for (m, extra, pl) in [
            (Method::Direct, "-n 2000 -Q 16", 1),
            (Method::DirectMpw, "-n 2000 -l 8 -Q 8", 8),
        ] {
            let p = client(extra);
            assert!(!p.no_peak, "{extra}");
            let mut st = Stamps::for_run(&p, 1);
            let r = run_with(m, &p, &mut st);
            assert_eq!(r.out.error, None, "{m:?}");
            assert_eq!(st.tposted.len(), 2000);
            let posted = st.tposted.iter().filter(|&&t| t != 0).count();
            assert_eq!(posted, 2000 / pl, "{m:?}: one stamp per list");
            assert!(st.tposted.iter().step_by(pl).all(|&t| t != 0), "{m:?}");
            assert!(st.tcompleted[1999] >= st.tposted[1992], "{m:?}");
            let signalled = st.tcompleted.iter().filter(|&&t| t != 0).count();
            assert!(
                (2000 / 16..2000).contains(&signalled),
                "{m:?}: {signalled} completions stamped"
            );
            let (peak, avg) = peak_and_avg(&p, &r.out, &st);
            println!("{m:?} {extra}: peak {peak} MB/s, average {avg} MB/s");
            assert!(
                peak.is_finite() && peak > 0.0 && peak >= avg && avg > 0.0,
                "{peak} {avg}"
            );
        }
        let p = client("-n 2000 -N");
        assert!(p.no_peak);
        let mut st = Stamps::for_run(&p, 1);
        assert!(st.tposted.is_empty() && st.tcompleted.is_empty());
        let r = run_with(Method::Direct, &p, &mut st);
        assert_eq!(r.out.error, None);
        let (peak, avg) = peak_and_avg(&p, &r.out, &st);
        assert!(peak == 0.0 && avg > 0.0, "-N: {peak} {avg}");
    }
}
