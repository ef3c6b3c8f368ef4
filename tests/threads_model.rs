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
    use rdmaperf::run::bw::BwConfig;
    use rdmaperf::run::threads::{aggregate, run, Worker};

    fn cfg(iters: u64, post_list: u32) -> BwConfig {
        // Ticks without a completion before the loop calls it stuck: large
        // (a descheduled worker on 2 cores is not a stuck NIC).
        ModelWorkers::write_64(iters, post_list, u64::MAX / 4)
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

    /// `Kept` (what `--threads --post direct` runs): each worker's queues
    /// are built once and carried into the next size, so the second run
    /// posts on from where the first left the ring (the model checks every
    /// WQE at its index), and every message of both runs completes.
    #[test]
    fn kept_queues_carry_over_into_the_next_size() {
        use rdmaperf::run::threads::{Kept, QueueFactory};
        use std::sync::atomic::{AtomicUsize, Ordering};
        struct Counting(ModelWorkers, AtomicUsize);
        impl QueueFactory for Counting {
            type Sq = <ModelWorkers as QueueFactory>::Sq;
            type Cq = <ModelWorkers as QueueFactory>::Cq;
            #[allow(clippy::type_complexity)]
            fn build(
                &self,
                t: usize,
                qps: &[usize],
            ) -> Result<(Vec<Self::Sq>, Self::Cq, Vec<rdmaperf::run::bw::QpTarget>), String>
            {
                self.1.fetch_add(1, Ordering::Relaxed);
                self.0.build(t, qps)
            }
        }
        let kept = Kept::new(Counting(ModelWorkers::default(), AtomicUsize::new(0)), 2);
        // 300 messages do not fill a whole number of rings: the second run
        // starts mid-ring.
        for size_run in 0..2 {
            let outs = run(
                &kept,
                &workers(2),
                cfg(300, 1),
                None,
                false,
                &rdmaperf::clock::now,
            )
            .unwrap();
            for (t, o) in outs.iter().enumerate() {
                assert_eq!(o.outcome.error, None, "run {size_run} worker {t}");
                assert_eq!((o.outcome.posted, o.outcome.completed), (300, 300));
            }
        }
        assert_eq!(kept_builds(&kept), 2, "one build per worker, not per run");

        fn kept_builds(k: &Kept<Counting>) -> usize {
            k.inner().1.load(Ordering::Relaxed)
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
