//! Cost of one receive on the direct mlx5 path — post a receive WQE into the
//! RQ and poll its responder CQE — next to a C reference doing the same work
//! the way rdma-core does it with its public helpers (vendor/c_ref_recv.c).
//!
//! Both sides own the same rings (an RQ of 256 16-byte WQEs, a CQ of 512
//! 64-byte CQEs, their doorbell records, in ordinary memory). Per batch of
//! 64 receives, outside the clock, a stand-in for the NIC writes 64
//! responder CQEs (SEND, 64 bytes, the RQ's next counters, the owner bit
//! of their lap); on the clock, the batch is posted as one list (one
//! doorbell record store) and polled 16 CQEs a call until all 64 are back.
//! Throughput is in receives (`Throughput::Elements`): ns/receive = time / 64.
//! Target: direct <= 0.8x the C reference, as on the send side.
//!
//! Run: `cargo bench --all-features --bench recv_path` (`-- --quick` for a
//! short run; `-- --test` runs each once, as CI does).

use std::alloc::{alloc_zeroed, Layout};
mod common;

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, Criterion, Throughput};
use rdmaperf::mlx5::rq::DirectRq;
use rdmaperf::mlx5::{DirectCq, HwMmio};
use rdmaperf::post::{Completion, CompletionQueue, RecvList, RecvQueue};
use rdmaperf::sys;

const SLOTS: u32 = 256;
const STRIDE: u32 = 16;
const CQES: u32 = 512;
const BATCH: u32 = 64;
const POLL: usize = 16;
const QPN: u32 = 0x000456;
const LEN: u32 = 64;
const LKEY: u32 = 0x1234;

#[repr(C)]
struct CrefRq {
    buf: *mut u8,
    wr_ids: *mut u64,
    dbrec: *mut u32,
    wqe_cnt: u32,
    shift: u32,
    head: u32,
    tail: u32,
}

#[repr(C)]
struct CrefCq {
    buf: *mut u8,
    dbrec: *mut u32,
    cqe_cnt: u32,
    ci: u32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CrefWc {
    wr_id: u64,
    byte_len: u32,
    qp_num: u32,
    opcode: u8,
    status: u8,
    pad: [u8; 6],
}

extern "C" {
    fn rdmaperf_cref_post_recv_list(
        rq: *mut CrefRq,
        addr: u64,
        step: u64,
        lkey: u32,
        len: u32,
        wr_id: u64,
        n: u32,
    ) -> i32;
    fn rdmaperf_cref_poll_recv(cq: *mut CrefCq, rq: *mut CrefRq, wc: *mut CrefWc, max: i32) -> i32;
    fn rdmaperf_cref_sizeof_rq() -> u32;
    fn rdmaperf_cref_sizeof_cq() -> u32;
    fn rdmaperf_cref_sizeof_wc() -> u32;
}

/// Zeroed, page-aligned memory that lives as long as the bench (leaked on
/// purpose: the rings' pointers are handed to both sides).
fn region(len: usize) -> *mut u8 {
    let layout = Layout::from_size_align(len, 4096).expect("layout");
    // SAFETY: a non-zero size.
    let p = unsafe { alloc_zeroed(layout) };
    assert!(!p.is_null(), "out of memory");
    p
}

/// The rings one side uses, and the NIC stand-in's position in its CQ.
struct Rings {
    rq: *mut u8,
    rq_dbrec: *mut u32,
    cq: *mut u8,
    cq_dbrec: *mut u32,
    cq_uar: *mut u8,
    /// CQEs written so far; the counter of the next receive.
    cq_pi: u32,
    rq_counter: u16,
}

impl Rings {
    fn new() -> Self {
        let cq = region((CQES * 64) as usize);
        for i in 0..CQES as usize {
            // SAFETY: inside the CQ region: op_own = INVALID, owner 0.
            unsafe { cq.add(i * 64 + 63).write(0xf0) };
        }
        Rings {
            rq: region((SLOTS * STRIDE) as usize),
            rq_dbrec: region(64).cast(),
            cq,
            cq_dbrec: region(64).cast(),
            cq_uar: region(4096),
            cq_pi: 0,
            rq_counter: 0,
        }
    }

    /// The NIC stand-in: `n` responder CQEs (SEND, LEN bytes) for the next
    /// `n` receive WQEs, owner bit of their lap, opcode byte last.
    fn complete(&mut self, n: u32) {
        for _ in 0..n {
            let idx = (self.cq_pi & (CQES - 1)) as usize;
            let owner = ((self.cq_pi / CQES) & 1) as u8;
            let mut c = [0u8; 64];
            c[44..48].copy_from_slice(&LEN.to_be_bytes());
            c[56..60].copy_from_slice(&QPN.to_be_bytes());
            c[60..62].copy_from_slice(&self.rq_counter.to_be_bytes());
            c[63] = 2 << 4 | owner;
            // SAFETY: entry idx lies inside the CQ region.
            unsafe { std::ptr::copy_nonoverlapping(c.as_ptr(), self.cq.add(idx * 64), 64) };
            self.cq_pi = self.cq_pi.wrapping_add(1);
            self.rq_counter = self.rq_counter.wrapping_add(1);
        }
    }
}

/// One side of the comparison: its RQ and CQ over their own rings, and the
/// receive buffer's address.
struct Rig<Rq, Cq> {
    rings: Rings,
    rq: Rq,
    cq: Cq,
    rx: u64,
}

/// rdmaperf's receive path.
type RustRig = Rig<DirectRq, DirectCq>;
/// The C reference's receive path.
type CRig = Rig<CrefRq, CrefCq>;

impl RustRig {
    fn new(rx: u64) -> Self {
        let rings = Rings::new();
        let mut qp = sys::mlx5dv_qp {
            dbrec: rings.rq_dbrec,
            ..Default::default()
        };
        qp.rq.buf = rings.rq.cast();
        qp.rq.wqe_cnt = SLOTS;
        qp.rq.stride = STRIDE;
        let dv_cq = sys::mlx5dv_cq {
            buf: rings.cq.cast(),
            dbrec: rings.cq_dbrec,
            cqe_cnt: CQES,
            cqe_size: 64,
            cq_uar: rings.cq_uar.cast(),
            cqn: 1,
            comp_mask: 0,
        };
        // SAFETY: the regions are leaked (live for the process), fresh, and
        // used by this rig alone.
        let (rq, mut cq) = unsafe {
            (
                DirectRq::from_dv(&qp, QPN, None, HwMmio).expect("rq"),
                DirectCq::from_dv(&dv_cq, None).expect("cq"),
            )
        };
        cq.attach_recv(QPN, rq.ring());
        RustRig { rings, rq, cq, rx }
    }

    fn run(&mut self, iters: u64) -> Duration {
        let mut wc = [Completion::default(); POLL];
        let mut t = Duration::ZERO;
        let rx = self.rx;
        let list = RecvList {
            n: BATCH as usize,
            wr_id: 7,
            lkey: LKEY,
            len: LEN,
            addr: |k: usize| rx + k as u64 * LEN as u64,
        };
        for _ in 0..iters {
            self.rings.complete(BATCH);
            let t0 = Instant::now();
            self.rq.post_recv_list(&list).expect("room");
            let mut got = 0;
            while got < BATCH as usize {
                got += self.cq.poll(&mut wc).expect("poll");
            }
            t += t0.elapsed();
            black_box(&wc);
        }
        t
    }
}

impl CRig {
    fn new(rx: u64) -> Self {
        let rings = Rings::new();
        let wr_ids = region(SLOTS as usize * 8).cast();
        CRig {
            rq: CrefRq {
                buf: rings.rq,
                wr_ids,
                dbrec: rings.rq_dbrec,
                wqe_cnt: SLOTS,
                shift: STRIDE.trailing_zeros(),
                head: 0,
                tail: 0,
            },
            cq: CrefCq {
                buf: rings.cq,
                dbrec: rings.cq_dbrec,
                cqe_cnt: CQES,
                ci: 0,
            },
            rings,
            rx,
        }
    }

    fn run(&mut self, iters: u64) -> Duration {
        let mut wc = [CrefWc::default(); POLL];
        let mut t = Duration::ZERO;
        for _ in 0..iters {
            self.rings.complete(BATCH);
            let t0 = Instant::now();
            // SAFETY: the rig's rings and table, sized as the structs say.
            let rc = unsafe {
                rdmaperf_cref_post_recv_list(&mut self.rq, self.rx, LEN as u64, LKEY, LEN, 7, BATCH)
            };
            assert_eq!(rc, 0, "room");
            let mut got = 0;
            while got < BATCH as i32 {
                // SAFETY: as above; `wc` holds POLL entries.
                got += unsafe {
                    rdmaperf_cref_poll_recv(
                        &mut self.cq,
                        &mut self.rq,
                        wc.as_mut_ptr(),
                        POLL as i32,
                    )
                };
            }
            t += t0.elapsed();
            black_box(&wc);
        }
        t
    }
}

fn direct_vs_c(c: &mut Criterion) {
    // SAFETY: plain size queries.
    let sizes = unsafe {
        (
            rdmaperf_cref_sizeof_rq(),
            rdmaperf_cref_sizeof_cq(),
            rdmaperf_cref_sizeof_wc(),
        )
    };
    assert_eq!(
        sizes,
        (
            std::mem::size_of::<CrefRq>() as u32,
            std::mem::size_of::<CrefCq>() as u32,
            std::mem::size_of::<CrefWc>() as u32
        ),
        "the C structs and their Rust mirrors differ"
    );
    let rx = region((BATCH * LEN) as usize) as u64;
    let mut g = c.benchmark_group("recv_path/rq_send_64B_x64");
    g.throughput(Throughput::Elements(BATCH as u64));
    let mut rust = RustRig::new(rx);
    g.bench_function("rust_direct", |b| b.iter_custom(|n| rust.run(n)));
    let mut cref = CRig::new(rx);
    g.bench_function("c_ref", |b| b.iter_custom(|n| cref.run(n)));
    g.finish();
    // Both sides saw every receive they posted.
    assert_eq!(rust.rq.ring().done(), rust.rq.posted());
    assert_eq!(cref.rq.tail, cref.rq.head);
}

criterion_group! {
    name = benches;
    config = common::config();
    targets = direct_vs_c
}

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
}
