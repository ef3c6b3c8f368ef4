//! The same bw loop the verbs path uses (`run::bw::BwLoop`), run over the mlx5
//! direct path (`DirectSq`/`DirectCq`) against the software queue model with
//! its NIC thread: WRITE, READ, SEND and atomics with post lists and cq_mod,
//! over one or several QPs on one CQ, data checked where it landed (SEND: by
//! a peer thread that checks and reposts each receive, in order).

#[cfg(not(feature = "model"))]
#[test]
fn direct_bw_needs_the_model_feature() {
    println!("SKIPPED: the direct-path bw tests need `--features model`");
}

#[cfg(feature = "model")]
mod with_model {
    use rdmaperf::model::{Access, Model, ModelConfig};
    use rdmaperf::post::{Completion, Op, WrDesc};
    use rdmaperf::run::bw::{signaled, BwConfig, BwLoop, QpCount, QpTarget};
    use std::sync::atomic::{AtomicBool, Ordering};

    const BUF: usize = 1 << 16;

    /// One bw run over `qps` model QPs sharing one CQ.
    #[derive(Clone, Copy)]
    struct Case {
        op: Op,
        size: u32,
        iters: u64,
        post_list: u32,
        cq_mod: u32,
        positions: u64,
        qps: u32,
        /// SEND: receives each QP's peer keeps posted (reposted as consumed).
        rx_depth: u32,
    }

    impl Case {
        fn new(op: Op, size: u32, iters: u64, post_list: u32, cq_mod: u32) -> Self {
            Self {
                op,
                size,
                iters,
                post_list,
                cq_mod,
                positions: 1,
                qps: 1,
                rx_depth: 0,
            }
        }
        fn cfg(&self) -> BwConfig {
            BwConfig {
                op: self.op,
                size: self.size,
                iters: self.iters,
                post_list: self.post_list,
                tx_depth: 32,
                cq_mod: self.cq_mod,
                inline: false,
                positions: self.positions,
                step: 64.max(self.size as u64),
                // Generous: under valgrind (scripts/sanitize.sh) the model's NIC
                // thread runs far slower.
                stall_ticks: 300_000_000_000,
                cost: false,
            }
        }
        /// Offset in the source buffer of message `k` (the loop's cycling).
        fn offset(&self, k: u64) -> usize {
            if self.post_list == 1 {
                ((k % self.positions) * 64.max(self.size as u64)) as usize
            } else {
                0
            }
        }
        /// CQEs one QP's messages ask for (perftest's signalling).
        fn signaled_per_qp(&self) -> u64 {
            let cfg = self.cfg();
            (0..self.iters)
                .filter(|&k| signaled(k, (k % self.post_list as u64) as u32, &cfg))
                .count() as u64
        }
    }

    /// What a run left: per-QP source and target buffers, counts, and the
    /// model (stopped) for its counters.
    struct Ran {
        local: Vec<Box<[u8]>>,
        remote: Vec<Box<[u8]>>,
        counts: Vec<QpCount>,
        /// SEND: receives completed per QP at the peer, checked in order.
        received: Vec<u64>,
        model: Model,
    }

    fn run(c: Case) -> (Box<[u8]>, Box<[u8]>, Model) {
        let mut r = run_case(c);
        (r.local.remove(0), r.remote.remove(0), r.model)
    }

    /// The peer of every QP for SEND: keeps `rx_depth` receives posted per
    /// QP in its own slots, checks each completion (in order: the data of
    /// the k-th message of that QP, its length, its opcode) and reposts it.
    /// Returns receives per QP, or the first mismatch.
    fn peer(
        model: &Model,
        c: &Case,
        rx: usize,
        rx_lkey: u32,
        expect: &[Box<[u8]>],
        sender_done: &AtomicBool,
    ) -> Result<Vec<u64>, String> {
        let slot = c.size as usize;
        let at = |q: usize, s: u64| (rx + (q * c.rx_depth as usize + s as usize) * slot) as *mut u8;
        for q in 0..c.qps as usize {
            for s in 0..c.rx_depth as u64 {
                model.post_peer_recv_on(q, s, at(q, s), c.size, rx_lkey);
            }
        }
        let mut got = vec![0u64; c.qps as usize];
        while got.iter().any(|&g| g < c.iters) {
            let done = sender_done.load(Ordering::Acquire);
            for (q, g) in got.iter_mut().enumerate() {
                for pc in model.take_peer_completions_of(q) {
                    let mut data = vec![0u8; slot];
                    // SAFETY: the slot lies in the registered receive buffer;
                    // the NIC wrote it before completing (under the model's
                    // lock, taken again by take_peer_completions_of) and does
                    // not write it again until it is reposted below.
                    unsafe {
                        std::ptr::copy_nonoverlapping(at(q, pc.wr_id), data.as_mut_ptr(), slot)
                    };
                    let off = c.offset(*g);
                    if !pc.ok || pc.byte_len != c.size || pc.opcode != 0x0a || pc.qp != q as u32 {
                        return Err(format!("QP {q} receive {g}: {pc:?}"));
                    }
                    if data[..] != expect[q][off..off + slot] {
                        return Err(format!("QP {q} receive {g}: data is not message {g}'s"));
                    }
                    *g += 1;
                    model.post_peer_recv_on(q, pc.wr_id, at(q, pc.wr_id), c.size, rx_lkey);
                }
            }
            if done && got.iter().any(|&g| g < c.iters) {
                // The sender ended (maybe in error): whatever arrived is all.
                let late: usize = (0..c.qps as usize)
                    .map(|q| model.take_peer_completions_of(q).len())
                    .sum();
                if late == 0 {
                    break;
                }
            }
            std::thread::yield_now();
        }
        Ok(got)
    }

    fn run_case(c: Case) -> Ran {
        let mut model = Model::new(ModelConfig {
            wqe_cnt: 64,
            cqe_cnt: 32 * c.qps.next_power_of_two(),
            qps: c.qps,
            rnr_retry: 7,
            ..ModelConfig::default()
        })
        .unwrap();
        let (mut sqs, mut cq) = model.queues().unwrap();
        let nq = c.qps as usize;
        let mut local: Vec<Box<[u8]>> = (0..nq)
            .map(|q| (0..BUF).map(|i| (i * 13 + 5 + q * 71) as u8).collect())
            .collect();
        let mut remote: Vec<Box<[u8]>> = (0..nq)
            .map(|q| (0..BUF).map(|i| (i * 3 + 1 + q * 29) as u8).collect())
            .collect();
        if matches!(c.op, Op::FetchAdd | Op::CmpSwap) {
            remote.iter_mut().for_each(|r| r.fill(0));
        }
        let mut rx = vec![0u8; (nq * c.rx_depth as usize * c.size as usize).max(1)];
        // SAFETY: every buffer outlives the model's use of it: the model is
        // stopped (below) before they are returned, read or dropped.
        let (targets, rx_lkey) = unsafe {
            let t: Vec<QpTarget> = local
                .iter_mut()
                .zip(remote.iter_mut())
                .map(|(l, r)| {
                    let lk = model.register(l.as_mut_ptr(), BUF, Access::ALL);
                    let rk = model.register(r.as_mut_ptr(), BUF, Access::ALL);
                    QpTarget {
                        laddr: l.as_ptr() as u64,
                        lkey: lk.lkey,
                        raddr: r.as_ptr() as u64,
                        rkey: rk.rkey,
                    }
                })
                .collect();
            (
                t,
                model.register(rx.as_mut_ptr(), rx.len(), Access::ALL).lkey,
            )
        };
        let rx_addr = rx.as_mut_ptr() as usize;
        model.start();
        let mut counts = vec![QpCount::default(); nq];
        let sender_done = AtomicBool::new(false);
        let expect = local.clone();
        let (out, received) = std::thread::scope(|s| {
            let model = &model;
            let peer = (c.op == Op::Send)
                .then(|| s.spawn(|| peer(model, &c, rx_addr, rx_lkey, &expect, &sender_done)));
            let out = BwLoop {
                cfg: c.cfg(),
                sqs: &mut sqs,
                cq: &mut cq,
                targets: &targets,
                counts: &mut counts,
                list: &mut vec![WrDesc::default(); c.post_list as usize],
                wcs: &mut [Completion::default(); 16],
                tposted: &mut [],
                tcompleted: &mut [],
                deadlines: None,
                periods: None,
                now: rdmaperf::clock::now,
            }
            .run();
            sender_done.store(true, Ordering::Release);
            let received = peer.map(|p| p.join().unwrap());
            (out, received)
        });
        model.stop();
        assert_eq!(out.error, None, "{out:?}");
        let total = c.iters * c.qps as u64;
        assert_eq!((out.posted, out.completed), (total, total));
        assert_eq!(model.violations(), Vec::<String>::new());
        let received = match received {
            Some(r) => r.unwrap_or_else(|e| panic!("peer: {e}")),
            None => Vec::new(),
        };
        drop((sqs, cq));
        Ran {
            local,
            remote,
            counts,
            received,
            model,
        }
    }

    /// [`run_case`] and then [`assert_per_qp`].
    fn run_checked(c: Case) -> Ran {
        let r = run_case(c);
        assert_per_qp(&r, &c);
        r
    }

    /// Per-QP checks every multi-QP case makes: each QP posted and completed
    /// its own `iters`, its SQ saw exactly its WQEs and the CQ carried
    /// exactly the CQEs its signalling asked for.
    fn assert_per_qp(r: &Ran, c: &Case) {
        for q in 0..c.qps as usize {
            assert_eq!(
                (r.counts[q].scnt, r.counts[q].ccnt),
                (c.iters, c.iters),
                "QP {q}"
            );
            let st = r.model.stats_of(q);
            assert_eq!(st.wqes, c.iters, "QP {q} WQEs: {st:?}");
            assert_eq!(st.cqes, c.signaled_per_qp(), "QP {q} CQEs: {st:?}");
            assert_eq!(st.error_cqes, 0, "QP {q}: {st:?}");
            // One WQEBB per WQE here: the doorbell record is the WQE count.
            assert_eq!(r.model.sq_dbrec_of(q) as u64, c.iters & 0xffff, "QP {q}");
            assert!(!r.model.qp_in_error_of(q));
        }
    }

    #[test]
    fn write_bw_with_address_cycling_lands_every_slot() {
        let (local, remote, _m) = run(Case {
            positions: 64,
            ..Case::new(Op::Write, 64, 1000, 1, 10)
        });
        for k in 0..64 {
            assert_eq!(
                &remote[k * 64..k * 64 + 64],
                &local[k * 64..k * 64 + 64],
                "slot {k}"
            );
        }
        // Past the 64 slots nothing was written.
        assert_eq!(remote[64 * 64], ((64 * 64) * 3 + 1) as u8);
    }

    #[test]
    fn write_bw_post_lists_of_8_with_cq_mod_4() {
        let (local, remote, _m) = run(Case::new(Op::Write, 256, 800, 8, 4));
        assert_eq!(&remote[..256], &local[..256]);
    }

    #[test]
    fn read_bw_brings_remote_data_home() {
        let (local, remote, _m) = run(Case::new(Op::Read, 4096, 200, 1, 1));
        assert_eq!(&local[..4096], &remote[..4096]);
    }

    #[test]
    fn atomic_bw_fetch_add_counts_every_message() {
        // Every fetch-add adds 1 at the same remote address (no cycling).
        let (_l, remote, _m) = run(Case::new(Op::FetchAdd, 8, 500, 1, 10));
        let v = u64::from_be_bytes(remote[..8].try_into().unwrap());
        let v_le = u64::from_le_bytes(remote[..8].try_into().unwrap());
        assert!(
            v == 500 || v_le == 500,
            "remote counter {v:#x}/{v_le:#x}, want 500"
        );
    }

    #[test]
    fn send_bw_post_lists_of_8_with_cq_mod_4_under_rnr_back_pressure() {
        // 4 receives per peer, lists of 8: every list runs into RNR NAKs and
        // waits for the peer to repost (rnr_retry 7), never an error.
        let r = run_checked(Case {
            rx_depth: 4,
            ..Case::new(Op::Send, 256, 800, 8, 4)
        });
        assert_eq!(r.received, vec![800]);
        assert!(r.model.stats().rnr_naks > 0, "{:?}", r.model.stats());
    }

    #[test]
    fn send_bw_cycles_sources_and_arrives_in_order() {
        // Post list 1 cycles 16 source slots: the peer checks message k's data.
        let r = run_checked(Case {
            positions: 16,
            rx_depth: 32,
            ..Case::new(Op::Send, 128, 600, 1, 16)
        });
        assert_eq!(r.received, vec![600]);
    }

    #[test]
    fn send_bw_two_qps_each_into_its_own_peer() {
        let r = run_checked(Case {
            qps: 2,
            positions: 8,
            rx_depth: 8,
            ..Case::new(Op::Send, 64, 400, 1, 4)
        });
        assert_eq!(r.received, vec![400, 400]);
    }

    fn write_bw_qps(qps: u32) {
        let r = run_checked(Case {
            qps,
            ..Case::new(Op::Write, 512, 640, 8, 4)
        });
        for q in 0..qps as usize {
            // Lists write at offset 0: each QP's own source, in its own target.
            assert_eq!(&r.remote[q][..512], &r.local[q][..512], "QP {q}");
            assert_eq!(
                r.remote[q][512],
                ((512 * 3 + 1 + q * 29) & 0xff) as u8,
                "QP {q}"
            );
        }
    }

    #[test]
    fn write_bw_two_qps_one_cq_post_lists_and_cq_mod() {
        write_bw_qps(2);
    }

    #[test]
    fn write_bw_four_qps_one_cq_post_lists_and_cq_mod() {
        write_bw_qps(4);
    }

    #[test]
    fn write_bw_four_qps_cycling_with_cq_mod() {
        // Post list 1: every QP cycles 32 slots of its own target.
        let r = run_checked(Case {
            qps: 4,
            positions: 32,
            ..Case::new(Op::Write, 64, 500, 1, 8)
        });
        for q in 0..4 {
            assert_eq!(&r.remote[q][..32 * 64], &r.local[q][..32 * 64], "QP {q}");
            assert_eq!(
                r.remote[q][32 * 64],
                ((32 * 64 * 3 + 1 + q * 29) & 0xff) as u8
            );
        }
    }

    #[test]
    fn read_and_atomic_bw_over_three_qps() {
        let r = run_checked(Case {
            qps: 3,
            ..Case::new(Op::Read, 1024, 300, 4, 2)
        });
        for q in 0..3 {
            assert_eq!(&r.local[q][..1024], &r.remote[q][..1024], "QP {q}");
        }
        let r = run_checked(Case {
            qps: 3,
            ..Case::new(Op::FetchAdd, 8, 250, 1, 5)
        });
        for q in 0..3 {
            let v = u64::from_le_bytes(r.remote[q][..8].try_into().unwrap());
            let v_be = u64::from_be_bytes(r.remote[q][..8].try_into().unwrap());
            assert!(v == 250 || v_be == 250, "QP {q}: {v:#x}");
        }
    }
}
