//! Cost per packet of the raw post paths (`mlx5::raw_sq`) at 64-byte frames
//! (`-s 64`: 60 bytes to the NIC), next to a C reference doing the same
//! work the way libmlx5 and DPDK would (vendor/c_ref_raw.c), and next to
//! write-bw's direct post of one WQEBB (an RDMA WRITE of 64 bytes on
//! `DirectSq`). All on queue-model memory with the real stores (`HwMmio`:
//! WQE stores, doorbell record, BlueFlame or 8-byte doorbell), in post
//! lists of 1, 16 and 64 packets:
//!
//! - `direct`: one SEND per frame without inline header (`ds` 3, what a
//!   ConnectX-5 or later takes); `direct-l2inl`: with the 18-byte inline
//!   L2 header libmlx5 always writes (`ds` 4, what a ConnectX-4 Lx needs);
//! - `direct-mpw`: enhanced multi-packet WQEs by pointer (32 per WQE);
//!   `direct-mpw-inline`: the frames inline (14 per WQE).
//!
//! Only the posts are timed: each timed stretch posts 192 packets (a ring
//! of 256 WQEBBs holds them, 512 for inline eMPW); then, outside the clock, the
//! model's NIC sends them (`Model::step_dbrec`), the wire is emptied and
//! the sparse CQEs are polled so the ring is free again. `cq_every`
//! divides each stretch's WQEs, so every stretch ends with a WQE that asks
//! for a CQE. The C reference stamps its WQEs alike and just wraps its ring
//! (never read between stretches); before it is timed, the model executes
//! one stretch of its WQEs and its wire must hold the frames.
//!
//! Throughput is in packets: ns/packet = time / 192.
//!
//! After criterion, the targets are checked on interleaved rounds of all
//! cases (median ns/packet per case) and printed as PASS/MISS lines:
//! `direct-mpw` ≤ 0.4× `direct` per packet (lists of 16 and 64: a list of
//! one is one packet per WQE either way), and `direct` ≤ 1.1× write-bw's
//! direct post of one WQEBB at each list length. `direct-mpw-inline` ÷
//! `direct` is printed beside them with no target.
//!
//! Run: `cargo bench --all-features --bench raw_post` (append `-- --quick`
//! for a shorter criterion run).

mod common;

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, Criterion, Throughput};
use rdmaperf::mlx5::mpw;
use rdmaperf::mlx5::raw_sq::{RawPkt, RawSq, RawSqConfig};
use rdmaperf::mlx5::{DirectCq, DirectSq, HwMmio};
use rdmaperf::model::{Access, Model, ModelConfig, ModelTransport};
use rdmaperf::post::{Completion, CompletionQueue, Op, SendQueue, WcStatus, WrDesc};
use rdmaperf::raw::frame::{self, FrameSpec};

const WQE_CNT: u32 = 256;
/// Packets per timed stretch.
const FILL: usize = 192;
const LISTS: [usize; 3] = [1, 16, 64];
/// The model's default QPN (the C reference stamps it in its WQEs).
const QPN: u32 = 0x000123;

/// The raw posts compared.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Path {
    Direct,
    DirectL2,
    Mpw,
    MpwInline,
}

const PATHS: [Path; 4] = [Path::Direct, Path::DirectL2, Path::Mpw, Path::MpwInline];

impl Path {
    fn name(self) -> &'static str {
        match self {
            Path::Direct => "direct",
            Path::DirectL2 => "direct-l2inl",
            Path::Mpw => "direct-mpw",
            Path::MpwInline => "direct-mpw-inline",
        }
    }
    fn min_inline(self) -> usize {
        if self == Path::DirectL2 {
            18
        } else {
            0
        }
    }
    /// WQEs one stretch takes in lists of `list`.
    fn wqes_per_fill(self, list: usize) -> usize {
        let pkts = vec![RawPkt { addr: 0, len: 60 }; FILL];
        match self {
            Path::Direct | Path::DirectL2 => FILL,
            Path::Mpw => pkts.chunks(list).map(|l| mpw::plan(l, false).0).sum(),
            Path::MpwInline => pkts.chunks(list).map(|l| mpw::plan(l, true).0).sum(),
        }
    }
    /// The largest `cq_every` up to 16 that divides a stretch's WQEs.
    fn cq_every(self, list: usize) -> u32 {
        let w = self.wqes_per_fill(list);
        (1..=16).rev().find(|k| w % k == 0).unwrap_or(1) as u32
    }
    /// The ring: 256 WQEBBs, 512 for inline eMPW (a list of one takes
    /// two WQEBBs per packet there: 384 a stretch).
    fn wqe_cnt(self) -> u32 {
        if self == Path::MpwInline {
            2 * WQE_CNT
        } else {
            WQE_CNT
        }
    }
    fn model(self) -> Model {
        Model::new(ModelConfig {
            transport: ModelTransport::RawEth {
                min_inline: self.min_inline() as u8,
            },
            ..ModelConfig::raw_eth_loop(self.wqe_cnt())
        })
        .expect("model config")
    }
}

/// One timed stretch of one case: the post time of FILL packets (then,
/// untimed, whatever frees the ring again).
trait Stretch {
    fn stretch(&mut self) -> Duration;
}

/// The timed part of a stretch: `post_all`, which returns the posts that
/// failed; none may (`why` says what a failure means).
fn timed_posts(post_all: impl FnOnce() -> u32, why: &str) -> Duration {
    let t = Instant::now();
    let failed = post_all();
    let d = t.elapsed();
    assert_eq!(failed, 0, "{why}");
    d
}

fn spec() -> FrameSpec {
    FrameSpec::sample_udp4(64)
}

/// perftest's buffer of FILL frames, a cache line apart; and the frames.
fn frames() -> (Vec<u8>, Vec<Vec<u8>>, usize) {
    let s = spec();
    let stride = s.frame_len().next_multiple_of(64);
    let frames: Vec<Vec<u8>> = (0..FILL)
        .map(|i| frame::frame(&s, 0, i as u64, 1))
        .collect();
    let mut buf = vec![0u8; stride * FILL];
    for (i, f) in frames.iter().enumerate() {
        buf[i * stride..i * stride + f.len()].copy_from_slice(f);
    }
    (buf, frames, stride)
}

/// The Rust raw SQ of one case.
struct RustRaw {
    path: Path,
    list: usize,
    sq: RawSq<HwMmio>,
    cq: DirectCq,
    pkts: Vec<RawPkt>,
    model: Model,
    _buf: Vec<u8>,
}

impl RustRaw {
    fn new(path: Path, list: usize) -> Self {
        let (mut buf, _, stride) = frames();
        let model = path.model();
        // SAFETY: `buf` moves into the rig with the model and the SQ; its heap
        // block does not move and is dropped after them (field order).
        let mr = unsafe { model.register(buf.as_mut_ptr(), buf.len(), Access::NONE) };
        let cfg = RawSqConfig {
            min_inline: path.min_inline(),
            ..RawSqConfig::new(mr.lkey, path.cq_every(list))
        };
        let (mut sq, cq) = model.raw_pair_with(cfg, HwMmio).expect("raw pair");
        // SAFETY: as above.
        unsafe { sq.set_frame_source(buf.as_ptr(), buf.len()) };
        let pkts = (0..FILL)
            .map(|i| RawPkt {
                addr: buf.as_ptr() as u64 + (i * stride) as u64,
                len: spec().frame_len() as u32,
            })
            .collect();
        Self {
            path,
            list,
            sq,
            cq,
            pkts,
            model,
            _buf: buf,
        }
    }

    /// The timed part (a function of its own, so a profile names it).
    #[inline(never)]
    fn post_all(&mut self) -> u32 {
        let mut failed = 0;
        for l in self.pkts.chunks(self.list) {
            let r = match self.path {
                Path::Direct | Path::DirectL2 => self.sq.post_send(black_box(l)),
                Path::Mpw => self.sq.post_mpw(black_box(l), false),
                Path::MpwInline => self.sq.post_mpw(black_box(l), true),
            };
            failed += black_box(r).is_err() as u32;
        }
        failed
    }
}

impl Stretch for RustRaw {
    fn stretch(&mut self) -> Duration {
        let d = timed_posts(|| self.post_all(), "the ring holds a whole stretch");
        self.model.step_dbrec();
        black_box(self.model.take_wire());
        let mut wc = [Completion::default(); 64];
        while let Ok(k @ 1..) = self.cq.poll(&mut wc) {
            assert!(wc[..k].iter().all(|c| c.status == WcStatus::SUCCESS));
        }
        assert_eq!(self.sq.outstanding(), 0, "every stretch ends signalled");
        d
    }
}

/// `struct rdmaperf_cref_raw_sq`.
#[repr(C)]
struct CrefRawSq {
    buf: *mut u8,
    dbrec: *mut u32,
    bf_reg: *mut u8,
    wqe_cnt: u32,
    qpn: u32,
    bf_size: u32,
    bf_offset: u32,
    pi: u32,
    lkey: u32,
    inl_hdr: u32,
    cq_every: u32,
    quiet: u32,
    pad: u32,
}

/// `struct rdmaperf_cref_pkt`.
#[repr(C)]
#[derive(Clone, Copy)]
struct CrefPkt {
    addr: u64,
    len: u32,
    pad: u32,
}

extern "C" {
    fn rdmaperf_cref_raw_run_send(sq: *mut CrefRawSq, pkts: *const CrefPkt, batch: u32, n: u32);
    fn rdmaperf_cref_raw_run_empw(
        sq: *mut CrefRawSq,
        pkts: *const CrefPkt,
        batch: u32,
        n: u32,
        inl: u32,
    );
    fn rdmaperf_cref_raw_sizeof_sq() -> u32;
    fn rdmaperf_cref_raw_sizeof_pkt() -> u32;
}

/// The C reference of one case on a second model's memory.
struct CRaw {
    path: Path,
    list: usize,
    sq: CrefRawSq,
    pkts: Vec<CrefPkt>,
    _model: Model,
    _buf: Vec<u8>,
}

impl CRaw {
    fn new(path: Path, list: usize) -> Self {
        // SAFETY: plain functions returning constants.
        let sizes = unsafe {
            (
                rdmaperf_cref_raw_sizeof_sq(),
                rdmaperf_cref_raw_sizeof_pkt(),
            )
        };
        assert_eq!(
            sizes,
            (size_of::<CrefRawSq>() as u32, size_of::<CrefPkt>() as u32),
            "CrefRawSq/CrefPkt do not mirror vendor/c_ref_raw.c"
        );
        let (mut buf, sent, stride) = frames();
        let model = path.model();
        // SAFETY: `buf` moves into the rig after the model (dropped after it).
        let mr = unsafe { model.register(buf.as_mut_ptr(), buf.len(), Access::NONE) };
        let dv = model.dv_qp();
        let sq = CrefRawSq {
            buf: dv.sq.buf.cast(),
            dbrec: dv.dbrec.wrapping_add(1),
            bf_reg: dv.bf.reg.cast(),
            wqe_cnt: dv.sq.wqe_cnt,
            qpn: QPN,
            bf_size: dv.bf.size,
            bf_offset: 0,
            pi: 0,
            lkey: mr.lkey,
            inl_hdr: path.min_inline() as u32,
            cq_every: path.cq_every(list),
            quiet: 0,
            pad: 0,
        };
        let pkts = (0..FILL)
            .map(|i| CrefPkt {
                addr: buf.as_ptr() as u64 + (i * stride) as u64,
                len: spec().frame_len() as u32,
                pad: 0,
            })
            .collect();
        let mut c = Self {
            path,
            list,
            sq,
            pkts,
            _model: model,
            _buf: buf,
        };
        c.check(&sent);
        c
    }

    /// The timed part.
    #[inline(never)]
    fn post_all(&mut self) {
        let b = self.list as u32;
        let n = (FILL / self.list) as u32;
        let (sq, pkts) = (&mut self.sq as *mut CrefRawSq, self.pkts.as_ptr());
        // SAFETY: `sq` describes the rig's model memory (ring, record, UAR
        // page), alive with the rig; `pkts` holds n·b frames inside `_buf`.
        unsafe {
            match self.path {
                Path::Direct | Path::DirectL2 => rdmaperf_cref_raw_run_send(sq, pkts, b, n),
                Path::Mpw => rdmaperf_cref_raw_run_empw(sq, pkts, b, n, 0),
                Path::MpwInline => rdmaperf_cref_raw_run_empw(sq, pkts, b, n, 1),
            }
        }
    }

    /// One stretch executed by the model: the C reference's WQEs carry the
    /// frames (so it does the work the Rust side does).
    fn check(&mut self, sent: &[Vec<u8>]) {
        self.post_all();
        let m = &self._model;
        m.step_dbrec();
        assert!(m.eth_rejected().is_empty(), "{:?}", m.eth_rejected());
        let wqes = m.stats().wqes;
        assert_eq!(wqes, self.path.wqes_per_fill(self.list) as u64, "C WQEs");
        let wire = m.take_wire();
        assert!(
            wire == sent,
            "{} list {}: the C reference's WQEs sent {} frames, not the {} expected ones",
            self.path.name(),
            self.list,
            wire.len(),
            sent.len()
        );
    }
}

impl Stretch for CRaw {
    fn stretch(&mut self) -> Duration {
        let t = Instant::now();
        self.post_all();
        t.elapsed()
    }
}

/// write-bw's direct post: RDMA WRITEs of 64 bytes (one WQEBB each), every
/// 16th signalled, as the raw SQ's `cq_every`.
struct WriteRig {
    list: usize,
    sq: DirectSq<HwMmio>,
    cq: DirectCq,
    wrs: Vec<WrDesc>,
    model: Model,
    _bufs: (Vec<u8>, Vec<u8>),
}

impl WriteRig {
    fn new(list: usize) -> Self {
        let model = Model::new(ModelConfig {
            wqe_cnt: WQE_CNT,
            cqe_cnt: WQE_CNT,
            record_history: false,
            ..ModelConfig::default()
        })
        .expect("model config");
        let (mut l, mut r) = (vec![7u8; 1 << 14], vec![0u8; 1 << 14]);
        // SAFETY: the buffers move into the rig with the model (dropped after it).
        let (lk, rk) = unsafe {
            (
                model.register(l.as_mut_ptr(), l.len(), Access::ALL),
                model.register(r.as_mut_ptr(), r.len(), Access::ALL),
            )
        };
        let (sq, cq) = model.pair_with(HwMmio).expect("model pair");
        let wrs = (0..FILL)
            .map(|i| WrDesc {
                wr_id: i as u64,
                laddr: l.as_ptr() as u64 + 64 * i as u64,
                lkey: lk.lkey,
                len: 64,
                raddr: r.as_ptr() as u64 + 64 * i as u64,
                rkey: rk.rkey,
                signaled: (i + 1) % 16 == 0,
                ..WrDesc::default()
            })
            .collect();
        Self {
            list,
            sq,
            cq,
            wrs,
            model,
            _bufs: (l, r),
        }
    }

    #[inline(never)]
    fn post_all(&mut self) -> u32 {
        let mut failed = 0;
        for l in self.wrs.chunks(self.list) {
            failed += self.sq.post(Op::Write, black_box(l)).is_err() as u32;
        }
        failed
    }
}

impl Stretch for WriteRig {
    fn stretch(&mut self) -> Duration {
        let d = timed_posts(|| self.post_all(), "direct WRITE post failed");
        self.model.step_dbrec();
        let mut wc = [Completion::default(); 64];
        let mut spins = 0u32;
        while self.sq.outstanding() != 0 {
            let k = self.cq.poll(&mut wc).expect("poll");
            assert!(wc[..k].iter().all(|c| c.status == WcStatus::SUCCESS));
            spins += 1;
            assert!(spins < 1_000_000, "{:?}", self.model.violations());
        }
        d
    }
}

/// Every case of one list length: (label, rig).
fn cases(list: usize) -> Vec<(String, Box<dyn Stretch>)> {
    let mut v: Vec<(String, Box<dyn Stretch>)> = Vec::new();
    for p in PATHS {
        v.push((p.name().to_string(), Box::new(RustRaw::new(p, list))));
        v.push((format!("{}/c_ref", p.name()), Box::new(CRaw::new(p, list))));
    }
    v.push(("write-bw-direct".into(), Box::new(WriteRig::new(list))));
    v
}

fn raw_post(c: &mut Criterion) {
    for list in LISTS {
        let mut g = c.benchmark_group(format!("raw_post_64B/list{list}"));
        g.throughput(Throughput::Elements(FILL as u64));
        for (name, mut rig) in cases(list) {
            g.bench_function(name, |b| {
                b.iter_custom(|iters| (0..iters).map(|_| rig.stretch()).sum())
            });
        }
        g.finish();
    }
}

/// The median of `v` (not empty).
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// ns/packet of every case of one list length: `rounds` rounds, each
/// running every case for `per` stretches in turn (so a slow spell of the
/// machine falls on all of them); the median round per case.
fn measure(list: usize, rounds: usize, per: usize) -> Vec<(String, f64)> {
    let mut cs = cases(list);
    let mut samples = vec![Vec::with_capacity(rounds); cs.len()];
    for _ in 0..rounds {
        for (i, (_, rig)) in cs.iter_mut().enumerate() {
            let t: Duration = (0..per).map(|_| rig.stretch()).sum();
            samples[i].push(t.as_nanos() as f64 / (per * FILL) as f64);
        }
    }
    cs.into_iter()
        .zip(samples)
        .map(|((n, _), s)| (n, median(s)))
        .collect()
}

/// One target line: PASS or MISS with the measured ratio.
fn target(what: &str, num: f64, den: f64, limit: f64) -> bool {
    let r = num / den;
    let ok = r <= limit;
    println!(
        "{} {what} ≤ {limit:.2}×: {r:.2}× ({num:.2} vs {den:.2} ns/packet)",
        if ok { "PASS" } else { "MISS" }
    );
    ok
}

/// The targets, on interleaved rounds of every case (see the module doc).
fn targets(rounds: usize, per: usize, note: &str) {
    println!(
        "\nraw_post targets: median of {rounds} interleaved rounds of {per}×{FILL} packets{note}"
    );
    let mut missed = 0;
    for list in LISTS {
        let m = measure(list, rounds, per);
        let ns = |n: &str| m.iter().find(|(k, _)| k == n).map_or(f64::NAN, |x| x.1);
        println!("list {list}: ns/packet (Rust / C reference / Rust÷C)");
        for p in PATHS {
            let (r, c) = (ns(p.name()), ns(&format!("{}/c_ref", p.name())));
            println!("  {:<18} {r:6.2} / {c:6.2} / {:.2}×", p.name(), r / c);
        }
        println!("  {:<18} {:6.2}", "write-bw-direct", ns("write-bw-direct"));
        let direct = ns("direct");
        let what = format!("list {list}: direct ÷ write-bw's direct post of one WQEBB");
        missed += !target(&what, direct, ns("write-bw-direct"), 1.1) as u32;
        if list > 1 {
            let what = format!("list {list}: direct-mpw ÷ direct");
            missed += !target(&what, ns(Path::Mpw.name()), direct, 0.4) as u32;
            // Inline eMPW copies each frame into the WQE: a different
            // trade (no gather by the NIC), reported, with no target.
            let r = ns(Path::MpwInline.name()) / direct;
            println!("info list {list}: direct-mpw-inline ÷ direct: {r:.2}× (no target)");
        }
    }
    println!("raw_post targets: {missed} missed");
}

criterion_group! {
    name = benches;
    config = common::config()
        .warm_up_time(Duration::from_millis(300))
        .measurement_time(Duration::from_secs(1))
        .sample_size(20)
        .configure_from_args();
    targets = raw_post
}

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    // `cargo test --benches` runs this without `--bench`: one short round,
    // so the checks run, but the figures mean nothing there.
    if std::env::args().any(|a| a == "--bench") {
        targets(61, 20, "");
    } else {
        targets(1, 1, " (test mode, not a measurement)");
    }
}
