//! The raw Ethernet receive side on the queue model: perftest's frames
//! (`raw::frame`, every variant) fed to the model's Ethernet port, steered
//! by its flow table into raw QPs' RQs (posted by `mlx5::rq`), completed
//! with real-format CQEs polled by `DirectCq`, and counted by the receive
//! loop (`run::raw_recv`). Checked: the frame lands byte for byte, the
//! CQE's byte count, L3/L4 header types and L3/L4 checksum bits equal what
//! **etherparse** (not rdmaperf's encoder) computes for the frame; a
//! corrupted IPv4 header is counted bad and named as a finding; frames no
//! rule takes are dropped and counted; promiscuous and sniffer rules; an RQ
//! that ran dry is counted and reported; a frame longer than the buffer;
//! and the loop-back: a raw SQ (one SEND per frame, eMPW by pointer and
//! inline) → wire → flow table → RQ → receive loop counts what was sent,
//! through both classifiers (the CQE's bytes, and libmlx5's view:
//! `IBV_WC_IP_CSUM_OK` and the frame's headers).

#[cfg(not(feature = "model"))]
#[test]
fn raw_recv_model_needs_the_model_feature() {
    println!("SKIPPED: the raw receive model tests need `--features model`");
}

#[cfg(feature = "model")]
mod common;

#[cfg(feature = "model")]
mod with_model {
    use super::common::model_env::{raw_recv_model, register_rx_tx};
    use super::common::raw_eth::{assert_one_bad_checksum, udp4, DST_MAC, SRC_MAC};
    use etherparse::{
        EtherType, Ethernet2Header, IpNumber, Ipv4Header, Ipv6Header, SingleVlanHeader, TcpHeader,
        UdpHeader,
    };
    use rdmaperf::mlx5::raw_sq::{RawPkt, RawSq, RawSqConfig};
    use rdmaperf::mlx5::rq::DirectRq;
    use rdmaperf::mlx5::DirectCq;
    use rdmaperf::model::{FlowRule, IpMatch, L4Match, Model, ModelMmio, ModelRecvMmio};
    use rdmaperf::post::rx_offload::{RxOffload, CQE_L2_OK, CQE_L3_OK, CQE_L4_OK, WC_IP_CSUM_OK};
    use rdmaperf::post::{Completion, CompletionQueue, PostError, WcOpcode, WcStatus};
    use rdmaperf::raw::frame::{self, FrameSpec, Ip, L4};
    use rdmaperf::run::raw_recv::{
        post_all, run_raw_recv, DirectRx, RawRecvCfg, RawRecvCounts, RxClassify, VerbsRx,
    };

    const OTHER_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 9];
    const QPN: u32 = 0x123;
    const STRIDE: usize = 2048;
    const SEED: u32 = 0x5eed;
    const V6A: [u8; 16] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1];
    const V6B: [u8; 16] = [0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2];

    /// The receive buffers (declared before the model: registered memory
    /// outlives it) and the transmit buffer.
    struct Bufs {
        rx: Vec<u8>,
        tx: Vec<u8>,
    }

    impl Bufs {
        fn new(slots: usize, tx: usize) -> Self {
            Bufs {
                rx: vec![0xee; slots * STRIDE],
                tx: vec![0; tx.max(1)],
            }
        }
    }

    /// A raw model of two QPs: QP 0's SQ, and RQs (`slots` each) for the
    /// QPs in `rqs`, attached to the one CQ.
    struct Rig {
        rqs: Vec<DirectRq<ModelRecvMmio>>,
        cfg: RawRecvCfg,
        sq: RawSq<ModelMmio>,
        cq: DirectCq,
        rx_base: u64,
        rx_lkey: u32,
        model: Model,
    }

    fn rig(b: &mut Bufs, slots: u32, room: u32, rqs: &[usize], sq: RawSqConfig) -> Rig {
        let model = raw_recv_model(QPN, 1024, slots);
        // SAFETY: both buffers outlive the model (declared before it).
        let (rx, tx) = unsafe { register_rx_tx(&model, &mut b.rx, &mut b.tx) };
        let (mut sq, mut cq) = model
            .raw_pair(RawSqConfig {
                lkey: tx.lkey,
                ..sq
            })
            .unwrap();
        // SAFETY: as above.
        unsafe { sq.set_frame_source(b.tx.as_ptr(), b.tx.len()) };
        let rqs: Vec<_> = rqs.iter().map(|&q| model.raw_rq(q).unwrap()).collect();
        for rq in &rqs {
            cq.attach_recv(rq.qpn(), rq.ring());
        }
        // SAFETY: `b.rx` holds `slots` strides, registered, and outlives
        // every loop over it.
        let cfg = unsafe { RawRecvCfg::new(b.rx.as_ptr(), STRIDE as u32, room, slots, rx.lkey) };
        Rig {
            rqs,
            cfg,
            sq,
            cq,
            rx_base: b.rx.as_ptr() as u64,
            rx_lkey: rx.lkey,
            model,
        }
    }

    fn sq_cfg() -> RawSqConfig {
        RawSqConfig {
            min_inline: 0,
            cs_flags: 0,
            lkey: 0,
            cq_every: 4,
        }
    }

    /// A receive rig: QP 1's RQ holding every slot, steered to by DST_MAC.
    fn rx_rig(b: &mut Bufs, slots: u32) -> Rig {
        rx_rig_cs(b, slots, 0)
    }

    /// As `rx_rig`, the SQ asking for checksum offload `cs` (`cs_flags`).
    fn rx_rig_cs(b: &mut Bufs, slots: u32, cs: u8) -> Rig {
        let sq = RawSqConfig {
            cs_flags: cs,
            ..sq_cfg()
        };
        let mut r = rig(b, slots, STRIDE as u32, &[1], sq);
        post_all(&mut r.rqs[0], &r.cfg).unwrap();
        r.model.add_flow(FlowRule::mac(1, DST_MAC)).unwrap();
        r
    }

    fn poll_all(cq: &mut DirectCq) -> Vec<Completion> {
        let mut v = Vec::new();
        let mut wc = [Completion::default(); 16];
        loop {
            let k = cq.poll(&mut wc).unwrap();
            v.extend_from_slice(&wc[..k]);
            if k == 0 {
                return v;
            }
        }
    }

    fn count<K: RxClassify>(r: &mut Rig, c: &mut RawRecvCounts, until: u64) {
        run_raw_recv::<_, _, K>(&mut r.rqs[0], &mut r.cq, &r.cfg, c, until, &mut || true).unwrap();
    }

    // ---- frames -------------------------------------------------------

    fn v4() -> Option<Ip> {
        Some(Ip::V4 {
            src: [10, 0, 0, 1],
            dst: [10, 0, 0, 2],
        })
    }
    fn v6() -> Option<Ip> {
        Some(Ip::V6 { src: V6A, dst: V6B })
    }
    fn l4(tcp: bool) -> Option<L4> {
        Some(L4 {
            tcp,
            src_port: 5000,
            dst_port: 6000,
        })
    }

    /// Every variant perftest sends: L2 (802.3 length), `-Y`, IPv4 and
    /// IPv6 without and with UDP/TCP, and the VLAN-tagged ones, at `size`.
    fn variants(size: usize) -> Vec<(&'static str, FrameSpec)> {
        let base = FrameSpec::l2(size, SRC_MAC, DST_MAC);
        let with = |ip, l4| FrameSpec { ip, l4, ..base };
        let vlan = |mut s: FrameSpec| {
            s.header.vlan_pcp = Some(3);
            s
        };
        vec![
            ("l2", base),
            ("ethertype", {
                let mut s = base;
                s.header.ethertype = Some(0x88b5);
                s
            }),
            ("ipv4", with(v4(), None)),
            ("ipv4/udp", with(v4(), l4(false))),
            ("ipv4/tcp", with(v4(), l4(true))),
            ("ipv6", with(v6(), None)),
            ("ipv6/udp", with(v6(), l4(false))),
            ("ipv6/tcp", with(v6(), l4(true))),
            ("vlan ipv4/udp", vlan(with(v4(), l4(false)))),
            ("vlan ipv4/tcp", vlan(with(v4(), l4(true)))),
            ("vlan ipv6/udp", vlan(with(v6(), l4(false)))),
        ]
    }

    // ---- the oracle: etherparse ----------------------------------------

    /// What a NIC's receive CQE says about `f`, computed with etherparse:
    /// L3 type (IPv4 2, IPv6 1) and OK (IPv4: the header checksum
    /// etherparse computes equals the frame's, and the total length fits;
    /// IPv6: its payload length fits: perftest's never does), L4 type (TCP
    /// without ACK 1, UDP 2, from the protocol field) and OK (the length
    /// fits and the checksum etherparse computes over the pseudo-header
    /// equals the frame's; a UDP checksum of 0 is good over IPv4, bad over
    /// IPv6).
    fn oracle(f: &[u8]) -> RxOffload {
        let (eth, mut rest) = Ethernet2Header::from_slice(f).unwrap();
        let mut ty = eth.ether_type;
        if ty == EtherType::VLAN_TAGGED_FRAME {
            let (v, r) = SingleVlanHeader::from_slice(rest).unwrap();
            (ty, rest) = (v.ether_type, r);
        }
        let (mut ok, mut types) = (CQE_L2_OK, 0u8);
        if ty == EtherType::IPV4 {
            let (ip, r) = Ipv4Header::from_slice(rest).unwrap();
            types |= 2 << 2;
            let seg = (ip.total_len as usize)
                .checked_sub(ip.header_len())
                .filter(|&n| n <= r.len());
            if seg.is_some() && ip.calc_header_checksum() == ip.header_checksum {
                ok |= CQE_L3_OK;
            }
            let (t, good) = l4_v4(&ip, &r[..seg.unwrap_or(r.len())]);
            types |= t << 4;
            ok |= if good && seg.is_some() { CQE_L4_OK } else { 0 };
        } else if ty == EtherType::IPV6 {
            types |= 1 << 2;
            let (ip, r) = Ipv6Header::from_slice(rest).unwrap();
            let fits = ip.payload_length as usize <= r.len();
            ok |= if fits { CQE_L3_OK } else { 0 };
            let (t, good) = l4_v6(&ip, &r[..(ip.payload_length as usize).min(r.len())]);
            types |= t << 4;
            ok |= if good && fits { CQE_L4_OK } else { 0 };
        }
        RxOffload::from_bytes(ok, types)
    }

    fn l4_v4(ip: &Ipv4Header, seg: &[u8]) -> (u8, bool) {
        if ip.protocol == IpNumber::UDP {
            let (u, p) = UdpHeader::from_slice(seg).unwrap();
            (
                2,
                u.checksum == 0 || u.calc_checksum_ipv4(ip, p).unwrap() == u.checksum,
            )
        } else if ip.protocol == IpNumber::TCP {
            let (t, p) = TcpHeader::from_slice(seg).unwrap();
            (1, t.calc_checksum_ipv4(ip, p).unwrap() == t.checksum)
        } else {
            (0, false)
        }
    }

    fn l4_v6(ip: &Ipv6Header, seg: &[u8]) -> (u8, bool) {
        if ip.next_header == IpNumber::UDP {
            let (u, p) = UdpHeader::from_slice(seg).unwrap();
            (
                2,
                u.checksum != 0 && u.calc_checksum_ipv6(ip, p).unwrap() == u.checksum,
            )
        } else if ip.next_header == IpNumber::TCP {
            let (t, p) = TcpHeader::from_slice(seg).unwrap();
            (1, t.calc_checksum_ipv6(ip, p).unwrap() == t.checksum)
        } else {
            (0, false)
        }
    }

    // ---- tests -----------------------------------------------------------

    /// Every variant at 64, 128 and 1518 bytes (and 82, IPv6+TCP+VLAN's
    /// minimum): delivered to QP 1's RQ through its MAC rule, the frame in
    /// its slot byte for byte, and the CQE's fields as etherparse says.
    #[test]
    fn every_variant_lands_with_the_cqe_fields_etherparse_computes() {
        let mut b = Bufs::new(64, 0);
        let mut r = rx_rig(&mut b, 64);
        let mut n = 0u64;
        for size in [64, 82, 128, 1518] {
            // rdmaperf refuses a size the headers and the CRC do not fit.
            for (name, s) in variants(size)
                .into_iter()
                .filter(|v| v.1.header_len() + 4 <= size)
            {
                let f = frame::frame(&s, 1, n, SEED);
                assert_eq!(r.model.deliver(&f), 1, "{name} at {size}");
                let wc = poll_all(&mut r.cq);
                assert_eq!(wc.len(), 1, "{name} at {size}");
                let c = wc[0];
                let slot = c.wr_id as usize;
                assert_eq!((c.status, c.opcode), (WcStatus::SUCCESS, WcOpcode::RECV));
                assert_eq!(c.qp_num, QPN + 1, "the CQE names raw QP 1");
                assert_eq!(c.byte_len as usize, f.len(), "{name} at {size}");
                assert_eq!(
                    &b.rx[slot * STRIDE..slot * STRIDE + f.len()],
                    &f[..],
                    "{name}"
                );
                assert_eq!(c.rx, oracle(&f), "{name} at {size}: {:#06x}", c.rx.0);
                // Put the receive back for the next frame.
                post_one(&mut r, slot as u64);
                n += 1;
            }
        }
        assert_eq!(r.model.raw_rx_stats().delivered, n);
    }

    fn post_one(r: &mut Rig, slot: u64) {
        use rdmaperf::post::RecvQueue;
        let addr = r.rx_base + slot * STRIDE as u64;
        r.rqs[0]
            .post_recv(slot, addr, r.rx_lkey, r.cfg.room())
            .unwrap();
    }

    /// What perftest's own frames are to a NIC that checks: IPv4/UDP good
    /// (checksum 0: none sent), IPv4/TCP bad (its checksum 0 is wrong),
    /// IPv6/UDP bad (0 is not allowed), as etherparse computes too.
    #[test]
    fn perftest_frames_as_a_checking_nic_sees_them() {
        let f = |ip, l4| {
            frame::frame(
                &FrameSpec {
                    ip,
                    l4,
                    ..FrameSpec::l2(128, SRC_MAC, DST_MAC)
                },
                0,
                0,
                SEED,
            )
        };
        assert!(oracle(&f(v4(), l4(false))).ip_csum_ok());
        assert!(!oracle(&f(v4(), l4(true))).l4_ok());
        assert!(oracle(&f(v4(), l4(true))).l3_ok());
        let mut b = Bufs::new(8, 0);
        let mut r = rx_rig(&mut b, 8);
        for ip_l4 in [(v4(), l4(false)), (v4(), l4(true)), (v6(), l4(false))] {
            r.model.deliver(&f(ip_l4.0, ip_l4.1));
        }
        let mut c = RawRecvCounts::default();
        count::<DirectRx>(&mut r, &mut c, 3);
        assert_eq!(
            (c.csum_ok, c.csum_bad, c.csum_unchecked),
            (1, 1, 1),
            "{c:?}"
        );
    }

    /// One IPv4 header bit flipped in one of ten frames: that frame's L3
    /// bit is clear (etherparse agrees the header checksum is wrong), the
    /// loop counts it bad, and the report names the count.
    #[test]
    fn a_corrupted_ipv4_checksum_is_counted_bad_and_named() {
        let mut b = Bufs::new(16, 0);
        let mut r = rx_rig(&mut b, 16);
        for i in 0..10u64 {
            let mut f = frame::frame(&udp4(64), 0, i, SEED);
            if i == 6 {
                f[14 + 8] ^= 0x01; // the TTL
                assert!(
                    !oracle(&f).l3_ok(),
                    "etherparse sees the bad header checksum"
                );
            }
            r.model.deliver(&f);
        }
        let mut c = RawRecvCounts::default();
        count::<DirectRx>(&mut r, &mut c, 10);
        assert_one_bad_checksum(&c, 10);
    }

    /// Rules match their specs: another MAC, another destination IP, another
    /// port: dropped and counted, nothing completed.
    #[test]
    fn frames_no_rule_takes_are_dropped_and_counted() {
        let mut b = Bufs::new(8, 0);
        let mut r = rig(&mut b, 8, STRIDE as u32, &[1], sq_cfg());
        post_all(&mut r.rqs[0], &r.cfg).unwrap();
        let rule = FlowRule::mac(1, DST_MAC)
            .with_ip(IpMatch::V4 {
                src: None,
                dst: Some([10, 0, 0, 2]),
            })
            .with_l4(L4Match {
                tcp: false,
                src_port: None,
                dst_port: Some(6000),
            });
        r.model.add_flow(rule).unwrap();
        let good = udp4(128);
        let others = [
            FrameSpec {
                dst_mac: OTHER_MAC,
                ..good
            },
            FrameSpec {
                ip: Some(Ip::V4 {
                    src: [10, 0, 0, 1],
                    dst: [10, 0, 0, 3],
                }),
                ..good
            },
            FrameSpec {
                l4: Some(L4 {
                    tcp: false,
                    src_port: 5000,
                    dst_port: 6001,
                }),
                ..good
            },
            FrameSpec {
                l4: l4(true),
                ..good
            },
            FrameSpec { ip: v6(), ..good },
        ];
        for s in &others {
            assert_eq!(r.model.deliver(&frame::frame(s, 0, 0, SEED)), 0, "{s:?}");
        }
        assert!(poll_all(&mut r.cq).is_empty());
        assert_eq!(r.model.deliver(&frame::frame(&good, 0, 0, SEED)), 1);
        // `--flows`: flow 1 adds 1 to both ports, so the rule no longer matches.
        assert_eq!(r.model.deliver(&frame::frame(&good, 1, 0, SEED)), 0);
        let st = r.model.raw_rx_stats();
        assert_eq!((st.frames, st.no_match, st.delivered), (7, 6, 1));
        assert_eq!(poll_all(&mut r.cq).len(), 1);
        assert!(
            r.model.add_flow(FlowRule::mac(2, DST_MAC)).is_err(),
            "no QP 2"
        );
    }

    /// `--promiscuous` (ALL_DEFAULT) takes what no normal rule took;
    /// `--sniffer` gets a copy of every frame, the normal rule's QP too.
    #[test]
    fn promiscuous_takes_the_rest_and_a_sniffer_sees_everything() {
        let mut b = Bufs::new(8, 0);
        let mut r = rig(&mut b, 8, STRIDE as u32, &[0, 1], sq_cfg());
        // Slots 0..3 for QP 0's RQ, 4..7 for QP 1's.
        for (k, rq) in r.rqs.iter_mut().enumerate() {
            use rdmaperf::post::RecvQueue;
            for s in 0..4 {
                let slot = (k * 4 + s) as u64;
                rq.post_recv(
                    slot,
                    r.rx_base + slot * STRIDE as u64,
                    r.rx_lkey,
                    STRIDE as u32,
                )
                .unwrap();
            }
        }
        let to = |mac| {
            frame::frame(
                &FrameSpec {
                    dst_mac: mac,
                    ..udp4(64)
                },
                0,
                0,
                SEED,
            )
        };
        r.model.add_flow(FlowRule::mac(1, DST_MAC)).unwrap();
        r.model.add_flow(FlowRule::promiscuous(0)).unwrap();
        assert_eq!(r.model.deliver(&to(DST_MAC)), 1);
        assert_eq!(r.model.deliver(&to(OTHER_MAC)), 1);
        let qps: Vec<u32> = poll_all(&mut r.cq).iter().map(|c| c.qp_num - QPN).collect();
        assert_eq!(qps, [1, 0]);
        r.model.clear_flows();
        r.model.add_flow(FlowRule::mac(1, DST_MAC)).unwrap();
        r.model.add_flow(FlowRule::sniffer(0)).unwrap();
        assert_eq!(
            r.model.deliver(&to(DST_MAC)),
            2,
            "the sniffer's copy and QP 1's"
        );
        assert_eq!(r.model.deliver(&to(OTHER_MAC)), 1, "the sniffer's only");
        let qps: Vec<u32> = poll_all(&mut r.cq).iter().map(|c| c.qp_num - QPN).collect();
        assert_eq!(qps, [0, 1, 0]);
        assert_eq!(r.model.raw_rx_stats().no_match, 0);
    }

    /// Four receives posted, ten frames: six dropped for want of a receive,
    /// counted by the port for QP 1 and reported as the RQ not keeping up.
    #[test]
    fn an_rq_that_ran_dry_is_counted_and_reported() {
        let mut b = Bufs::new(4, 0);
        let mut r = rx_rig(&mut b, 4);
        let delivered: usize = (0..10)
            .map(|i| r.model.deliver(&frame::frame(&udp4(64), 0, i, SEED)))
            .sum();
        assert_eq!(delivered, 4);
        let mut c = RawRecvCounts::default();
        count::<DirectRx>(&mut r, &mut c, 10);
        assert_eq!(c.packets, 4);
        c.rq_dry = r.model.raw_rx_stats().out_of_buffer.get(1).copied();
        assert_eq!(c.rq_dry, Some(6));
        let f = c.findings(64);
        assert_eq!(
            f,
            [
                "one RQ did not keep up at this frame size (64 B): 6 frames were dropped \
                        because no receive was posted; post more receives (a deeper RQ) or \
                        spread the flows over more QPs"
            ]
        );
        // The loop posted the four receives again: four more land.
        let again: usize = (0..4)
            .map(|i| r.model.deliver(&frame::frame(&udp4(64), 0, i, SEED)))
            .sum();
        assert_eq!(again, 4);
    }

    /// A 1518-byte frame into 256-byte receives: a local length error,
    /// counted by the port and the loop, and named.
    #[test]
    fn a_frame_longer_than_the_buffer_is_a_length_error() {
        let mut b = Bufs::new(4, 0);
        let mut r = rig(&mut b, 4, 256, &[1], sq_cfg());
        post_all(&mut r.rqs[0], &r.cfg).unwrap();
        r.model.add_flow(FlowRule::mac(1, DST_MAC)).unwrap();
        assert_eq!(r.model.deliver(&frame::frame(&udp4(1518), 0, 0, SEED)), 0);
        assert_eq!(r.model.deliver(&frame::frame(&udp4(256), 0, 0, SEED)), 1);
        let mut c = RawRecvCounts::default();
        count::<DirectRx>(&mut r, &mut c, 1);
        assert_eq!((c.packets, c.too_long), (1, 1));
        assert_eq!(r.model.raw_rx_stats().too_long, 1);
        assert!(c.findings(1518)[0].starts_with("1 frames were longer than the receive buffers"));
    }

    #[derive(Clone, Copy, Debug)]
    enum Post {
        Send,
        MpwPtr,
        MpwInline,
    }

    /// libmlx5's view of a raw receive, for the verbs classifier: the CQE's
    /// bytes folded into `IBV_WC_IP_CSUM_OK` (cq.c handle_responder), the
    /// rest dropped as `ibv_wc` has no room for it.
    struct LibMlx5View<'a>(&'a mut DirectCq);

    impl CompletionQueue for LibMlx5View<'_> {
        fn poll(&mut self, out: &mut [Completion]) -> Result<usize, PostError> {
            let n = self.0.poll(out)?;
            for c in &mut out[..n] {
                c.wc_flags |= if c.rx.ip_csum_ok() { WC_IP_CSUM_OK } else { 0 };
                c.rx = RxOffload::NONE;
            }
            Ok(n)
        }
    }

    /// The client's raw SQ on QP 0 sends `n` frames of `spec` (four flows)
    /// in lists of 16; the wire loops back into QP 1's RQ (64 receives)
    /// through its MAC rule; the receive loop counts them as they arrive.
    fn loop_back<K: RxClassify>(
        spec: FrameSpec,
        n: usize,
        how: Post,
        verbs: bool,
    ) -> RawRecvCounts {
        loop_back_cs::<K>(spec, n, (how, 0), verbs)
    }

    /// As `loop_back`, the SQ asking for checksum offload `cs`.
    fn loop_back_cs<K: RxClassify>(
        spec: FrameSpec,
        n: usize,
        (how, cs): (Post, u8),
        verbs: bool,
    ) -> RawRecvCounts {
        let stride = spec.frame_len().next_multiple_of(64);
        let mut b = Bufs::new(64, stride * n);
        for i in 0..n {
            let f = frame::frame(&spec, (i % 4) as u16, i as u64, SEED + i as u32);
            b.tx[i * stride..i * stride + f.len()].copy_from_slice(&f);
        }
        let mut r = rx_rig_cs(&mut b, 64, cs);
        let pkts: Vec<RawPkt> = (0..n)
            .map(|i| RawPkt {
                addr: b.tx.as_ptr() as u64 + (i * stride) as u64,
                len: spec.frame_len() as u32,
            })
            .collect();
        let mut c = RawRecvCounts::default();
        let mut sent = 0u64;
        for list in pkts.chunks(16) {
            match how {
                Post::Send => r.sq.post_send(list),
                Post::MpwPtr => r.sq.post_mpw(list, false),
                Post::MpwInline => r.sq.post_mpw(list, true),
            }
            .unwrap();
            r.model.step();
            assert_eq!(r.model.loop_back(), list.len());
            sent += list.len() as u64;
            if verbs {
                let mut view = LibMlx5View(&mut r.cq);
                run_raw_recv::<_, _, K>(&mut r.rqs[0], &mut view, &r.cfg, &mut c, sent, &mut || {
                    true
                })
            } else {
                run_raw_recv::<_, _, K>(&mut r.rqs[0], &mut r.cq, &r.cfg, &mut c, sent, &mut || {
                    true
                })
            }
            .unwrap();
        }
        poll_all(&mut r.cq);
        assert!(
            r.model.violations().is_empty(),
            "{:?}",
            r.model.violations()
        );
        c.rq_dry = r.model.raw_rx_stats().out_of_buffer.get(1).copied();
        c
    }

    #[test]
    fn client_to_server_over_the_wire_counts_what_was_sent() {
        for how in [Post::Send, Post::MpwPtr, Post::MpwInline] {
            for size in [64, 1518] {
                let n = 200;
                let s = udp4(size);
                let bytes = (n * s.frame_len()) as u64;
                for (c, who) in [
                    (loop_back::<DirectRx>(s, n, how, false), "direct"),
                    (loop_back::<VerbsRx>(s, n, how, true), "verbs"),
                ] {
                    let at = format!("{how:?} {size} {who}");
                    assert_eq!((c.packets, c.bytes), (n as u64, bytes), "{at}");
                    assert_eq!(
                        (c.ipv4, c.udp, c.csum_ok),
                        (n as u64, n as u64, n as u64),
                        "{at}"
                    );
                    assert_eq!((c.csum_bad, c.too_long, c.errors), (0, 0, 0), "{at}");
                    assert_eq!(c.rq_dry, Some(0), "{at}");
                    assert!(
                        c.other_cqes > 0,
                        "{at}: send CQEs on the shared CQ told apart"
                    );
                    assert!(
                        c.findings(size as u32).is_empty(),
                        "{at}: {:?}",
                        c.findings(size as u32)
                    );
                }
            }
        }
    }

    /// IPv6/UDP with a VLAN tag: typed by both classifiers, not judged.
    #[test]
    fn ipv6_frames_loop_back_typed_and_unchecked() {
        let mut s = FrameSpec {
            ip: v6(),
            ..udp4(128)
        };
        s.header.vlan_pcp = Some(1);
        for c in [
            loop_back::<DirectRx>(s, 40, Post::MpwPtr, false),
            loop_back::<VerbsRx>(s, 40, Post::Send, true),
        ] {
            assert_eq!(
                (c.packets, c.ipv6, c.udp, c.csum_unchecked),
                (40, 40, 40, 40),
                "{c:?}"
            );
        }
    }

    /// `cs_flags` L3|L4 on the raw SQ: the model's port fills the IPv4
    /// header and TCP checksums as a NIC does (etherparse verifies them on
    /// the wire), and the receive side reads them good; perftest's TCP
    /// frames without it arrive bad and are named.
    #[test]
    fn checksum_offload_on_the_send_side_makes_tcp_frames_good() {
        use rdmaperf::mlx5::eth_seg::{CS_L3, CS_L4};
        let tcp = FrameSpec {
            l4: l4(true),
            ..udp4(128)
        };
        // One frame, its checksums broken first, sent with offload.
        let mut f = frame::frame(&tcp, 0, 0, SEED);
        f[24] ^= 0xff;
        let mut b = Bufs::new(4, f.len());
        b.tx.copy_from_slice(&f);
        let mut r = rx_rig_cs(&mut b, 4, CS_L3 | CS_L4);
        let pkt = RawPkt {
            addr: b.tx.as_ptr() as u64,
            len: f.len() as u32,
        };
        r.sq.post_send(&[pkt]).unwrap();
        r.model.step();
        let wire = r.model.take_wire();
        let (_, rest) = Ethernet2Header::from_slice(&wire[0]).unwrap();
        let (ip, seg) = Ipv4Header::from_slice(rest).unwrap();
        assert_eq!(ip.calc_header_checksum(), ip.header_checksum);
        let (t, p) = TcpHeader::from_slice(seg).unwrap();
        assert_eq!(t.calc_checksum_ipv4(&ip, p).unwrap(), t.checksum);
        assert_ne!(t.checksum, 0);
        assert!(oracle(&wire[0]).ip_csum_ok());
        // Looped back: good with offload, bad (and named) without.
        let with = loop_back_cs::<DirectRx>(tcp, 64, (Post::MpwPtr, CS_L3 | CS_L4), false);
        assert_eq!(
            (with.tcp, with.csum_ok, with.csum_bad),
            (64, 64, 0),
            "{with:?}"
        );
        let without = loop_back::<VerbsRx>(tcp, 64, Post::Send, true);
        assert_eq!(
            (without.tcp, without.csum_ok, without.csum_bad),
            (64, 0, 64)
        );
        assert!(without.findings(128)[0]
            .starts_with("64 of 64 IPv4 TCP/UDP frames arrived with a bad checksum"));
    }
}
