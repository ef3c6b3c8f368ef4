//! Direct UD send-bw and unknown-QPN CQEs on the queue model, through the
//! tool's own functions: `method::direct_wired` admits UD send-bw, the
//! address vector is made from the 48 bytes libmlx5 builds for an AH by
//! `mlx5::device::ud_av` (what `tool::direct::open_queues` does after
//! `MLX5DV_OBJ_AH`), and `tool::direct::run_size` runs the bw loop: every
//! SEND lands in the peer's receive queue with the right bytes. CQEs of a
//! QP the poller does not know are counted in the run's result.

#[cfg(not(feature = "model"))]
#[test]
fn direct_ud_needs_the_model_feature() {
    println!("SKIPPED: the direct UD tests need `--features model`");
}

#[cfg(feature = "model")]
mod common;

#[cfg(feature = "model")]
mod with_model {
    use crate::common::cli::params;
    use crate::common::model_env::{register_pair, signaled_wr, ud_model};
    use rdmaperf::clock::Clock;
    use rdmaperf::ctrl::Dest;
    use rdmaperf::model::{Model, ModelConfig};
    use rdmaperf::post::{Op, SendQueue, WrDesc};
    use rdmaperf::run::geometry::Geometry;
    use rdmaperf::tool::common::landing;
    use rdmaperf::tool::session::bw_measure::qp_targets_shared;
    use rdmaperf::tool::session::direct;
    use rdmaperf::tool::setup::method::direct_wired;

    const PEER_QPN: u32 = 0x0a0b0c;
    const QKEY: u32 = 0x1111_1111;

    #[test]
    fn ud_send_bw_is_wired_for_direct() {
        assert!(direct_wired(&params("send-bw -c UD --post direct")));
    }

    /// UD send-bw over direct queues: `iters` receives posted at the peer
    /// (UD drops a SEND without one), every SEND lands, byte for byte.
    #[test]
    fn ud_sends_land_in_the_peers_receive_queue() {
        let p = params("send-bw -c UD --post direct -n 300 -s 256 -l 4 -Q 2");
        let size = p.sizes[0] as usize;
        let base = Geometry::new(p.max_size(), 4096, 64, 1);
        let mut local: Box<[u8]> = vec![0u8; base.total() as usize].into();
        landing::fill_pattern(&mut local[..(base.slot * base.slots) as usize]);
        let mut rx = vec![0u8; p.iters as usize * size];
        let cfg = ModelConfig {
            wqe_cnt: (p.tx_depth * 4).next_power_of_two(),
            cqe_cnt: p.tx_depth.next_power_of_two(),
            record_history: false,
            ..ModelConfig::default()
        };
        let (mut model, sq, mut cq) = ud_model(cfg, PEER_QPN, QKEY, QKEY);
        // SAFETY: both buffers outlive the model (stopped and dropped first).
        let (lk, rxk) = unsafe { register_pair(&model, &mut local, &mut rx) };
        let at = |s: u64| rx.as_ptr() as usize + s as usize * size;
        for s in 0..p.iters {
            model.post_peer_recv(s, at(s) as *mut u8, size as u32, rxk.lkey);
        }
        let targets = qp_targets_shared(&base, local.as_ptr() as u64, lk.lkey, &[Dest::default()]);
        let mut sqs = [sq];
        model.start();
        let clock = Clock::calibrate();
        let r = direct::run_size(&p, &base, size as u64, &targets, &mut sqs, &mut cq, &clock)
            .unwrap_or_else(|f| panic!("{}", f.msg));
        model.stop();
        assert_eq!(r.error, None);
        assert_eq!((r.outcome.posted, r.outcome.completed), (p.iters, p.iters));
        assert_eq!(r.unknown_qpn_cqes, 0);
        let stats = model.stats();
        assert_eq!((stats.ud_dropped, stats.wqes), (0, p.iters), "{stats:?}");
        let done = model.take_peer_completions();
        assert_eq!(done.len() as u64, p.iters);
        assert!(
            done.iter().all(|c| c.ok && c.byte_len as usize == size),
            "{done:?}"
        );
        assert_eq!(model.violations(), Vec::<String>::new());
        drop((sqs, cq, model));
        // Every message is the client's send slot (perftest's UD send-bw
        // posts the same slot each time).
        for s in 0..p.iters as usize {
            assert_eq!(rx[s * size..(s + 1) * size], local[..size], "message {s}");
        }
    }

    /// The AV's destination is what reaches the wire: a wrong qkey in the
    /// AV makes the peer drop every SEND (the run still completes: UD).
    #[test]
    fn the_av_from_the_ah_decides_where_sends_go() {
        let (model, mut sq, _cq) = ud_model(ModelConfig::default(), PEER_QPN, QKEY, QKEY ^ 1);
        let (mut src, mut dst) = (vec![1u8; 64], vec![0u8; 64]);
        // SAFETY: both buffers outlive the model.
        let (l, d) = unsafe { register_pair(&model, &mut src, &mut dst) };
        model.post_peer_recv(1, dst.as_mut_ptr(), 64, d.lkey);
        let wr = WrDesc {
            wr_id: 1,
            laddr: src.as_ptr() as u64,
            lkey: l.lkey,
            len: 64,
            signaled: true,
            ..WrDesc::default()
        };
        sq.post(Op::Send, &[wr]).unwrap();
        model.step();
        assert_eq!(model.stats().ud_dropped, 1);
        assert_eq!(dst, vec![0u8; 64]);
    }

    /// CQEs of a QP the poller was not given (another QP on the same CQ)
    /// are counted in the run's result, and the run's own QP completes.
    #[test]
    fn unknown_qpn_cqes_are_counted_in_the_result() {
        let p = params("write-bw --post direct -n 200 -s 64");
        let base = Geometry::new(p.max_size(), 4096, 64, 1);
        let mut local: Box<[u8]> = vec![7u8; base.total() as usize].into();
        let mut remote: Box<[u8]> = vec![0u8; base.total() as usize].into();
        let mut model = Model::new(ModelConfig {
            qps: 2,
            wqe_cnt: 1024,
            cqe_cnt: 256,
            record_history: false,
            ..ModelConfig::default()
        })
        .unwrap();
        let (sq, mut cq) = model.pair().unwrap();
        // SAFETY: QP 1 is built once, and pair() built only QP 0.
        let mut stranger = unsafe { model.extra_sq(1) }.unwrap();
        // SAFETY: both buffers outlive the model.
        let (lk, rk) = unsafe { register_pair(&model, &mut local, &mut remote) };
        for i in 0..3u64 {
            let (laddr, raddr) = (local.as_ptr() as u64, remote.as_ptr() as u64);
            let wr = signaled_wr(i, (laddr, lk.lkey), (raddr, rk.rkey), 8);
            stranger.post(Op::Write, &[wr]).unwrap();
        }
        assert_eq!(model.step(), 3);
        let peer = Dest {
            vaddr: remote.as_ptr() as u64 + base.recv_offset(0),
            rkey: rk.rkey,
            ..Dest::default()
        };
        let targets = qp_targets_shared(&base, local.as_ptr() as u64, lk.lkey, &[peer]);
        let mut sqs = [sq];
        model.start();
        let clock = Clock::calibrate();
        let r = direct::run_size(&p, &base, 64, &targets, &mut sqs, &mut cq, &clock)
            .unwrap_or_else(|f| panic!("{}", f.msg));
        model.stop();
        assert_eq!(r.error, None);
        assert_eq!(r.outcome.completed, p.iters);
        assert_eq!(r.unknown_qpn_cqes, 3);
        drop((sqs, stranger, cq, model));
    }
}
