//! Direct send-lat on the queue model, through the tool's own pieces:
//! `method::direct_wired` admits UD send-lat, `tool::lat::lat_config` sets
//! the loop up from the parsed command line, and `run::lat::send_lat` (the
//! loop the tool runs) posts every SEND through the direct SQ with the
//! address vector libmlx5 builds for an AH. The model's peer answers each
//! SEND that landed in its receive queue (the ping-pong's reply); the loop
//! ends with one stamp per round trip, and every message landed byte for byte.

#[cfg(not(feature = "model"))]
#[test]
fn direct_lat_needs_the_model_feature() {
    println!("SKIPPED: the direct send-lat tests need `--features model`");
}

#[cfg(feature = "model")]
mod common;

#[cfg(feature = "model")]
mod with_model {
    use crate::common::cli::params;
    use crate::common::model_env::{register_pair, ud_model};
    use rdmaperf::clock::{self, Clock};
    use rdmaperf::model::{Model, ModelConfig, PeerCompletion};
    use rdmaperf::post::{Completion, CompletionQueue, PostError, RecvQueue, WcStatus};
    use rdmaperf::report::stats::LatUnits;
    use rdmaperf::run::lat::{send_lat, LatTarget};
    use rdmaperf::tool::common::landing;
    use rdmaperf::tool::runs::lat::{lat_config, lat_stats};
    use rdmaperf::tool::session::direct::allow_buffer;
    use rdmaperf::tool::setup::method::direct_wired;

    const PEER_QPN: u32 = 0x0d0e0f;
    const QKEY: u32 = 0x1111_1111;

    /// Our receives (reposted by the loop): counted; the loop decides how many.
    struct Reposts(u64);
    impl RecvQueue for Reposts {
        fn post_recv(&mut self, _: u64, _: u64, _: u32, _: u32) -> Result<(), PostError> {
            self.0 += 1;
            Ok(())
        }
    }

    /// Our receive CQ: the peer's reply to each SEND that landed in its
    /// receive queue (one receive completion per peer completion).
    struct Replies<'m> {
        model: &'m Model,
        landed: Vec<PeerCompletion>,
        consumed: usize,
    }
    impl CompletionQueue for Replies<'_> {
        fn poll(&mut self, out: &mut [Completion]) -> Result<usize, PostError> {
            if self.consumed == self.landed.len() {
                self.landed.extend(self.model.take_peer_completions());
            }
            if self.consumed == self.landed.len() {
                return Ok(0);
            }
            self.consumed += 1;
            out[0] = Completion {
                wr_id: self.consumed as u64,
                status: WcStatus::SUCCESS,
                ..Completion::default()
            };
            Ok(1)
        }
    }

    #[test]
    fn ud_send_lat_is_wired_for_direct() {
        assert!(direct_wired(&params("send-lat -c UD --post direct")));
        assert!(direct_wired(&params("send-lat -c UD --post auto -e")));
    }

    /// The client's UD send-lat over a direct SQ: every SEND lands in the
    /// peer's receive queue with the client's bytes, the loop completes
    /// `-n` round trips with `-n` stamps, and the statistics come out.
    /// Inline (64 B) and gathered (512 B, above -I) SENDs.
    #[test]
    fn ud_send_lat_sends_land_and_the_loop_completes() {
        for size in [64u64, 512] {
            let p = params(&format!(
                "send-lat -c UD --post direct -n 200 -r 50 -s {size} -I 128"
            ));
            assert!(direct_wired(&p));
            let n = p.iters as usize;
            let sz = size as usize;
            let mut local: Box<[u8]> = vec![0u8; 4096].into();
            landing::fill_pattern(&mut local);
            let mut rx = vec![0u8; n * sz];
            let cfg = ModelConfig {
                // -t is 1 for the latency tools: one WQE (several BBs) at a time.
                wqe_cnt: 64,
                cqe_cnt: 64,
                record_history: false,
                ..ModelConfig::default()
            };
            let (mut model, mut sq, mut cq) = ud_model(cfg, PEER_QPN, QKEY, QKEY);
            // SAFETY: `local` outlives the SQ (dropped at the end of the scope first).
            unsafe { allow_buffer(&mut sq, local.as_ptr(), local.len()) }
                .unwrap_or_else(|f| panic!("{}", f.msg));
            // SAFETY: both buffers outlive the model (stopped and dropped first).
            let (lk, rxk) = unsafe { register_pair(&model, &mut local, &mut rx) };
            for s in 0..n {
                let at = rx.as_mut_ptr().wrapping_add(s * sz);
                model.post_peer_recv(s as u64, at, sz as u32, rxk.lkey);
            }
            let clock = Clock::calibrate();
            let (cfg, window) = lat_config(&p, size, &clock, clock::now());
            assert_eq!(window, 0, "iterations mode");
            assert!(cfg.initiator, "the send-lat client sends first");
            assert_eq!(cfg.inline, size <= 128);
            let target = LatTarget {
                laddr: local.as_ptr() as u64,
                lkey: lk.lkey,
                recv_addr: 0,
                recv_len: size as u32,
                ..LatTarget::default()
            };
            let mut tposted = vec![0u64; n];
            let mut reposts = Reposts(0);
            model.start();
            let o = {
                let mut rcq = Replies {
                    model: &model,
                    landed: Vec::new(),
                    consumed: 0,
                };
                let o = send_lat(
                    &cfg,
                    &mut sq,
                    &mut cq,
                    &mut reposts,
                    &mut rcq,
                    &target,
                    &mut tposted,
                    clock::now,
                );
                assert_eq!(rcq.consumed, n, "one reply per SEND ({size} B)");
                assert!(
                    rcq.landed.iter().all(|c| c.ok && c.byte_len as usize == sz),
                    "{size} B: {:?}",
                    rcq.landed
                );
                o
            };
            model.stop();
            assert_eq!(o.error, None, "{size} B");
            assert_eq!(o.iters, p.iters, "{size} B: one stamp per round trip");
            assert_eq!(reposts.0, p.iters - p.rx_depth as u64, "reposts");
            assert!(tposted.windows(2).all(|w| w[1] > w[0]), "{size} B");
            let s = lat_stats(&tposted, clock.hz(), 2, false, LatUnits::Usec)
                .unwrap_or_else(|f| panic!("{}", f.msg));
            assert!(s.t_min > 0.0 && s.t_min <= s.t_max, "{s:?}");
            let stats = model.stats();
            assert_eq!((stats.ud_dropped, stats.wqes), (0, p.iters), "{stats:?}");
            assert_eq!(model.violations(), Vec::<String>::new());
            assert_eq!(cq.unknown_qpn_cqes(), 0);
            drop((sq, cq, model));
            for s in 0..n {
                assert_eq!(
                    rx[s * sz..(s + 1) * sz],
                    local[..sz],
                    "{size} B message {s}"
                );
            }
        }
    }
}
