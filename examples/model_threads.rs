//! Aggregate post rate of the direct mlx5 path with 1 and 2 worker threads,
//! each owning its own queue model (SQ ring, CQ, doorbell page) — nothing is
//! shared between threads. The model's NIC is stepped inline by the polling
//! thread (`step_dbrec`), so "loop rate" includes the model's work, while
//! "post rate" counts only the time inside post calls (WQE build + doorbell
//! record + doorbell/BlueFlame store into model memory).
//!
//! `cargo run --release --features model --example model_threads [-- MESSAGES]`

use rdmaperf::model::workers::ModelWorkers;
use rdmaperf::run::threads::{aggregate, run, Worker};

fn main() {
    let messages: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(2_000_000);
    let clock = rdmaperf::clock::Clock::calibrate();
    let cores = core_affinity::get_core_ids().unwrap_or_default();
    println!("clock: {clock}");
    println!(
        "threads  messages/thread  post_list  post rate [Mpps]  ns/WR (post)  loop rate [Mpps]"
    );
    for threads in [1usize, 2] {
        for post_list in [1u32, 16] {
            let workers: Vec<Worker> = (0..threads)
                .map(|t| Worker {
                    cpu: cores.get(t).map(|c| c.id),
                    qps: vec![t],
                })
                .collect();
            let stall = clock.cycles_for(std::time::Duration::from_secs(10));
            let cfg = ModelWorkers::write_64(messages, post_list, stall);
            let outs = run(
                &ModelWorkers::default(),
                &workers,
                cfg,
                None,
                false,
                &rdmaperf::clock::now,
            )
            .expect("run");
            for o in &outs {
                assert!(o.outcome.error.is_none(), "{:?}", o.outcome.error);
            }
            let agg = aggregate(&outs);
            let loop_mpps = agg.measured as f64 / clock.seconds(agg.t_end - agg.t_start) / 1e6;
            // Post rate: each thread's WRs over its own time inside post calls, summed.
            let post_mpps: f64 = outs
                .iter()
                .map(|o| {
                    (o.outcome.post_calls * post_list as u64) as f64
                        / clock.seconds(o.outcome.post_ticks)
                        / 1e6
                })
                .sum();
            let ns_per_wr = outs
                .iter()
                .map(|o| {
                    clock.nanos(o.outcome.post_ticks)
                        / (o.outcome.post_calls * post_list as u64) as f64
                })
                .sum::<f64>()
                / outs.len() as f64;
            println!("{threads:>7}  {messages:>15}  {post_list:>9}  {post_mpps:>16.1}  {ns_per_wr:>12.2}  {loop_mpps:>16.2}");
        }
    }
}
