//! The tool's `--post direct` run (`tool::direct::run_size`, the function
//! `rdma_bw` calls with hardware queues) driven with queues built on the
//! software mlx5 model: parameters parsed from real command lines, targets
//! from the tool's `qp_targets` over perftest's buffer geometry, inline
//! sources allowed by the tool's `allow_buffer`, queues kept across sizes as
//! the tool keeps them. Checks counts, completions per cq_mod, doorbells per
//! post list, report rows and where the data landed.

#[cfg(not(feature = "model"))]
#[test]
fn direct_tool_needs_the_model_feature() {
    println!("SKIPPED: the direct tool-path tests need `--features model`");
}

#[cfg(feature = "model")]
mod common;

#[cfg(feature = "model")]
mod with_model {
    use crate::common::cli::params;
    use crate::common::model_env::register_pair;
    use rdmaperf::cli::params::Params;
    use rdmaperf::clock::Clock;
    use rdmaperf::ctrl::Dest;
    use rdmaperf::model::{Model, ModelConfig, NicStats};
    use rdmaperf::run::geometry::Geometry;
    use rdmaperf::tool::common::landing;
    use rdmaperf::tool::session::bw_measure::qp_targets_shared;
    use rdmaperf::tool::session::bw_result::SizeRun;
    use rdmaperf::tool::session::direct;
    use std::sync::OnceLock;

    const PAGE: u64 = 4096;
    const CACHE_LINE: u64 = 64;

    fn clock() -> &'static Clock {
        static C: OnceLock<Clock> = OnceLock::new();
        C.get_or_init(Clock::calibrate)
    }

    /// What one run left behind: the rows, the client's buffer and the
    /// server's, laid out as `Resources` lays them out (send halves first,
    /// advertised halves after), and the NIC's counters.
    struct Ran {
        runs: Vec<SizeRun>,
        local: Box<[u8]>,
        remote: Box<[u8]>,
        base: Geometry,
        stats: NicStats,
        /// The SQ doorbell record: WQEBBs posted (16 bits).
        sq_pi: u32,
    }

    /// Runs every size of `p` through `direct::run_size` on one model QP.
    /// `before_size` may prepare the buffers, `after_size` checks them (the
    /// NIC is idle between sizes: iteration mode drains the queues).
    fn run(
        p: &Params,
        wrong_rkey: bool,
        mut before_size: impl FnMut(u64, &Geometry, &mut [u8], &mut [u8]),
        mut after_size: impl FnMut(u64, &Geometry, &SizeRun, &[u8], &[u8]),
    ) -> Ran {
        assert_eq!(p.num_qps, 1, "the model has one QP per CQ");
        let base = Geometry::new(p.max_size(), PAGE, CACHE_LINE, 1);
        let mut local: Box<[u8]> = vec![0u8; base.total() as usize].into();
        let mut remote: Box<[u8]> = vec![0u8; base.total() as usize].into();
        // As Resources::create does on a client: the send halves carry the pattern.
        landing::fill_pattern(&mut local[..(base.slot * base.slots) as usize]);
        let mut model = Model::new(ModelConfig {
            // Room for tx_depth WQEs of up to 4 WQEBBs (inline), as libmlx5
            // sizes the SQ for max_send_wr and max_inline_data.
            wqe_cnt: (p.tx_depth * 4).next_power_of_two().min(1 << 15),
            cqe_cnt: p.tx_depth.next_power_of_two().max(2),
            record_history: false,
            ..ModelConfig::default()
        })
        .unwrap();
        let (mut sq, mut cq) = model.pair().unwrap();
        // SAFETY: both buffers outlive the model: it is stopped and the
        // queues dropped before they are returned.
        let (lk, rk) = unsafe { register_pair(&model, &mut local, &mut remote) };
        // SAFETY: the local buffer outlives the SQ (dropped below).
        unsafe { direct::allow_buffer(&mut sq, local.as_ptr(), local.len()) }.unwrap();
        let peer = Dest {
            vaddr: remote.as_ptr() as u64 + base.recv_offset(0),
            rkey: if wrong_rkey { rk.rkey ^ 0x100 } else { rk.rkey },
            ..Dest::default()
        };
        let targets = qp_targets_shared(&base, local.as_ptr() as u64, lk.lkey, &[peer]);
        let mut sqs = [sq];
        model.start();
        let mut runs = Vec::new();
        for &size in &p.sizes {
            let g = Geometry::new(size, PAGE, CACHE_LINE, 1);
            before_size(size, &g, &mut local, &mut remote);
            let r = direct::run_size(p, &base, size, &targets, &mut sqs, &mut cq, clock())
                .unwrap_or_else(|f| panic!("size {size}: {}", f.msg));
            if r.error.is_some() {
                runs.push(r);
                break;
            }
            after_size(size, &g, &r, &local, &remote);
            runs.push(r);
        }
        model.stop();
        let stats = model.stats();
        let sq_pi = model.sq_dbrec();
        if !wrong_rkey {
            assert_eq!(model.violations(), Vec::<String>::new());
        }
        drop(sqs);
        drop(cq);
        drop(model);
        Ran {
            runs,
            local,
            remote,
            base,
            stats,
            sq_pi,
        }
    }

    /// `p`'s run with nothing done between sizes; its first size completed
    /// every iteration.
    fn run_complete(p: &Params) -> Ran {
        let ran = run(p, false, |_, _, _, _| {}, |_, _, _, _, _| {});
        assert_complete(p, &ran.runs[0]);
        ran
    }

    fn assert_complete(p: &Params, r: &SizeRun) {
        assert_eq!(r.error, None);
        assert_eq!(r.outcome.error, None);
        assert_eq!((r.outcome.posted, r.outcome.completed), (p.iters, p.iters));
        assert_eq!(r.row.iters, p.iters);
        assert!(r.row.bw_avg > 0.0 && r.row.msg_rate > 0.0, "{:?}", r.row);
    }

    fn recv_region<'a>(buf: &'a [u8], base: &Geometry) -> &'a [u8] {
        let off = base.recv_offset(0) as usize;
        &buf[off..off + base.slot as usize]
    }

    #[test]
    fn write_bw_lands_every_slot_with_cq_mod_completions_and_blueflame() {
        let p = params("write-bw --post direct -n 1000 -s 64");
        assert_eq!((p.cq_mod, p.post_list, p.tx_depth), (100, 1, 128));
        let ran = run_complete(&p);
        assert_eq!(ran.runs.len(), 1);
        let g = Geometry::new(64, PAGE, CACHE_LINE, 1);
        let l = landing::check(recv_region(&ran.remote, &ran.base), &g, p.iters);
        assert!(l.ok() && l.pattern == l.slots && l.slots == 64, "{l:?}");
        // One WQE per message, one CQE per cq_mod messages, one doorbell per
        // post, and single small WQEs go by BlueFlame.
        assert_eq!(ran.stats.wqes, 1000);
        assert_eq!(ran.stats.cqes, 10);
        assert_eq!(ran.stats.doorbells, 1000);
        assert_eq!(ran.stats.blueflame_doorbells, 1000);
        assert_eq!(ran.stats.error_cqes, 0);
        assert_eq!(ran.sq_pi, 1000, "one WQEBB per gathered WRITE");
    }

    #[test]
    fn write_bw_post_lists_ring_once_per_list() {
        let p = params("write-bw --post direct -n 800 -s 256 -l 8 -Q 4");
        assert_eq!((p.cq_mod, p.post_list), (4, 8));
        let ran = run_complete(&p);
        // perftest posts a list at one address (no cycling with -l).
        let region = recv_region(&ran.remote, &ran.base);
        assert_eq!(&region[..256], &ran.local[..256]);
        assert!(region[256..].iter().all(|&b| b == 0));
        assert_eq!(ran.stats.wqes, 800);
        assert_eq!(ran.stats.cqes, 200);
        assert_eq!(ran.stats.doorbells, 100);
        assert_eq!(ran.stats.blueflame_doorbells, 0);
    }

    #[test]
    fn write_bw_inline_copies_from_the_registered_buffer() {
        let p = params("write-bw --post direct -n 300 -s 100 -I 128 -Q 7");
        assert_eq!((p.inline_size, p.cq_mod), (128, 7));
        let ran = run_complete(&p);
        let g = Geometry::new(100, PAGE, CACHE_LINE, 1);
        let l = landing::check(recv_region(&ran.remote, &ran.base), &g, p.iters);
        assert!(l.ok() && l.pattern == l.slots, "{l:?}");
        // 300 = 42 * 7 + 6: every 7th is signaled, and the last one.
        assert_eq!(ran.stats.cqes, 43);
        // ctrl + raddr + 4-byte inline header + 100 bytes = 9 units: 3 WQEBBs.
        assert_eq!(ran.sq_pi, 900, "inline WQEs");
    }

    #[test]
    fn write_bw_all_sizes_reuse_the_queues_and_land_each_size() {
        let p = params("write-bw --post direct -a -n 20");
        assert_eq!(p.sizes.len(), 23);
        let ran = run(
            &p,
            false,
            |_, _, _, remote| {
                // A zero advertised half (the second: one QP) before each
                // size, as the landing check needs.
                let n = remote.len();
                remote[n / 2..].iter_mut().for_each(|b| *b = 0);
            },
            |size, g, r, _, remote| {
                assert_complete(&p, r);
                let half = remote.len() / 2;
                let l = landing::check(&remote[half..], g, p.iters);
                assert!(l.ok() && l.pattern == l.slots, "size {size}: {l:?}");
            },
        );
        assert_eq!(ran.runs.len(), 23);
        assert_eq!(ran.stats.wqes, 23 * 20);
    }

    #[test]
    fn read_bw_brings_the_peer_data_to_every_slot() {
        for (size, cmd) in [
            (64, "read-bw --post direct -n 1000 -s 64"),
            (8, "read-bw --post direct -n 500 -s 8 -Q 10"),
            (4096, "read-bw --post direct -n 200 -s 4096 -l 4"),
        ] {
            let p = params(cmd);
            let ran = run(
                &p,
                false,
                |_, _, local, remote| {
                    // The peer's advertised half holds data; ours starts zeroed.
                    local.iter_mut().for_each(|b| *b = 0);
                    landing::fill_pattern(remote);
                },
                |_, _, _, _, _| {},
            );
            assert_complete(&p, &ran.runs[0]);
            let g = Geometry::new(size, PAGE, CACHE_LINE, 1);
            let slots = if p.post_list == 1 {
                g.positions().min(p.iters)
            } else {
                1
            };
            let roff = ran.base.recv_offset(0) as usize;
            let (size, step) = (size as usize, g.step() as usize);
            for k in 0..slots as usize {
                let at = k * step;
                assert_eq!(
                    &ran.local[at..at + size],
                    &ran.remote[roff + at..roff + at + size],
                    "{cmd}: slot {k}"
                );
                // Nothing lands between slots.
                assert!(
                    ran.local[at + size..at + step].iter().all(|&b| b == 0),
                    "{cmd}: bytes after slot {k}"
                );
            }
            assert_eq!(ran.stats.cqes, p.iters / p.cq_mod as u64, "{cmd}");
        }
    }

    fn counter(b: &[u8]) -> u64 {
        let ne = u64::from_ne_bytes(b.try_into().unwrap());
        let be = u64::from_be_bytes(b.try_into().unwrap());
        ne.min(be)
    }

    #[test]
    fn atomic_bw_fetch_add_adds_once_per_message_at_each_slot() {
        let p = params("atomic-bw --post direct -n 1000");
        assert_eq!(p.sizes, vec![8]);
        let ran = run(
            &p,
            false,
            |_, _, local, _| local.iter_mut().for_each(|b| *b = 0xff),
            |_, _, _, _, _| {},
        );
        assert_complete(&p, &ran.runs[0]);
        let g = Geometry::new(8, PAGE, CACHE_LINE, 1);
        let (n, step) = (g.positions(), g.step() as usize);
        assert_eq!(n, 64);
        let region = recv_region(&ran.remote, &ran.base);
        let mut total = 0;
        for k in 0..n as usize {
            // Message j goes to slot j % 64.
            let want = p.iters / n + u64::from((k as u64) < p.iters % n);
            let v = counter(&region[k * step..k * step + 8]);
            assert_eq!(v, want, "slot {k}");
            // The last fetch at slot k returned the value before the last add.
            let old = counter(&ran.local[k * step..k * step + 8]);
            assert_eq!(old, want - 1, "fetched value at slot {k}");
            total += v;
        }
        assert_eq!(total, p.iters);
        assert_eq!(ran.stats.cqes, 10);
    }

    #[test]
    fn atomic_bw_fetch_add_post_lists_hit_one_address() {
        let p = params("atomic-bw --post direct -n 400 -l 4 -Q 2");
        let ran = run_complete(&p);
        let region = recv_region(&ran.remote, &ran.base);
        assert_eq!(counter(&region[..8]), 400);
        assert!(region[8..].iter().all(|&b| b == 0));
        assert_eq!((ran.stats.cqes, ran.stats.doorbells), (200, 100));
    }

    #[test]
    fn a_remote_access_error_stops_the_run_with_the_message_the_tool_prints() {
        let p = params("write-bw --post direct -n 100 -s 64 -Q 1");
        let ran = run(&p, true, |_, _, _, _| {}, |_, _, _, _, _| {});
        let r = &ran.runs[0];
        let e = r.error.as_deref().expect("the run must report the error");
        assert!(
            e.contains("completion with error on QP 0") && e.contains("rkey"),
            "{e}"
        );
        assert!(r.outcome.completed < p.iters, "{:?}", r.outcome);
        assert!(ran.stats.error_cqes >= 1);
        assert!(recv_region(&ran.remote, &ran.base).iter().all(|&b| b == 0));
    }

    /// `compare` on the queue model: the direct path is the one method the
    /// model can run; the verbs methods are listed with the reason. Checks
    /// the interleaved repetitions and the JSON (parsed back).
    #[test]
    fn compare_on_the_model_runs_direct_and_lists_the_verbs_methods() {
        use rdmaperf::cli::params::PostChoice;
        use rdmaperf::tool::compare::{compare_with, Unsupported};
        use rdmaperf::tool::session::bw_result::SizeSummary;
        let mut p = params("write-bw --post direct -n 400 -s 64");
        let json =
            std::env::temp_dir().join(format!("rdmaperf-compare-{}.json", std::process::id()));
        p.json_file = Some(json.clone());
        let why = "the queue model has no verbs provider: it models mlx5 queues only";
        let unsupported = [
            Unsupported {
                method: "wr-api",
                reason: why.into(),
            },
            Unsupported {
                method: "post-send",
                reason: why.into(),
            },
        ];
        let mut reps_run = 0;
        compare_with(
            &p,
            3,
            "queue-model",
            &[(PostChoice::Direct, "direct")],
            &unsupported,
            |q| {
                assert_eq!(q.post, PostChoice::Direct);
                assert!(
                    q.json_file.is_none(),
                    "a repetition must not write the report"
                );
                reps_run += 1;
                let ran = run(q, false, |_, _, _, _| {}, |_, _, _, _, _| {});
                assert_complete(q, &ran.runs[0]);
                Ok(SizeSummary::of(q, 64, &ran.runs[0], "direct", clock()))
            },
        )
        .unwrap();
        assert_eq!(reps_run, 3);
        let text = std::fs::read_to_string(&json).unwrap();
        let _ = std::fs::remove_file(&json);
        let j: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(j["test"], "write-bw");
        assert_eq!(j["device"], "queue-model");
        assert_eq!(j["reps"], 3);
        let samples = j["samples"].as_array().unwrap();
        assert_eq!(samples.len(), 3);
        for (i, s) in samples.iter().enumerate() {
            assert_eq!(s["method"], "direct");
            assert_eq!(s["rep"], i as u64);
            assert!(s["mpps"].as_f64().unwrap() > 0.0, "{s}");
            assert!(s["ns_per_call"].as_f64().unwrap() > 0.0, "{s}");
        }
        let summary = j["summary"].as_array().unwrap();
        assert_eq!(summary.len(), 1);
        assert_eq!(summary[0]["method"], "direct");
        assert_eq!(summary[0]["reps"], 3);
        // No post-send run: no ratio to it.
        assert!(summary[0]["ratio_to_post_send"].is_null());
        let unsup = j["unsupported"].as_array().unwrap();
        assert_eq!(unsup.len(), 2);
        assert!(unsup.iter().all(|u| u["reason"] == why));
        assert_eq!(j["units"]["mpps"], "Mpps");
    }

    /// send-bw's client loop (`run_size`, the function the tool's direct
    /// path calls; send-bw itself is not wired to `--post direct` yet) on a
    /// model QP whose peer keeps `-r` receives posted and reposts each as it
    /// completes (rnr_retry 7: a SEND without a receive waits, as perftest's
    /// QPs do). Returns the run and the receives the peer saw (count, first
    /// message's bytes, any bad completion).
    fn run_send(p: &Params) -> (SizeRun, u64, Vec<u8>, Vec<String>, NicStats) {
        let size = p.sizes[0];
        let base = Geometry::new(p.max_size(), PAGE, CACHE_LINE, 1);
        let mut local: Box<[u8]> = vec![0u8; base.total() as usize].into();
        landing::fill_pattern(&mut local[..(base.slot * base.slots) as usize]);
        let depth = p.rx_depth as usize;
        let mut rx = vec![0u8; depth * size as usize];
        let mut model = Model::new(ModelConfig {
            wqe_cnt: (p.tx_depth * 4).next_power_of_two(),
            cqe_cnt: p.tx_depth.next_power_of_two().max(2),
            record_history: false,
            rnr_retry: 7,
            ..ModelConfig::default()
        })
        .unwrap();
        let (mut sq, mut cq) = model.pair().unwrap();
        // SAFETY: both buffers outlive the model: it is stopped and the
        // queues dropped before they are read or dropped.
        let (lk, rxk) = unsafe { register_pair(&model, &mut local, &mut rx) };
        // SAFETY: the local buffer outlives the SQ (dropped below).
        unsafe { direct::allow_buffer(&mut sq, local.as_ptr(), local.len()) }.unwrap();
        let targets = qp_targets_shared(&base, local.as_ptr() as u64, lk.lkey, &[Dest::default()]);
        let rx_at = rx.as_mut_ptr() as usize;
        let at = move |s: u64| (rx_at + s as usize * size as usize) as *mut u8;
        for s in 0..depth as u64 {
            model.post_peer_recv(s, at(s), size as u32, rxk.lkey);
        }
        model.start();
        let done = std::sync::atomic::AtomicBool::new(false);
        let mut sqs = [sq];
        let (r, (got, first, bad)) = std::thread::scope(|sc| {
            let m = &model;
            let done = &done;
            let peer = sc.spawn(move || {
                let (mut got, mut first, mut bad) = (0u64, Vec::new(), Vec::new());
                loop {
                    let finished = done.load(std::sync::atomic::Ordering::Acquire);
                    let cs = m.take_peer_completions();
                    for c in &cs {
                        if !c.ok || c.byte_len as u64 != size {
                            bad.push(format!("{c:?}"));
                        }
                        if got == 0 {
                            first = vec![0u8; size as usize];
                            // SAFETY: the slot is in the registered receive
                            // buffer, written before it completed and not
                            // again until reposted below.
                            unsafe {
                                std::ptr::copy_nonoverlapping(
                                    at(c.wr_id),
                                    first.as_mut_ptr(),
                                    size as usize,
                                )
                            };
                        }
                        got += 1;
                        m.post_peer_recv(c.wr_id, at(c.wr_id), size as u32, rxk.lkey);
                    }
                    if finished && cs.is_empty() {
                        return (got, first, bad);
                    }
                    std::thread::yield_now();
                }
            });
            let r = direct::run_size(p, &base, size, &targets, &mut sqs, &mut cq, clock())
                .unwrap_or_else(|f| panic!("size {size}: {}", f.msg));
            done.store(true, std::sync::atomic::Ordering::Release);
            (r, peer.join().unwrap())
        });
        model.stop();
        assert_eq!(model.violations(), Vec::<String>::new());
        let stats = model.stats();
        drop((sqs, cq, model));
        assert_eq!(&first[..], &local[..first.len()], "first message's bytes");
        (r, got, first, bad, stats)
    }

    #[test]
    fn send_bw_client_loop_over_direct_queues_with_post_lists_and_cq_mod() {
        let p = params("send-bw --post direct -n 600 -s 512 -l 4 -Q 2 -r 8");
        assert_eq!((p.cq_mod, p.post_list, p.rx_depth), (2, 4, 8));
        let (r, got, first, bad, stats) = run_send(&p);
        assert_complete(&p, &r);
        assert_eq!(got, 600);
        assert_eq!(first.len(), 512);
        assert_eq!(bad, Vec::<String>::new());
        assert_eq!(stats.wqes, 600);
        assert_eq!(stats.cqes, 300);
        assert_eq!(stats.doorbells, 150);
        assert_eq!(stats.error_cqes, 0);
    }

    #[test]
    fn send_bw_client_loop_cq_mod_with_a_small_receive_queue() {
        // -r 2 under lists of 4 (one doorbell each): every list meets RNR
        // NAKs and waits for the peer's reposts.
        let p = params("send-bw --post direct -n 400 -s 64 -l 4 -Q 4 -r 2");
        let (r, got, _first, bad, stats) = run_send(&p);
        assert_complete(&p, &r);
        assert_eq!((got, bad.len()), (400, 0));
        assert_eq!(stats.cqes, 100);
        assert!(stats.rnr_naks > 0, "{stats:?}");
    }
}
