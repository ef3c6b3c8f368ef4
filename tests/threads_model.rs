//! The multi-threaded bw engine (`run::threads`, what `--threads N` runs)
//! over the direct mlx5 path on the queue model: two workers, each with its
//! own model (SQ ring, CQ, doorbell page), run the same BwLoop side by side;
//! every message is posted, completed and counted, and the aggregate adds up.

#[cfg(not(feature = "model"))]
#[test]
fn threads_model_needs_the_model_feature() {
    println!("SKIPPED: the threaded direct-path tests need `--features model`");
}

#[cfg(feature = "model")]
mod with_model {
    use rdmaperf::model::workers::ModelWorkers;
    use rdmaperf::post::Op;
    use rdmaperf::run::bw::BwConfig;
    use rdmaperf::run::threads::{aggregate, run, Worker};

    fn cfg(iters: u64, post_list: u32) -> BwConfig {
        BwConfig {
            op: Op::Write,
            size: 64,
            iters,
            post_list,
            tx_depth: 128,
            cq_mod: post_list.max(16),
            inline: false,
            positions: 64,
            step: 64,
            // Ticks without a completion before the loop calls it stuck: large
            // (a descheduled worker on 2 cores is not a stuck NIC).
            stall_ticks: u64::MAX / 4,
            cost: true,
        }
    }

    fn workers(n: usize) -> Vec<Worker> {
        (0..n)
            .map(|t| Worker {
                cpu: None,
                qps: vec![t],
            })
            .collect()
    }

    #[test]
    fn two_workers_each_complete_every_message() {
        for post_list in [1u32, 16] {
            let iters = 20_000;
            let outs = run(
                &ModelWorkers::default(),
                &workers(2),
                cfg(iters, post_list),
                None,
                true,
                &rdmaperf::clock::now,
            )
            .unwrap();
            assert_eq!(outs.len(), 2);
            for (t, o) in outs.iter().enumerate() {
                assert_eq!(o.outcome.error, None, "worker {t}");
                assert_eq!(o.worker.qps, vec![t]);
                assert_eq!((o.outcome.posted, o.outcome.completed), (iters, iters));
                assert_eq!(o.outcome.measured, iters);
                assert_eq!(o.outcome.post_calls, iters / post_list as u64);
                assert_eq!(o.counts.len(), 1);
                assert_eq!((o.counts[0].scnt, o.counts[0].ccnt), (iters, iters));
                assert!(o.outcome.post_ticks > 0);
                // Stamps for the thread's peak: one per message, all filled.
                assert_eq!(o.tposted.len(), iters as usize);
                assert!(o.tcompleted.last().is_some_and(|&t| t > 0));
            }
            let agg = aggregate(&outs);
            assert_eq!(agg.measured, 2 * iters);
            assert!(agg.t_end > agg.t_start);
        }
    }

    #[test]
    fn a_worker_with_two_qps_on_one_model_is_refused_by_name() {
        let w = vec![Worker {
            cpu: None,
            qps: vec![0, 1],
        }];
        let e = run(
            &ModelWorkers::default(),
            &w,
            cfg(100, 1),
            None,
            false,
            &rdmaperf::clock::now,
        )
        .unwrap_err();
        assert!(
            e.contains("thread 0") && e.contains("a model holds one"),
            "{e}"
        );
    }
}
