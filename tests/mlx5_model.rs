//! The direct SQ/CQ against the queue model (feature `model`): doorbell and
//! BlueFlame store order, post lists, ring wrap, back-pressure, CQ wrap,
//! selective signalling, error CQEs, every operation's data where it landed.

#[cfg(not(feature = "model"))]
#[test]
fn model_tests_need_the_model_feature() {
    println!("SKIPPED: the queue-model tests need `--features model`");
}

#[cfg(feature = "model")]
mod common;

#[cfg(feature = "model")]
mod with_model {
    use crate::common::mlx5::NoDmaFence;
    use crate::common::model_env::{finish, with_bufs, Env, BUF};
    use rdmaperf::mlx5::{CompletionError, DirectSq, HwMmio, Mmio};
    use rdmaperf::model::{MmioEvent, Model, ModelConfig, ModelMmio, ModelTransport};
    use rdmaperf::post::{
        Completion, CompletionQueue, Op, PostError, SendQueue, WcOpcode, WcStatus, WrDesc,
    };

    fn env(cfg: ModelConfig) -> Env {
        let model = Model::new(cfg).unwrap();
        let (sq, cq) = model.pair().unwrap();
        finish(model, sq, cq)
    }

    impl<M: Mmio> Env<DirectSq<M>> {
        fn fill_local(&mut self, off: usize, len: usize, seed: u8) {
            for (i, b) in self.local[off..off + len].iter_mut().enumerate() {
                *b = seed.wrapping_mul(31).wrapping_add(i as u8);
            }
        }
        /// Steps the NIC and polls until `want` completions arrived.
        fn complete(&mut self, want: usize) -> Vec<Completion> {
            let mut got = Vec::new();
            let mut wc = [Completion::default(); 16];
            for _ in 0..10_000 {
                self.model.step();
                let n = self.cq.poll(&mut wc).unwrap();
                got.extend_from_slice(&wc[..n]);
                if got.len() >= want {
                    break;
                }
                std::thread::yield_now();
            }
            assert_eq!(got.len(), want, "completions: {got:?}");
            got
        }
        fn assert_clean(&self) {
            assert_eq!(self.model.violations(), Vec::<String>::new());
        }
    }

    fn ok(c: &Completion, wr_id: u64, opcode: WcOpcode) {
        assert_eq!(c.status, WcStatus::SUCCESS, "{c:?}");
        assert_eq!(c.wr_id, wr_id, "{c:?}");
        assert_eq!(c.opcode, opcode, "{c:?}");
    }

    #[test]
    fn single_wqe_goes_through_blueflame_in_the_exact_store_order() {
        let mut e = env(ModelConfig::default());
        e.fill_local(0, 64, 1);
        e.sq.post(Op::Write, &[e.wr(7, 0, 128, 64)]).unwrap();
        let ring = e.model.sq_bytes();
        let mut wqe = [0u8; 64];
        wqe.copy_from_slice(&ring[..64]);
        assert_eq!(
            e.model.history(),
            vec![
                MmioEvent::FenceDma,
                MmioEvent::Dbrec {
                    offset: 4,
                    value: 1
                },
                MmioEvent::FenceWc,
                MmioEvent::Bf64 {
                    offset: 0,
                    bytes: wqe
                },
                MmioEvent::FenceWc,
            ]
        );
        assert_eq!(e.model.step(), 1);
        let c = e.complete(1);
        ok(&c[0], 7, WcOpcode::RDMA_WRITE);
        assert_eq!(c[0].byte_len, 64);
        assert_eq!(c[0].qp_num, 0x123);
        assert_eq!(&e.remote[128..192], &e.local[0..64]);

        // The next single WQEs alternate the BlueFlame halves: 256, 0, ...
        // An inline 100-byte WRITE is 9 units = 3 WQEBBs = 3 chunks.
        e.model.clear_history();
        let w = WrDesc {
            inline: true,
            ..e.wr(8, 512, 1024, 100)
        };
        e.sq.post(Op::Write, &[w]).unwrap();
        let h = e.model.history();
        let offs: Vec<isize> = h
            .iter()
            .filter_map(|ev| match ev {
                MmioEvent::Bf64 { offset, .. } => Some(*offset),
                _ => None,
            })
            .collect();
        assert_eq!(offs, vec![256, 320, 384]);
        assert_eq!(h.first(), Some(&MmioEvent::FenceDma));
        assert_eq!(
            h[1],
            MmioEvent::Dbrec {
                offset: 4,
                value: 4
            }
        );
        assert_eq!(h[2], MmioEvent::FenceWc);
        assert_eq!(h.last(), Some(&MmioEvent::FenceWc));
        assert_eq!(h.len(), 7);
        ok(&e.complete(1)[0], 8, WcOpcode::RDMA_WRITE);
        assert_eq!(&e.remote[1024..1124], &e.local[512..612]);
        assert_eq!(e.sq.bf_offset(), 0);
        assert_eq!(e.model.stats().blueflame_doorbells, 2);
        e.assert_clean();
    }

    fn kinds(h: &[MmioEvent]) -> (usize, usize) {
        let db = h
            .iter()
            .filter(|x| matches!(x, MmioEvent::Db64 { .. }))
            .count();
        let bf = h
            .iter()
            .filter(|x| matches!(x, MmioEvent::Bf64 { .. }))
            .count();
        (db, bf)
    }

    #[test]
    fn blueflame_only_for_wqes_that_fit_bf_size() {
        let mut e = env(ModelConfig::default());
        // 220 inline bytes: ds 2 + 14 = 16 → 256 B = bf.size → 4 chunks.
        e.sq.post(
            Op::Write,
            &[WrDesc {
                inline: true,
                ..e.wr(1, 0, 0, 220)
            }],
        )
        .unwrap();
        assert_eq!(kinds(&e.model.history()), (0, 4));
        e.complete(1);
        // 221 bytes: ds 17 → 272 B > bf.size → an 8-byte doorbell.
        e.model.clear_history();
        e.sq.post(
            Op::Write,
            &[WrDesc {
                inline: true,
                ..e.wr(2, 0, 0, 221)
            }],
        )
        .unwrap();
        assert_eq!(kinds(&e.model.history()), (1, 0));
        e.complete(1);
        assert_eq!(&e.remote[..221], &e.local[..221]);
        e.assert_clean();
        // No BlueFlame register (bf.size 0): always 8-byte doorbells at +0.
        let mut e = env(ModelConfig {
            bf_size: 0,
            ..ModelConfig::default()
        });
        for i in 0..3 {
            e.model.clear_history();
            e.sq.post(Op::Write, &[e.wr(i, 0, 0, 8)]).unwrap();
            let h = e.model.history();
            assert_eq!(kinds(&h), (1, 0));
            assert!(matches!(h[3], MmioEvent::Db64 { offset: 0, .. }), "{h:?}");
            e.complete(1);
        }
        e.assert_clean();
    }

    #[test]
    fn post_lists_of_1_to_64_ring_exactly_one_doorbell() {
        let mut e = env(ModelConfig {
            wqe_cnt: 64,
            ..ModelConfig::default()
        });
        let mut id = 0u64;
        for n in 1..=64usize {
            e.model.clear_history();
            e.remote.fill(0);
            let wrs: Vec<WrDesc> = (0..n)
                .map(|i| {
                    id += 1;
                    WrDesc {
                        signaled: i == n - 1,
                        ..e.wr(id, i * 64, i * 64, 64)
                    }
                })
                .collect();
            for i in 0..n {
                e.fill_local(i * 64, 64, (n + i) as u8);
            }
            let pi_before = e.sq.pi();
            e.sq.post(Op::Write, &wrs).unwrap();
            let h = e.model.history();
            let pi = pi_before.wrapping_add(n as u16) as u32;
            assert_eq!(
                h[..3],
                [
                    MmioEvent::FenceDma,
                    MmioEvent::Dbrec {
                        offset: 4,
                        value: pi
                    },
                    MmioEvent::FenceWc
                ]
            );
            assert_eq!(h.last(), Some(&MmioEvent::FenceWc));
            let (dbs, bfs) = kinds(&h);
            if n == 1 {
                assert_eq!((dbs, bfs, h.len()), (0, 1, 5), "{h:?}");
            } else {
                assert_eq!((dbs, bfs, h.len()), (1, 0, 5), "{h:?}");
                // The doorbell carries the last WQE's first 8 ring bytes.
                let ring = e.model.sq_bytes();
                let last = (pi.wrapping_sub(1) & 63) as usize * 64;
                let MmioEvent::Db64 { bytes, .. } = h[3] else {
                    panic!("{h:?}")
                };
                assert_eq!(bytes[..], ring[last..last + 8]);
            }
            assert_eq!(e.model.step(), n);
            let c = e.complete(1);
            ok(&c[0], id, WcOpcode::RDMA_WRITE);
            assert_eq!(&e.remote[..n * 64], &e.local[..n * 64], "list of {n}");
            assert_eq!(e.sq.free_wqebbs(), 64);
        }
        e.assert_clean();
    }

    #[test]
    fn single_inline_wqe_matches_the_list_path_bytes() {
        // A single inline WR takes the 16-byte-unit fast path; the same WR
        // second in a post list takes the general one. The WQE bytes the
        // NIC reads (ds units, but the payload padding) must be the same.
        for op in [Op::Write, Op::Send] {
            for len in [16u32, 17, 31, 44, 60, 100, 200] {
                let mut e = env(ModelConfig {
                    wqe_cnt: 64,
                    ..ModelConfig::default()
                });
                if op == Op::Send {
                    for k in 0..3 {
                        let rb = e.remote[4096 + k * 256..].as_mut_ptr();
                        e.model.post_peer_recv(70 + k as u64, rb, 256, e.rk.lkey);
                    }
                }
                e.fill_local(0, len as usize, len as u8);
                let w = WrDesc {
                    inline: true,
                    ..e.wr(1, 0, 0, len)
                };
                e.sq.post(op, &[w]).unwrap();
                let nbb = e.sq.pi() as usize;
                let lead = WrDesc {
                    inline: true,
                    ..e.wr(2, 0, 256, len)
                };
                e.sq.post(op, &[lead, WrDesc { wr_id: 3, ..w }]).unwrap();
                let ring = e.model.sq_bytes();
                let (a, b) = (&ring[..nbb * 64], &ring[2 * nbb * 64..3 * nbb * 64]);
                let hdr_end = if op == Op::Send { 16 } else { 32 } + 4;
                let used = hdr_end + len as usize;
                // Ctrl differs in the WQE index (bytes 1..3) only.
                assert_eq!((a[0], &a[3..16]), (b[0], &b[3..16]), "{op:?} {len}: ctrl");
                assert_eq!(a[16..used], b[16..used], "{op:?} {len}: segments");
                let c = e.complete(3);
                for (c, id) in c.iter().zip(1..) {
                    assert_eq!((c.wr_id, c.status), (id, WcStatus::SUCCESS), "{op:?} {len}");
                }
                if op == Op::Write {
                    assert_eq!(&e.remote[..len as usize], &e.local[..len as usize]);
                }
                e.assert_clean();
            }
        }
    }

    #[test]
    fn ring_wrap_with_multi_wqebb_inline_wqes() {
        let mut e = env(ModelConfig {
            wqe_cnt: 8,
            ..ModelConfig::default()
        });
        let mut wraps = 0;
        for i in 0..60u64 {
            // 100 B → 3 WQEBBs, 44 B → 2 (ds 2+3), 28 B → 1: starts drift
            // across the ring end; lists of two mix doorbell and BlueFlame.
            let len = [100u32, 44, 28, 200][i as usize % 4];
            let s =
                e.sq.shape(
                    Op::Write,
                    &WrDesc {
                        inline: true,
                        len,
                        ..WrDesc::default()
                    },
                )
                .unwrap();
            if (e.sq.pi() as u32 % 8) + s.nbb as u32 > 8 {
                wraps += 1;
            }
            let loff = (i as usize * 37) % 4096;
            e.fill_local(loff, len as usize, i as u8);
            e.remote[..512].fill(0);
            let w = WrDesc {
                inline: true,
                ..e.wr(i, loff, 0, len)
            };
            if i % 5 == 4 {
                let w2 = WrDesc {
                    inline: true,
                    wr_id: 1000 + i,
                    ..e.wr(i, loff, 256, len.min(44))
                };
                e.sq.post(
                    Op::Write,
                    &[
                        WrDesc {
                            signaled: false,
                            ..w
                        },
                        w2,
                    ],
                )
                .unwrap();
                ok(&e.complete(1)[0], 1000 + i, WcOpcode::RDMA_WRITE);
                assert_eq!(
                    &e.remote[256..256 + len.min(44) as usize],
                    &e.local[loff..loff + len.min(44) as usize]
                );
            } else {
                e.sq.post(Op::Write, &[w]).unwrap();
                ok(&e.complete(1)[0], i, WcOpcode::RDMA_WRITE);
            }
            assert_eq!(
                &e.remote[..len as usize],
                &e.local[loff..loff + len as usize],
                "WR {i}"
            );
        }
        assert!(wraps >= 5, "only {wraps} WQEs wrapped");
        e.assert_clean();
    }

    #[test]
    fn ud_send_lists_start_everywhere_and_wrap() {
        // Lists of 3 UD SENDs (2 + 1 + 2 WQEBBs: the middle one carries no
        // payload) on an 8-WQEBB ring: the bulk path starts them at every
        // slot, straight when the worst case fits before the ring end,
        // masked when it does not.
        let mut e = env(ModelConfig {
            wqe_cnt: 8,
            transport: ModelTransport::Ud {
                peer_qpn: 0x777,
                qkey: 0x1111_2222,
            },
            ..ModelConfig::default()
        });
        let mut starts = [false; 8];
        for l in 0..16u64 {
            starts[e.sq.pi() as usize % 8] = true;
            let mut list = Vec::new();
            for k in 0..3u64 {
                let i = l * 3 + k;
                let len = if k == 1 { 0 } else { 48 + k as u32 };
                let roff = 4096 + k as usize * 256;
                e.remote[roff..roff + 256].fill(0);
                let rbuf = e.remote[roff..].as_mut_ptr();
                e.model.post_peer_recv(900 + i, rbuf, 256, e.rk.lkey);
                e.fill_local(k as usize * 256, len as usize, i as u8);
                list.push(WrDesc {
                    signaled: k == 2,
                    ..e.wr(i, k as usize * 256, 0, len)
                });
            }
            e.sq.post(Op::Send, &list).unwrap();
            ok(&e.complete(1)[0], l * 3 + 2, WcOpcode::SEND);
            let p = e.model.take_peer_completions();
            assert_eq!(p.len(), 3, "list {l}");
            for (k, c) in p.iter().enumerate() {
                let len = list[k].len as usize;
                assert_eq!(
                    (c.wr_id, c.byte_len, c.ok),
                    (900 + l * 3 + k as u64, len as u32, true)
                );
                let (roff, loff) = (4096 + k * 256, k * 256);
                assert_eq!(
                    &e.remote[roff..roff + len],
                    &e.local[loff..loff + len],
                    "list {l} WR {k}"
                );
            }
        }
        assert!(starts.iter().all(|&s| s), "lists started at {starts:?}");
        assert_eq!(e.model.stats().ud_dropped, 0);
        e.assert_clean();
    }

    #[test]
    fn ud_sends_wrap_the_ring_and_land_at_the_peer() {
        let cfg = ModelConfig {
            wqe_cnt: 4,
            transport: ModelTransport::Ud {
                peer_qpn: 0x777,
                qkey: 0x1111_2222,
            },
            ..ModelConfig::default()
        };
        let mut e = env(cfg);
        let mut wraps = 0;
        for i in 0..24u64 {
            // UD SEND: ctrl + 48-byte AV + payload: 2 or 3 WQEBBs.
            let (len, inline) = [(64u32, false), (60, true), (100, true)][i as usize % 3];
            let s =
                e.sq.shape(
                    Op::Send,
                    &WrDesc {
                        inline,
                        len,
                        ..WrDesc::default()
                    },
                )
                .unwrap();
            if (e.sq.pi() as u32 % 4) + s.nbb as u32 > 4 {
                wraps += 1;
            }
            let roff = 4096 + (i as usize % 4) * 256;
            e.remote[roff..roff + 256].fill(0);
            let rbuf = e.remote[roff..].as_mut_ptr();
            e.model.post_peer_recv(500 + i, rbuf, 256, e.rk.lkey);
            e.fill_local(64, len as usize, i as u8);
            let w = WrDesc {
                inline,
                ..e.wr(i, 64, 0, len)
            };
            e.sq.post(Op::Send, &[w]).unwrap();
            ok(&e.complete(1)[0], i, WcOpcode::SEND);
            let p = e.model.take_peer_completions();
            assert_eq!(p.len(), 1);
            assert_eq!((p[0].wr_id, p[0].byte_len, p[0].ok), (500 + i, len, true));
            assert_eq!(
                &e.remote[roff..roff + len as usize],
                &e.local[64..64 + len as usize]
            );
        }
        assert!(wraps >= 4, "only {wraps} UD WQEs wrapped");
        assert_eq!(e.model.stats().ud_dropped, 0);
        e.assert_clean();
    }

    #[test]
    fn full_sq_pushes_back_instead_of_overrunning() {
        let mut e = env(ModelConfig {
            wqe_cnt: 16,
            ..ModelConfig::default()
        });
        for i in 0..16 {
            e.sq.post(Op::Write, &[e.wr(i, 0, 0, 8)]).unwrap();
        }
        assert_eq!(e.sq.free_wqebbs(), 0);
        let events = e.model.history().len();
        assert_eq!(
            e.sq.post(Op::Write, &[e.wr(99, 0, 0, 8)]),
            Err(PostError::QueueFull)
        );
        assert_eq!(
            e.model.history().len(),
            events,
            "nothing written on QueueFull"
        );
        assert_eq!(e.sq.pi(), 16);
        // All-or-nothing: a list of 2 with 1 free slot fails whole.
        assert_eq!(e.complete(16).len(), 16);
        for i in 0..15 {
            e.sq.post(
                Op::Write,
                &[WrDesc {
                    signaled: false,
                    ..e.wr(100 + i, 0, 0, 8)
                }],
            )
            .unwrap();
        }
        let pi = e.sq.pi();
        let two = [e.wr(200, 0, 0, 8), e.wr(201, 0, 0, 8)];
        assert_eq!(e.sq.post(Op::Write, &two), Err(PostError::QueueFull));
        assert_eq!(e.sq.pi(), pi);
        e.model.step();
        // Unsignalled WQEs give no CQE, so the SQ cannot know they are done.
        assert_eq!(e.sq.post(Op::Write, &two), Err(PostError::QueueFull));
        e.sq.post(Op::Write, &[e.wr(202, 0, 0, 8)]).unwrap();
        ok(&e.complete(1)[0], 202, WcOpcode::RDMA_WRITE);
        assert_eq!(e.sq.free_wqebbs(), 16, "the signalled WQE retired all 16");
        e.sq.post(Op::Write, &two).unwrap();
        assert_eq!(e.complete(2).len(), 2);
        e.assert_clean();
    }

    #[test]
    fn an_unencodable_wr_rolls_back_the_whole_list() {
        let mut e = env(ModelConfig::default());
        let outside = [0u8; 64]; // never declared as an inline source
        let bad = WrDesc {
            inline: true,
            laddr: outside.as_ptr() as u64,
            ..e.wr(3, 0, 0, 64)
        };
        let list = [
            e.wr(1, 0, 0, 8),
            WrDesc {
                inline: true,
                ..e.wr(2, 0, 0, 40)
            },
            bad,
        ];
        assert_eq!(e.sq.post(Op::Write, &list), Err(PostError::Unsupported));
        let read_inline = WrDesc {
            inline: true,
            ..e.wr(4, 0, 0, 8)
        };
        assert_eq!(
            e.sq.post(Op::Read, &[read_inline]),
            Err(PostError::Unsupported)
        );
        assert_eq!(e.sq.pi(), 0, "nothing posted");
        assert!(e.model.history().is_empty(), "no doorbell");
        // The slots are reused by the next list as if nothing happened.
        e.sq.post(Op::Write, &list[..2]).unwrap();
        assert_eq!(e.model.step(), 2);
        ok(&e.complete(2)[1], 2, WcOpcode::RDMA_WRITE);
        e.assert_clean();
    }

    #[test]
    fn cq_wraps_many_times_and_the_owner_bit_flips() {
        let mut e = env(ModelConfig {
            cqe_cnt: 4,
            wqe_cnt: 8,
            ..ModelConfig::default()
        });
        let mut id = 0;
        for round in 0..40 {
            let n = 1 + round % 3;
            let wrs: Vec<WrDesc> = (0..n)
                .map(|_| {
                    id += 1;
                    e.wr(id, 0, 0, 16)
                })
                .collect();
            e.sq.post(Op::Write, &wrs).unwrap();
            let c = e.complete(n);
            for (k, w) in c.iter().zip(&wrs) {
                ok(k, w.wr_id, WcOpcode::RDMA_WRITE);
            }
        }
        assert_eq!(e.cq.ci() as u64, id);
        assert_eq!(e.model.cq_ci_record() as u64, id);
        e.assert_clean();
    }

    #[test]
    fn model_reports_cq_overrun_when_the_consumer_index_is_not_released() {
        let mut e = env(ModelConfig {
            cqe_cnt: 4,
            ..ModelConfig::default()
        });
        for i in 0..5 {
            e.sq.post(Op::Write, &[e.wr(i, 0, 0, 8)]).unwrap();
        }
        e.model.step();
        let v = e.model.violations();
        assert!(v.iter().any(|s| s.contains("CQ overrun")), "{v:?}");
    }

    #[test]
    fn selective_signalling_with_cq_mod() {
        let mut e = env(ModelConfig {
            wqe_cnt: 32,
            cqe_cnt: 16,
            ..ModelConfig::default()
        });
        let cq_mod = 8u64;
        let mut signalled = Vec::new();
        let mut got = Vec::new();
        let mut i = 0u64;
        let mut stalls = 0;
        while i < 200 {
            let wrs: Vec<WrDesc> = (i..i + 4)
                .map(|k| {
                    let s = (k + 1) % cq_mod == 0;
                    WrDesc {
                        signaled: s,
                        ..e.wr(k, (k as usize % 64) * 64, k as usize * 64, 64)
                    }
                })
                .collect();
            match e.sq.post(Op::Write, &wrs) {
                Ok(()) => {
                    signalled.extend(wrs.iter().filter(|w| w.signaled).map(|w| w.wr_id));
                    i += 4;
                }
                Err(PostError::QueueFull) => {
                    stalls += 1;
                    assert!(
                        stalls < 10_000,
                        "SQ never drains: {:?}",
                        e.model.violations()
                    );
                    e.model.step();
                    let mut wc = [Completion::default(); 4];
                    let n = e.cq.poll(&mut wc).unwrap();
                    got.extend(wc[..n].iter().map(|c| c.wr_id));
                }
                Err(x) => panic!("{x:?}"),
            }
        }
        got.extend(
            e.complete(signalled.len() - got.len())
                .iter()
                .map(|c| c.wr_id),
        );
        assert_eq!(got, signalled);
        assert_eq!(got.len(), 25);
        for k in 0..200usize {
            assert_eq!(
                &e.remote[k * 64..k * 64 + 64],
                &e.local[(k % 64) * 64..(k % 64) * 64 + 64]
            );
        }
        assert_eq!(e.sq.free_wqebbs(), 32);
        e.assert_clean();
    }

    #[test]
    fn bad_rkey_gives_an_error_cqe_then_flushes_cleanly() {
        let mut e = env(ModelConfig::default());
        e.fill_local(0, 256, 9);
        let wrs = [
            WrDesc {
                signaled: false,
                ..e.wr(1, 0, 0, 64)
            },
            WrDesc {
                rkey: 0xdead,
                signaled: false,
                ..e.wr(2, 64, 64, 64)
            },
            e.wr(3, 128, 128, 64),
            WrDesc {
                signaled: false,
                ..e.wr(4, 192, 192, 64)
            },
        ];
        e.sq.post(Op::Write, &wrs).unwrap();
        let c = e.complete(3);
        assert_eq!(c[0].status, WcStatus::REM_ACCESS_ERR);
        assert_eq!(
            (c[0].wr_id, c[0].syndrome, c[0].vendor_err),
            (2, 0x13, 0x88)
        );
        assert_eq!(c[0].opcode, WcOpcode::RDMA_WRITE);
        for (k, id) in c[1..].iter().zip([3, 4]) {
            assert_eq!(
                (k.status, k.wr_id, k.syndrome),
                (WcStatus::WR_FLUSH_ERR, id, 0x05)
            );
        }
        let msg = CompletionError(&c[0]).to_string();
        for s in [
            "IBV_WC_REM_ACCESS_ERR",
            "REMOTE_ACCESS_ERR",
            "wr_id 2",
            "0x88",
            "rkey",
        ] {
            assert!(msg.contains(s), "{msg}");
        }
        assert_eq!(
            &e.remote[..64],
            &e.local[..64],
            "the WR before the error landed"
        );
        assert!(
            e.remote[64..256].iter().all(|&b| b == 0),
            "nothing after it did"
        );
        assert!(e.model.qp_in_error());
        assert_eq!(e.sq.free_wqebbs(), e.sq.capacity(), "every slot retired");
        // Later posts complete as flushed, even unsignalled ones.
        e.sq.post(
            Op::Write,
            &[WrDesc {
                signaled: false,
                ..e.wr(5, 0, 0, 8)
            }],
        )
        .unwrap();
        assert_eq!(e.complete(1)[0].status, WcStatus::WR_FLUSH_ERR);
        e.assert_clean();
    }

    fn raw_error(qpn_delta: u32, opcode: u8, ds: u8) -> Completion {
        let mut e = env(ModelConfig::default());
        let qpn = 0x123 + qpn_delta;
        let mut wqe = [0u8; 64];
        wqe[3] = opcode;
        wqe[11] = 0x08; // CQ_UPDATE (errors complete regardless)
        wqe[4..8].copy_from_slice(&((qpn << 8) | ds as u32).to_be_bytes());
        // raddr + data segments of a valid WRITE, in case the ctrl passes.
        let w = e.wr(1, 0, 0, 8);
        wqe[16..24].copy_from_slice(&w.raddr.to_be_bytes());
        wqe[24..28].copy_from_slice(&w.rkey.to_be_bytes());
        wqe[32..36].copy_from_slice(&8u32.to_be_bytes());
        wqe[36..40].copy_from_slice(&w.lkey.to_be_bytes());
        wqe[40..48].copy_from_slice(&w.laddr.to_be_bytes());
        e.sq.post_raw(&wqe, 42).unwrap();
        let c = e.complete(1)[0];
        assert_eq!(c.wr_id, 42);
        assert_eq!(e.sq.free_wqebbs(), e.sq.capacity());
        c
    }

    #[test]
    fn malformed_wqes_get_the_local_qp_operation_syndrome() {
        // A valid raw WRITE first: proves the helper itself is right.
        let good = raw_error(0, 0x08, 3);
        assert_eq!(good.status, WcStatus::SUCCESS, "{good:?}");
        for (what, c) in [
            ("bad opcode", raw_error(0, 0x07, 3)),
            ("ds = 0", raw_error(0, 0x08, 0)),
            ("wrong QPN", raw_error(1, 0x08, 3)),
        ] {
            assert_eq!(c.status, WcStatus::LOC_QP_OP_ERR, "{what}: {c:?}");
            assert_eq!((c.syndrome, c.vendor_err), (0x02, 0x68), "{what}");
        }
    }

    #[test]
    fn bad_lkey_gives_local_protection_error() {
        let mut e = env(ModelConfig::default());
        e.sq.post(
            Op::Write,
            &[WrDesc {
                lkey: 0x77,
                ..e.wr(3, 0, 0, 64)
            }],
        )
        .unwrap();
        let c = e.complete(1)[0];
        assert_eq!(
            (c.status, c.syndrome, c.vendor_err),
            (WcStatus::LOC_PROT_ERR, 0x04, 0x51)
        );
        let r = WrDesc {
            raddr: e.remote.as_ptr() as u64 + (BUF as u64 - 4),
            ..e.wr(4, 0, 0, 64)
        };
        let mut e2 = env(ModelConfig::default());
        let r2 = WrDesc {
            raddr: e2.remote.as_ptr() as u64 + (BUF as u64 - 4),
            rkey: e2.rk.rkey,
            lkey: e2.lk.lkey,
            laddr: e2.local.as_ptr() as u64,
            ..r
        };
        e2.sq.post(Op::Read, &[r2]).unwrap();
        let c = e2.complete(1)[0];
        assert_eq!(
            c.status,
            WcStatus::REM_ACCESS_ERR,
            "READ past the remote region"
        );
    }

    #[test]
    fn every_operation_lands_its_data() {
        let mut e = env(ModelConfig::default());
        // WRITE_IMM consumes a peer receive and delivers the immediate.
        let rb = e.remote[8192..].as_mut_ptr();
        e.model.post_peer_recv(71, rb, 512, e.rk.lkey);
        e.fill_local(0, 300, 5);
        e.sq.post(
            Op::WriteImm,
            &[WrDesc {
                imm: 0xcafe_f00d,
                ..e.wr(1, 0, 0, 300)
            }],
        )
        .unwrap();
        ok(&e.complete(1)[0], 1, WcOpcode::RDMA_WRITE);
        assert_eq!(&e.remote[..300], &e.local[..300]);
        let p = e.model.take_peer_completions();
        assert_eq!((p[0].wr_id, p[0].imm), (71, Some([0xca, 0xfe, 0xf0, 0x0d])));

        // SEND and SEND_IMM land in the peer's receive buffers.
        for (k, (op, inline)) in [(Op::Send, false), (Op::SendImm, true), (Op::Send, true)]
            .into_iter()
            .enumerate()
        {
            let off = 8192 + k * 512;
            let rb = e.remote[off..].as_mut_ptr();
            e.model.post_peer_recv(80 + k as u64, rb, 512, e.rk.lkey);
            e.fill_local(1024, 120, 40 + k as u8);
            e.sq.post(
                op,
                &[WrDesc {
                    imm: 0x0102_0304,
                    inline,
                    ..e.wr(10 + k as u64, 1024, 0, 120)
                }],
            )
            .unwrap();
            let c = e.complete(1)[0];
            ok(&c, 10 + k as u64, WcOpcode::SEND);
            assert_eq!(&e.remote[off..off + 120], &e.local[1024..1144]);
            let p = e.model.take_peer_completions();
            assert_eq!(p[0].imm, (op == Op::SendImm).then_some([1, 2, 3, 4]));
        }
        // SEND without a posted receive: RNR retries exhausted.
        let mut e3 = env(ModelConfig::default());
        e3.sq.post(Op::Send, &[e3.wr(1, 0, 0, 8)]).unwrap();
        assert_eq!(e3.complete(1)[0].status, WcStatus::RNR_RETRY_EXC_ERR);

        // READ: remote → local.
        for (i, b) in e.remote[16384..16384 + 200].iter_mut().enumerate() {
            *b = (i as u8) ^ 0x5a;
        }
        e.sq.post(Op::Read, &[e.wr(20, 2048, 16384, 200)]).unwrap();
        let c = e.complete(1)[0];
        ok(&c, 20, WcOpcode::RDMA_READ);
        assert_eq!(c.byte_len, 200);
        assert_eq!(&e.local[2048..2248], &e.remote[16384..16584]);

        // Atomics on an 8-byte aligned remote word; the old value comes back.
        let word = 20480usize;
        e.remote[word..word + 8].copy_from_slice(&100u64.to_ne_bytes());
        e.sq.post(
            Op::FetchAdd,
            &[WrDesc {
                swap_add: 23,
                ..e.wr(30, 4096, word, 8)
            }],
        )
        .unwrap();
        ok(&e.complete(1)[0], 30, WcOpcode::FETCH_ADD);
        assert_eq!(
            u64::from_ne_bytes(e.remote[word..word + 8].try_into().unwrap()),
            123
        );
        assert_eq!(
            u64::from_ne_bytes(e.local[4096..4104].try_into().unwrap()),
            100
        );
        let cas = |e: &Env, id, cmp| WrDesc {
            swap_add: 7,
            compare: cmp,
            ..e.wr(id, 4104, word, 8)
        };
        e.sq.post(Op::CmpSwap, &[cas(&e, 31, 5)]).unwrap();
        ok(&e.complete(1)[0], 31, WcOpcode::COMP_SWAP);
        assert_eq!(
            u64::from_ne_bytes(e.remote[word..word + 8].try_into().unwrap()),
            123,
            "no swap"
        );
        e.sq.post(Op::CmpSwap, &[cas(&e, 32, 123)]).unwrap();
        ok(&e.complete(1)[0], 32, WcOpcode::COMP_SWAP);
        assert_eq!(
            u64::from_ne_bytes(e.remote[word..word + 8].try_into().unwrap()),
            7,
            "swapped"
        );
        assert_eq!(
            u64::from_ne_bytes(e.local[4104..4112].try_into().unwrap()),
            123
        );
        e.assert_clean();
    }

    #[test]
    fn zero_length_operations_carry_no_data_segment() {
        let mut e = env(ModelConfig::default());
        let rb = e.remote[4096..].as_mut_ptr();
        e.model.post_peer_recv(9, rb, 64, e.rk.lkey);
        e.sq.post(Op::Write, &[e.wr(1, 0, 0, 0)]).unwrap();
        e.sq.post(Op::Send, &[e.wr(2, 0, 0, 0)]).unwrap();
        let ring = e.model.sq_bytes();
        assert_eq!(ring[7], 2, "WRITE of 0 bytes: ctrl + raddr");
        assert_eq!(ring[64 + 7], 1, "SEND of 0 bytes: ctrl only");
        let c = e.complete(2);
        ok(&c[0], 1, WcOpcode::RDMA_WRITE);
        ok(&c[1], 2, WcOpcode::SEND);
        assert_eq!(e.model.take_peer_completions()[0].byte_len, 0);
        // In a post list: the bulk path stops at the zero-length WRITE and
        // the rest of the list goes WR by WR; every WQE keeps its own ds.
        e.fill_local(0, 64, 7);
        let list = [
            e.wr(3, 0, 0, 64),
            e.wr(4, 0, 128, 0),
            e.wr(5, 0, 256, 32),
            e.wr(6, 0, 384, 64),
        ];
        e.sq.post(Op::Write, &list).unwrap();
        let ring = e.model.sq_bytes();
        let ds: Vec<u8> = (2..6).map(|s| ring[s * 64 + 7]).collect();
        assert_eq!(ds, [3, 2, 3, 3]);
        for (c, id) in e.complete(4).iter().zip(3..) {
            ok(c, id, WcOpcode::RDMA_WRITE);
        }
        for (roff, len) in [(0, 64), (256, 32), (384, 64)] {
            assert_eq!(&e.remote[roff..roff + len], &e.local[..len]);
        }
        e.assert_clean();
    }

    #[test]
    fn model_catches_a_missing_fence() {
        let model = Model::new(ModelConfig::default()).unwrap();
        let (sq, cq) = model.pair_with(NoDmaFence(model.mmio())).unwrap();
        let mut e = finish(model, sq, cq);
        e.sq.post(Op::Write, &[e.wr(1, 0, 0, 8)]).unwrap();
        e.model.step();
        let v = e.model.violations();
        assert!(v.iter().any(|s| s.contains("store_fence_dma")), "{v:?}");
    }

    #[test]
    fn real_stores_into_model_memory_with_step_dbrec() {
        // The bench configuration: HwMmio (volatile stores, real fences).
        let model = Model::new(ModelConfig {
            wqe_cnt: 16,
            ..ModelConfig::default()
        })
        .unwrap();
        let (sq, cq) = model.pair_with(HwMmio).unwrap();
        let mut e = finish(model, sq, cq);
        for round in 0..10u64 {
            let wrs: Vec<WrDesc> = (0..4)
                .map(|k| WrDesc {
                    signaled: k == 3,
                    ..e.wr(round * 4 + k, k as usize * 8, k as usize * 8, 8)
                })
                .collect();
            e.sq.post(Op::Write, &wrs).unwrap();
            assert_eq!(e.model.sq_dbrec(), (round as u32 + 1) * 4);
            assert_eq!(e.model.step_dbrec(), 4);
            let mut wc = [Completion::default(); 4];
            assert_eq!(e.cq.poll(&mut wc).unwrap(), 1);
            ok(&wc[0], round * 4 + 3, WcOpcode::RDMA_WRITE);
        }
        assert_eq!(&e.remote[..32], &e.local[..32]);
        assert!(e.model.history().is_empty());
        e.assert_clean();
    }

    #[test]
    fn nic_thread_runs_a_post_poll_loop() {
        let mut e = env(ModelConfig {
            wqe_cnt: 64,
            cqe_cnt: 32,
            ..ModelConfig::default()
        });
        e.model.start();
        let total = 2000u64;
        let (mut posted, mut done) = (0u64, 0u64);
        let mut wc = [Completion::default(); 16];
        let mut last_seen = 0;
        let mut spins = 0u64;
        // Progress is judged by wall time, not spins: under valgrind the
        // threads are serialised and the NIC thread may wait many spins.
        let mut last_progress = std::time::Instant::now();
        while done < total / 16 {
            spins += 1;
            if spins % 4096 == 0 {
                // Fail, don't hang, if the NIC stopped (e.g. CQ overrun).
                e.assert_clean();
                assert!(
                    last_progress.elapsed() < std::time::Duration::from_secs(60),
                    "no progress for 60 s: {done} of {} completions",
                    total / 16
                );
            }
            if posted < total {
                let n = 1 + (posted % 7);
                let n = n.min(total - posted);
                let wrs: Vec<WrDesc> = (posted..posted + n)
                    .map(|k| WrDesc {
                        signaled: (k + 1) % 16 == 0,
                        ..e.wr(k, (k as usize % 512) * 8, (k as usize % 4096) * 8, 8)
                    })
                    .collect();
                match e.sq.post(Op::Write, &wrs) {
                    Ok(()) => posted += n,
                    Err(PostError::QueueFull) => {}
                    Err(x) => panic!("{x:?}"),
                }
            }
            let n = e.cq.poll(&mut wc).unwrap();
            for c in &wc[..n] {
                assert_eq!(c.status, WcStatus::SUCCESS);
                assert!(c.wr_id > last_seen || done == 0);
                last_seen = c.wr_id;
            }
            done += n as u64;
            if n > 0 {
                last_progress = std::time::Instant::now();
            } else {
                // Let the NIC thread run (one core, or valgrind's one lock).
                std::thread::yield_now();
            }
        }
        e.model.stop();
        assert_eq!(last_seen, total - 1);
        for k in 0..4096usize {
            if (k as u64) < total {
                assert_eq!(
                    &e.remote[k * 8..k * 8 + 8],
                    &e.local[(k % 512) * 8..(k % 512) * 8 + 8]
                );
            }
        }
        e.assert_clean();
    }

    /// Several QPs on one model (one SQ each): buffers, keys and a poll helper.
    type Multi = Env<Vec<DirectSq<ModelMmio>>>;

    fn multi(cfg: ModelConfig) -> Multi {
        let model = Model::new(cfg).unwrap();
        let (sqs, cq) = model.queues().unwrap();
        with_bufs(model, sqs, cq)
    }

    impl Multi {
        fn poll_all(&mut self) -> Vec<Completion> {
            let mut got = Vec::new();
            let mut wc = [Completion::default(); 16];
            loop {
                let n = self.cq.poll(&mut wc).unwrap();
                if n == 0 {
                    return got;
                }
                got.extend_from_slice(&wc[..n]);
            }
        }
    }

    #[test]
    fn several_qps_own_rings_doorbells_uars_and_share_one_cq_round_robin() {
        let mut m = multi(ModelConfig {
            qps: 3,
            wqe_cnt: 16,
            cqe_cnt: 64,
            ..ModelConfig::default()
        });
        let dv: Vec<_> = (0..3).map(|q| m.model.dv_qp_of(q)).collect();
        for a in 0..3 {
            for b in a + 1..3 {
                assert_ne!(dv[a].sq.buf, dv[b].sq.buf);
                assert_ne!(dv[a].dbrec, dv[b].dbrec);
                // Own UAR page each (4 KiB apart at least).
                let (x, y) = (dv[a].bf.reg as usize, dv[b].bf.reg as usize);
                assert!(x.abs_diff(y) >= 4096, "{x:#x} {y:#x}");
            }
        }
        let cq_uar = m.model.dv_cq().cq_uar as usize;
        assert!(dv.iter().all(|d| (d.bf.reg as usize) & !4095 != cq_uar));
        // Several rounds wrap each 16-WQEBB ring; every round each QP posts
        // a list of 4, all doorbells ring before the NIC steps once.
        for round in 0..10u64 {
            for q in 0..3usize {
                let wrs: Vec<WrDesc> = (0..4u64)
                    .map(|j| {
                        let roff = q * 4096 + j as usize * 64;
                        m.wr(
                            ((q as u64) << 32) | (round * 4 + j),
                            q * 256 + j as usize * 64,
                            roff,
                            64,
                        )
                    })
                    .collect();
                m.sq[q].post(Op::Write, &wrs).unwrap();
            }
            assert_eq!(m.model.step(), 12);
            let got = m.poll_all();
            assert_eq!(got.len(), 12, "{got:?}");
            // Round-robin: one WQE per QP per pass, each QP's in order.
            for (i, c) in got.iter().enumerate() {
                let (q, j) = (i % 3, (i / 3) as u64);
                assert_eq!(c.status, WcStatus::SUCCESS, "{c:?}");
                assert_eq!(c.qp_num, m.model.qpn_of(q), "{c:?}");
                assert_eq!(c.wr_id, ((q as u64) << 32) | (round * 4 + j), "{c:?}");
            }
        }
        for q in 0..3 {
            let st = m.model.stats_of(q);
            assert_eq!((st.wqes, st.cqes, st.doorbells), (40, 40, 10), "QP {q}");
            assert_eq!(m.model.sq_dbrec_of(q), 40);
            let recs: Vec<_> = m
                .model
                .history_of(q)
                .into_iter()
                .filter_map(|e| match e {
                    MmioEvent::Dbrec { offset, value } => Some((offset, value)),
                    _ => None,
                })
                .collect();
            assert_eq!(
                recs,
                (1..=10).map(|r| (4, r * 4)).collect::<Vec<_>>(),
                "QP {q}"
            );
            assert_eq!(
                &m.remote[q * 4096..q * 4096 + 256],
                &m.local[q * 256..q * 256 + 256],
                "QP {q}"
            );
        }
        assert_eq!(m.model.stats().wqes, 120);
        assert_eq!(m.model.violations(), Vec::<String>::new());
    }

    #[test]
    fn rnr_retry_7_stalls_a_send_until_its_peer_posts_a_receive_without_holding_back_other_qps() {
        let mut m = multi(ModelConfig {
            qps: 2,
            rnr_retry: 7,
            ..ModelConfig::default()
        });
        // QP 0: a SEND, then a WRITE that must wait behind it (RC order).
        let send = m.wr(1, 0, 0, 100);
        let write = m.wr(2, 512, 1024, 64);
        m.sq[0].post(Op::Send, &[send]).unwrap();
        m.sq[0].post(Op::Write, &[write]).unwrap();
        let other = m.wr(3, 0, 2048, 64);
        m.sq[1].post(Op::Write, &[other]).unwrap();
        m.model.step();
        let got = m.poll_all();
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!((got[0].wr_id, got[0].qp_num), (3, m.model.qpn_of(1)));
        // A receive at QP 1's peer does not help QP 0.
        let rb1 = m.remote[8192..].as_mut_ptr();
        m.model.post_peer_recv_on(1, 90, rb1, 256, m.rk.lkey);
        for _ in 0..3 {
            m.model.step();
        }
        assert!(m.poll_all().is_empty());
        assert_eq!(m.model.stats_of(0).rnr_naks, 4);
        assert!(!m.model.qp_in_error());
        let rb0 = m.remote[16384..].as_mut_ptr();
        m.model.post_peer_recv_on(0, 91, rb0, 256, m.rk.lkey);
        m.model.step();
        let got = m.poll_all();
        let ids: Vec<_> = got.iter().map(|c| (c.wr_id, c.status)).collect();
        assert_eq!(ids, vec![(1, WcStatus::SUCCESS), (2, WcStatus::SUCCESS)]);
        assert_eq!(&m.remote[16384..16484], &m.local[..100]);
        assert_eq!(&m.remote[1024..1088], &m.local[512..576]);
        let p = m.model.take_peer_completions_of(0);
        assert_eq!(
            (p.len(), p[0].wr_id, p[0].byte_len, p[0].qp),
            (1, 91, 100, 0)
        );
        // QP 1's peer receive is still posted, untouched.
        assert!(m.model.take_peer_completions_of(1).is_empty());
        assert_eq!(m.model.violations(), Vec::<String>::new());
    }

    #[test]
    fn rnr_retry_2_fails_on_the_third_nak_and_flushes_the_rest() {
        let mut m = multi(ModelConfig {
            rnr_retry: 2,
            ..ModelConfig::default()
        });
        let (send, write) = (m.wr(1, 0, 0, 8), m.wr(2, 0, 64, 8));
        m.sq[0].post(Op::Send, &[send]).unwrap();
        m.sq[0].post(Op::Write, &[write]).unwrap();
        for naks in 1..=2 {
            m.model.step();
            assert!(m.poll_all().is_empty(), "retry {naks}");
            assert_eq!(m.model.stats().rnr_naks, naks);
        }
        m.model.step();
        let got = m.poll_all();
        let st: Vec<_> = got.iter().map(|c| (c.wr_id, c.status)).collect();
        assert_eq!(
            st,
            vec![
                (1, WcStatus::RNR_RETRY_EXC_ERR),
                (2, WcStatus::WR_FLUSH_ERR)
            ]
        );
        assert_eq!(m.model.stats().rnr_naks, 3);
        assert!(m.model.qp_in_error_of(0));
        // The WRITE was flushed, not executed.
        assert_eq!(&m.remote[64..72], &[0u8; 8]);
    }
}
