//! Cost of one post on the direct mlx5 path, next to a C reference doing the
//! same work the way rdma-core would (vendor/c_ref_post.c), both writing into
//! queue-model memory (ordinary cached memory laid out as `mlx5dv_qp`).
//!
//! Only the post is timed: WQE build + doorbell record + 8-byte doorbell or
//! BlueFlame stores. Each timed stretch fills the 256-WQEBB ring once; then,
//! outside the clock, the model's NIC executes the ring up to the doorbell
//! record (`Model::step_dbrec`) and the CQ is polled so the SQ has room
//! again. The C reference just wraps its ring (no bookkeeping, as the
//! anchor in shared/reference/post-path-anchors.md).
//!
//! Throughput is in WQEs (`Throughput::Elements`): ns/WQE = time / batch.
//! Third group: ibv_post_send vs the WR API on a real device (SKIPPED here
//! when there is none).
//!
//! Run: `cargo bench --all-features --bench post_path` (append `-- --quick`
//! for a short run).

mod common;

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, Criterion, Throughput};
use rdmaperf::mlx5::seg::DatagramSeg;
use rdmaperf::mlx5::wqe::shape;
use rdmaperf::mlx5::{DirectCq, DirectSq, HwMmio};
use rdmaperf::model::{Access, Model, ModelConfig, ModelTransport};
use rdmaperf::post::{Completion, CompletionQueue, Op, SendQueue, WcStatus, WrDesc};

/// Ring size of both sides (WQEBBs): 16 KiB, as the anchor's ring.
const WQE_CNT: u32 = 256;
const BF_SIZE: u32 = 256;
const QPN: u32 = 0x000123;
const PEER_QPN: u32 = 0x000456;
const QKEY: u32 = 0x1111_1111;
const BUF: usize = 1 << 16;

/// `struct rdmaperf_cref_qp`.
#[repr(C)]
struct CrefQp {
    buf: *mut u8,
    wqe_cnt: u32,
    qpn: u32,
    dbrec: *mut u32,
    bf_reg: *mut u8,
    bf_size: u32,
    bf_offset: u32,
    pi: u32,
    ud: u32,
    av: [u8; 48],
}

/// `struct rdmaperf_cref_wr`.
#[repr(C)]
#[derive(Clone, Copy)]
struct CrefWr {
    wr_id: u64,
    laddr: u64,
    raddr: u64,
    lkey: u32,
    rkey: u32,
    len: u32,
    signaled: u8,
    inl: u8,
    pad: [u8; 2],
}

extern "C" {
    fn rdmaperf_cref_run_write(qp: *mut CrefQp, wrs: *const CrefWr, batch: u32, nlists: u32);
    fn rdmaperf_cref_run_send_ud(qp: *mut CrefQp, wrs: *const CrefWr, batch: u32, nlists: u32);
    fn rdmaperf_cref_sizeof_qp() -> u32;
    fn rdmaperf_cref_sizeof_wr() -> u32;
}

/// One benchmarked shape.
#[derive(Clone, Copy)]
struct Case {
    name: &'static str,
    ud: bool,
    batch: u32,
    len: u32,
    inline: bool,
}

const CASES: &[Case] = &[
    Case {
        name: "write_64B_bf_x1",
        ud: false,
        batch: 1,
        len: 64,
        inline: false,
    },
    Case {
        name: "write_64B_db_x4",
        ud: false,
        batch: 4,
        len: 64,
        inline: false,
    },
    Case {
        name: "write_64B_db_x16",
        ud: false,
        batch: 16,
        len: 64,
        inline: false,
    },
    Case {
        name: "write_64B_db_x64",
        ud: false,
        batch: 64,
        len: 64,
        inline: false,
    },
    Case {
        name: "write_inline16_bf_x1",
        ud: false,
        batch: 1,
        len: 16,
        inline: true,
    },
    Case {
        name: "write_inline64_bf_x1",
        ud: false,
        batch: 1,
        len: 64,
        inline: true,
    },
    Case {
        name: "write_inline220_bf_x1",
        ud: false,
        batch: 1,
        len: 220,
        inline: true,
    },
    Case {
        name: "ud_send_64B_bf_x1",
        ud: true,
        batch: 1,
        len: 64,
        inline: false,
    },
    Case {
        name: "ud_send_64B_db_x16",
        ud: true,
        batch: 16,
        len: 64,
        inline: false,
    },
];

impl Case {
    fn op(&self) -> Op {
        if self.ud {
            Op::Send
        } else {
            Op::Write
        }
    }
    fn transport(&self) -> ModelTransport {
        if self.ud {
            ModelTransport::Ud {
                peer_qpn: PEER_QPN,
                qkey: QKEY,
            }
        } else {
            ModelTransport::Rc
        }
    }
    fn model(&self) -> Model {
        Model::new(ModelConfig {
            wqe_cnt: WQE_CNT,
            cqe_cnt: WQE_CNT,
            bf_size: BF_SIZE,
            qpn: QPN,
            transport: self.transport(),
            record_history: false,
            ..ModelConfig::default()
        })
        .expect("model config")
    }
    /// The list of one timed stretch: as many WQEs as fill the ring, the
    /// last of each post list signaled (so any prefix of lists retires).
    fn wrs(&self, l: (u64, u32), r: (u64, u32)) -> (Vec<WrDesc>, u32) {
        let proto = WrDesc {
            laddr: l.0,
            lkey: l.1,
            len: self.len,
            raddr: r.0,
            rkey: r.1,
            inline: self.inline,
            ..WrDesc::default()
        };
        let nbb = shape(self.op(), &proto, self.ud).expect("shape").nbb as u32;
        let lists = WQE_CNT / nbb / self.batch;
        assert!(lists > 0, "{}: a list must fit the ring", self.name);
        let n = lists * self.batch;
        let wrs = (0..n)
            .map(|i| WrDesc {
                wr_id: i as u64,
                signaled: (i + 1) % self.batch == 0,
                ..proto
            })
            .collect();
        (wrs, lists)
    }
}

/// Buffers the model's NIC reads and writes (outlive the models using them).
struct Bufs {
    local: Box<[u8]>,
    remote: Box<[u8]>,
}

impl Bufs {
    fn new() -> Self {
        Self {
            local: (0..BUF).map(|i| i as u8).collect(),
            remote: vec![0u8; BUF].into_boxed_slice(),
        }
    }
}

/// The Rust direct SQ on a model with its real stores (`HwMmio`).
struct RustRig {
    model: Model,
    sq: DirectSq<HwMmio>,
    cq: DirectCq,
    wrs: Vec<WrDesc>,
    lists: u32,
    wcs: [Completion; 64],
}

impl RustRig {
    fn new(c: &Case, bufs: &mut Bufs) -> Self {
        let model = c.model();
        let (mut sq, cq) = model.pair_with(HwMmio).expect("model pair");
        // SAFETY: `bufs` outlives the rig (owned by the caller across the bench).
        let (l, r) = unsafe {
            (
                model.register(bufs.local.as_mut_ptr(), BUF, Access::ALL),
                model.register(bufs.remote.as_mut_ptr(), BUF, Access::ALL),
            )
        };
        // SAFETY: as above: the local buffer stays readable.
        unsafe { sq.allow_inline_source(bufs.local.as_ptr(), BUF) }.expect("inline source");
        let (wrs, lists) = c.wrs(
            (bufs.local.as_ptr() as u64, l.lkey),
            (bufs.remote.as_ptr() as u64, r.rkey),
        );
        Self {
            model,
            sq,
            cq,
            wrs,
            lists,
            wcs: [Completion::default(); 64],
        }
    }

    /// Outside the clock: the NIC executes the ring, the CQ frees it.
    fn drain(&mut self) {
        self.model.step_dbrec();
        let mut spins = 0u32;
        while self.sq.outstanding() != 0 {
            let n = self.cq.poll(&mut self.wcs).expect("poll");
            for wc in &self.wcs[..n] {
                assert_eq!(wc.status, WcStatus::SUCCESS, "{wc:?}");
            }
            spins += 1;
            assert!(
                spins < 1_000_000,
                "ring not retired: {:?}",
                self.model.violations()
            );
        }
    }

    /// The timed part: `n` post lists of `b` WRs (a function of its own so
    /// callgrind can count its instructions, see `count_mode`). The
    /// operation is matched once, outside the loop, as a run loop does and
    /// as the C reference has one function per operation.
    #[inline(never)]
    fn post_lists(&mut self, op: Op, b: usize, n: usize) -> u32 {
        match op {
            Op::Write => self.lists(Op::Write, b, n),
            Op::Send => self.lists(Op::Send, b, n),
            _ => self.lists(op, b, n),
        }
    }

    #[inline(always)]
    fn lists(&mut self, op: Op, b: usize, n: usize) -> u32 {
        let mut failed = 0;
        for list in self.wrs.chunks_exact(b).take(n) {
            failed += self.sq.post(op, black_box(list)).is_err() as u32;
        }
        failed
    }

    fn run(&mut self, op: Op, batch: u32, iters: u64) -> Duration {
        let b = batch as usize;
        let mut total = Duration::ZERO;
        let mut left = iters;
        let mut failed = 0u32;
        while left > 0 {
            let n = left.min(self.lists as u64) as usize;
            let t = Instant::now();
            failed += self.post_lists(op, b, n);
            total += t.elapsed();
            assert_eq!(failed, 0, "direct post failed");
            left -= n as u64;
            self.drain();
        }
        total
    }
}

/// The C reference on a second model's memory (never executed).
struct CRig {
    _model: Model,
    qp: CrefQp,
    wrs: Vec<CrefWr>,
    lists: u32,
}

impl CRig {
    fn new(c: &Case, bufs: &Bufs) -> Self {
        // SAFETY: plain functions returning constants.
        let sizes = unsafe { (rdmaperf_cref_sizeof_qp(), rdmaperf_cref_sizeof_wr()) };
        assert_eq!(
            sizes,
            (size_of::<CrefQp>() as u32, size_of::<CrefWr>() as u32),
            "CrefQp/CrefWr do not mirror vendor/c_ref_post.c"
        );
        let model = c.model();
        let dv = model.dv_qp();
        let av = DatagramSeg::new(0, 0, 0, 0, 0, 0x0001, [0; 6], 0, 64, 0, [0; 16])
            .with_ud_dest(PEER_QPN, QKEY)
            .to_bytes();
        let qp = CrefQp {
            buf: dv.sq.buf.cast(),
            wqe_cnt: dv.sq.wqe_cnt,
            qpn: QPN,
            dbrec: dv.dbrec.wrapping_add(1),
            bf_reg: dv.bf.reg.cast(),
            bf_size: dv.bf.size,
            bf_offset: 0,
            pi: 0,
            ud: c.ud as u32,
            av,
        };
        let (wrs, lists) = c.wrs((bufs.local.as_ptr() as u64, 1), (0x1000, 2));
        let wrs = wrs
            .iter()
            .map(|w| CrefWr {
                wr_id: w.wr_id,
                laddr: w.laddr,
                raddr: w.raddr,
                lkey: w.lkey,
                rkey: w.rkey,
                len: w.len,
                signaled: w.signaled as u8,
                inl: w.inline as u8,
                pad: [0; 2],
            })
            .collect();
        Self {
            _model: model,
            qp,
            wrs,
            lists,
        }
    }

    fn run(&mut self, ud: bool, batch: u32, iters: u64) -> Duration {
        let mut total = Duration::ZERO;
        let mut left = iters;
        while left > 0 {
            let n = left.min(self.lists as u64) as u32;
            let t = Instant::now();
            // SAFETY: qp describes the second model's live memory (ring,
            // record, UAR page); wrs holds n·batch entries whose inline
            // sources lie in `bufs`, alive for the bench.
            unsafe {
                if ud {
                    rdmaperf_cref_run_send_ud(&mut self.qp, self.wrs.as_ptr(), batch, n);
                } else {
                    rdmaperf_cref_run_write(&mut self.qp, self.wrs.as_ptr(), batch, n);
                }
            }
            total += t.elapsed();
            left -= n as u64;
        }
        total
    }
}

fn direct_vs_c(c: &mut Criterion) {
    let mut bufs = Bufs::new();
    for case in CASES {
        let mut g = c.benchmark_group(format!("post_path/{}", case.name));
        g.throughput(Throughput::Elements(case.batch as u64));
        let mut rust = RustRig::new(case, &mut bufs);
        g.bench_function("rust_direct", |b| {
            b.iter_custom(|iters| rust.run(case.op(), case.batch, iters))
        });
        assert!(
            rust.model.violations().is_empty(),
            "{:?}",
            rust.model.violations()
        );
        drop(rust);
        let mut cref = CRig::new(case, &bufs);
        g.bench_function("c_ref", |b| {
            b.iter_custom(|iters| cref.run(case.ud, case.batch, iters))
        });
        g.finish();
    }
}

/// ibv_post_send vs the WR API on a real device (loopback RC pair).
mod verbs_bench {
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use criterion::{Criterion, Throughput};
    use rdmaperf::post::post_send::PostSendQueue;
    use rdmaperf::post::verbs_cq::VerbsCq;
    use rdmaperf::post::wr_api::{send_ops_flags, wr_api_probe, WrApiQueue};
    use rdmaperf::post::{Completion, CompletionQueue, Op, SendQueue, WcStatus, WrDesc};
    use rdmaperf::verbs::{
        random_psn, AlignedBuf, Context, Cq, Grh, InitAttr, Mr, Pd, Qp, QpInit, QpType, RtrAttr,
        RtsAttr,
    };

    const DEPTH: u32 = 128;
    const ALL: rdmaperf::verbs::Access = rdmaperf::verbs::Access(15);

    struct Side {
        qp: Arc<Qp>,
        cq: VerbsCq,
        psn: u32,
    }

    fn side(ctx: &Arc<Context>, pd: &Arc<Pd>, ops: Option<u64>) -> Result<Side, String> {
        let cq = Cq::new(ctx, DEPTH * 2, false).map_err(|e| e.to_string())?;
        let init = QpInit {
            send_ops_flags: ops,
            max_send_wr: DEPTH,
            ..QpInit::new(QpType::RC)
        };
        let qp = Qp::create(pd, &cq, &cq, &init).map_err(|e| e.to_string())?;
        qp.to_init(&InitAttr::new(1, ALL))
            .map_err(|e| e.to_string())?;
        Ok(Side {
            qp,
            cq: VerbsCq::new(&cq, 64).map_err(|e| e.to_string())?,
            psn: random_psn(),
        })
    }

    /// A connected loopback pair on port 1; returns the sending side.
    fn pair(ctx: &Arc<Context>, pd: &Arc<Pd>, ops: Option<u64>) -> Result<(Side, Side), String> {
        let pa = ctx.query_port(1).map_err(|e| e.to_string())?;
        if !pa.state.is_active() {
            return Err(format!("{} port 1 is {}", ctx.name(), pa.state.name()));
        }
        let grh = if pa.link_layer.is_ethernet() {
            let t = ctx.gid_table(1).map_err(|e| e.to_string())?;
            let i = t.auto_select(false).ok_or("port 1 has no usable GID")?;
            Some(Grh::new(
                t.get(i).map_err(|e| e.to_string())?.gid.0,
                i as u8,
            ))
        } else {
            None
        };
        let a = side(ctx, pd, ops)?;
        let b = side(ctx, pd, ops)?;
        for (x, y) in [(&a, &b), (&b, &a)] {
            let mut r = RtrAttr::new(1, pa.active_mtu, y.qp.qpn(), y.psn);
            r.dlid = pa.lid;
            r.grh = grh;
            x.qp.to_rtr(&r).map_err(|e| e.to_string())?;
            x.qp.to_rts(&RtsAttr::new(x.psn, 16))
                .map_err(|e| e.to_string())?;
        }
        Ok((a, b))
    }

    /// Posts lists of `batch` WRITEs of 64 B; only the post calls are timed,
    /// completions are reaped outside the clock whenever the SQ is full.
    fn run<S: SendQueue>(
        q: &mut S,
        cq: &mut VerbsCq,
        wrs: &[WrDesc],
        batch: usize,
        iters: u64,
    ) -> Duration {
        let lists_per_fill = DEPTH as usize / batch;
        let mut wcs = [Completion::default(); 64];
        let mut total = Duration::ZERO;
        let mut left = iters;
        while left > 0 {
            let n = (left as usize).min(lists_per_fill);
            let t = Instant::now();
            for list in wrs.chunks_exact(batch).take(n) {
                q.post(Op::Write, list).expect("post");
            }
            total += t.elapsed();
            left -= n as u64;
            let mut got = 0;
            let deadline = Instant::now() + Duration::from_secs(10);
            while got < n {
                let k = cq.poll(&mut wcs).expect("poll");
                for wc in &wcs[..k] {
                    assert_eq!(wc.status, WcStatus::SUCCESS, "{wc:?}");
                }
                got += k;
                assert!(Instant::now() < deadline, "device completions stalled");
            }
        }
        total
    }

    pub fn bench(c: &mut Criterion) {
        let ctx = match Context::open(std::env::var("RDMAPERF_BENCH_DEV").ok().as_deref()) {
            Ok(c) => c,
            Err(e) => {
                println!("SKIPPED: verbs post methods (ibv_post_send vs WR API) need an RDMA device: {e}");
                return;
            }
        };
        let pd = match Pd::new(&ctx) {
            Ok(p) => p,
            Err(e) => {
                println!("SKIPPED: verbs post methods: {e}");
                return;
            }
        };
        let ops = send_ops_flags(&[Op::Write]);
        let wr_api = wr_api_probe(&ctx, QpType::RC, ops).is_ok();
        let src = match Mr::new(&pd, AlignedBuf::filled(1 << 16, 7).expect("buffer"), ALL) {
            Ok(m) => m,
            Err(e) => {
                println!("SKIPPED: verbs post methods: {e}");
                return;
            }
        };
        let dst = Mr::new(&pd, AlignedBuf::zeroed(1 << 16).expect("buffer"), ALL).expect("reg mr");
        for batch in [1usize, 16] {
            let wrs: Vec<WrDesc> = (0..DEPTH as usize)
                .map(|i| WrDesc {
                    wr_id: i as u64,
                    laddr: src.addr(),
                    lkey: src.lkey(),
                    len: 64,
                    raddr: dst.addr(),
                    rkey: dst.rkey(),
                    signaled: (i + 1) % batch == 0,
                    ..WrDesc::default()
                })
                .collect();
            let mut g = c.benchmark_group(format!("verbs_post/{}/write_64B_x{batch}", ctx.name()));
            g.throughput(Throughput::Elements(batch as u64));
            match pair(&ctx, &pd, None) {
                Ok((mut a, _b)) => {
                    let mut q = PostSendQueue::new(&a.qp, batch, None).expect("post_send queue");
                    g.bench_function("ibv_post_send", |b| {
                        b.iter_custom(|it| run(&mut q, &mut a.cq, &wrs, batch, it))
                    });
                }
                Err(e) => println!("SKIPPED: ibv_post_send on {}: {e}", ctx.name()),
            }
            if !wr_api {
                println!("SKIPPED: WR API not supported by {}", ctx.name());
            } else {
                match pair(&ctx, &pd, Some(ops)) {
                    Ok((mut a, _b)) => {
                        let mut q = WrApiQueue::new(&a.qp, None).expect("WR API queue");
                        g.bench_function("wr_api", |b| {
                            b.iter_custom(|it| run(&mut q, &mut a.cq, &wrs, batch, it))
                        });
                    }
                    Err(e) => println!("SKIPPED: WR API on {}: {e}", ctx.name()),
                }
            }
            g.finish();
        }
    }
}

/// `RDMAPERF_BENCH_COUNT=<chunks>`: no criterion, each case posts this many
/// ring-fulls on both sides, for instruction counts under
/// `valgrind --tool=callgrind` (functions `post_lists`, `rdmaperf_cref_run_*`);
/// `RDMAPERF_BENCH_CASE=<name>` runs only that case.
fn count_mode(chunks: u64) {
    let only = std::env::var("RDMAPERF_BENCH_CASE").ok();
    let mut bufs = Bufs::new();
    for case in CASES
        .iter()
        .filter(|c| only.is_none() || only.as_deref() == Some(c.name))
    {
        let mut rust = RustRig::new(case, &mut bufs);
        let lists = rust.lists as u64;
        rust.run(case.op(), case.batch, chunks * lists);
        drop(rust);
        let mut cref = CRig::new(case, &bufs);
        cref.run(case.ud, case.batch, chunks * lists);
        println!(
            "{}: {} WQEs per side",
            case.name,
            chunks * lists * case.batch as u64
        );
    }
}

criterion_group! {
    name = benches;
    config = common::config();
    targets = direct_vs_c, verbs_bench::bench
}

fn main() {
    if let Some(chunks) = std::env::var("RDMAPERF_BENCH_COUNT")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        count_mode(chunks);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
