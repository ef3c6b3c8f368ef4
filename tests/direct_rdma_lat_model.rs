//! Direct write-lat, read-lat and atomic-lat on the queue model, through
//! the tool's own pieces: `method::direct_wired` admits them (and `auto`
//! picks direct on mlx5), `tool::tools::lat::lat_config` sets the loop up
//! from the parsed command line, and the loops the tool runs
//! (`run::lat::write_lat`, `run::lat::rdma_lat`) post every WRITE, READ and
//! atomic through the direct SQ, rung with BlueFlame.
//!
//! write-lat is a real ping-pong: two sides, each with its own model NIC
//! and thread, each polling the last byte of its own buffer (the mailbox)
//! for the peer's WRITE, as the tool does. read-lat and atomic-lat have one
//! active side (the client). Each test checks the bytes where they landed,
//! one latency sample per round trip, one WQE, one BlueFlame doorbell and
//! one CQE per message, and that the model saw nothing the PRM forbids.

#[cfg(not(feature = "model"))]
#[test]
fn direct_rdma_lat_needs_the_model_feature() {
    println!("SKIPPED: the direct write/read/atomic-lat tests need `--features model`");
}

#[cfg(feature = "model")]
mod common;

#[cfg(feature = "model")]
mod with_model {
    use crate::common::cli::params;
    use rdmaperf::cli::params::{Params, PostChoice};
    use rdmaperf::clock::{self, Clock};
    use rdmaperf::mlx5::{DirectCq, DirectSq, Transport};
    use rdmaperf::model::{Access, Model, ModelConfig, ModelMmio, NicStats};
    use rdmaperf::post::CompletionQueue;
    use rdmaperf::report::stats::LatUnits;
    use rdmaperf::run::lat::{rdma_lat, write_lat, LatConfig, LatOutcome, LatTarget, Mailbox};
    use rdmaperf::tool::common::landing;
    use rdmaperf::tool::runs::lat::{lat_config, lat_stats};
    use rdmaperf::tool::session::direct::allow_buffer;
    use rdmaperf::tool::setup::method::{decide_for, direct_wired, Method};

    /// One side's model NIC with its direct SQ and CQ (RC).
    fn side() -> (Model, DirectSq<ModelMmio>, DirectCq) {
        let model = Model::new(ModelConfig {
            // -t is 1 for the latency tools: one WQE (up to 4 BBs) at a time.
            wqe_cnt: 64,
            cqe_cnt: 64,
            record_history: false,
            ..ModelConfig::default()
        })
        .unwrap();
        let (sq, cq) = model
            .pair_with_transport(model.mmio(), Transport::Rc)
            .unwrap();
        (model, sq, cq)
    }

    /// The tool's choice for `p` on an mlx5 device: `auto` gives direct.
    fn auto_on_mlx5(p: &Params) -> Method {
        decide_for(PostChoice::Auto, p, "mlx5_0", true, || Ok(()))
            .unwrap_or_else(|f| panic!("{}", f.msg))
    }

    /// One message per round trip: a WQE, a BlueFlame doorbell and a CQE
    /// each, no error, nothing the PRM forbids.
    fn assert_one_each(what: &str, model: &Model, cq: &DirectCq, n: u64) {
        let s: NicStats = model.stats();
        assert_eq!(
            (s.wqes, s.cqes, s.blueflame_doorbells, s.error_cqes),
            (n, n, n, 0),
            "{what}: {s:?}"
        );
        assert_eq!(model.violations(), Vec::<String>::new(), "{what}");
        assert_eq!(cq.unknown_qpn_cqes(), 0, "{what}");
    }

    /// The loop ended cleanly with one increasing stamp per round trip, and
    /// the statistics come out of them.
    fn assert_samples(what: &str, o: &LatOutcome, tposted: &[u64], n: u64, rtt: u32) {
        assert_eq!(o.error, None, "{what}");
        assert_eq!(o.iters, n, "{what}: one stamp per round trip");
        assert!(tposted.windows(2).all(|w| w[1] > w[0]), "{what}");
        let s = lat_stats(tposted, Clock::calibrate().hz(), rtt, false, LatUnits::Usec)
            .unwrap_or_else(|f| panic!("{what}: {}", f.msg));
        assert!(s.t_min > 0.0 && s.t_min <= s.t_max, "{what}: {s:?}");
    }

    /// A client running `cfg` (READ or an atomic: no peer loop) on a fresh
    /// model from `local` to `remote` (`len` bytes each): a clean run of `n`
    /// round trips, one WQE and CQE each.
    ///
    /// # Safety
    /// Both buffers hold `len` bytes, outlive the call, and nothing else
    /// touches them during it (the model is stopped and dropped before it
    /// returns).
    unsafe fn run_client(what: &str, cfg: &LatConfig, bufs: (*mut u8, *mut u8, usize), n: u64) {
        let (local, remote, len) = bufs;
        let (mut model, mut sq, mut cq) = side();
        // SAFETY: the caller's contract.
        let (l, r) = unsafe {
            (
                model.register(local, len, Access::ALL),
                model.register(remote, len, Access::ALL),
            )
        };
        let t = LatTarget {
            laddr: local as u64,
            lkey: l.lkey,
            raddr: remote as u64,
            rkey: r.rkey,
            ..LatTarget::default()
        };
        let mut tposted = vec![0u64; n as usize];
        model.start();
        let o = rdma_lat(cfg, &mut sq, &mut cq, &t, &mut tposted, clock::now);
        model.stop();
        assert_samples(what, &o, &tposted, n, 1);
        assert_one_each(what, &model, &cq, n);
    }

    /// write-lat's mailbox over raw buffer addresses (kept as integers so a
    /// side's mailbox can move to its thread): the last byte the peer writes
    /// into, and the last byte of what this side sends.
    struct BufMailbox {
        recv_last: usize,
        send_last: usize,
    }
    impl Mailbox for BufMailbox {
        fn received(&self) -> u8 {
            // SAFETY: the byte lies in a buffer that outlives both loops; the
            // peer's NIC (a model thread) writes it, hence the volatile read.
            unsafe { std::ptr::read_volatile(self.recv_last as *const u8) }
        }
        fn stamp(&mut self, seq: u8) {
            // SAFETY: as above; only this side writes its send buffer.
            unsafe { std::ptr::write_volatile(self.send_last as *mut u8, seq) }
        }
    }

    #[test]
    fn the_latency_tools_are_wired_and_auto_picks_direct() {
        for cmd in [
            "write-lat",
            "write-lat -c UC",
            "write-lat -R",
            "read-lat -e",
            "read-lat",
            "read-lat -R",
            "atomic-lat",
            "atomic-lat -A CMP_AND_SWAP",
        ] {
            let p = params(&format!("{cmd} --post auto"));
            assert!(direct_wired(&p), "{cmd}");
            assert_eq!(auto_on_mlx5(&p), Method::Direct, "{cmd}");
        }
    }

    /// write-lat, both sides direct: each WRITE lands in the peer's buffer
    /// byte for byte (its last byte the sender's sequence number), both
    /// loops complete `-n` round trips with `-n` stamps. Inline sizes (2 B,
    /// 100 B with -I 128) and gathered ones (512 B, 4096 B: above -I).
    #[test]
    fn write_lat_ping_pong_lands_and_completes() {
        for size in [2u64, 100, 512, 4096] {
            let p = params(&format!("write-lat --post direct -n 300 -s {size} -I 128"));
            assert!(direct_wired(&p));
            let n = p.iters;
            let sz = size as usize;
            let clock = Clock::calibrate();
            let (cfg, window) = lat_config(&p, size, &clock, clock::now());
            assert_eq!(window, 0, "iterations mode");
            assert!(!cfg.initiator, "the write-lat client waits first");
            assert_eq!(cfg.inline, size <= 128);
            // The server: the same settings, it writes first.
            let mut peer_cfg = cfg;
            peer_cfg.initiator = true;

            // Each side: a send and a receive region (the peer writes into it).
            let mut send: [Vec<u8>; 2] = [vec![0u8; sz], vec![0u8; sz]];
            landing::fill_pattern(&mut send[0]);
            landing::fill_pattern(&mut send[1]);
            send[1].reverse(); // the two sides' bytes differ
            let mut recv: [Vec<u8>; 2] = [vec![0u8; sz], vec![0u8; sz]];
            let (mut ma, mut sqa, mut cqa) = side();
            let (mut mb, mut sqb, mut cqb) = side();
            // SAFETY: the send buffers outlive the SQs (dropped first, below).
            unsafe {
                allow_buffer(&mut sqa, send[0].as_ptr(), sz).unwrap();
                allow_buffer(&mut sqb, send[1].as_ptr(), sz).unwrap();
            }
            // A's NIC reads A's send region and writes B's receive region,
            // and B's the reverse.
            // SAFETY: every buffer outlives the models (stopped, dropped first).
            let (la, rb, lb, ra) = unsafe {
                (
                    ma.register(send[0].as_mut_ptr(), sz, Access::ALL),
                    ma.register(recv[1].as_mut_ptr(), sz, Access::ALL),
                    mb.register(send[1].as_mut_ptr(), sz, Access::ALL),
                    mb.register(recv[0].as_mut_ptr(), sz, Access::ALL),
                )
            };
            let target = |l: &Vec<u8>, lkey: u32, r: &Vec<u8>, rkey: u32| LatTarget {
                laddr: l.as_ptr() as u64,
                lkey,
                raddr: r.as_ptr() as u64,
                rkey,
                ..LatTarget::default()
            };
            let ta = target(&send[0], la.lkey, &recv[1], rb.rkey);
            let tb = target(&send[1], lb.lkey, &recv[0], ra.rkey);
            let last = |v: &Vec<u8>| v.as_ptr() as usize + sz - 1;
            let mut mba = BufMailbox {
                recv_last: last(&recv[0]),
                send_last: last(&send[0]),
            };
            let mut mbb = BufMailbox {
                recv_last: last(&recv[1]),
                send_last: last(&send[1]),
            };
            let mut ta_posted = vec![0u64; n as usize];
            let mut tb_posted = vec![0u64; n as usize];
            ma.start();
            mb.start();
            let (oa, ob) = std::thread::scope(|s| {
                let server = s.spawn(|| {
                    write_lat(
                        &peer_cfg,
                        &mut sqb,
                        &mut cqb,
                        &mut mbb,
                        &tb,
                        &mut tb_posted,
                        clock::now,
                    )
                });
                let oa = write_lat(
                    &cfg,
                    &mut sqa,
                    &mut cqa,
                    &mut mba,
                    &ta,
                    &mut ta_posted,
                    clock::now,
                );
                (oa, server.join().unwrap())
            });
            ma.stop();
            mb.stop();
            let what = |who: &str| format!("write-lat {size} B, {who}");
            assert_samples(&what("client"), &oa, &ta_posted, n, 2);
            assert_samples(&what("server"), &ob, &tb_posted, n, 2);
            assert_one_each(&what("client"), &ma, &cqa, n);
            assert_one_each(&what("server"), &mb, &cqb, n);
            drop((sqa, cqa, sqb, cqb, ma, mb));
            // The last WRITE each way landed whole: the sender's bytes, its
            // last one the sequence number of round trip n.
            for (to, from) in [(0, 1), (1, 0)] {
                assert_eq!(
                    recv[to][..sz - 1],
                    send[from][..sz - 1],
                    "{size} B into side {to}"
                );
                assert_eq!(recv[to][sz - 1], n as u8, "{size} B into side {to}");
                assert_eq!(send[from][sz - 1], n as u8);
            }
        }
    }

    /// read-lat (client): every READ brings the server's bytes into the
    /// local buffer, one stamp per round trip.
    #[test]
    fn read_lat_reads_land_and_the_loop_completes() {
        for size in [2u64, 64, 4096] {
            let p = params(&format!("read-lat --post direct -n 200 -s {size}"));
            assert!(direct_wired(&p));
            let (n, sz) = (p.iters, size as usize);
            let clock = Clock::calibrate();
            let (cfg, _) = lat_config(&p, size, &clock, clock::now());
            assert!(cfg.initiator && !cfg.inline);
            let mut remote = vec![0u8; sz];
            landing::fill_pattern(&mut remote);
            let mut local = vec![0u8; sz];
            let what = format!("read-lat {size} B");
            let bufs = (local.as_mut_ptr(), remote.as_mut_ptr(), sz);
            // SAFETY: both buffers outlive the call and nothing else uses them during it.
            unsafe { run_client(&what, &cfg, bufs, n) };
            assert_eq!(local, remote, "{what}");
        }
    }

    /// atomic-lat (client), both atomics: fetch-and-add adds 1 per round
    /// trip and brings the value before the last add back; compare-and-swap
    /// (compare 0) leaves a non-zero value and brings it back each time.
    #[test]
    fn atomic_lat_atomics_land_and_the_loop_completes() {
        for (cmd, start, remote_after, local_after) in [
            ("atomic-lat", 1000u64, 1200u64, 1199u64),
            ("atomic-lat -A CMP_AND_SWAP", 77, 77, 77),
        ] {
            let p = params(&format!("{cmd} --post direct -n 200"));
            assert!(direct_wired(&p), "{cmd}");
            assert_eq!(p.iters, 200);
            let n = p.iters;
            let clock = Clock::calibrate();
            let (cfg, _) = lat_config(&p, 8, &clock, clock::now());
            assert!(cfg.initiator && !cfg.inline);
            // u64s: the atomic target is 8-byte aligned.
            let mut remote = [start];
            let mut local = [0u64];
            let bufs = (local.as_mut_ptr().cast(), remote.as_mut_ptr().cast(), 8);
            // SAFETY: both buffers outlive the call and nothing else uses them during it.
            unsafe { run_client(cmd, &cfg, bufs, n) };
            assert_eq!((remote[0], local[0]), (remote_after, local_after), "{cmd}");
        }
    }
}
