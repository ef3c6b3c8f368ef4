//! The hot path allocates nothing and makes no system calls in steady state.
//!
//! A counting global allocator counts allocations made by the current thread
//! while its `COUNTING` flag is set. Measured: the direct `post()` + `poll()`
//! loop, and the whole `run::bw::BwLoop::run()` over `DirectSq`/`DirectCq`,
//! both on the queue model with the real stores (`HwMmio`). The model's NIC
//! (which stands in for hardware and allocates freely) runs outside the
//! counted region: between posts in step mode, or on its own thread.
//!
//! The syscall check re-runs this test binary under `strace -f` and counts
//! the system calls of the thread running the bw loop between two marker
//! calls (SKIPPED where strace is absent or cannot trace).

#[cfg(not(feature = "model"))]
#[test]
fn no_alloc_needs_the_model_feature() {
    println!("SKIPPED: the no-allocation tests need `--features model`");
}

#[cfg(feature = "model")]
mod common;

#[cfg(feature = "model")]
mod with_model {
    use crate::common::model_env::{finish, Env};
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;
    use std::sync::atomic::{AtomicBool, Ordering};

    use rdmaperf::mlx5::raw_sq::{RawPkt, RawSqConfig};
    use rdmaperf::mlx5::rq::DirectRq;
    use rdmaperf::mlx5::{DirectSq, HwMmio};
    use rdmaperf::model::{Access, FlowRule, Model, ModelConfig, RecvSpec};
    use rdmaperf::post::RecvQueue;
    use rdmaperf::post::{Completion, CompletionQueue, Op, SendQueue, WcStatus, WrDesc};
    use rdmaperf::run::bw::{BwConfig, BwLoop, QpCount, QpTarget};
    use rdmaperf::run::raw_bw::Direct;
    use rdmaperf::run::raw_lat::{RawLatConfig, RawLatLoop, RawQp, RxRing};
    use rdmaperf::run::raw_recv::{
        post_all, run_raw_recv, DirectRx, RawRecvCfg, RawRecvCounts, RawRecvError, RxClassify,
        VerbsRx,
    };
    use std::cell::RefCell;
    use std::collections::VecDeque;

    struct Counting;

    thread_local! {
        static COUNTING: Cell<bool> = const { Cell::new(false) };
        // Per thread: tests run in parallel threads, and a global counter
        // would add another test's counted allocations to this one's.
        static ALLOCS: Cell<u64> = const { Cell::new(0) };
    }

    fn note() {
        // try_with: the allocator may run during thread teardown.
        if COUNTING.try_with(|c| c.get()).unwrap_or(false) {
            let _ = ALLOCS.try_with(|a| a.set(a.get() + 1));
        }
    }

    // SAFETY: forwards every call unchanged to the system allocator; the
    // counter and the flag are const-initialised thread-locals (neither
    // allocates).
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, l: Layout) -> *mut u8 {
            note();
            // SAFETY: the caller's contract, forwarded.
            unsafe { System.alloc(l) }
        }
        unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
            note();
            // SAFETY: the caller's contract, forwarded.
            unsafe { System.alloc_zeroed(l) }
        }
        unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
            note();
            // SAFETY: the caller's contract, forwarded.
            unsafe { System.realloc(p, l, n) }
        }
        unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
            // SAFETY: the caller's contract, forwarded.
            unsafe { System.dealloc(p, l) }
        }
    }

    #[global_allocator]
    static A: Counting = Counting;

    /// Allocations this thread makes while running `f`.
    fn count<R>(f: impl FnOnce() -> R) -> (u64, R) {
        let before = ALLOCS.with(|a| a.get());
        COUNTING.with(|c| c.set(true));
        let r = f();
        COUNTING.with(|c| c.set(false));
        (ALLOCS.with(|a| a.get()) - before, r)
    }

    type Rig = Env<DirectSq<HwMmio>>;

    fn rig(wqe_cnt: u32) -> Rig {
        let model = Model::new(ModelConfig {
            wqe_cnt,
            cqe_cnt: wqe_cnt,
            record_history: false,
            ..ModelConfig::default()
        })
        .unwrap();
        let (sq, cq) = model.pair_with(HwMmio).unwrap();
        finish(model, sq, cq)
    }

    /// The counter sees allocations at all (else the zero below proves nothing).
    #[test]
    fn the_counter_counts() {
        let (n, v) = count(|| vec![1u8; 100]);
        assert!(n >= 1, "counting allocator missed a Vec allocation");
        drop(v);
    }

    /// Direct post (single WQE with BlueFlame, inline, post lists of 16) and
    /// CQ poll over many ring wraps: zero allocations on this thread.
    #[test]
    fn direct_post_and_poll_allocate_nothing() {
        let mut r = rig(64);
        let wr = |i: u64, inline: bool, len: u32, signaled: bool| WrDesc {
            wr_id: i,
            laddr: r.local.as_ptr() as u64 + (i % 64) * 64,
            lkey: r.lk.lkey,
            len,
            raddr: r.remote.as_ptr() as u64 + (i % 64) * 64,
            rkey: r.rk.rkey,
            signaled,
            inline,
            ..WrDesc::default()
        };
        let single = [wr(1, false, 64, true)];
        let inline = [wr(2, true, 60, true)];
        let list: Vec<WrDesc> = (0..16).map(|i| wr(i, false, 64, i == 15)).collect();
        let mut wcs = [Completion::default(); 16];
        let mut total = 0u64;
        let mut completed = 0u64;
        for round in 0..200u64 {
            let (n, res) = count(|| match round % 3 {
                0 => r.sq.post(Op::Write, &single),
                1 => r.sq.post(Op::Write, &inline),
                _ => r.sq.post(Op::Write, &list),
            });
            assert_eq!(res, Ok(()), "round {round}");
            total += n;
            // The NIC stands in for hardware: not counted.
            r.model.step_dbrec();
            let (n, got) = count(|| {
                let mut got = 0;
                while r.sq.outstanding() != 0 {
                    match r.cq.poll(&mut wcs) {
                        Ok(k) => {
                            got += k;
                            if wcs[..k].iter().any(|w| w.status != WcStatus::SUCCESS) {
                                return Err(wcs[0]);
                            }
                        }
                        Err(_) => return Err(Completion::default()),
                    }
                }
                Ok(got)
            });
            total += n;
            completed += got.expect("completions are successful") as u64;
        }
        assert_eq!(completed, 200, "one signaled WQE per round");
        assert!(
            r.model.violations().is_empty(),
            "{:?}",
            r.model.violations()
        );
        assert_eq!(r.remote[..64], r.local[..64]);
        assert_eq!(
            total, 0,
            "the direct post/poll path allocated {total} times"
        );
    }

    /// The NIC on its own thread, driven by the doorbell record (spins, no
    /// syscalls of its own needed) until `stop`.
    fn nic_thread<'s>(
        s: &'s std::thread::Scope<'s, '_>,
        model: &'s Model,
        stop: &'s AtomicBool,
    ) -> std::thread::ScopedJoinHandle<'s, ()> {
        s.spawn(move || {
            while !stop.load(Ordering::Acquire) {
                if model.step_dbrec() == 0 {
                    std::hint::spin_loop();
                }
            }
        })
    }

    /// Runs `f` with `model`'s NIC stepping on a thread of its own (see
    /// [`nic_thread`]), stopped and joined when `f` returns.
    fn with_nic<R>(model: &Model, f: impl FnOnce() -> R) -> R {
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            let nic = nic_thread(s, model, &stop);
            let res = f();
            stop.store(true, Ordering::Release);
            nic.join().unwrap();
            res
        })
    }

    fn bw_cfg(iters: u64, post_list: u32, cq_mod: u32, inline: bool) -> BwConfig {
        BwConfig {
            op: Op::Write,
            size: if inline { 32 } else { 64 },
            iters,
            post_list,
            tx_depth: 32,
            cq_mod,
            inline,
            positions: 16,
            step: 64,
            stall_ticks: u64::MAX / 4,
            // Timing each post call must not allocate either.
            cost: true,
        }
    }

    /// Runs the bw loop (counted on this thread) with the NIC on a thread.
    fn run_bw(r: &mut Rig, cfg: BwConfig, marker: bool) -> (u64, rdmaperf::run::bw::BwOutcome) {
        run_bw_paced(r, cfg, marker, None)
    }

    /// [`run_bw`], paced by the SW rate limiter (`burst` messages every `gap` ticks) when given.
    fn run_bw_paced(
        r: &mut Rig,
        cfg: BwConfig,
        marker: bool,
        pace: Option<(u64, u32)>,
    ) -> (u64, rdmaperf::run::bw::BwOutcome) {
        let target = [QpTarget {
            laddr: r.local.as_ptr() as u64,
            lkey: r.lk.lkey,
            raddr: r.remote.as_ptr() as u64,
            rkey: r.rk.rkey,
        }];
        let mut counts = [QpCount::default()];
        let mut list = vec![WrDesc::default(); cfg.post_list as usize];
        let mut wcs = [Completion::default(); 16];
        let Rig { model, sq, cq, .. } = r;
        let sqs = std::slice::from_mut(sq);
        with_nic(model, || {
            let mut bw = BwLoop {
                cfg,
                sqs,
                cq,
                targets: &target,
                counts: &mut counts,
                list: &mut list,
                wcs: &mut wcs,
                tposted: &mut [],
                tcompleted: &mut [],
                deadlines: None,
                periods: None,
                now: rdmaperf::clock::now,
            };
            if marker {
                syscall_marker(b"RDMAPERF_LOOP_BEGIN");
            }
            let res = count(|| match pace {
                Some((gap, burst)) => bw.run_paced(&mut rdmaperf::run::pace::SwPace::new(
                    gap,
                    burst,
                    rdmaperf::clock::now(),
                )),
                None => bw.run(),
            });
            if marker {
                syscall_marker(b"RDMAPERF_LOOP_END");
            }
            res
        })
    }

    /// A system call strace shows verbatim: write(-1, "<tag>", n) = EBADF.
    fn syscall_marker(tag: &[u8]) {
        // SAFETY: writing from a valid buffer to an invalid fd only fails.
        unsafe { libc::write(-1, tag.as_ptr().cast(), tag.len()) };
    }

    /// `run::bw::BwLoop::run()` over the direct SQ/CQ: single WRs with
    /// BlueFlame, post lists of 8, and inline WRITEs, zero allocations.
    #[test]
    fn bw_loop_over_the_direct_path_allocates_nothing() {
        for (pl, cq_mod, inline) in [(1, 4, false), (8, 8, false), (1, 1, true)] {
            let mut r = rig(64);
            let cfg = bw_cfg(4000, pl, cq_mod, inline);
            let (n, out) = run_bw(&mut r, cfg, false);
            assert_eq!(out.error, None, "post_list {pl}");
            assert_eq!((out.posted, out.completed), (4000, 4000));
            assert!(
                r.model.violations().is_empty(),
                "{:?}",
                r.model.violations()
            );
            assert_eq!(
                n, 0,
                "BwLoop::run over the direct path allocated {n} times (post_list {pl}, inline {inline})"
            );
        }
    }

    /// The SW rate limiter's loop (`--rate_limit_type=SW`) allocates nothing either.
    #[test]
    fn paced_bw_loop_allocates_nothing() {
        let mut r = rig(64);
        let (n, out) = run_bw_paced(&mut r, bw_cfg(2000, 1, 4, false), false, Some((2000, 8)));
        assert_eq!(out.error, None);
        assert_eq!((out.posted, out.completed), (2000, 2000));
        assert_eq!(n, 0, "the paced BwLoop allocated {n} times");
    }

    /// Child side of the syscall check (run under strace by the parent).
    #[test]
    #[ignore = "the traced child of bw_loop_makes_no_syscalls, run by it"]
    fn syscall_child() {
        // Control region: the parser must see this one call.
        syscall_marker(b"RDMAPERF_CTRL_BEGIN");
        // SAFETY: getppid has no preconditions.
        unsafe { libc::getppid() };
        syscall_marker(b"RDMAPERF_CTRL_END");
        let mut r = rig(64);
        let (_, out) = run_bw(&mut r, bw_cfg(20_000, 1, 4, false), true);
        assert_eq!(out.error, None);
        assert_eq!(out.completed, 20_000);
    }

    /// The calls one thread made between `<tag>_BEGIN` and `<tag>_END`.
    fn between(logs: &[String], tag: &str) -> Vec<String> {
        let (b, e) = (format!("{tag}_BEGIN"), format!("{tag}_END"));
        let log = logs
            .iter()
            .find(|t| t.contains(&b))
            .unwrap_or_else(|| panic!("{b} marker in a strace log"));
        let mut lines = log.lines().skip_while(|l| !l.contains(&b));
        lines.next();
        let mut inside = Vec::new();
        for l in lines {
            if l.contains(&e) {
                return inside;
            }
            inside.push(l.to_string());
        }
        panic!("{e} marker missing from the strace log");
    }

    /// Between the markers, the thread running the bw loop makes no system
    /// call at all (the NIC thread's, a stand-in for hardware, are ignored).
    #[test]
    fn bw_loop_makes_no_syscalls() {
        let strace = std::process::Command::new("strace").arg("-V").output();
        if !strace.is_ok_and(|o| o.status.success()) {
            println!("SKIPPED: strace is not installed (apt-get install strace)");
            return;
        }
        let exe = std::env::current_exe().unwrap();
        let dir = std::env::temp_dir().join(format!("rdmaperf-no-syscall-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // -ff: one log per thread, so no call is split across lines.
        let st = std::process::Command::new("strace")
            .arg("-ff")
            .arg("-o")
            .arg(dir.join("t"))
            .arg(&exe)
            .args([
                "--exact",
                "with_model::syscall_child",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .output()
            .unwrap();
        let logs: Vec<String> = std::fs::read_dir(&dir)
            .map(|d| {
                d.filter_map(|e| std::fs::read_to_string(e.ok()?.path()).ok())
                    .collect()
            })
            .unwrap_or_default();
        let _ = std::fs::remove_dir_all(&dir);
        let err = String::from_utf8_lossy(&st.stderr);
        if !st.status.success() && err.contains("Exec format error") {
            // A cross-built test binary run by qemu-user (the aarch64 CI step): the host's
            // strace cannot exec it, and qemu's own system calls would not be the loop's.
            println!("SKIPPED: strace cannot run this binary (emulated architecture): {err}");
            return;
        }
        if !st.status.success() && logs.is_empty() {
            println!(
                "SKIPPED: strace cannot trace here (ptrace not permitted?): {}",
                err.trim()
            );
            return;
        }
        assert!(
            st.status.success(),
            "child failed: {}\n{}",
            String::from_utf8_lossy(&st.stdout),
            String::from_utf8_lossy(&st.stderr)
        );
        let ctrl = between(&logs, "RDMAPERF_CTRL");
        assert!(
            ctrl.len() == 1 && ctrl[0].starts_with("getppid"),
            "the log parser missed the control call: {ctrl:?}"
        );
        let inside = between(&logs, "RDMAPERF_LOOP");
        assert!(
            inside.is_empty(),
            "the bw loop thread made {} system calls:\n{}",
            inside.len(),
            inside.join("\n")
        );
    }

    /// The raw Ethernet SQ (one SEND WQE per packet, and eMPW with pointers
    /// and inline) and the poll of its sparse completions allocate nothing.
    #[test]
    fn raw_posts_allocate_nothing() {
        let mut buf = vec![0u8; 64 * 64];
        let model = Model::new(ModelConfig::raw_eth_loop(256)).unwrap();
        // SAFETY: `buf` outlives the model (declared first).
        let mr = unsafe { model.register(buf.as_mut_ptr(), buf.len(), Access::NONE) };
        let cfg = RawSqConfig::new(mr.lkey, 1);
        let (mut sq, mut cq) = model.raw_pair_with(cfg, HwMmio).unwrap();
        // SAFETY: as above.
        unsafe { sq.set_frame_source(buf.as_ptr(), buf.len()) };
        let pkts: Vec<RawPkt> = (0..64)
            .map(|i| RawPkt {
                addr: buf.as_ptr() as u64 + i * 64,
                len: 60,
            })
            .collect();
        let mut wc = [Completion::default(); 64];
        for round in 0..6 {
            let (n, r) = count(|| match round % 3 {
                0 => sq.post_send(&pkts[..16]),
                1 => sq.post_mpw(&pkts, false),
                _ => sq.post_mpw(&pkts, true),
            });
            r.unwrap();
            assert_eq!(n, 0, "round {round}: the post allocated");
            assert!(model.step_dbrec() > 0);
            let (n, k) = count(|| cq.poll(&mut wc).unwrap());
            assert!(k > 0);
            assert_eq!(n, 0, "round {round}: the poll allocated");
        }
        assert_eq!(model.take_wire().len(), 2 * (16 + 64 + 64));
    }

    /// A 64-entry raw Ethernet loop-back model whose QP has an RQ: frames
    /// the SQ sends arrive in the same QP's receive queue.
    fn raw_loop_with_rq() -> Model {
        Model::new(ModelConfig {
            recv: Some(RecvSpec {
                qpn: ModelConfig::default().qpn,
                ..RecvSpec::default()
            }),
            ..ModelConfig::raw_eth_loop(64)
        })
        .unwrap()
    }

    /// The raw receive loop with classifier `K` until `until` frames are
    /// counted (it never idles out).
    fn receive<K: RxClassify>(
        rq: &mut impl RecvQueue,
        cq: &mut impl CompletionQueue,
        cfg: &RawRecvCfg,
        counts: &mut RawRecvCounts,
        until: u64,
    ) -> Result<(), RawRecvError> {
        run_raw_recv::<_, _, K>(rq, cq, cfg, counts, until, &mut || true)
    }

    /// The raw receive loop (poll, classify by the CQE's bytes or the
    /// frame's headers, count, post the slot again) allocates nothing.
    #[test]
    fn raw_receive_loop_allocates_nothing() {
        const STRIDE: usize = 128;
        let mut rx = vec![0u8; 64 * STRIDE];
        let model = raw_loop_with_rq();
        // SAFETY: `rx` outlives the model (declared first).
        let mr = unsafe { model.register(rx.as_mut_ptr(), rx.len(), Access::LOCAL_WRITE) };
        let (_sq, mut cq) = model.raw_pair_with(RawSqConfig::new(0, 1), HwMmio).unwrap();
        let mut rq = model.raw_rq_with(0, HwMmio).unwrap();
        cq.attach_recv(rq.qpn(), rq.ring());
        // SAFETY: `rx` holds 64 registered strides and outlives the loops.
        let cfg =
            unsafe { RawRecvCfg::new(rx.as_ptr(), STRIDE as u32, STRIDE as u32, 64, mr.lkey) };
        post_all(&mut rq, &cfg).unwrap();
        model.add_flow(FlowRule::promiscuous(0)).unwrap();
        let mut frame = vec![0u8; 60];
        frame[12..14].copy_from_slice(&[0x08, 0x00]);
        let mut counts = RawRecvCounts::default();
        for round in 1..=4u64 {
            for _ in 0..32 {
                assert_eq!(model.deliver(&frame), 1);
            }
            let (n, r) = count(|| {
                if round % 2 == 0 {
                    receive::<DirectRx>(&mut rq, &mut cq, &cfg, &mut counts, round * 32)
                } else {
                    receive::<VerbsRx>(&mut rq, &mut cq, &cfg, &mut counts, round * 32)
                }
            });
            r.unwrap();
            assert_eq!(n, 0, "round {round}: the receive loop allocated");
            assert_eq!(counts.packets, round * 32);
        }
    }

    /// The server's loop over several QPs (`run::raw_recv_qps`: each QP's
    /// CQ polled in turn, its frames counted and its slots posted again on
    /// it) allocates nothing: two QPs, each a model of its own (an RQ and
    /// a CQ each, as the tool gives each QP), 32 frames each per round.
    #[test]
    fn raw_receive_loop_over_qps_allocates_nothing() {
        use rdmaperf::run::raw_recv_qps::{run_raw_recv_qps, RecvQp};
        const STRIDE: usize = 128;
        let mut rx = [vec![0u8; 64 * STRIDE], vec![0u8; 64 * STRIDE]];
        let models = [raw_loop_with_rq(), raw_loop_with_rq()];
        let mut qps = Vec::new();
        let mut keep = Vec::new();
        for (model, buf) in models.iter().zip(rx.iter_mut()) {
            // SAFETY: `rx` outlives the models (declared first).
            let mr = unsafe { model.register(buf.as_mut_ptr(), buf.len(), Access::LOCAL_WRITE) };
            let (sq, mut cq) = model.raw_pair_with(RawSqConfig::new(0, 1), HwMmio).unwrap();
            keep.push(sq);
            let mut rq = model.raw_rq_with(0, HwMmio).unwrap();
            cq.attach_recv(rq.qpn(), rq.ring());
            // SAFETY: `buf` holds 64 registered strides and outlives the loops.
            let cfg =
                unsafe { RawRecvCfg::new(buf.as_ptr(), STRIDE as u32, STRIDE as u32, 64, mr.lkey) };
            post_all(&mut rq, &cfg).unwrap();
            model.add_flow(FlowRule::promiscuous(0)).unwrap();
            qps.push(RecvQp {
                rq,
                cq,
                cfg,
                counts: RawRecvCounts::default(),
            });
        }
        let mut frame = vec![0u8; 60];
        frame[12..14].copy_from_slice(&[0x08, 0x00]);
        for round in 1..=4u64 {
            for m in &models {
                for _ in 0..32 {
                    assert_eq!(m.deliver(&frame), 1);
                }
            }
            let (n, r) =
                count(|| run_raw_recv_qps::<_, _, DirectRx>(&mut qps, round * 64, &mut |_| false));
            r.unwrap();
            assert_eq!(n, 0, "round {round}: the receive loop over QPs allocated");
            assert_eq!(qps[0].counts.packets + qps[1].counts.packets, round * 64);
        }
        assert_eq!((qps[0].counts.packets, qps[1].counts.packets), (128, 128));
    }

    /// The raw Ethernet sender loop (`run::raw_bw::RawBwLoop`) over the
    /// direct SQ and over eMPW, with the NIC on its own thread: no
    /// allocation on the loop's thread.
    #[test]
    fn raw_sender_loop_allocates_nothing() {
        use rdmaperf::raw::slots::Slots;
        use rdmaperf::run::raw_bw::{Direct, DirectMpw, RawBwConfig, RawBwLoop, RawPost};

        fn go<P: RawPost>(
            model: &Model,
            posts: &mut [P],
            cq: &mut impl CompletionQueue,
            base: u64,
            slots: Slots,
        ) -> (u64, rdmaperf::run::bw::BwOutcome) {
            let cfg = RawBwConfig {
                iters: 3000,
                post_list: slots.post_list as u32,
                tx_depth: 64,
                cq_mod: 16,
                stall_ticks: u64::MAX / 4,
            };
            let mut counts = [QpCount::default()];
            let mut list = vec![RawPkt::default(); cfg.post_list as usize];
            let mut wcs = [Completion::default(); 16];
            // The peak's stamps (handed in, as the tool allocates them).
            let (mut tp, mut tc) = (vec![0u64; 3000], vec![0u64; 3000]);
            with_nic(model, || {
                let mut lp = RawBwLoop {
                    cfg,
                    posts,
                    cq,
                    bases: &[base],
                    slots,
                    counts: &mut counts,
                    list: &mut list,
                    wcs: &mut wcs,
                    tposted: &mut tp,
                    tcompleted: &mut tc,
                    deadlines: None,
                    now: rdmaperf::clock::now,
                };
                count(|| lp.run())
            })
        }

        for (mpw, post_list) in [(false, 1), (false, 8), (true, 32)] {
            let slots = Slots::new(128, 2, 1, post_list, 4096);
            let mut buf = vec![0u8; slots.buffer_len()];
            let model = Model::new(ModelConfig::raw_eth_loop(256)).unwrap();
            // SAFETY: `buf` outlives the model (declared first).
            let mr = unsafe { model.register(buf.as_mut_ptr(), buf.len(), Access::NONE) };
            let (mut sq, mut cq) = model
                .raw_pair_with(RawSqConfig::new(mr.lkey, 4), HwMmio)
                .unwrap();
            // SAFETY: as above.
            unsafe { sq.set_frame_source(buf.as_ptr(), buf.len()) };
            let base = buf.as_ptr() as u64;
            let (n, out) = if mpw {
                go(&model, &mut [DirectMpw(sq)], &mut cq, base, slots)
            } else {
                go(&model, &mut [Direct(sq)], &mut cq, base, slots)
            };
            assert_eq!(out.error, None, "mpw {mpw}, -l {post_list}");
            assert_eq!((out.posted, out.completed), (3000, 3000));
            assert_eq!(
                n, 0,
                "the raw sender loop allocated {n} times (mpw {mpw}, -l {post_list})"
            );
        }
    }
    /// The direct sender on several QPs: one raw SQ per QP (direct and
    /// eMPW), all on the one CQ polled through `run::raw_qpn::ByQpn`, the
    /// NIC on its own thread: no allocation on the loop's thread.
    #[test]
    fn raw_sender_loop_over_qps_allocates_nothing() {
        use crate::common::raw_loop::RawLoop;
        use rdmaperf::raw::slots::Slots;
        use rdmaperf::run::raw_bw::{Direct, DirectMpw, RawBwConfig, RawBwLoop, RawPost};
        use rdmaperf::run::raw_qpn::ByQpn;

        fn go<P: RawPost>(
            model: &Model,
            posts: &mut [P],
            cq: &mut impl CompletionQueue,
            bases: &[u64],
            slots: Slots,
        ) -> (u64, rdmaperf::run::bw::BwOutcome) {
            let cfg = RawBwConfig {
                iters: 1024,
                post_list: slots.post_list as u32,
                tx_depth: 64,
                cq_mod: 16,
                stall_ticks: u64::MAX / 4,
            };
            let mut counts = vec![QpCount::default(); posts.len()];
            let mut list = vec![RawPkt::default(); cfg.post_list as usize];
            let mut wcs = [Completion::default(); 16];
            let all = 1024 * posts.len();
            let (mut tp, mut tc) = (vec![0u64; all], vec![0u64; all]);
            with_nic(model, || {
                let mut lp = RawBwLoop {
                    cfg,
                    posts,
                    cq,
                    bases,
                    slots,
                    counts: &mut counts,
                    list: &mut list,
                    wcs: &mut wcs,
                    tposted: &mut tp,
                    tcompleted: &mut tc,
                    deadlines: None,
                    now: rdmaperf::clock::now,
                };
                count(|| lp.run())
            })
        }

        for (mpw, post_list, qps) in [(false, 1, 2), (false, 8, 4), (true, 32, 4)] {
            let slots = Slots::new(128, 2, 1, post_list, 4096);
            // Declared before the SQs and the CQ: they are dropped first.
            let (rig, sqs, cq) = RawLoop::with(slots, qps, 4, |_, _| HwMmio);
            let model = &rig.model;
            let qpns: Vec<u32> = (0..qps).map(|q| model.qpn_of(q)).collect();
            let mut cq = ByQpn::new(cq, &qpns);
            let bases = rig.bases();
            let (n, out) = if mpw {
                let mut posts: Vec<_> = sqs.into_iter().map(DirectMpw).collect();
                go(model, &mut posts, &mut cq, &bases, slots)
            } else {
                let mut posts: Vec<_> = sqs.into_iter().map(Direct).collect();
                go(model, &mut posts, &mut cq, &bases, slots)
            };
            let all = 1024 * qps as u64;
            let ctx = format!("mpw {mpw}, -l {post_list}, -q {qps}");
            assert_eq!(out.error, None, "{ctx}");
            assert_eq!((out.posted, out.completed), (all, all), "{ctx}");
            assert_eq!(
                n, 0,
                "the raw sender loop over QPs allocated {n} times ({ctx})"
            );
        }
    }

    /// The model's one CQ, its completions sorted into sends and receives
    /// (queues reserved before the count).
    struct Split {
        cq: rdmaperf::mlx5::DirectCq,
        q: [VecDeque<Completion>; 2],
    }
    struct Half<'a>(&'a RefCell<Split>, usize);
    impl CompletionQueue for Half<'_> {
        fn poll(&mut self, out: &mut [Completion]) -> Result<usize, rdmaperf::post::PostError> {
            let mut s = self.0.borrow_mut();
            let mut wc = [Completion::default(); 4];
            let n = s.cq.poll(&mut wc)?;
            for c in &wc[..n] {
                let recv = c.opcode == rdmaperf::post::WcOpcode::RECV;
                s.q[recv as usize].push_back(*c);
            }
            let q = &mut s.q[self.1];
            let k = out.len().min(q.len());
            for o in &mut out[..k] {
                *o = q.pop_front().unwrap_or_default();
            }
            Ok(k)
        }
    }

    /// A raw latency loop's QP on the loop-back model.
    type LoopQp<'a> = RawQp<'a, Direct<HwMmio>, DirectRq<HwMmio>, Half<'a>, Half<'a>>;

    /// Sets the flag when dropped: the NIC thread stops also when the
    /// loop's thread panics (a scope would otherwise wait for it forever).
    struct StopOnDrop<'a>(&'a AtomicBool);
    impl Drop for StopOnDrop<'_> {
        fn drop(&mut self) {
            self.0.store(true, Ordering::Release);
        }
    }

    /// The stall allowance of the loops below: a lost frame ends the test
    /// with a stall in seconds rather than a hang.
    fn stall_ticks() -> u64 {
        rdmaperf::clock::Clock::calibrate().cycles_for(std::time::Duration::from_secs(5))
    }

    /// The raw sending loops' numbers on the loop-back QP: 2000 frames, one
    /// a post, at most 32 in flight (half the receives), a CQE every 16th.
    fn loop_back_cfg() -> rdmaperf::run::raw_bw::RawBwConfig {
        rdmaperf::run::raw_bw::RawBwConfig {
            iters: 2000,
            post_list: 1,
            tx_depth: 32,
            cq_mod: 16,
            stall_ticks: stall_ticks(),
        }
    }

    /// `go` on the direct SQ and RQ of QP 0, whose frames loop back into
    /// its own RQ (a promiscuous rule; 64 receives posted), the NIC and
    /// the loop-back on their own thread; what `go` returned and the
    /// allocations it made on its thread.
    fn on_loop_back_qp<R>(go: impl FnOnce(LoopQp<'_>) -> R) -> (u64, R) {
        on_loop_back_qp_with(0, go)
    }

    /// [`on_loop_back_qp`]; with `seed` above 0, a forwarder's QP: its SQ
    /// sends from the receive buffer (`tool::runs::raw_fw`'s set-up) and
    /// `seed` frames are delivered to its receives before `go` starts.
    fn on_loop_back_qp_with<R>(seed: u64, go: impl FnOnce(LoopQp<'_>) -> R) -> (u64, R) {
        const STRIDE: u32 = 128;
        let mut tx = vec![0u8; 128];
        tx[..12].fill(0x02);
        let mut rx = vec![0u8; 64 * STRIDE as usize];
        let model = raw_loop_with_rq();
        // SAFETY: both buffers outlive the model (declared first).
        let (txk, rxk) = unsafe {
            (
                model.register(tx.as_mut_ptr(), tx.len(), Access::NONE),
                model.register(rx.as_mut_ptr(), rx.len(), Access::LOCAL_WRITE),
            )
        };
        let (lkey, src) = if seed > 0 {
            (rxk.lkey, &rx)
        } else {
            (txk.lkey, &tx)
        };
        let (mut sq, mut cq) = model
            .raw_pair_with(RawSqConfig::new(lkey, 4), HwMmio)
            .unwrap();
        // SAFETY: as above.
        unsafe { sq.set_frame_source(src.as_ptr(), src.len()) };
        let mut rq = model.raw_rq_with(0, HwMmio).unwrap();
        cq.attach_recv(rq.qpn(), rq.ring());
        model.add_flow(FlowRule::promiscuous(0)).unwrap();
        let ring = RxRing {
            base: rx.as_ptr() as u64,
            stride: STRIDE,
            room: STRIDE,
            slots: 64,
            lkey: rxk.lkey,
        };
        ring.post_first(&mut rq, 64).unwrap();
        for _ in 0..seed {
            assert_eq!(model.deliver(&tx[..60]), 1);
        }
        let split = RefCell::new(Split {
            cq,
            q: [VecDeque::with_capacity(64), VecDeque::with_capacity(64)],
        });
        let frames = [RawPkt {
            addr: tx.as_ptr() as u64,
            len: 60,
        }];
        let mut post = Direct(sq);
        let stop = AtomicBool::new(false);
        std::thread::scope(|s| {
            let m = &model;
            let stop = &stop;
            // Both every turn: a loop-back only when the SQ is idle would
            // let the wire pile up past the 64 receives (frames dropped).
            s.spawn(move || {
                while !stop.load(Ordering::Acquire) {
                    let (sent, looped) = (m.step_dbrec(), m.loop_back());
                    if sent == 0 && looped == 0 {
                        std::hint::spin_loop();
                    }
                }
            });
            let _stop = StopOnDrop(stop);
            let (mut scq, mut rcq) = (Half(&split, 0), Half(&split, 1));
            let qp = RawQp::new((&mut post, &mut scq), (&mut rq, &mut rcq), (&frames, ring));
            count(|| go(qp))
        })
    }

    /// The raw ping-pong (`run::raw_lat::RawLatLoop`) allocates nothing.
    #[test]
    fn raw_lat_loop_allocates_nothing() {
        let mut tposted = vec![0u64; 2000];
        let cfg = RawLatConfig {
            iters: 2000,
            initiator: true,
            cq_mod: 1,
            rx_depth: 64,
            stall_ticks: stall_ticks(),
            frame_len: 60,
            end: 0,
            sample_start: 0,
            sample_stop: 0,
        };
        let (n, out) = on_loop_back_qp(|qp| {
            RawLatLoop {
                cfg,
                qp,
                tposted: &mut tposted,
                now: rdmaperf::clock::now,
            }
            .run()
        });
        assert_eq!(out.error, None);
        assert_eq!(out.iters, 2000);
        assert_eq!(n, 0, "the raw ping-pong allocated {n} times");
    }

    /// The burst loop (`run::raw_burst_lat::BurstLatLoop`) as a client
    /// allocates nothing: its frames come back as its replies
    /// (`--reply_every 1`), bursts of 16 under `-t 32`, so fewer frames
    /// are in flight than the 64 receives posted.
    #[test]
    fn raw_burst_lat_loop_allocates_nothing() {
        use rdmaperf::run::raw_burst_lat::{BurstLatConfig, BurstLatLoop};
        let cfg = BurstLatConfig {
            iters: 2000,
            initiator: true,
            burst: 16,
            reply_every: 1,
            tx_depth: 32,
            cq_mod: 16,
            stall_ticks: stall_ticks(),
            frame_len: 60,
        };
        let (mut tposted, mut tcompleted) = (vec![0u64; 2000], vec![0u64; 2000]);
        let (n, (out, counts)) = on_loop_back_qp(|qp| {
            BurstLatLoop {
                cfg,
                qp,
                tposted: &mut tposted,
                tcompleted: &mut tcompleted,
                now: rdmaperf::clock::now,
            }
            .run()
        });
        assert_eq!(out.error, None, "{counts:?}");
        assert_eq!(
            (counts.sent, counts.completed, counts.received),
            (2000, 2000, 2000)
        );
        assert_eq!(n, 0, "the burst loop allocated {n} times");
    }

    /// `-b`'s loop (`RawBwLoop::run_beside` with `run::raw_duplex`'s
    /// receive side) allocates nothing: 2000 frames sent under `-t 32`
    /// loop back into the QP's own 64 receives and are counted there.
    /// A queue borrowed, as `RecvQp` owns its RQ and CQ.
    struct Lent<'a, T>(&'a mut T);
    impl<T: rdmaperf::post::RecvQueue> rdmaperf::post::RecvQueue for Lent<'_, T> {
        fn post_recv(
            &mut self,
            wr_id: u64,
            addr: u64,
            lkey: u32,
            len: u32,
        ) -> Result<(), rdmaperf::post::PostError> {
            self.0.post_recv(wr_id, addr, lkey, len)
        }
    }
    impl<T: CompletionQueue> CompletionQueue for Lent<'_, T> {
        fn poll(&mut self, out: &mut [Completion]) -> Result<usize, rdmaperf::post::PostError> {
            self.0.poll(out)
        }
    }

    /// `-b -q N`'s receive side (`run::raw_duplex_qps::RecvSideQps`) beside
    /// the sender's loop on the loop-back QP: no allocation.
    #[test]
    fn raw_duplex_qps_receive_side_allocates_nothing() {
        use crate::common::raw_duplex_session::ring_cfg;
        use rdmaperf::raw::slots::Slots;
        use rdmaperf::run::pace::Unpaced;
        use rdmaperf::run::raw_bw::RawBwLoop;
        use rdmaperf::run::raw_duplex::RxWait;
        use rdmaperf::run::raw_duplex_qps::RecvSideQps;
        use rdmaperf::run::raw_recv_qps::RecvQp;
        let (n, (out, rx_error, got)) = on_loop_back_qp(|qp| {
            // SAFETY: the ring's buffer is registered and outlives the
            // loop; only the model writes it.
            let cfg = unsafe { ring_cfg(qp.rx) };
            let mut qps = [RecvQp {
                rq: Lent(qp.rq),
                cq: Lent(qp.rcq),
                cfg,
                counts: RawRecvCounts::default(),
            }];
            // 64 a poll, as the one-QP case: the 64 receives never run dry.
            let mut rwc = [Completion::default(); 64];
            let wait = RxWait {
                owed: 2000,
                wait_first: false,
                stall_ticks: stall_ticks(),
            };
            let now = rdmaperf::clock::now;
            let mut side = RecvSideQps::<_, _, DirectRx, _>::new(&mut qps, &mut rwc, wait, now);
            let (mut qc, mut list, mut wcs) = (
                [QpCount::default()],
                [RawPkt::default()],
                [Completion::default(); 16],
            );
            let out = RawBwLoop {
                cfg: loop_back_cfg(),
                posts: std::slice::from_mut(qp.sq),
                cq: qp.scq,
                bases: &[qp.frames[0].addr],
                slots: Slots::new(64, 1, 1, 1, 128),
                counts: &mut qc,
                list: &mut list,
                wcs: &mut wcs,
                tposted: &mut [],
                tcompleted: &mut [],
                deadlines: None,
                now: rdmaperf::clock::now,
            }
            .run_beside(&mut Unpaced, &mut side);
            let err = side.error.take();
            (out, err, qps[0].counts.packets)
        });
        assert_eq!((out.error, rx_error), (None, None));
        assert_eq!((out.posted, out.completed, got), (2000, 2000, 2000));
        assert_eq!(n, 0, "the -b -q receive side allocated {n} times");
    }

    #[test]
    fn raw_duplex_loop_allocates_nothing() {
        use crate::common::raw_duplex_session::ring_cfg;
        use rdmaperf::raw::slots::Slots;
        use rdmaperf::run::pace::Unpaced;
        use rdmaperf::run::raw_bw::RawBwLoop;
        use rdmaperf::run::raw_duplex::{RecvSide, RxWait};
        let mut counts = RawRecvCounts::default();
        let (n, (out, rx_error)) = on_loop_back_qp(|qp| {
            // SAFETY: the ring's buffer is registered and outlives the
            // loop; only the model writes it.
            let cfg = unsafe { ring_cfg(qp.rx) };
            // A poll takes up to 64: every frame in since the last pass, so
            // the 64 receives never run dry (at most 64 frames arrive between
            // two passes: the window's 32 and the 32 posted in between).
            let mut rwc = [Completion::default(); 64];
            let wait = RxWait {
                owed: 2000,
                wait_first: false,
                stall_ticks: stall_ticks(),
            };
            let scratch = (&mut counts, &mut rwc[..]);
            let now = rdmaperf::clock::now;
            let mut side =
                RecvSide::<_, _, DirectRx, _>::new((qp.rq, qp.rcq), &cfg, scratch, wait, now);
            let (mut qc, mut list, mut wcs) = (
                [QpCount::default()],
                [RawPkt::default()],
                [Completion::default(); 16],
            );
            let out = RawBwLoop {
                cfg: loop_back_cfg(),
                posts: std::slice::from_mut(qp.sq),
                cq: qp.scq,
                bases: &[qp.frames[0].addr],
                // Two 64-byte slots: the test rig's 128-byte frame buffer.
                slots: Slots::new(64, 1, 1, 1, 128),
                counts: &mut qc,
                list: &mut list,
                wcs: &mut wcs,
                tposted: &mut [],
                tcompleted: &mut [],
                deadlines: None,
                now: rdmaperf::clock::now,
            }
            .run_beside(&mut Unpaced, &mut side);
            (out, side.error.take())
        });
        assert_eq!((out.error, rx_error), (None, None));
        assert_eq!(
            (out.posted, out.completed, counts.packets),
            (2000, 2000, 2000)
        );
        assert_eq!(n, 0, "the duplex loop allocated {n} times");
    }

    /// The forwarding loop (`run::raw_fw::FwLoop`) allocates nothing: 32
    /// frames delivered to its receives go round (each forward loops back
    /// into the QP's own RQ) until 2000 have been received and forwarded,
    /// one a post and in lists of 4 (`-l`). The loop posts, polls and
    /// reposts in the test's thread; the model steps in its own.
    #[test]
    fn raw_fw_loop_allocates_nothing() {
        for post_list in [1, 4] {
            let cfg = rdmaperf::run::raw_bw::RawBwConfig {
                post_list,
                ..loop_back_cfg()
            };
            let (n, out, counts) = fw_on_loop_back(cfg, None);
            assert_eq!(out.error, None, "-l {post_list}");
            // Frames still going round may land in the last poll's batch.
            assert!(out.received >= 2000, "{}", out.received);
            assert_eq!((out.sent.completed, counts), (2000, out.received));
            assert_eq!(
                n, 0,
                "-l {post_list}: the forwarding loop allocated {n} times"
            );
        }
    }

    /// The forwarding loop under `-D` (a window from the first frame:
    /// 20 ms of warm-up, 60 ms sampled, 20 ms of cool-down) with lists of
    /// 4 allocates nothing either.
    #[test]
    fn raw_fw_loop_for_a_duration_allocates_nothing() {
        let clock = rdmaperf::clock::Clock::calibrate();
        let ms = |m| clock.cycles_for(std::time::Duration::from_millis(m));
        let window = rdmaperf::run::bw::Deadlines {
            sample_start: ms(20),
            sample_stop: ms(80),
            end: ms(100),
        };
        let cfg = rdmaperf::run::raw_bw::RawBwConfig {
            iters: 0,
            post_list: 4,
            ..loop_back_cfg()
        };
        let (n, out, counts) = fw_on_loop_back(cfg, Some(window));
        assert_eq!(out.error, None);
        let s = &out.sent;
        assert!(s.measured > 0 && s.measured < s.completed, "{s:?}");
        assert_eq!(counts, out.received);
        assert_eq!(n, 0, "the forwarding loop allocated {n} times");
    }

    /// `FwLoop` with `cfg` and `window` on the loop-back QP seeded with 32
    /// frames: the allocations on the loop's thread, its outcome, the
    /// frames it counted.
    fn fw_on_loop_back(
        cfg: rdmaperf::run::raw_bw::RawBwConfig,
        window: Option<rdmaperf::run::bw::Deadlines>,
    ) -> (u64, rdmaperf::run::raw_fw::FwOutcome, u64) {
        use crate::common::raw_duplex_session::ring_cfg;
        use rdmaperf::mlx5::raw_sq::RawPkt;
        use rdmaperf::run::raw_fw::{FwBuf, FwLoop};
        let mut counts = RawRecvCounts::default();
        let (n, out) = on_loop_back_qp_with(32, |qp| {
            // SAFETY: the ring's buffer is registered for local write and
            // outlives the loop; only the model and the loop touch it.
            let buf = unsafe { FwBuf::new(ring_cfg(qp.rx)) };
            let (mut held, mut wc) = ([(0u32, 0u32); 64], [Completion::default(); 16]);
            let mut list = [RawPkt::default(); 4];
            FwLoop::<_, _, _, _, DirectRx, _> {
                cfg,
                window,
                post: qp.sq,
                send_cq: qp.scq,
                rq: qp.rq,
                recv_cq: qp.rcq,
                buf: &buf,
                counts: &mut counts,
                held: &mut held,
                list: &mut list,
                wc: &mut wc,
                now: rdmaperf::clock::now,
                classify: core::marker::PhantomData,
            }
            .run()
        });
        (n, out, counts.packets)
    }
}
