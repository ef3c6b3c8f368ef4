//! The raw post paths (`mlx5::raw_sq`: one SEND per frame, eMPW by pointer
//! and inline) allocate nothing: a counting global allocator counts this
//! thread's allocations around the posts, on model memory with the real
//! stores (`HwMmio`). The model's NIC, which allocates freely, runs between
//! posts outside the counted region.

#[cfg(not(feature = "model"))]
#[test]
fn raw_no_alloc_needs_the_model_feature() {
    println!("SKIPPED: the raw no-allocation test needs `--features model`");
}

#[cfg(feature = "model")]
mod with_model {
    use std::alloc::{GlobalAlloc, Layout, System};
    use std::cell::Cell;

    use rdmaperf::mlx5::raw_sq::{RawPkt, RawSqConfig};
    use rdmaperf::mlx5::HwMmio;
    use rdmaperf::model::{Access, Model, ModelConfig, ModelTransport};
    use rdmaperf::post::{Completion, CompletionQueue};

    struct Counting;

    thread_local! {
        static COUNTING: Cell<bool> = const { Cell::new(false) };
        static ALLOCS: Cell<u64> = const { Cell::new(0) };
    }

    fn note() {
        if COUNTING.try_with(|c| c.get()).unwrap_or(false) {
            let _ = ALLOCS.try_with(|a| a.set(a.get() + 1));
        }
    }

    // SAFETY: forwards every call unchanged to the system allocator; the
    // counter and the flag are const-initialised thread-locals.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, l: Layout) -> *mut u8 {
            note();
            // SAFETY: the caller's contract, forwarded.
            unsafe { System.alloc(l) }
        }
        unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
            // SAFETY: the caller's contract, forwarded.
            unsafe { System.dealloc(p, l) }
        }
    }

    #[global_allocator]
    static A: Counting = Counting;

    fn count<R>(f: impl FnOnce() -> R) -> (u64, R) {
        let before = ALLOCS.with(|a| a.get());
        COUNTING.with(|c| c.set(true));
        let r = f();
        COUNTING.with(|c| c.set(false));
        (ALLOCS.with(|a| a.get()) - before, r)
    }

    #[test]
    fn the_counter_counts() {
        let (n, v) = count(|| vec![1u8; 10]);
        assert_eq!((n, v.len()), (1, 10));
    }

    #[test]
    fn raw_posts_allocate_nothing() {
        let mut buf = vec![0u8; 64 * 64];
        let model = Model::new(ModelConfig {
            wqe_cnt: 256,
            cqe_cnt: 256,
            transport: ModelTransport::RawEth { min_inline: 0 },
            record_history: false,
            ..ModelConfig::default()
        })
        .unwrap();
        // SAFETY: `buf` outlives the model (declared first).
        let mr = unsafe { model.register(buf.as_mut_ptr(), buf.len(), Access::NONE) };
        let cfg = RawSqConfig {
            min_inline: 0,
            cs_flags: 0,
            lkey: mr.lkey,
            cq_every: 1,
        };
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
}
