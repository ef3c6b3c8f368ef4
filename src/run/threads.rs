//! The multi-threaded bw engine: each worker thread owns its QPs' send queues
//! and its own CQ (built inside the thread, so nothing is shared but the
//! read-only targets), is pinned to its core, and runs the same [`BwLoop`].
//! Threads start together behind a barrier; nothing is shared while they run.

use super::bw::{BwConfig, BwLoop, BwOutcome, Deadlines, QpCount, QpTarget};
use crate::post::{Completion, CompletionQueue, SendQueue, WrDesc};
use std::sync::{Barrier, Mutex};

/// Builds one thread's queues, inside that thread.
pub trait QueueFactory: Sync {
    type Sq: SendQueue;
    type Cq: CompletionQueue;
    /// Send queues for `qps` (indices into the run's QP list), the CQ they
    /// complete on, and each QP's addressing.
    #[allow(clippy::type_complexity)]
    fn build(
        &self,
        thread: usize,
        qps: &[usize],
    ) -> Result<(Vec<Self::Sq>, Self::Cq, Vec<QpTarget>), String>;

    /// After the run, the thread's queues come back here (inside the
    /// thread); a factory whose queues must carry their ring indices into
    /// the next size (the direct path's) keeps them. The default drops them.
    fn give_back(&self, _thread: usize, _sqs: Vec<Self::Sq>, _cq: Self::Cq) {}
}

/// A factory whose queues are built once per worker and kept across runs,
/// so their ring indices carry over into the next size (the direct path's
/// SQs and CQ pollers must never restart at index 0 on a live ring): the
/// first run builds through `inner`, later runs take back what the worker
/// gave back. The lock is taken before and after a worker's loop, never in it.
pub struct Kept<F: QueueFactory> {
    inner: F,
    #[allow(clippy::type_complexity)]
    slots: Mutex<Vec<Option<(Vec<F::Sq>, F::Cq, Vec<QpTarget>)>>>,
    /// Each worker's targets, as its first build gave them.
    targets: Mutex<Vec<Vec<QpTarget>>>,
}

impl<F: QueueFactory> Kept<F> {
    pub fn new(inner: F, workers: usize) -> Self {
        Self {
            inner,
            slots: Mutex::new((0..workers).map(|_| None).collect()),
            targets: Mutex::new(vec![Vec::new(); workers]),
        }
    }

    /// The factory that builds the first time.
    pub fn inner(&self) -> &F {
        &self.inner
    }
}

impl<F: QueueFactory> QueueFactory for Kept<F>
where
    F::Sq: Send,
    F::Cq: Send,
{
    type Sq = F::Sq;
    type Cq = F::Cq;

    #[allow(clippy::type_complexity)]
    fn build(
        &self,
        thread: usize,
        qps: &[usize],
    ) -> Result<(Vec<Self::Sq>, Self::Cq, Vec<QpTarget>), String> {
        let poisoned = || "a worker panicked holding the kept queues".to_string();
        let kept = self
            .slots
            .lock()
            .map_err(|_| poisoned())?
            .get_mut(thread)
            .and_then(Option::take);
        if let Some(q) = kept {
            return Ok(q);
        }
        let (sqs, cq, targets) = self.inner.build(thread, qps)?;
        if let Some(t) = self.targets.lock().map_err(|_| poisoned())?.get_mut(thread) {
            t.clone_from(&targets);
        }
        Ok((sqs, cq, targets))
    }

    fn give_back(&self, thread: usize, sqs: Vec<Self::Sq>, cq: Self::Cq) {
        let targets = match self.targets.lock() {
            Ok(t) => t.get(thread).cloned().unwrap_or_default(),
            Err(_) => return,
        };
        if let Ok(mut slots) = self.slots.lock() {
            if let Some(slot) = slots.get_mut(thread) {
                *slot = Some((sqs, cq, targets));
            }
        }
    }
}

/// One worker: its core (None = not pinned) and its QPs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Worker {
    pub cpu: Option<usize>,
    pub qps: Vec<usize>,
}

/// What one worker measured.
#[derive(Clone, Debug)]
pub struct WorkerOutcome {
    pub worker: Worker,
    pub outcome: BwOutcome,
    pub counts: Vec<QpCount>,
    /// Post and completion stamps for this thread's peak (empty without one).
    pub tposted: Vec<u64>,
    pub tcompleted: Vec<u64>,
}

/// Run `workers` in parallel. `cfg.iters` is per QP, as in the single-threaded loop.
/// `peak`: stamp every post and completion (iterations mode) for each thread's peak.
pub fn run<F: QueueFactory, N: Fn() -> u64 + Sync>(
    factory: &F,
    workers: &[Worker],
    cfg: BwConfig,
    deadlines: Option<Deadlines>,
    peak: bool,
    now: &N,
) -> Result<Vec<WorkerOutcome>, String> {
    let barrier = Barrier::new(workers.len());
    std::thread::scope(|s| {
        let handles: Vec<_> = workers
            .iter()
            .enumerate()
            .map(|(t, w)| {
                let barrier = &barrier;
                s.spawn(move || -> Result<WorkerOutcome, String> {
                    if let Some(cpu) = w.cpu {
                        if !core_affinity::set_for_current(core_affinity::CoreId { id: cpu }) {
                            barrier.wait();
                            return Err(format!(
                                "thread {t}: could not pin to CPU {cpu}; check --cpus"
                            ));
                        }
                    }
                    let built = factory.build(t, &w.qps);
                    // Everyone waits here even on failure, so no thread is left hanging.
                    barrier.wait();
                    let (mut sqs, mut cq, my_targets) =
                        built.map_err(|e| format!("thread {t}: {e}"))?;
                    let mut counts = vec![QpCount::default(); sqs.len()];
                    let mut list = vec![WrDesc::default(); cfg.post_list as usize];
                    let mut wcs = [Completion::default(); 16];
                    let stamps = if peak {
                        (cfg.iters * sqs.len() as u64) as usize
                    } else {
                        0
                    };
                    let mut tposted = vec![0u64; stamps];
                    let mut tcompleted = vec![0u64; stamps];
                    let outcome = BwLoop {
                        cfg,
                        sqs: &mut sqs,
                        cq: &mut cq,
                        targets: &my_targets,
                        counts: &mut counts,
                        list: &mut list,
                        wcs: &mut wcs,
                        tposted: &mut tposted,
                        tcompleted: &mut tcompleted,
                        deadlines,
                        periods: None,
                        now,
                    }
                    .run();
                    factory.give_back(t, sqs, cq);
                    Ok(WorkerOutcome {
                        worker: w.clone(),
                        outcome,
                        counts,
                        tposted,
                        tcompleted,
                    })
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("a worker thread panicked".into()))
            })
            .collect()
    })
}

/// The aggregate over workers: messages measured and the window spanning all of them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Aggregate {
    pub measured: u64,
    pub t_start: u64,
    pub t_end: u64,
}

pub fn aggregate(outs: &[WorkerOutcome]) -> Aggregate {
    let measured = outs.iter().map(|o| o.outcome.measured).sum();
    let t_start = outs.iter().map(|o| o.outcome.t_start).min().unwrap_or(0);
    let t_end = outs.iter().map(|o| o.outcome.t_end).max().unwrap_or(0);
    Aggregate {
        measured,
        t_start,
        t_end,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::post::{Op, PostError, WcStatus};
    use std::collections::VecDeque;

    /// A queue pair that completes every signaled WR at once (thread-local state).
    struct Sq(std::rc::Rc<std::cell::RefCell<VecDeque<u64>>>);
    struct Cq(std::rc::Rc<std::cell::RefCell<VecDeque<u64>>>);
    impl SendQueue for Sq {
        fn post(&mut self, _: Op, wrs: &[WrDesc]) -> Result<(), PostError> {
            for w in wrs.iter().filter(|w| w.signaled) {
                self.0.borrow_mut().push_back(w.wr_id);
            }
            Ok(())
        }
    }
    impl CompletionQueue for Cq {
        fn poll(&mut self, out: &mut [Completion]) -> Result<usize, PostError> {
            let mut q = self.0.borrow_mut();
            let n = out.len().min(q.len());
            for (slot, id) in out.iter_mut().zip(q.drain(..n)) {
                *slot = Completion {
                    wr_id: id,
                    status: WcStatus::SUCCESS,
                    ..Default::default()
                };
            }
            Ok(n)
        }
    }
    struct Factory;
    impl QueueFactory for Factory {
        type Sq = Sq;
        type Cq = Cq;
        fn build(&self, _t: usize, qps: &[usize]) -> Result<(Vec<Sq>, Cq, Vec<QpTarget>), String> {
            let shared = std::rc::Rc::new(std::cell::RefCell::new(VecDeque::new()));
            let targets = vec![QpTarget::default(); qps.len()];
            Ok((
                qps.iter().map(|_| Sq(shared.clone())).collect(),
                Cq(shared),
                targets,
            ))
        }
    }

    fn cfg() -> BwConfig {
        BwConfig {
            op: Op::Write,
            size: 64,
            iters: 500,
            post_list: 1,
            tx_depth: 16,
            cq_mod: 4,
            inline: false,
            positions: 1,
            step: 64,
            stall_ticks: u64::MAX,
            cost: true,
        }
    }

    #[test]
    fn two_workers_share_the_qps_and_add_up() {
        let workers = [
            Worker {
                cpu: None,
                qps: vec![0, 2],
            },
            Worker {
                cpu: None,
                qps: vec![1],
            },
        ];
        let outs = run(&Factory, &workers, cfg(), None, true, &crate::clock::now).unwrap();
        assert_eq!(outs.len(), 2);
        assert_eq!(outs[0].outcome.completed, 1000);
        assert_eq!(outs[1].outcome.completed, 500);
        assert_eq!((outs[0].tposted.len(), outs[1].tposted.len()), (1000, 500));
        assert!(outs.iter().all(|o| o.outcome.error.is_none()));
        let a = aggregate(&outs);
        assert_eq!(a.measured, 1500);
        assert!(a.t_end >= a.t_start);
    }

    #[test]
    fn a_failing_factory_is_reported_without_hanging() {
        struct Bad;
        impl QueueFactory for Bad {
            type Sq = Sq;
            type Cq = Cq;
            fn build(
                &self,
                t: usize,
                qps: &[usize],
            ) -> Result<(Vec<Sq>, Cq, Vec<QpTarget>), String> {
                if t == 1 {
                    return Err("no CQ".into());
                }
                Factory.build(t, qps)
            }
        }
        let workers = [
            Worker {
                cpu: None,
                qps: vec![0],
            },
            Worker {
                cpu: None,
                qps: vec![1],
            },
        ];
        let e = run(&Bad, &workers, cfg(), None, false, &crate::clock::now).unwrap_err();
        assert_eq!(e, "thread 1: no CQ");
    }
}
