//! Cost per packet of the raw post paths (`mlx5::raw_sq`) at 64-byte frames
//! (`-s 64`: 60 bytes to the NIC): one SEND per frame (`direct`) and
//! enhanced multi-packet WQEs by pointer (`direct-mpw`), in post lists of
//! 1, 16 and 64 packets, on queue-model memory with the real stores
//! (`HwMmio`: WQE stores, doorbell record, BlueFlame or 8-byte doorbell).
//!
//! Only the posts are timed: each timed stretch posts 192 packets (a ring
//! of 256 WQEBBs holds them on every path); then, outside the clock, the
//! model's NIC sends them (`Model::step_dbrec`), the wire is emptied and
//! the sparse CQEs are polled so the ring is free again. `cq_every` divides
//! each stretch's WQEs, so every stretch ends with a WQE that asks for a CQE.
//!
//! Throughput is in packets: ns/packet = time / 192.
//!
//! Run: `cargo bench --features model --bench raw_post` (append
//! `-- --quick` for a short run).

mod common;

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use rdmaperf::mlx5::mpw;
use rdmaperf::mlx5::raw_sq::{RawPkt, RawSq, RawSqConfig};
use rdmaperf::mlx5::{DirectCq, HwMmio};
use rdmaperf::model::{Access, Model, ModelConfig};
use rdmaperf::post::{Completion, CompletionQueue, WcStatus};
use rdmaperf::raw::frame::{self, FrameSpec};

const WQE_CNT: u32 = 256;
/// Packets per timed stretch.
const FILL: usize = 192;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Method {
    Direct,
    Mpw,
}

/// The queues, the frames' buffer and the packets of one case.
struct Rig {
    sq: RawSq<HwMmio>,
    cq: DirectCq,
    pkts: Vec<RawPkt>,
    model: Model,
    _buf: Vec<u8>,
}

fn spec() -> FrameSpec {
    FrameSpec::udp4(
        64,
        ([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]),
        ([10, 0, 0, 1], [10, 0, 0, 2]),
        (5000, 6000),
    )
}

/// WQEs one stretch takes in lists of `list`.
fn wqes_per_fill(m: Method, list: usize) -> usize {
    let pkts = vec![RawPkt { addr: 0, len: 60 }; FILL];
    match m {
        Method::Direct => FILL,
        Method::Mpw => pkts.chunks(list).map(|l| mpw::plan(l, false).0).sum(),
    }
}

/// The largest `cq_every` up to 16 that divides a stretch's WQEs.
fn cq_every(m: Method, list: usize) -> u32 {
    let w = wqes_per_fill(m, list);
    (1..=16).rev().find(|k| w % k == 0).unwrap_or(1) as u32
}

fn rig(m: Method, list: usize) -> Rig {
    let s = spec();
    let stride = s.frame_len().next_multiple_of(64);
    let mut buf = vec![0u8; stride * FILL];
    for i in 0..FILL {
        let f = frame::frame(&s, 0, i as u64, 1);
        buf[i * stride..i * stride + f.len()].copy_from_slice(&f);
    }
    let model = Model::new(ModelConfig::raw_eth_loop(WQE_CNT)).unwrap();
    // SAFETY: `buf` moves into the rig with the model and the SQ; its heap
    // block does not move and is dropped after them (field order).
    let mr = unsafe { model.register(buf.as_mut_ptr(), buf.len(), Access::NONE) };
    let cfg = RawSqConfig::new(mr.lkey, cq_every(m, list));
    let (mut sq, cq) = model.raw_pair_with(cfg, HwMmio).unwrap();
    // SAFETY: as above.
    unsafe { sq.set_frame_source(buf.as_ptr(), buf.len()) };
    let pkts = (0..FILL)
        .map(|i| RawPkt {
            addr: buf.as_ptr() as u64 + (i * stride) as u64,
            len: s.frame_len() as u32,
        })
        .collect();
    Rig {
        sq,
        cq,
        pkts,
        model,
        _buf: buf,
    }
}

impl Rig {
    /// `iters` stretches of FILL packets; only the posts are timed.
    fn run(&mut self, m: Method, list: usize, iters: u64) -> Duration {
        let mut total = Duration::ZERO;
        let mut wc = [Completion::default(); 64];
        for _ in 0..iters {
            let t = Instant::now();
            for l in self.pkts.chunks(list) {
                let r = match m {
                    Method::Direct => self.sq.post_send(black_box(l)),
                    Method::Mpw => self.sq.post_mpw(black_box(l), false),
                };
                black_box(r).expect("the ring holds a whole stretch");
            }
            total += t.elapsed();
            self.model.step_dbrec();
            black_box(self.model.take_wire());
            while let Ok(k @ 1..) = self.cq.poll(&mut wc) {
                assert!(wc[..k].iter().all(|c| c.status == WcStatus::SUCCESS));
            }
            assert_eq!(self.sq.outstanding(), 0, "every stretch ends signalled");
        }
        total
    }
}

fn raw_post(c: &mut Criterion) {
    let mut g = c.benchmark_group("raw_post_64B");
    g.throughput(Throughput::Elements(FILL as u64));
    for (m, name) in [(Method::Direct, "direct"), (Method::Mpw, "direct-mpw")] {
        for list in [1usize, 16, 64] {
            let mut r = rig(m, list);
            g.bench_function(format!("{name}/list{list}"), |b| {
                b.iter_custom(|iters| r.run(m, list, iters))
            });
        }
    }
    g.finish();
}

criterion_group! {
    name = benches;
    config = common::config();
    targets = raw_post
}
criterion_main!(benches);
