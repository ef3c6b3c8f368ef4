//! `--payload_file_path` on the raw tools, on the queue model: the send
//! buffer filled as the tools fill it (`slots::fill_body` with
//! `RawParams::body`: the pattern repeated from the buffer's start, the
//! headers written over each slot, as perftest's `create_mr` then
//! `create_raw_eth_pkt`), raw-eth-bw's sender (direct) on a loop-back
//! model and raw-eth-lat client against server (`common::raw_host`).
//! Every frame on the wire is parsed with etherparse: its headers are
//! the tool's, and its payload bytes are the file's pattern at the
//! frame's place in the buffer.

#[cfg(not(feature = "model"))]
#[test]
fn raw_payload_model_needs_the_model_feature() {
    println!("SKIPPED: the raw payload model tests need `--features model`");
}

#[cfg(feature = "model")]
mod common;

#[cfg(feature = "model")]
mod with_model {
    use super::common::model_env::Stepping;
    use super::common::raw_eth::assert_model_clean;
    use super::common::raw_host;
    use super::common::raw_steer_model::{self, CLIENT};
    use std::path::PathBuf;
    use std::time::Duration;

    use etherparse::{Ethernet2Header, Ipv4Header, UdpHeader};
    use rdmaperf::clock::Clock;
    use rdmaperf::mlx5::raw_sq::RawSqConfig;
    use rdmaperf::model::{Access, Model, ModelConfig, ModelMmio};
    use rdmaperf::raw::slots::{self, Slots};
    use rdmaperf::raw::tools::RawTool;
    use rdmaperf::run::raw_bw::{Alone, Direct};
    use rdmaperf::tool::session::raw_measure::{self, Stamps};

    /// A payload file of 11 DWORDs (44 bytes: no multiple of the cache
    /// line, so each slot starts at another place in the pattern).
    fn payload_file(name: &str) -> (PathBuf, Vec<u8>) {
        let words: Vec<u32> = (0..11u32)
            .map(|i| 0xa0b0_c0d0 ^ (i * 0x0101_0101))
            .collect();
        let text: Vec<String> = words.iter().map(|w| format!("0x{w:08x}")).collect();
        let dir = std::env::temp_dir();
        let path = dir.join(format!("rdmaperf-{name}-{}.txt", std::process::id()));
        std::fs::write(&path, text.join(",")).unwrap();
        let bytes = words.iter().flat_map(|w| w.to_le_bytes()).collect();
        (path, bytes)
    }

    /// A frame's headers as etherparse reads them (IPv4/UDP), and its
    /// payload equal to `pat` at the frame's buffer offset `at`.
    fn check(f: &[u8], pat: &[u8], at: u64, what: &str) {
        let (eth, rest) = Ethernet2Header::from_slice(f).unwrap();
        assert_eq!(eth.ether_type, etherparse::EtherType::IPV4, "{what}");
        let (ip, rest) = Ipv4Header::from_slice(rest).unwrap();
        assert_eq!(ip.header_checksum, ip.calc_header_checksum(), "{what}");
        let (udp, body) = UdpHeader::from_slice(rest).unwrap();
        assert_eq!(udp.length as usize, 8 + body.len(), "{what}");
        let hl = f.len() - body.len();
        for (j, b) in body.iter().enumerate() {
            let o = (at as usize + hl + j) % pat.len();
            assert_eq!(*b, pat[o], "{what}: payload byte {j}");
        }
    }

    #[test]
    fn raw_eth_bw_sends_the_files_pattern_under_its_headers() {
        let (path, pat) = payload_file("bw");
        let cmd = format!(
            "{CLIENT} -s 300 --flows 3 -n 240 --payload_file_path {}",
            path.display()
        );
        let p = raw_steer_model::params(RawTool::Bw, &cmd);
        std::fs::remove_file(&path).unwrap();
        assert_eq!(p.payload.as_deref(), Some(&pat[..]));
        let slots = Slots::new(p.size, p.raw.flows, p.raw.flows_burst, p.post_list, 4096);
        // Declared before the model: registered memory outlives it.
        let mut buf = vec![0u8; slots.buffer_len()];
        // As `tool::setup::raw_res` fills each QP's buffer.
        slots::fill_body(&mut buf, &p.frame_spec(), &slots, p.body(0x5eed));
        let model = Model::new(ModelConfig::raw_eth_loop(256)).unwrap();
        // SAFETY: `buf` outlives the model and the SQ (declared first).
        let mr = unsafe { model.register(buf.as_mut_ptr(), buf.len(), Access::NONE) };
        let (mut sq, cq) = model.raw_pair(RawSqConfig::new(mr.lkey, 8)).unwrap();
        // SAFETY: as above.
        unsafe { sq.set_frame_source(buf.as_ptr(), buf.len()) };
        let mut cq = Stepping { cq, model: &model };
        let out = raw_measure::measure_stamped(
            &p,
            (&mut [Direct::<ModelMmio>(sq)], &mut cq),
            (&[buf.as_ptr() as u64], slots),
            &Clock::fixed(1e9),
            (&mut Alone, &mut Stamps::default()),
        );
        assert_eq!((out.error, out.completed), (None, 240), "{out:?}");
        assert_model_clean(&model);
        let wire = model.take_wire();
        assert_eq!(wire.len(), 240);
        for (k, f) in wire.iter().enumerate() {
            let at = slots.offset(k as u64);
            assert_eq!(f.len(), 296, "frame {k}");
            check(f, &pat, at, &format!("frame {k}"));
            let (_, rest) = Ethernet2Header::from_slice(f).unwrap();
            let (_, rest) = Ipv4Header::from_slice(rest).unwrap();
            let (udp, _) = UdpHeader::from_slice(rest).unwrap();
            let flow = slots.flow_of(k as u64) as u16;
            assert_eq!(
                udp.source_port,
                5000 + flow,
                "frame {k}: its flow's headers"
            );
        }
    }

    #[test]
    fn raw_eth_lat_sends_the_files_pattern_both_ways() {
        let (path, pat) = payload_file("lat");
        let extra = format!("-n 50 -s 200 --payload_file_path {}", path.display());
        let pair = raw_host::pair(RawTool::Lat, &extra, None, Duration::from_secs(5));
        std::fs::remove_file(&path).unwrap();
        for s in [&pair.client, &pair.server] {
            let o = &s.run.lat.as_ref().unwrap().outcome;
            assert_eq!((o.error, o.iters), (None, 50), "{o:?}");
        }
        assert_eq!(raw_host::check_log(&pair, "lat payload"), (50, 50));
        // One flow: every frame is its side's first slot, at offset 0.
        for (i, (_, _, f)) in pair.log.iter().enumerate() {
            check(f, &pat, 0, &format!("frame {i}"));
        }
    }
}
