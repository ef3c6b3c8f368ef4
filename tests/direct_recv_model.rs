//! The direct receive side on the queue model: RQs and an SRQ posted by
//! `mlx5::rq` / `mlx5::srq` into real-layout rings, SENDs consuming them at
//! the model's NIC, responder CQEs in real format on the CQ the senders
//! complete on, polled by `DirectCq` — data landing byte for byte (through
//! the buffer, or copied out of the CQE for scatter-to-CQE sizes on both
//! sides of the 32/64-byte limits), completions counted per QP and
//! direction, an out-of-order RQ, SRQ wrap, RNR, a bad lkey's error CQE,
//! UD with GRH, immediates, post lists, a full ring, and the CQ arm.

#[cfg(not(feature = "model"))]
#[test]
fn direct_recv_needs_the_model_feature() {
    println!("SKIPPED: the direct receive model tests need `--features model`");
}

#[cfg(feature = "model")]
mod common;

#[cfg(feature = "model")]
mod with_model {
    use crate::common::mlx5::NoDmaFence;
    use crate::common::model_env::register_pair;
    use rdmaperf::mlx5::recv::RecvRing;
    use rdmaperf::mlx5::rq::DirectRq;
    use rdmaperf::mlx5::srq::DirectSrq;
    use rdmaperf::mlx5::{DirectCq, DirectSq, Mmio};
    use rdmaperf::model::recv::GRH_BYTES;
    use rdmaperf::model::{
        MmioEvent, Model, ModelConfig, ModelMmio, ModelRecvMmio, ModelTransport, RecvSpec,
    };
    use rdmaperf::post::wc::{WC_GRH, WC_WITH_IMM};
    use rdmaperf::post::{
        Completion, CompletionQueue, Op, PostError, RecvList, RecvQueue, SendQueue, WcOpcode,
        WcStatus, WrDesc,
    };
    use std::sync::Arc;

    const MSG: usize = 256;

    /// Buffers first (they outlive the model), then the model, then queues.
    struct Bufs {
        tx: Vec<u8>,
        rx: Vec<u8>,
    }

    impl Bufs {
        fn new(n: usize) -> Self {
            let tx = (0..n * MSG).map(|i| (i * 7 + i / MSG) as u8).collect();
            Bufs {
                tx,
                rx: vec![0xee; n * MSG],
            }
        }
    }

    struct Rig {
        sqs: Vec<DirectSq<ModelMmio>>,
        cq: DirectCq,
        lkey: u32,
        rx_lkey: u32,
        model: Model,
    }

    fn rig(b: &mut Bufs, cfg: ModelConfig) -> Rig {
        let model = Model::new(cfg).unwrap();
        let (sqs, cq) = model.queues().unwrap();
        // SAFETY: the buffers outlive the model (declared before it).
        let (l, r) = unsafe { register_pair(&model, &mut b.tx, &mut b.rx) };
        Rig {
            sqs,
            cq,
            lkey: l.lkey,
            rx_lkey: r.lkey,
            model,
        }
    }

    /// A rig of two QPs with `recv`, the NIC retrying RNR forever
    /// (`rnr_retry` 7), completing in `cqe_size`-byte CQEs.
    fn rig2(b: &mut Bufs, recv: RecvSpec, cqe_size: u32) -> Rig {
        rig(
            b,
            ModelConfig {
                qps: 2,
                rnr_retry: 7,
                cqe_size,
                ..cfg(recv)
            },
        )
    }

    /// QP 0's RQ with receive `wr_id` posted into slot 0, then one SEND of
    /// `len` bytes from slot 0 posted and the NIC stepped.
    fn one_send(r: &mut Rig, b: &Bufs, wr_id: u64, len: u32) -> DirectRq<ModelRecvMmio> {
        let mut rq = rq_of(r, 0);
        rq.post_recv(wr_id, rx_at(b, 0), r.rx_lkey, MSG as u32)
            .unwrap();
        r.sqs[0]
            .post(Op::Send, &[send(b, r.lkey, 0, len, 1)])
            .unwrap();
        r.model.step();
        rq
    }

    /// A one-QP rig over `b`, QP 0's RQ holding a receive for each of `b`'s
    /// slots (receive k into slot k).
    fn rq_on_all_slots(b: &mut Bufs) -> (Rig, DirectRq<ModelRecvMmio>) {
        let mut r = rig(b, cfg(RecvSpec::default()));
        let mut rq = rq_of(&mut r, 0);
        for k in 0..b.rx.len() / MSG {
            rq.post_recv(k as u64, rx_at(b, k), r.rx_lkey, MSG as u32)
                .unwrap();
        }
        (r, rq)
    }

    /// Two QPs sharing one SRQ of `slots` WQEs whose WQEs complete out of order.
    fn out_of_order_srq(b: &mut Bufs, slots: u32) -> (Rig, DirectSrq<ModelRecvMmio>) {
        let spec = RecvSpec {
            out_of_order: true,
            ..srq_spec(slots)
        };
        let mut r = rig2(b, spec, 64);
        let srq = srq_for_all(&mut r);
        (r, srq)
    }

    /// The model saw no violation (every receive record stored in order).
    fn assert_no_violations(model: &Model) {
        assert!(model.violations().is_empty(), "{:?}", model.violations());
    }

    /// QP `q`'s peer RQ, its record stored through the model's recorder
    /// (every test's `violations()` then checks the store order).
    fn rq_of(r: &mut Rig, q: usize) -> DirectRq<ModelRecvMmio> {
        let dv = r.model.recv_dv_qp(q).unwrap();
        let qpn = r.model.recv_qpn(q).unwrap();
        let mmio = r.model.recv_mmio(q);
        // SAFETY: the model owns the ring and outlives the RQ (test order).
        let rq = unsafe { DirectRq::from_dv(&dv, qpn, None, mmio) }.unwrap();
        r.cq.attach_recv(qpn, rq.ring());
        rq
    }

    fn srq_for_all(r: &mut Rig) -> DirectSrq<ModelRecvMmio> {
        let dv = r.model.recv_dv_srq().unwrap();
        // SAFETY: as rq_of.
        let srq = unsafe { DirectSrq::from_dv(&dv, 7, None, r.model.recv_mmio(0)) }.unwrap();
        for q in 0..r.model.config().qps as usize {
            r.cq.attach_recv(r.model.recv_qpn(q).unwrap(), srq.ring());
        }
        srq
    }

    fn cfg(recv: RecvSpec) -> ModelConfig {
        ModelConfig {
            wqe_cnt: 64,
            cqe_cnt: 256,
            record_history: false,
            recv: Some(recv),
            ..ModelConfig::default()
        }
    }

    /// An SRQ of `slots` WQEs of 32 bytes (the least SRQ stride).
    fn srq_spec(slots: u32) -> RecvSpec {
        RecvSpec {
            srq: true,
            slots,
            stride: 32,
            ..RecvSpec::default()
        }
    }

    fn send(b: &Bufs, lkey: u32, k: usize, len: u32, wr_id: u64) -> WrDesc {
        WrDesc {
            wr_id,
            laddr: b.tx.as_ptr() as u64 + (k * MSG) as u64,
            lkey,
            len,
            signaled: true,
            ..WrDesc::default()
        }
    }

    /// `n` receives of `MSG` bytes in one post list, the k-th at `addr(k)`.
    fn msgs<A: Fn(usize) -> u64>(n: usize, wr_id: u64, lkey: u32, addr: A) -> RecvList<A> {
        let len = MSG as u32;
        RecvList {
            n,
            wr_id,
            lkey,
            len,
            addr,
        }
    }

    fn rx_at(b: &Bufs, k: usize) -> u64 {
        b.rx.as_ptr() as u64 + (k * MSG) as u64
    }

    fn poll_all(cq: &mut DirectCq, want: usize) -> Vec<Completion> {
        let mut out = Vec::new();
        let mut wc = [Completion::default(); 16];
        for _ in 0..100 {
            let n = cq.poll(&mut wc).unwrap();
            out.extend_from_slice(&wc[..n]);
            if out.len() >= want {
                break;
            }
        }
        out
    }

    fn is_recv(c: &Completion) -> bool {
        matches!(c.opcode, WcOpcode::RECV | WcOpcode::RECV_RDMA_WITH_IMM)
    }

    /// Two senders, two RQs, one CQ: every SEND lands in its peer's buffer
    /// byte for byte; each completion is counted for its own QP and
    /// direction (the sender's SEND, the receiver's RECV with the posted
    /// `wr_id`); the receive doorbell records hold the posted counts.
    #[test]
    fn rq_sends_land_and_completions_count_per_qp_and_direction() {
        let mut b = Bufs::new(16);
        let mut r = rig(
            &mut b,
            ModelConfig {
                qps: 2,
                ..cfg(RecvSpec::default())
            },
        );
        let mut rqs = [rq_of(&mut r, 0), rq_of(&mut r, 1)];
        for k in 0..16 {
            let q = k % 2;
            rqs[q]
                .post_recv(1000 + k as u64, rx_at(&b, k), r.rx_lkey, MSG as u32)
                .unwrap();
        }
        assert_eq!((rqs[0].posted(), rqs[1].posted()), (8, 8));
        for k in 0..16 {
            let wr = send(&b, r.lkey, k, MSG as u32, k as u64);
            r.sqs[k % 2].post(Op::Send, &[wr]).unwrap();
        }
        r.model.step();
        let all = poll_all(&mut r.cq, 32);
        assert_eq!(all.len(), 32, "{all:?}");
        for (q, rq) in rqs.iter().enumerate() {
            let sender = r.model.qpn_of(q);
            let receiver = r.model.recv_qpn(q).unwrap();
            let sends: Vec<_> = all.iter().filter(|c| c.qp_num == sender).collect();
            let recvs: Vec<_> = all.iter().filter(|c| c.qp_num == receiver).collect();
            assert_eq!((sends.len(), recvs.len()), (8, 8), "QP {q}");
            assert!(sends
                .iter()
                .all(|c| c.opcode == WcOpcode::SEND && !is_recv(c)));
            for (i, c) in recvs.iter().enumerate() {
                let k = q + 2 * i;
                assert_eq!(
                    (c.status, c.wr_id, c.byte_len),
                    (WcStatus::SUCCESS, 1000 + k as u64, MSG as u32)
                );
                assert_eq!(c.opcode, WcOpcode::RECV);
            }
            assert_eq!(rq.ring().done(), 8);
        }
        assert_eq!(b.rx, b.tx, "every message in its receive buffer");
        assert_no_violations(&r.model);
    }

    /// Scatter-to-CQE at both CQE sizes, on both sides of each limit: a
    /// payload that fits (32 B in a 64-byte CQE, 64 B in a 128-byte entry)
    /// is not in the buffer after the NIC ran, and is there, whole, after
    /// the poll copied it out of the CQE; a larger one went to the buffer.
    /// With 128-byte CQEs also in format 1 (up to 32 bytes inside the
    /// 64-byte CQE, the entry's second half) as well as format 2.
    #[test]
    fn scatter_to_cqe_sizes_land_after_the_poll() {
        for (cqe_size, format1_in_128) in [(64u32, false), (128, false), (128, true)] {
            let limit = if cqe_size == 128 { 64 } else { 32 };
            let sizes = [0u32, 1, 31, 32, 33, 63, 64, 65];
            let mut b = Bufs::new(sizes.len());
            let mut r = rig(
                &mut b,
                ModelConfig {
                    cqe_size,
                    ..cfg(RecvSpec {
                        scatter_to_cqe: true,
                        format1_in_128,
                        ..RecvSpec::default()
                    })
                },
            );
            let mut rq = rq_of(&mut r, 0);
            for (k, &len) in sizes.iter().enumerate() {
                rq.post_recv(k as u64, rx_at(&b, k), r.rx_lkey, MSG as u32)
                    .unwrap();
                let wr = send(&b, r.lkey, k, len, k as u64);
                r.sqs[0].post(Op::Send, &[wr]).unwrap();
            }
            r.model.step();
            // The format each receive's CQE came in (entry 2k: the receive
            // precedes its SEND's CQE), read before the poll.
            let dv = r.model.dv_cq();
            for (k, &len) in sizes.iter().enumerate() {
                let at = (2 * k + 1) * cqe_size as usize - 1;
                // SAFETY: inside the model's CQ buffer, written by step().
                let own = unsafe { dv.buf.cast::<u8>().add(at).read_volatile() };
                let want = match len {
                    0..=32 if cqe_size == 64 || format1_in_128 => 1,
                    0..=64 if cqe_size == 128 => 2,
                    _ => 0,
                };
                assert_eq!((own >> 2) & 3, want, "{cqe_size} B CQE, {len} B: format");
            }
            for (k, &len) in sizes.iter().enumerate() {
                let landed = &b.rx[k * MSG..k * MSG + len as usize];
                let sent = &b.tx[k * MSG..k * MSG + len as usize];
                if len > 0 && len <= limit {
                    assert!(
                        landed.iter().all(|&x| x == 0xee),
                        "{cqe_size} B CQE, {len} B: NIC wrote the buffer"
                    );
                } else {
                    assert_eq!(landed, sent, "{cqe_size} B CQE, {len} B through the buffer");
                }
            }
            let all = poll_all(&mut r.cq, 2 * sizes.len());
            let recvs: Vec<_> = all.iter().filter(|c| is_recv(c)).collect();
            assert_eq!(recvs.len(), sizes.len());
            for (k, &len) in sizes.iter().enumerate() {
                assert_eq!(
                    (recvs[k].wr_id, recvs[k].byte_len, recvs[k].status),
                    (k as u64, len, WcStatus::SUCCESS)
                );
                let (lo, hi) = (k * MSG, k * MSG + len as usize);
                assert_eq!(
                    b.rx[lo..hi],
                    b.tx[lo..hi],
                    "{cqe_size} B CQE, {len} B after the poll"
                );
                assert!(
                    b.rx[hi..(k + 1) * MSG].iter().all(|&x| x == 0xee),
                    "bytes past {len}"
                );
            }
        }
    }

    /// An inline payload larger than the WR's buffer: LOC_LEN_ERR, as
    /// libmlx5's copy reports it.
    #[test]
    fn scatter_to_cqe_into_a_short_buffer_is_a_length_error() {
        let mut b = Bufs::new(1);
        let mut r = rig(
            &mut b,
            cfg(RecvSpec {
                scatter_to_cqe: true,
                ..RecvSpec::default()
            }),
        );
        let mut rq = rq_of(&mut r, 0);
        rq.post_recv(9, rx_at(&b, 0), r.rx_lkey, 8).unwrap();
        r.sqs[0]
            .post(Op::Send, &[send(&b, r.lkey, 0, 20, 1)])
            .unwrap();
        r.model.step();
        let all = poll_all(&mut r.cq, 2);
        let rc: Vec<_> = all.iter().filter(|c| is_recv(c)).collect();
        assert_eq!((rc[0].wr_id, rc[0].status), (9, WcStatus::LOC_LEN_ERR));
    }

    /// Out-of-order consumption (newer firmware): the NIC takes RQ WQEs
    /// 1, 0, 3, 2, ...; each completion names the WR its `wqe_counter`
    /// points at, and that WR's buffer holds the message the completion
    /// reports.
    #[test]
    fn out_of_order_rq_completions_name_the_right_wr() {
        let n = 8;
        let mut b2 = Bufs::new(n);
        let mut r = rig(
            &mut b2,
            cfg(RecvSpec {
                out_of_order: true,
                ..RecvSpec::default()
            }),
        );
        let mut rq = rq_of(&mut r, 0);
        for k in 0..n {
            rq.post_recv(100 + k as u64, rx_at(&b2, k), r.rx_lkey, MSG as u32)
                .unwrap();
        }
        for k in 0..n {
            r.sqs[0]
                .post(
                    Op::Send,
                    &[send(&b2, r.lkey, k, MSG as u32 - k as u32, k as u64)],
                )
                .unwrap();
        }
        r.model.step();
        let recvs: Vec<_> = poll_all(&mut r.cq, 2 * n)
            .into_iter()
            .filter(is_recv)
            .collect();
        let order: Vec<u64> = recvs.iter().map(|c| c.wr_id - 100).collect();
        assert_eq!(order, [1, 0, 3, 2, 5, 4, 7, 6]);
        for (msg, c) in recvs.iter().enumerate() {
            let slot = (c.wr_id - 100) as usize;
            let len = MSG - msg;
            assert_eq!(c.byte_len as usize, len);
            assert_eq!(
                b2.rx[slot * MSG..slot * MSG + len],
                b2.tx[msg * MSG..msg * MSG + len]
            );
        }
    }

    /// An SRQ of 4 slots (3 usable: the tail is a sentinel) shared by two
    /// QPs, refilled 12 times: it wraps through its free list, every message
    /// lands in the WR the completion names, a fourth post is refused.
    #[test]
    fn srq_shared_by_two_qps_wraps_through_its_free_list() {
        let mut b = Bufs::new(3);
        let mut r = rig(
            &mut b,
            ModelConfig {
                qps: 2,
                ..cfg(srq_spec(4))
            },
        );
        let mut srq = srq_for_all(&mut r);
        let mut seq = 0u64;
        for round in 0..12 {
            for k in 0..3 {
                srq.post_recv(seq + k as u64, rx_at(&b, k), r.rx_lkey, MSG as u32)
                    .unwrap();
            }
            assert_eq!(
                srq.post_recv(99, rx_at(&b, 0), r.rx_lkey, 8),
                Err(PostError::QueueFull),
                "round {round}"
            );
            b.rx.fill(0);
            for k in 0..3 {
                let len = 16 + 8 * ((round + k) % 5) as u32;
                r.sqs[k % 2]
                    .post(
                        Op::Send,
                        &[send(&b, r.lkey, (round + k) % 3, len, k as u64)],
                    )
                    .unwrap();
            }
            r.model.step();
            let recvs: Vec<_> = poll_all(&mut r.cq, 6).into_iter().filter(is_recv).collect();
            assert_eq!(recvs.len(), 3, "round {round}");
            for (k, c) in recvs.iter().enumerate() {
                assert_eq!(c.status, WcStatus::SUCCESS);
                assert_eq!(c.wr_id, seq + k as u64, "round {round}");
                assert_eq!(c.qp_num, r.model.recv_qpn(k % 2).unwrap());
                let src = ((round + k) % 3) * MSG;
                let len = c.byte_len as usize;
                assert_eq!(
                    b.rx[k * MSG..k * MSG + len],
                    b.tx[src..src + len],
                    "round {round}"
                );
            }
            seq += 3;
        }
        assert_eq!(srq.posted(), 36);
        assert_no_violations(&r.model);
    }

    /// Ports of one SRQ post through shared references: a post list on
    /// port 0 whose address closure posts through port 1 (safe code, which
    /// used to alias the `&mut DirectSrq` port 0 held) leaves every WQE
    /// posted once, in the order taken, and the record counting all of them.
    #[test]
    fn a_post_list_may_post_through_another_port_of_its_srq() {
        use rdmaperf::mlx5::srq::SrqPort;
        use std::cell::RefCell;
        let mut b = Bufs::new(8);
        let mut r = rig(&mut b, cfg(srq_spec(16)));
        let srq = srq_for_all(&mut r);
        let mut ports: Vec<SrqPort<ModelRecvMmio>> = srq.share(2);
        let other = RefCell::new(ports.pop().unwrap());
        let (lkey, rx0) = (r.rx_lkey, rx_at(&b, 0));
        ports[0]
            .post_recv_list(&msgs(4, 100, lkey, |k| {
                let at = rx0 + ((4 + k) * MSG) as u64;
                other
                    .borrow_mut()
                    .post_recv(200 + k as u64, at, lkey, MSG as u32)
                    .unwrap();
                rx0 + (k * MSG) as u64
            }))
            .unwrap();
        assert_eq!(ports[0].posted(), 8);
        let dv = r.model.recv_dv_srq().unwrap();
        // SAFETY: the SRQ's record in model memory, alive with the model.
        let rec = u32::from_be(unsafe { dv.dbrec.read_volatile() });
        assert_eq!(rec, 8, "the record counts the inner posts too");
        for k in 0..8 {
            r.sqs[0]
                .post(Op::Send, &[send(&b, r.lkey, k, MSG as u32, k as u64)])
                .unwrap();
        }
        r.model.step();
        let recvs: Vec<_> = poll_all(&mut r.cq, 16)
            .into_iter()
            .filter(is_recv)
            .collect();
        let ids: Vec<u64> = recvs.iter().map(|c| c.wr_id).collect();
        assert_eq!(ids, [200, 100, 201, 100, 202, 100, 203, 100]);
        assert!(recvs.iter().all(|c| c.status == WcStatus::SUCCESS));
        assert_no_violations(&r.model);
    }

    /// No receive posted: RC answers RNR; with rnr_retry 0 the sender's
    /// WQE completes with RNR_RETRY_EXC_ERR and nothing is consumed.
    #[test]
    fn a_send_without_a_receive_is_rnr() {
        let mut b = Bufs::new(1);
        let mut r = rig(&mut b, cfg(RecvSpec::default()));
        let rq = rq_of(&mut r, 0);
        r.sqs[0]
            .post(Op::Send, &[send(&b, r.lkey, 0, 64, 5)])
            .unwrap();
        r.model.step();
        r.model.step();
        let all = poll_all(&mut r.cq, 1);
        assert_eq!(all.len(), 1, "{all:?}");
        assert_eq!(
            (all[0].wr_id, all[0].status),
            (5, WcStatus::RNR_RETRY_EXC_ERR)
        );
        assert_eq!(rq.ring().done(), 0);
        assert!(r.model.stats().rnr_naks >= 1);
    }

    /// A receive whose lkey the NIC does not know: the responder's CQE is
    /// RESP_ERR with LOC_PROT_ERR, the mlx5 syndrome and vendor syndrome,
    /// naming the posted WR; the sender sees REM_OP_ERR.
    #[test]
    fn a_bad_lkey_gives_an_error_cqe_with_its_syndrome() {
        let mut b = Bufs::new(1);
        let mut r = rig(&mut b, cfg(RecvSpec::default()));
        let mut rq = rq_of(&mut r, 0);
        rq.post_recv(77, rx_at(&b, 0), r.rx_lkey ^ 0xdead, MSG as u32)
            .unwrap();
        r.sqs[0]
            .post(Op::Send, &[send(&b, r.lkey, 0, 100, 3)])
            .unwrap();
        r.model.step();
        let all = poll_all(&mut r.cq, 2);
        let rc = all
            .iter()
            .find(|c| is_recv(c))
            .expect("a receive completion");
        assert_eq!(
            (rc.wr_id, rc.status, rc.syndrome, rc.vendor_err),
            (77, WcStatus::LOC_PROT_ERR, 0x04, 0x51)
        );
        let sc = all
            .iter()
            .find(|c| !is_recv(c))
            .expect("the sender's completion");
        assert_eq!((sc.wr_id, sc.status), (3, WcStatus::REM_OP_ERR));
        let text = rdmaperf::mlx5::CompletionError(rc).to_string();
        assert!(
            text.contains("LOC_PROT_ERR") && text.contains("wr_id 77"),
            "{text}"
        );
    }

    /// UD with a GRH: the buffer starts with the 40-byte GRH, the payload
    /// after it; the completion has the GRH flag, the sender's QPN and the
    /// byte count including the GRH. UD never scatters into the CQE.
    #[test]
    fn ud_receive_reports_grh_and_source_qp() {
        let mut b = Bufs::new(1);
        let mut r = rig(
            &mut b,
            ModelConfig {
                transport: ModelTransport::Ud {
                    peer_qpn: 0x000456,
                    qkey: 0x1111_1111,
                },
                ..cfg(RecvSpec {
                    grh: true,
                    ..RecvSpec::default()
                })
            },
        );
        let _rq = one_send(&mut r, &b, 4, 16);
        let rc = poll_all(&mut r.cq, 2)
            .into_iter()
            .find(is_recv)
            .expect("receive");
        assert_eq!((rc.wr_id, rc.byte_len), (4, 16 + GRH_BYTES as u32));
        assert_eq!(rc.src_qp, r.model.qpn_of(0));
        assert_ne!(rc.wc_flags & WC_GRH, 0);
        assert_eq!(b.rx[GRH_BYTES..GRH_BYTES + 16], b.tx[..16]);
    }

    /// SEND with immediate and WRITE with immediate: the immediate as sent
    /// (network order), the flag, and WRITE_IMM consuming a receive while
    /// its data goes to the remote address.
    #[test]
    fn immediates_arrive_and_write_imm_consumes_a_receive() {
        let mut b = Bufs::new(2);
        let mut r = rig(&mut b, cfg(RecvSpec::default()));
        let mut rq = rq_of(&mut r, 0);
        rq.post_recv(10, rx_at(&b, 0), r.rx_lkey, MSG as u32)
            .unwrap();
        rq.post_recv(11, rx_at(&b, 1), r.rx_lkey, MSG as u32)
            .unwrap();
        let mut s = send(&b, r.lkey, 0, 48, 1);
        s.imm = 0x1234_5678;
        r.sqs[0].post(Op::SendImm, &[s]).unwrap();
        let mut w = send(&b, r.lkey, 1, 40, 2);
        w.imm = 0xcafe_f00d;
        w.raddr = rx_at(&b, 1) + 100;
        w.rkey = r.rx_lkey;
        r.sqs[0].post(Op::WriteImm, &[w]).unwrap();
        r.model.step();
        let rc: Vec<_> = poll_all(&mut r.cq, 4).into_iter().filter(is_recv).collect();
        assert_eq!(rc.len(), 2);
        assert_eq!(
            (rc[0].wr_id, rc[0].opcode, rc[0].byte_len),
            (10, WcOpcode::RECV, 48)
        );
        assert_eq!(u32::from_be(rc[0].imm), 0x1234_5678);
        assert_ne!(rc[0].wc_flags & WC_WITH_IMM, 0);
        assert_eq!(
            (rc[1].wr_id, rc[1].opcode),
            (11, WcOpcode::RECV_RDMA_WITH_IMM)
        );
        assert_eq!(u32::from_be(rc[1].imm), 0xcafe_f00d);
        assert_eq!(b.rx[..48], b.tx[..48]);
        assert_eq!(b.rx[MSG + 100..MSG + 140], b.tx[MSG..MSG + 40]);
    }

    /// A post list rings the receive record once with the new count; a
    /// list larger than the free slots is refused whole; a zero-length
    /// receive still takes a slot (its WQE is the terminator alone).
    #[test]
    fn post_lists_ring_once_and_a_full_rq_refuses() {
        let mut b = Bufs::new(8);
        let mut r = rig(
            &mut b,
            cfg(RecvSpec {
                slots: 8,
                stride: 32,
                ..RecvSpec::default()
            }),
        );
        let mut rq = rq_of(&mut r, 0);
        rq.post_recv_list(&msgs(6, 1, r.rx_lkey, |k| rx_at(&b, k)))
            .unwrap();
        let rec = r.model.recv_dv_qp(0).unwrap().dbrec;
        // SAFETY: the model's receive record, 4-aligned and alive.
        let posted = u32::from_be(unsafe { rec.read_volatile() });
        assert_eq!(posted, 6);
        assert_eq!(
            rq.post_recv_list(&msgs(3, 2, r.rx_lkey, |k| rx_at(&b, k))),
            Err(PostError::QueueFull)
        );
        rq.post_recv(3, rx_at(&b, 6), r.rx_lkey, 0).unwrap();
        rq.post_recv(4, rx_at(&b, 7), r.rx_lkey, MSG as u32)
            .unwrap();
        assert_eq!(
            rq.post_recv(5, rx_at(&b, 7), r.rx_lkey, 8),
            Err(PostError::QueueFull)
        );
        assert_eq!(rq.room(), 0);
    }

    /// What one receive run on the model gave.
    struct RecvRun {
        o: rdmaperf::run::recv::RecvOutcome,
        counts: [rdmaperf::run::recv::RxCount; 2],
        done: u32,
        landed: bool,
        violations: usize,
    }

    const PER_QP: u64 = 40;

    /// send-bw's receiver loop over direct RQs and the direct CQ, the
    /// model's NIC on its own thread: two QPs, 8 receives kept posted each,
    /// `PER_QP` SENDs each posted up front (unsignalled: only the receives
    /// complete on the CQ); `cost` as the tool's --no-cost leaves it.
    fn receive_run(cost: bool) -> RecvRun {
        let mut b = Bufs::new(2);
        for (k, x) in b.tx.iter_mut().enumerate() {
            *x = (k / MSG) as u8 * 0x40 + (k % 61) as u8;
        }
        let mut r = rig2(&mut b, RecvSpec::default(), 64);
        let mut rqs = vec![rq_of(&mut r, 0), rq_of(&mut r, 1)];
        let (o, counts) = loop_over(&mut r, &b, &mut rqs, cost);
        RecvRun {
            o,
            counts,
            done: rqs[0].ring().done() + rqs[1].ring().done(),
            landed: b.rx == b.tx,
            violations: r.model.violations().len(),
        }
    }

    /// The receive loop over `rqs` (one per QP): receives preposted, every
    /// SEND posted up front, the NIC started, the loop run, the NIC stopped.
    fn loop_over<R: RecvQueue>(r: &mut Rig, b: &Bufs, rqs: &mut [R], cost: bool) -> Looped {
        loop_with(r, b, rqs, (cost, MSG as u32, &|_| {}))
    }

    /// [`loop_over`] as `run` says (see [`loop_on`]).
    fn loop_with<R: RecvQueue>(r: &mut Rig, b: &Bufs, rqs: &mut [R], run: Run<'_>) -> Looped {
        let Rig {
            sqs,
            cq,
            lkey,
            rx_lkey,
            model,
        } = r;
        let keys = (*lkey, *rx_lkey);
        loop_on(sqs, model, keys, cq, b, rqs, run)
    }

    /// What the receive loop returned, and its per-QP counts.
    type Looped = (
        rdmaperf::run::recv::RecvOutcome,
        [rdmaperf::run::recv::RxCount; 2],
    );

    /// How [`loop_on`] runs: `cost`, the SENDs' length, the hook.
    type Run<'h> = (bool, u32, &'h dyn Fn(&Model));

    /// [`loop_over`] with any receive CQ poller, messages of `len` bytes,
    /// and `hook` run on the model after the receives are preposted and
    /// the SENDs posted, before the NIC starts.
    fn loop_on<R: RecvQueue, C: CompletionQueue>(
        sqs: &mut [DirectSq<ModelMmio>],
        model: &mut Model,
        (lkey, rx_lkey): (u32, u32),
        cq: &mut C,
        b: &Bufs,
        rqs: &mut [R],
        (cost, len, hook): Run<'_>,
    ) -> Looped {
        use rdmaperf::clock;
        use rdmaperf::run::recv::{self, RecvBuf, RecvConfig, RecvLoop, RxCount};
        let bufs = [0, 1].map(|k| RecvBuf {
            addr: rx_at(b, k),
            lkey: rx_lkey,
        });
        let cfg = RecvConfig {
            iters: PER_QP,
            rx_depth: 8,
            len: MSG as u32,
            // (`len` is the receive length; the SENDs carry `len` bytes.)
            positions: 1,
            step: 0,
            stall_ticks: clock::Clock::calibrate().cycles_for(std::time::Duration::from_secs(20)),
            window: None,
            list: 1,
            cost,
        };
        let mut counts = [RxCount::default(); 2];
        recv::prepost(rqs, &bufs, &mut counts, &cfg).unwrap();
        for k in 0..PER_QP as usize {
            for (q, sq) in sqs.iter_mut().enumerate().take(2) {
                let mut wr = send(b, lkey, q, len, k as u64);
                wr.signaled = false;
                sq.post(Op::Send, &[wr]).unwrap();
            }
        }
        hook(model);
        model.start();
        let mut wcs = [Completion::default(); 16];
        let o = RecvLoop {
            cfg,
            rqs,
            cq,
            bufs: &bufs,
            counts: &mut counts,
            wcs: &mut wcs,
            now: clock::now,
        }
        .run();
        model.stop();
        (o, counts)
    }

    /// Every message is received and counted for its QP, the bytes landed,
    /// nothing stalls (the senders wait out RNR until receives come back).
    #[test]
    fn the_send_bw_receive_loop_runs_on_direct_queues() {
        let r = receive_run(false);
        assert_eq!(r.o.error, None, "{:?}", r.o);
        assert_eq!(r.o.received, 80);
        assert_eq!([r.counts[0].received, r.counts[1].received], [40, 40]);
        assert!(r.landed, "each QP's buffer holds its sender's bytes");
        assert_eq!(r.done, 80);
        assert_eq!(r.violations, 0);
        assert_eq!((r.o.busy_ticks, r.o.busy_msgs), (0, 0), "no cost asked");
    }

    /// `compare send-bw` on the model: the receive cost of the direct path
    /// (its polls that found completions plus the reposts) reaches the
    /// table and the JSON through `compare_with`, per repetition.
    #[test]
    fn compare_reports_the_direct_receive_cost() {
        use rdmaperf::cli::params::PostChoice;
        use rdmaperf::report::stats::BwResult;
        use rdmaperf::tool::compare::compare_with;
        use rdmaperf::tool::session::bw_result::SizeSummary;
        let mut p = {
            let argv = ["rdmaperf", "send-bw", "--post", "direct", "-s", "256"];
            match rdmaperf::cli::parse(argv.iter().map(|s| s.to_string()).collect()) {
                rdmaperf::cli::Parsed::Tool(t, a) => rdmaperf::cli::params::resolve(t, &a).unwrap(),
                other => panic!("{other:?}"),
            }
        };
        let json = std::env::temp_dir().join(format!("rdmaperf-rcost-{}.json", std::process::id()));
        p.json_file = Some(json.clone());
        let hz = rdmaperf::clock::Clock::calibrate();
        compare_with(
            &p,
            2,
            "queue-model",
            &[(PostChoice::Direct, "direct")],
            &[],
            |_| {
                let r = receive_run(true);
                assert_eq!(r.o.error, None);
                assert_eq!(r.o.busy_msgs, 80, "every message timed once");
                Ok(SizeSummary {
                    size: 256,
                    result: BwResult {
                        msg_rate: 1.0,
                        ..BwResult::default()
                    },
                    method: "direct",
                    ns_per_call: 1.0,
                    ns_per_wr: 1.0,
                    recv_ns_per_msg: hz.nanos(r.o.busy_ticks) / r.o.busy_msgs as f64,
                })
            },
        )
        .unwrap();
        let text = std::fs::read_to_string(&json).unwrap();
        let _ = std::fs::remove_file(&json);
        let j: serde_json::Value = serde_json::from_str(&text).unwrap();
        let row = &j["summary"][0];
        assert_eq!(row["method"], "direct");
        assert!(row["recv_ns_per_msg"].as_f64().unwrap() > 0.0, "{row}");
    }

    /// One direct CQ seen as the two CQs `send-bw -b`'s loop polls (the
    /// tool gives it a send CQ and a receive CQ; the model has one): each
    /// half polls the shared CQ and keeps the other half's completions.
    struct Sorted {
        cq: DirectCq,
        sends: std::collections::VecDeque<Completion>,
        recvs: std::collections::VecDeque<Completion>,
    }
    struct Half(std::rc::Rc<std::cell::RefCell<Sorted>>, bool);

    impl CompletionQueue for Half {
        fn poll(&mut self, out: &mut [Completion]) -> Result<usize, PostError> {
            let mut s = self.0.borrow_mut();
            let mut buf = [Completion::default(); 16];
            let n = s.cq.poll(&mut buf)?;
            for c in &buf[..n] {
                if is_recv(c) {
                    s.recvs.push_back(*c);
                } else {
                    s.sends.push_back(*c);
                }
            }
            let q = if self.1 { &mut s.recvs } else { &mut s.sends };
            let k = out.len().min(q.len());
            for slot in out.iter_mut().take(k) {
                *slot = q.pop_front().unwrap_or_default();
            }
            Ok(k)
        }
    }

    /// `send-bw -b`'s loop (`run::duplex::DuplexLoop`, what both sides of a
    /// duplex SEND test run) over direct SQs, direct RQs and the direct CQ,
    /// the model's NIC on its own thread: two QPs send into their peers'
    /// RQs while the loop keeps those RQs posted. Every message goes out and
    /// comes in, each counted for its QP and direction, the bytes land.
    #[test]
    fn the_duplex_send_loop_runs_on_direct_queues() {
        use rdmaperf::clock;
        use rdmaperf::run::bw::{BwConfig, QpCount, QpTarget};
        use rdmaperf::run::duplex::{DuplexConfig, DuplexLoop};
        use rdmaperf::run::recv::{self, RecvBuf, RecvConfig, RxCount};
        const PER_QP: u64 = 200;
        let mut b = Bufs::new(2);
        let mut r = rig2(&mut b, RecvSpec::default(), 64);
        let mut rqs = vec![rq_of(&mut r, 0), rq_of(&mut r, 1)];
        let bufs = [0, 1].map(|k| RecvBuf {
            addr: rx_at(&b, k),
            lkey: r.rx_lkey,
        });
        let targets = [0, 1].map(|k| QpTarget {
            laddr: b.tx.as_ptr() as u64 + (k * MSG) as u64,
            lkey: r.lkey,
            raddr: 0,
            rkey: 0,
        });
        let stall = clock::Clock::calibrate().cycles_for(std::time::Duration::from_secs(20));
        let cfg = DuplexConfig {
            tx: BwConfig {
                op: Op::Send,
                size: MSG as u32,
                iters: PER_QP,
                post_list: 1,
                tx_depth: 16,
                cq_mod: 4,
                inline: false,
                positions: 1,
                step: 0,
                stall_ticks: stall,
                cost: false,
            },
            rx: RecvConfig {
                iters: PER_QP,
                rx_depth: 8,
                len: MSG as u32,
                positions: 1,
                step: 0,
                stall_ticks: stall,
                window: None,
                list: 1,
                cost: false,
            },
            wait_first_rx: false,
            window: None,
        };
        let mut rx_counts = [RxCount::default(); 2];
        recv::prepost(&mut rqs, &bufs, &mut rx_counts, &cfg.rx).unwrap();
        let Rig {
            mut sqs,
            cq,
            mut model,
            ..
        } = r;
        let shared = std::rc::Rc::new(std::cell::RefCell::new(Sorted {
            cq,
            sends: Default::default(),
            recvs: Default::default(),
        }));
        let (mut scq, mut rcq) = (Half(shared.clone(), false), Half(shared, true));
        let mut counts = [QpCount::default(); 2];
        model.start();
        let o = DuplexLoop {
            cfg,
            sqs: &mut sqs,
            rqs: &mut rqs,
            scq: &mut scq,
            rcq: &mut rcq,
            targets: &targets,
            bufs: &bufs,
            counts: &mut counts,
            rx_counts: &mut rx_counts,
            list: &mut [rdmaperf::post::WrDesc::default(); 1],
            wcs: &mut [Completion::default(); 16],
            rwcs: &mut [Completion::default(); 16],
            tposted: &mut [],
            tcompleted: &mut [],
            now: clock::now,
        }
        .run();
        model.stop();
        assert_eq!(o.tx.error, None, "{o:?}");
        assert_eq!((o.tx.posted, o.tx.completed), (2 * PER_QP, 2 * PER_QP));
        assert_eq!(o.received, 2 * PER_QP);
        for q in 0..2 {
            assert_eq!(
                (counts[q].scnt, counts[q].ccnt),
                (PER_QP, PER_QP),
                "QP {q} out"
            );
            assert_eq!(rx_counts[q].received, PER_QP, "QP {q} in");
        }
        assert_eq!(b.rx, b.tx, "each peer's buffer holds its sender's bytes");
        assert_no_violations(&model);
    }

    /// The same loop with `--use-srq`'s shape: both QPs receive from one
    /// SRQ, each through its own [`SrqPort`] (what the tools hand the loop
    /// per QP). Every message is received; the SRQ took exactly one post per
    /// message; the model saw no violation (no receive beyond the ring).
    #[test]
    fn the_send_bw_receive_loop_runs_on_srq_ports() {
        use rdmaperf::mlx5::srq::SrqPort;
        let mut b = Bufs::new(2);
        let mut r = rig2(&mut b, srq_spec(32), 64);
        let srq = srq_for_all(&mut r);
        let ring = Arc::clone(srq.ring());
        let mut ports: Vec<SrqPort<ModelRecvMmio>> = srq.share(2);
        assert!(Arc::ptr_eq(ports[1].ring(), &ring));
        let (o, counts) = loop_over(&mut r, &b, &mut ports, false);
        assert_eq!(o.error, None, "{o:?}");
        assert_eq!(o.received, 2 * PER_QP);
        assert_eq!(counts[0].posted + counts[1].posted, 2 * PER_QP);
        assert_eq!(ring.done(), 2 * PER_QP as u32, "one SRQ WQE per message");
        assert_no_violations(&r.model);
    }

    /// An ODP page fault on an SRQ receive (RESP_ERR, REMOTE_ABORTED,
    /// vendor syndrome 0x93): the receive CQ posts the dropped WR again and
    /// hides the CQE, as libmlx5 does; the receive loop never sees it and
    /// carries on to the last message (the senders retry after the RNR
    /// NAK). Without the repost the loop would stop at REM_ABORT_ERR.
    #[test]
    fn the_receive_loop_carries_on_past_odp_faults_on_its_srq() {
        use rdmaperf::mlx5::recv_cq::RecvCq;
        use rdmaperf::mlx5::srq::SrqPort;
        let mut b = Bufs::new(2);
        let r = rig2(&mut b, srq_spec(32), 64);
        let Rig {
            mut sqs,
            mut cq,
            lkey,
            rx_lkey,
            mut model,
        } = r;
        let dv = model.recv_dv_srq().unwrap();
        // SAFETY: the model owns the ring and outlives the SRQ (test order).
        let srq = unsafe { DirectSrq::from_dv(&dv, 7, None, model.recv_mmio(0)) }.unwrap();
        for q in 0..2 {
            cq.attach_recv(model.recv_qpn(q).unwrap(), srq.ring());
        }
        let ring = Arc::clone(srq.ring());
        let mut ports: Vec<SrqPort<ModelRecvMmio>> = srq.share(3);
        let mut rcq = RecvCq::new(cq, ports.pop());
        model.fault_next_srq_receives(5);
        let (o, counts) = loop_on(
            &mut sqs,
            &mut model,
            (lkey, rx_lkey),
            &mut rcq,
            &b,
            &mut ports,
            (false, MSG as u32, &|_| {}),
        );
        assert_eq!(o.error, None, "{o:?}");
        assert_eq!(o.received, 2 * PER_QP);
        assert_eq!(counts[0].posted + counts[1].posted, 2 * PER_QP);
        assert_eq!(ring.done(), 2 * PER_QP as u32, "faults are not receives");
        assert_eq!(
            ports[0].posted() as u64,
            2 * PER_QP + 5,
            "each faulted WR posted again"
        );
        assert!(rcq.direct().reposts().is_empty());
        assert!(model.stats().rnr_naks >= 5, "{:?}", model.stats());
        assert_no_violations(&model);
    }

    /// As the tools create their direct QPs (scatter-to-CQE disabled), the
    /// model's default lands even a 16-byte SEND in the buffer.
    #[test]
    fn by_default_small_sends_land_in_the_buffer_as_on_the_hardware_path() {
        assert!(!RecvSpec::default().scatter_to_cqe);
        let mut b = Bufs::new(1);
        let mut r = rig(&mut b, cfg(RecvSpec::default()));
        let _rq = one_send(&mut r, &b, 1, 16);
        assert_eq!(b.rx[..16], b.tx[..16], "the NIC wrote the buffer");
    }

    /// The receive loop on small messages scattered into 128-byte CQEs in
    /// format 1 (and, for an RQ, the copy out of the CQE): every message
    /// received and its bytes in its QP's buffer.
    #[test]
    fn the_receive_loop_runs_on_format1_scatter_in_128_byte_cqes() {
        let mut b = Bufs::new(2);
        let spec = RecvSpec {
            scatter_to_cqe: true,
            format1_in_128: true,
            ..RecvSpec::default()
        };
        let mut r = rig2(&mut b, spec, 128);
        let mut rqs = vec![rq_of(&mut r, 0), rq_of(&mut r, 1)];
        b.rx.fill(0);
        let (o, _) = loop_with(&mut r, &b, &mut rqs, (false, 24, &|_| {}));
        assert_eq!(o.error, None, "{o:?}");
        assert_eq!(o.received, 2 * PER_QP);
        for q in 0..2 {
            let at = q * MSG;
            assert_eq!(b.rx[at..at + 24], b.tx[at..at + 24], "QP {q}");
            assert!(b.rx[at + 24..at + MSG].iter().all(|&x| x == 0), "QP {q}");
        }
        assert_no_violations(&r.model);
    }

    /// An SRQ whose WQEs complete out of order (1, 0, 3, 2, ...: the poller
    /// frees them out of order) over many laps of a 4-slot ring: each
    /// completion names the WR whose buffer holds its message, and the NIC,
    /// following the links the poller wrote, never meets a bad WQE.
    #[test]
    fn out_of_order_srq_frees_keep_the_free_list_whole() {
        let mut b = Bufs::new(3);
        let (mut r, mut srq) = out_of_order_srq(&mut b, 4);
        let mut seq = 0u64;
        for round in 0..16 {
            for k in 0..2 {
                srq.post_recv(seq + k, rx_at(&b, k as usize), r.rx_lkey, MSG as u32)
                    .unwrap();
            }
            b.rx.fill(0);
            for k in 0..2usize {
                let len = 16 + 8 * ((round + k) % 5) as u32;
                r.sqs[k]
                    .post(Op::Send, &[send(&b, r.lkey, 2, len, k as u64)])
                    .unwrap();
            }
            r.model.step();
            let recvs: Vec<_> = poll_all(&mut r.cq, 4).into_iter().filter(is_recv).collect();
            let ids: Vec<u64> = recvs.iter().map(|c| c.wr_id).collect();
            assert_eq!(ids, [seq + 1, seq], "round {round}: freed 1 then 0");
            for c in &recvs {
                let k = (c.wr_id - seq) as usize;
                let len = c.byte_len as usize;
                assert_eq!(c.status, WcStatus::SUCCESS, "round {round}");
                assert_eq!(b.rx[k * MSG..k * MSG + len], b.tx[2 * MSG..2 * MSG + len]);
            }
            seq += 2;
        }
        assert_no_violations(&r.model);
    }

    /// The receive loop over SRQ ports whose WQEs complete out of order.
    #[test]
    fn the_receive_loop_runs_on_out_of_order_srq_frees() {
        use rdmaperf::mlx5::srq::SrqPort;
        let mut b = Bufs::new(2);
        let (mut r, srq) = out_of_order_srq(&mut b, 32);
        let mut ports: Vec<SrqPort<ModelRecvMmio>> = srq.share(2);
        let (o, counts) = loop_over(&mut r, &b, &mut ports, false);
        assert_eq!(o.error, None, "{o:?}");
        assert_eq!(o.received, 2 * PER_QP);
        assert_eq!(counts[0].received + counts[1].received, 2 * PER_QP);
        assert_no_violations(&r.model);
    }

    /// A peer QP moved to the error state with receives posted: each
    /// posted receive completes with a flush CQE naming its own WR, in
    /// order, after the one that had arrived; a receive posted later is
    /// flushed too.
    #[test]
    fn a_qp_in_error_flushes_its_posted_receives() {
        let mut b = Bufs::new(4);
        let mut r = rig(&mut b, cfg(RecvSpec::default()));
        let mut rq = rq_of(&mut r, 0);
        for k in 0..4 {
            rq.post_recv(10 + k as u64, rx_at(&b, k), r.rx_lkey, MSG as u32)
                .unwrap();
        }
        r.sqs[0]
            .post(Op::Send, &[send(&b, r.lkey, 0, 64, 1)])
            .unwrap();
        r.model.step();
        assert_eq!(r.model.recv_to_error(0), 3);
        rq.post_recv(14, rx_at(&b, 0), r.rx_lkey, MSG as u32)
            .unwrap();
        r.model.step();
        let recvs: Vec<_> = poll_all(&mut r.cq, 6).into_iter().filter(is_recv).collect();
        let got: Vec<_> = recvs.iter().map(|c| (c.wr_id, c.status)).collect();
        let flush = WcStatus::WR_FLUSH_ERR;
        assert_eq!(
            got,
            [
                (10, WcStatus::SUCCESS),
                (11, flush),
                (12, flush),
                (13, flush),
                (14, flush)
            ]
        );
        assert!(recvs[1..].iter().all(|c| c.opcode == WcOpcode::RECV));
        assert_eq!(rq.ring().done(), 5);
    }

    /// The receive loop meets the flush of one QP's receives: it stops with
    /// that QP's WR_FLUSH_ERR completion (not a stall, not a success).
    #[test]
    fn the_receive_loop_stops_on_a_flushed_receive() {
        use rdmaperf::run::bw::RunError;
        let mut b = Bufs::new(2);
        let mut r = rig2(&mut b, RecvSpec::default(), 64);
        let mut rqs = vec![rq_of(&mut r, 0), rq_of(&mut r, 1)];
        let hook = |m: &Model| {
            assert_eq!(m.recv_to_error(1), 8);
        };
        let (o, _) = loop_with(&mut r, &b, &mut rqs, (false, MSG as u32, &hook));
        match o.error {
            Some(RunError::Completion { qp, wc, .. }) => {
                assert_eq!((qp, wc.status), (1, WcStatus::WR_FLUSH_ERR), "{o:?}");
            }
            other => panic!("{other:?}"),
        }
    }

    /// `-e` on the direct CQ: armed while empty, no event; a SEND comes in
    /// (the NIC on its thread) and the event wakes the waiter, then the
    /// poll finds the completions; armed while CQEs wait, the event is
    /// immediate; a solicited-only arm is not woken by an unsolicited SEND.
    #[test]
    fn an_armed_direct_cq_wakes_on_its_next_completion() {
        use std::time::Duration;
        let mut b = Bufs::new(4);
        let (mut r, _rq) = rq_on_all_slots(&mut b);
        let arm_mmio = r.model.cq_mmio();
        r.model.start();
        assert!(poll_all(&mut r.cq, 0).is_empty());
        r.cq.arm(&arm_mmio, false).unwrap();
        assert!(
            !r.model.wait_cq_event(Duration::from_millis(50)),
            "an event with nothing completed"
        );
        r.sqs[0]
            .post(Op::Send, &[send(&b, r.lkey, 0, 64, 1)])
            .unwrap();
        assert!(
            r.model.wait_cq_event(Duration::from_secs(5)),
            "no event after the SEND completed"
        );
        r.cq.event_consumed();
        let got = poll_all(&mut r.cq, 2);
        assert_eq!(got.len(), 2, "{got:?}");
        // CQEs already waiting when armed: the event comes at once.
        r.sqs[0]
            .post(Op::Send, &[send(&b, r.lkey, 1, 64, 2)])
            .unwrap();
        std::thread::sleep(Duration::from_millis(50));
        r.cq.arm(&arm_mmio, false).unwrap();
        assert!(r.model.wait_cq_event(Duration::from_secs(1)));
        r.cq.event_consumed();
        assert_eq!(poll_all(&mut r.cq, 2).len(), 2);
        // Solicited-only: an unsolicited SEND wakes nobody.
        r.cq.arm(&arm_mmio, true).unwrap();
        r.sqs[0]
            .post(Op::Send, &[send(&b, r.lkey, 2, 64, 3)])
            .unwrap();
        assert!(!r.model.wait_cq_event(Duration::from_millis(200)));
        assert_eq!(poll_all(&mut r.cq, 2).len(), 2);
        r.model.stop();
        assert_eq!(r.cq.arm_sn(), 2);
        assert_no_violations(&r.model);
    }

    /// The arm sequence number is compared: an arm after a delivered event
    /// that did not bump it (no `event_consumed`) is a violation; with the
    /// bump there is none.
    #[test]
    fn an_arm_without_the_sequence_bump_is_a_violation() {
        use std::time::Duration;
        for bump in [true, false] {
            let mut b = Bufs::new(2);
            let (mut r, _rq) = rq_on_all_slots(&mut b);
            let arm_mmio = r.model.cq_mmio();
            r.cq.arm(&arm_mmio, false).unwrap();
            r.sqs[0]
                .post(Op::Send, &[send(&b, r.lkey, 0, 64, 1)])
                .unwrap();
            r.model.step();
            assert!(r.model.wait_cq_event(Duration::from_secs(1)));
            if bump {
                r.cq.event_consumed();
            }
            assert_eq!(poll_all(&mut r.cq, 2).len(), 2);
            r.cq.arm(&arm_mmio, false).unwrap();
            let v = r.model.violations();
            if bump {
                assert!(v.is_empty(), "{v:?}");
            } else {
                assert!(
                    v.len() == 1 && v[0].contains("sequence number 0 after 1 events"),
                    "{v:?}"
                );
            }
        }
    }

    /// The receive doorbell goes through the recording MMIO layer as the
    /// send side's does: store barrier, then the record (the posted count),
    /// once per post and once per post list, for an RQ and the SRQ alike;
    /// a record stored without the barrier is a violation.
    #[test]
    fn the_receive_record_follows_a_store_barrier() {
        let (fence, rec) = (MmioEvent::FenceDma, |value| MmioEvent::Dbrec {
            offset: 0,
            value,
        });
        let with_history = |recv| ModelConfig {
            record_history: true,
            ..cfg(recv)
        };
        let mut b = Bufs::new(4);
        let mut r = rig(&mut b, with_history(RecvSpec::default()));
        let mut rq = rq_of(&mut r, 0);
        rq.post_recv(1, rx_at(&b, 0), r.rx_lkey, MSG as u32)
            .unwrap();
        let base = rx_at(&b, 1);
        rq.post_recv_list(&msgs(3, 2, r.rx_lkey, |k| base + (k * MSG) as u64))
            .unwrap();
        assert_eq!(r.model.recv_history(0), [fence, rec(1), fence, rec(4)]);
        assert_no_violations(&r.model);

        let mut b = Bufs::new(4);
        let mut r = rig(&mut b, with_history(srq_spec(8)));
        let mut srq = srq_for_all(&mut r);
        srq.post_recv(1, rx_at(&b, 0), r.rx_lkey, MSG as u32)
            .unwrap();
        srq.post_recv_list(&msgs(2, 2, r.rx_lkey, |k| base + (k * MSG) as u64))
            .unwrap();
        assert_eq!(r.model.recv_history(0), [fence, rec(1), fence, rec(3)]);
        assert_no_violations(&r.model);

        // The check can fail: a recorder whose barrier does nothing.
        let mut b = Bufs::new(1);
        let r = rig(&mut b, cfg(RecvSpec::default()));
        let dv = r.model.recv_dv_qp(0).unwrap();
        let mmio = NoDmaFence(r.model.recv_mmio(0));
        // SAFETY: as rq_of.
        let mut rq = unsafe { DirectRq::from_dv(&dv, 0x456, None, mmio) }.unwrap();
        rq.post_recv(1, rx_at(&b, 0), r.rx_lkey, MSG as u32)
            .unwrap();
        let v = r.model.violations();
        assert!(
            v.len() == 1 && v[0].contains("without store_fence_dma"),
            "{v:?}"
        );
    }

    /// The ring record the RQ and the CQ share is one `Arc`.
    #[test]
    fn the_cq_completes_from_the_rqs_own_record() {
        let mut b = Bufs::new(1);
        let mut r = rig(&mut b, cfg(RecvSpec::default()));
        let rq = rq_of(&mut r, 0);
        let ring: &Arc<RecvRing> = rq.ring();
        assert_eq!(Arc::strong_count(ring), 2);
    }

    /// Arming for `-e`: the arm record gets sequence number, command and
    /// consumer index; then, after the WC barrier, one 64-bit store of that
    /// word and the CQN to the UAR's CQ doorbell, and a flush; the next arm
    /// after an event uses the next sequence number.
    #[test]
    fn arming_writes_the_record_then_the_uar_doorbell() {
        #[derive(Default)]
        struct Rec(std::cell::RefCell<Vec<String>>);
        impl Mmio for Rec {
            fn store_fence_dma(&self) {
                self.0.borrow_mut().push("fence_dma".into());
            }
            fn store_fence_wc(&self) {
                self.0.borrow_mut().push("fence_wc".into());
            }
            unsafe fn write_dbrec(&self, dbrec: *mut u32, raw: u32) {
                // SAFETY: the poller passes its own arm record.
                unsafe { dbrec.write_volatile(raw) };
                self.0
                    .borrow_mut()
                    .push(format!("dbrec {:#x}", u32::from_be(raw)));
            }
            unsafe fn write_db64(&self, reg: *mut u64, raw: u64) {
                self.0.borrow_mut().push(format!(
                    "db64 +{:#x} {:#x}",
                    reg as usize & 0xfff,
                    u64::from_be(raw)
                ));
            }
            unsafe fn write_bf64(&self, _: *mut u64, _: *const [u64; 8]) {
                unreachable!("arming never uses BlueFlame");
            }
        }
        let mut b = Bufs::new(1);
        let mut r = rig(&mut b, cfg(RecvSpec::default()));
        let _rq = one_send(&mut r, &b, 1, 64);
        assert_eq!(poll_all(&mut r.cq, 2).len(), 2);
        let rec = Rec::default();
        r.cq.arm(&rec, false).unwrap();
        r.cq.event_consumed();
        r.cq.arm(&rec, true).unwrap();
        let cqn = r.model.dv_cq().cqn as u64;
        let w0 = 2u64; // sn 0, REQ_NOT, ci 2
        let w1 = 1 << 28 | 1 << 24 | 2u64; // sn 1, REQ_NOT_SOL, ci 2
        assert_eq!(
            *rec.0.borrow(),
            [
                format!("dbrec {w0:#x}"),
                "fence_wc".into(),
                format!("db64 +0x20 {:#x}", w0 << 32 | cqn),
                "fence_wc".into(),
                format!("dbrec {w1:#x}"),
                "fence_wc".into(),
                format!("db64 +0x20 {:#x}", w1 << 32 | cqn),
                "fence_wc".into(),
            ]
        );
        assert_eq!(r.cq.arm_sn(), 1);
    }
}
