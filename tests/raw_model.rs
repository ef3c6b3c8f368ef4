//! The raw packet post paths (`mlx5::raw_sq`: one SEND per frame, and eMPW
//! sessions by pointer or inline) against the queue model's Ethernet port:
//! perftest's frames (`raw::frame`) are posted from a registered buffer, the
//! model decodes the WQEs from the ring bytes with its own reader and puts
//! the frames on its wire. Checked: the wire equals the frames byte for
//! byte, etherparse parses every frame (headers, IPv4 checksum, sizes), the
//! WQE and CQE counts follow the session and sparse-completion plans, the
//! consumer index comes back from those CQEs, and a pcap per method is left
//! under target/.

#[cfg(not(feature = "model"))]
#[test]
fn raw_model_needs_the_model_feature() {
    println!("SKIPPED: the raw post-path model tests need `--features model`");
}

#[cfg(feature = "model")]
mod common;

#[cfg(feature = "model")]
mod with_model {
    use super::common::raw_eth::{assert_model_clean, udp4, DST_MAC, SRC_MAC};
    use etherparse::{Ethernet2Header, Ipv4Header, UdpHeader};
    use rdmaperf::mlx5::mpw;
    use rdmaperf::mlx5::raw_sq::{RawPkt, RawSq, RawSqConfig};
    use rdmaperf::mlx5::DirectCq;
    use rdmaperf::model::{Access, Model, ModelConfig, ModelMmio, ModelTransport};
    use rdmaperf::post::{Completion, CompletionQueue, PostError, WcStatus};
    use rdmaperf::raw::frame::{self, FrameSpec};
    use rdmaperf::raw::pcap::{self, PcapWriter};

    const SEED: u32 = 0x5eed;
    /// `-s` values around the 18-byte inline header, one WQEBB, perftest's
    /// 236-byte inline, eMPW's 256-byte inline limit (260/261) and the MTU.
    const SIZES: [usize; 8] = [64, 65, 128, 236, 237, 260, 261, 1518];

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Method {
        Direct,
        MpwPtr,
        MpwInline,
    }

    /// One run: `n` frames of `-s size` posted in lists of `list`.
    #[derive(Clone, Copy, Debug)]
    struct Case {
        method: Method,
        size: usize,
        n: usize,
        list: usize,
        wqe_cnt: u32,
        cq_every: u32,
        min_inline: usize,
    }

    /// What a run left: the wire, the CQEs' wr_ids, the WQEs the NIC ran.
    struct Outcome {
        sent: Vec<Vec<u8>>,
        wire: Vec<Vec<u8>>,
        wr_ids: Vec<u64>,
        wqes: u64,
        outstanding: u32,
    }

    /// perftest's buffer: frame `i` (flow `i % 4`, its own payload seed) at
    /// slot `i`, slots a cache line apart as `INC(size, cache line)` puts them.
    fn buffer(s: &FrameSpec, n: usize) -> (Vec<u8>, Vec<Vec<u8>>, usize) {
        let stride = s.frame_len().next_multiple_of(64);
        let frames: Vec<Vec<u8>> = (0..n)
            .map(|i| frame::frame(s, (i % 4) as u16, i as u64, SEED + i as u32))
            .collect();
        let mut buf = vec![0u8; stride * n];
        for (i, f) in frames.iter().enumerate() {
            buf[i * stride..i * stride + f.len()].copy_from_slice(f);
        }
        (buf, frames, stride)
    }

    fn drain(model: &Model, cq: &mut DirectCq, wr_ids: &mut Vec<u64>) {
        model.step();
        let mut wc = [Completion::default(); 16];
        loop {
            let k = cq.poll(&mut wc).unwrap();
            for c in &wc[..k] {
                assert_eq!(c.status, WcStatus::SUCCESS, "{:?}", model.eth_rejected());
                wr_ids.push(c.wr_id);
            }
            if k == 0 {
                return;
            }
        }
    }

    fn post(sq: &mut RawSq<ModelMmio>, m: Method, pkts: &[RawPkt]) -> Result<(), PostError> {
        match m {
            Method::Direct => sq.post_send(pkts),
            Method::MpwPtr => sq.post_mpw(pkts, false),
            Method::MpwInline => sq.post_mpw(pkts, true),
        }
    }

    fn run(c: Case) -> Outcome {
        let s = udp4(c.size);
        // Declared before the model: registered memory outlives it.
        let (mut buf, sent, stride) = buffer(&s, c.n);
        let model = Model::new(ModelConfig {
            wqe_cnt: c.wqe_cnt,
            cqe_cnt: 256,
            transport: ModelTransport::RawEth {
                min_inline: c.min_inline as u8,
            },
            record_history: false,
            ..ModelConfig::default()
        })
        .unwrap();
        // SAFETY: `buf` outlives the model and the SQ (declared first).
        let mr = unsafe { model.register(buf.as_mut_ptr(), buf.len(), Access::NONE) };
        let cfg = RawSqConfig {
            min_inline: c.min_inline,
            cs_flags: 0,
            lkey: mr.lkey,
            cq_every: c.cq_every,
        };
        let (mut sq, mut cq) = model.raw_pair(cfg).unwrap();
        // SAFETY: as above.
        unsafe { sq.set_frame_source(buf.as_ptr(), buf.len()) };
        let pkts: Vec<RawPkt> = (0..c.n)
            .map(|i| RawPkt {
                addr: buf.as_ptr() as u64 + (i * stride) as u64,
                len: s.frame_len() as u32,
            })
            .collect();
        let mut wr_ids = Vec::new();
        for list in pkts.chunks(c.list) {
            while let Err(e) = post(&mut sq, c.method, list) {
                assert_eq!(e, PostError::QueueFull, "{c:?}");
                drain(&model, &mut cq, &mut wr_ids);
            }
            drain(&model, &mut cq, &mut wr_ids);
        }
        drain(&model, &mut cq, &mut wr_ids);
        assert_model_clean(&model);
        Outcome {
            sent,
            wire: model.take_wire(),
            wr_ids,
            wqes: model.stats().wqes,
            outstanding: sq.outstanding(),
        }
    }

    /// The WQEs a case's lists take (sessions never span two lists).
    fn planned_wqes(c: &Case) -> usize {
        let pkts = vec![
            RawPkt {
                addr: 0,
                len: (c.size - 4) as u32
            };
            c.n
        ];
        pkts.chunks(c.list)
            .map(|l| match c.method {
                Method::Direct => l.len(),
                Method::MpwPtr => mpw::plan(l, false).0,
                Method::MpwInline => mpw::plan(l, true).0,
            })
            .sum()
    }

    /// Every check of one case; returns the wire for the pcap.
    fn check(c: Case) -> Vec<Vec<u8>> {
        let o = run(c);
        assert_eq!(o.wire.len(), c.n, "{c:?}: frames on the wire");
        for (i, (w, f)) in o.wire.iter().zip(&o.sent).enumerate() {
            assert_eq!(w, f, "{c:?}: frame {i} differs from raw::frame's");
            parse(w, c.size, (i % 4) as u16);
        }
        let wqes = planned_wqes(&c);
        assert_eq!(o.wqes, wqes as u64, "{c:?}: WQEs the NIC ran");
        let every = c.cq_every as usize;
        assert_eq!(o.wr_ids.len(), wqes / every, "{c:?}: sparse CQEs");
        assert!(
            o.wr_ids.windows(2).all(|w| w[0] < w[1]),
            "{c:?}: {:?}",
            o.wr_ids
        );
        if wqes % every == 0 {
            assert_eq!(o.wr_ids.last().copied(), Some(c.n as u64), "{c:?}");
            assert_eq!(o.outstanding, 0, "{c:?}: consumer index from the CQEs");
        } else {
            assert!(
                o.outstanding > 0,
                "{c:?}: unsignalled WQEs stay outstanding"
            );
        }
        o.wire
    }

    /// etherparse's reading of an IPv4/UDP frame of `-s size`, flow `flow`.
    fn parse(f: &[u8], size: usize, flow: u16) {
        assert_eq!(f.len(), size - 4);
        let (eth, rest) = Ethernet2Header::from_slice(f).unwrap();
        assert_eq!((eth.destination, eth.source), (DST_MAC, SRC_MAC));
        assert_eq!(eth.ether_type.0, 0x0800);
        let (ip, rest) = Ipv4Header::from_slice(rest).unwrap();
        assert_eq!(
            ip.header_checksum,
            ip.calc_header_checksum(),
            "IPv4 checksum"
        );
        assert_eq!(ip.total_len as usize, size - 18);
        assert_eq!((ip.source, ip.destination), ([10, 0, 0, 1], [10, 0, 0, 2]));
        let (udp, _) = UdpHeader::from_slice(rest).unwrap();
        assert_eq!(
            (udp.source_port, udp.destination_port),
            (5000 + flow, 6000 + flow)
        );
        etherparse::SlicedPacket::from_ethernet(f).unwrap();
    }

    fn write_pcap(name: &str, frames: &[Vec<u8>]) {
        let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
            .parent()
            .unwrap()
            .join(name);
        let mut w = PcapWriter::new(std::fs::File::create(&path).unwrap()).unwrap();
        for (i, f) in frames.iter().enumerate() {
            w.record(1_000_000 + i as u64, f).unwrap();
        }
        w.finish().unwrap();
        let (link, recs) = pcap::read(&std::fs::read(&path).unwrap()).unwrap();
        assert_eq!((link, recs.len()), (1, frames.len()));
        println!("wrote {} frames to {}", frames.len(), path.display());
    }

    fn case(method: Method, size: usize) -> Case {
        Case {
            method,
            size,
            n: 200,
            list: 16,
            wqe_cnt: 64,
            cq_every: 4,
            min_inline: 0,
        }
    }

    #[test]
    fn direct_sends_every_size_with_and_without_the_inline_header() {
        let mut all = Vec::new();
        for size in SIZES {
            for min_inline in [0, 18] {
                for list in [1, 16] {
                    let c = Case {
                        min_inline,
                        list,
                        ..case(Method::Direct, size)
                    };
                    all.extend(check(c));
                }
            }
        }
        write_pcap("raw-direct.pcap", &all);
    }

    /// An eMPW method over every size at post lists of 1, 16 and 64 (written to `pcap`),
    /// then its session limit: `full` 64-byte frames fill one WQE, one more opens a second.
    fn mpw_sizes_and_limit(method: Method, wqe_cnt: u32, cq_every: u32, full: usize, pcap: &str) {
        let mut all = Vec::new();
        for size in SIZES {
            for list in [1, 16, 64] {
                let c = Case {
                    list,
                    wqe_cnt,
                    cq_every,
                    ..case(method, size)
                };
                all.extend(check(c));
            }
        }
        let one = Case {
            n: full,
            list: full,
            wqe_cnt,
            cq_every: 1,
            ..case(method, 64)
        };
        assert_eq!(planned_wqes(&one), 1);
        check(one);
        let two = Case {
            n: full + 1,
            list: full + 1,
            ..one
        };
        assert_eq!(planned_wqes(&two), 2);
        check(two);
        write_pcap(pcap, &all);
    }

    #[test]
    fn mpw_by_pointer_every_size_and_the_32_packet_limit() {
        // Exactly 32 packets: one WQE; 33: two (32 + 1).
        mpw_sizes_and_limit(Method::MpwPtr, 256, 3, 32, "raw-direct-mpw.pcap");
    }

    #[test]
    fn mpw_inline_every_size_and_the_60_unit_limit() {
        // 60-byte frames take 4 units: 14 fill 58 of the 60; the 15th opens
        // a second session (WQE size, not the packet count, closes it).
        mpw_sizes_and_limit(Method::MpwInline, 512, 8, 14, "raw-direct-mpw-inline.pcap");
    }

    #[test]
    fn sessions_wrap_the_ring() {
        // A 64-WQEBB ring: 15-WQEBB inline sessions and 9-WQEBB pointer
        // sessions straddle its end many times over 500 frames.
        for method in [Method::MpwPtr, Method::MpwInline] {
            check(Case {
                n: 500,
                list: 20,
                ..case(method, 64)
            });
        }
    }

    /// A list with one bad frame (before the frame source, one byte past
    /// its end, shorter than an Ethernet header) is refused whole by every
    /// method: no producer index, packet count or doorbell moves and the
    /// wire stays empty; the signal request is kept, so the good list
    /// posted next ends with the one CQE that retires all of it.
    #[test]
    fn a_list_with_one_bad_frame_is_refused_whole() {
        let s = udp4(64);
        let (mut buf, _, stride) = buffer(&s, 40);
        for method in [Method::Direct, Method::MpwPtr, Method::MpwInline] {
            let model = Model::new(ModelConfig {
                transport: ModelTransport::RawEth { min_inline: 0 },
                ..ModelConfig::default()
            })
            .unwrap();
            // SAFETY: `buf` outlives the model and the SQ.
            let mr = unsafe { model.register(buf.as_mut_ptr(), buf.len(), Access::NONE) };
            let (mut sq, mut cq) = model.raw_pair(RawSqConfig::new(mr.lkey, 4)).unwrap();
            // SAFETY: as above.
            unsafe { sq.set_frame_source(buf.as_ptr(), buf.len()) };
            let base = buf.as_ptr() as u64;
            let good: Vec<RawPkt> = (0..40)
                .map(|i| RawPkt {
                    addr: base + (i * stride) as u64,
                    len: s.frame_len() as u32,
                })
                .collect();
            let end = base + buf.len() as u64;
            let bad = [
                RawPkt {
                    addr: base - 1,
                    len: 60,
                },
                RawPkt {
                    addr: end - 59,
                    len: 60,
                },
                RawPkt {
                    addr: base,
                    len: 13,
                },
            ];
            sq.signal_list_end();
            for b in bad {
                let mut list = good.clone();
                list[37] = b;
                assert_eq!(
                    post(&mut sq, method, &list),
                    Err(PostError::Unsupported),
                    "{method:?} {b:?}"
                );
                assert_eq!((sq.pi(), sq.sent()), (0, 0), "{method:?} {b:?}");
            }
            model.step();
            assert!(model.take_wire().is_empty(), "{method:?}");
            post(&mut sq, method, &good).unwrap();
            let mut wr_ids = Vec::new();
            drain(&model, &mut cq, &mut wr_ids);
            assert_eq!(model.take_wire().len(), 40, "{method:?}");
            assert_eq!(
                wr_ids.last(),
                Some(&40),
                "{method:?}: the kept signal retires all"
            );
            assert_eq!(sq.outstanding(), 0, "{method:?}");
        }
    }

    #[test]
    fn a_device_that_wants_the_inline_header_refuses_frames_without_it() {
        let s = udp4(64);
        let (mut buf, _, _) = buffer(&s, 1);
        let model = Model::new(ModelConfig {
            transport: ModelTransport::RawEth { min_inline: 18 },
            ..ModelConfig::default()
        })
        .unwrap();
        // SAFETY: `buf` outlives the model.
        let mr = unsafe { model.register(buf.as_mut_ptr(), buf.len(), Access::NONE) };
        let cfg = RawSqConfig::new(mr.lkey, 1);
        let (mut sq, mut cq) = model.raw_pair(cfg).unwrap();
        // SAFETY: as above.
        unsafe { sq.set_frame_source(buf.as_ptr(), buf.len()) };
        let p = RawPkt {
            addr: buf.as_ptr() as u64,
            len: s.frame_len() as u32,
        };
        sq.post_send(&[p]).unwrap();
        model.step();
        let mut wc = [Completion::default(); 4];
        assert_eq!(cq.poll(&mut wc).unwrap(), 1);
        assert_ne!(wc[0].status, WcStatus::SUCCESS);
        assert!(model.take_wire().is_empty());
        assert_eq!(
            model.eth_rejected(),
            ["inline header shorter than the device's minimum inline"]
        );
        // And an SQ told of that minimum inline refuses eMPW before writing.
        let model = Model::new(ModelConfig {
            transport: ModelTransport::RawEth { min_inline: 18 },
            ..ModelConfig::default()
        })
        .unwrap();
        let (mut sq, _cq) = model
            .raw_pair(RawSqConfig {
                min_inline: 18,
                ..cfg
            })
            .unwrap();
        assert_eq!(sq.post_mpw(&[p], false), Err(PostError::Unsupported));
        assert_eq!(sq.pi(), 0);
    }
}
