//! GPU memory (`--use_cuda`) on soft-RoCE in the VM, against the project's
//! fake `libcuda.so.1` (tests/fake_cuda: host memory posing as GPU memory,
//! built by the test). This shows the peer-memory path end to end — load,
//! init, allocate, SYNC_MEMOPS, `ibv_reg_mr` on the "device" address,
//! exchange, traffic, copy-back for validation, deregistration, free (the
//! order checked from the fake's call log, with the MR verbs logged into it
//! by an LD_PRELOAD shim, tests/fake_cuda/log_verbs.c) — in
//! the tools and modes, and against stock perftest (host memory on its
//! side) both ways. The fake's protect mode makes the buffers PROT_NONE
//! after their first copy, so any CPU touch of "device" memory kills the
//! run (rxe moves the data through the kernel's mapping of the pinned
//! pages). What it cannot show: real GPU DMA (P2P into BAR1) and its speed,
//! nvidia-peermem / the NVIDIA dma-buf exporter, topology effects, the
//! driver's real error codes. dma-buf is shown only up to rxe's refusal
//! (rxe has no dma-buf MRs).

mod common;
use common::cli::SCATTER_OFF_NOTICE;
use common::vm;

const SCRIPT: &str = r#"
G="LD_LIBRARY_PATH=$FAKE LD_PRELOAD=$LOGV FAKE_CUDA_PROTECT=1"
R='"$RDMAPERF_BIN"'
srv() { echo "env $G FAKE_CUDA_LOG=$RESULTS/$1.server.cuda $R $2 --use_cuda=0 -d rxe0 -x 0 -F -p \$PORT"; }
cli() { echo "env $G FAKE_CUDA_LOG=$RESULTS/$1.client.cuda $R $2 --use_cuda=0 -d rxe0 -x 0 -F -p \$PORT 127.0.0.1"; }
both() { pair "$1" "$(srv "$1" "$2")" "$(cli "$1" "$2 ${3:-}")"; }
N='-n 200 --timeout 60'
both wbw "write-bw -s 65536 $N" "--out_json --out_json_file=$RESULTS/wbw.json"
both wbw_val "write-bw -s 4096 $N --data_validation"
both rbw_val "read-bw -s 4096 $N --data_validation"
both sbw "send-bw -s 4096 $N"
# A SEND of at most 64 bytes: MLX5_SCATTER_TO_CQE=0 as perftest sets it (rxe has no
# scatter-to-CQE, so only the setting and the line show here, not the fault it avoids).
both s32 "send-bw -s 32 $N"
both w32 "write-bw -s 32 $N"
both wbw_noro "write-bw -s 4096 $N --disable_pcie_relaxed"
# Host memory through the same shim: its MRs get RELAXED_ORDERING too, or not.
H="env LD_PRELOAD=$LOGV"
HS="write-bw -s 4096 $N -d rxe0 -x 0 -F -p \$PORT"
pair host_ro "$H FAKE_CUDA_LOG=$RESULTS/host_ro.server.cuda $R $HS" "$H FAKE_CUDA_LOG=$RESULTS/host_ro.client.cuda $R $HS 127.0.0.1"
pair host_noro "$H FAKE_CUDA_LOG=$RESULTS/host_noro.server.cuda $R $HS --disable_pcie_relaxed" "$H FAKE_CUDA_LOG=$RESULTS/host_noro.client.cuda $R $HS --disable_pcie_relaxed 127.0.0.1"
both wbw_b "write-bw -s 4096 $N -b"
both wbw_q "write-bw -s 4096 $N -q 2"
both wbw_wr "write-bw -s 4096 $N --post wr-api"
both wbw_ps "write-bw -s 4096 $N --post post-send"
# -R: rdma_cm needs the address on the RDMA netdev (dummy0's 169.254.7.1), not 127.0.0.1.
CM="write-bw -s 4096 $N -R --use_cuda=0 -d rxe0 -F -p \$PORT"
pair wbw_cm "env $G FAKE_CUDA_LOG=$RESULTS/wbw_cm.server.cuda $R $CM" "env $G FAKE_CUDA_LOG=$RESULTS/wbw_cm.client.cuda $R $CM 169.254.7.1"
both wbw_rev "write-bw -s 4096 $N --reversed"
both wbw_thr "write-bw -s 4096 $N -q 2 --threads 2"
both wbw_a "write-bw -a -n 20 --timeout 60"
both slat "send-lat -s 64 -n 100 --timeout 60"
both rlat "read-lat -s 64 -n 100 --timeout 60"
# --explain after a GPU run: the GPU-NIC path is read (the VM's sysfs has no such GPU: said).
both wbw_exp "write-bw -s 4096 $N --explain"
# compare (every post method, both ends in one process) and --run_infinitely on GPU memory.
single cmp "env $G FAKE_CUDA_LOG=$RESULTS/cmp.cuda $R compare write-bw --loopback -d rxe0 -x 0 -F -s 4096 -n 200 --reps 1 --use_cuda=0"
( eval "exec timeout 60 $(srv inf 'write-bw -s 4096 --run_infinitely -D 1')" ) > $RESULTS/inf.srv 2>&1 & S=$!
wait_port $PORT $S
( eval "exec $(cli inf 'write-bw -s 4096 --run_infinitely -D 1')" ) > $RESULTS/inf.cli 2>&1 & C=$!
sleep 6; kill -INT $C; wait $C; echo $? > $RESULTS/inf.crc; wait $S; echo $? > $RESULTS/inf.src
# Stock perftest with host memory on its side, both ways.
pair st_srv 'ib_write_bw -d rxe0 -x 0 -F -s 65536 -n 200 -p $PORT' "$(cli st_srv "write-bw -s 65536 $N")"
pair st_cli "$(srv st_cli "write-bw -s 65536 $N")" 'ib_write_bw -d rxe0 -x 0 -F -s 65536 -n 200 -p $PORT 127.0.0.1'
# dma-buf on rxe: its provider has no reg_dmabuf_mr.
both dmabuf "write-bw -s 4096 $N --use_cuda_dmabuf"
# No peer-memory client: the range has no CPU pages the kernel can pin.
pair nopeer "$(srv nopeer "write-bw -s 4096 $N")" "env FAKE_CUDA_NOPEER=1 $(cli nopeer "write-bw -s 4096 $N")"
# No libcuda at all (the client's loader path lacks the fake).
pair nolib "$(srv nolib "write-bw -s 4096 $N")" "$R write-bw -s 4096 $N --use_cuda=0 -d rxe0 -x 0 -F -p \$PORT 127.0.0.1"
exit 0 # the batch status says only whether the VM itself worked
"#;

/// The fake's call log of one side, call names only; the fake's own
/// `fake_cuda_loaded` / `fake_cuda_unloaded` lines (the library mapped, and
/// unmapped at exit) left out after checking it was mapped once.
fn calls(r: &vm::BatchResult, name: &str) -> Vec<String> {
    let all: Vec<String> = r
        .file(name)
        .unwrap_or_else(|| panic!("no CUDA log {name}"))
        .lines()
        .map(|l| l.split(' ').next().unwrap().to_string())
        .collect();
    let loads = all.iter().filter(|c| *c == "fake_cuda_loaded").count();
    assert_eq!(loads, 1, "{name}: libcuda loaded once: {all:?}");
    all.into_iter()
        .filter(|c| !c.starts_with("fake_cuda_"))
        .collect()
}

fn gpu_ok(r: &vm::BatchResult, case: &str) {
    let p = r.ok_pair(case);
    for (side, out) in [("server", &p.server.out), ("client", &p.client.out)] {
        if out.contains("ib_write_bw") || !r.files.contains_key(&format!("{case}.{side}.cuda")) {
            continue;
        }
        let c = calls(r, &format!("{case}.{side}.cuda"));
        // With -R the rdma_cm control channel's host MR is registered before
        // CUDA is touched: the order below starts at the first CUDA call.
        let c: Vec<String> = c.into_iter().skip_while(|x| !x.starts_with("cu")).collect();
        // cuInit is the first CUDA call (with -R the rdma_cm control channel
        // registers its host-memory MR before).
        let first_cu = c.iter().find(|x| x.starts_with("cu")).map(String::as_str);
        assert_eq!(first_cu, Some("cuInit"), "{case} {side}: {c:?}");
        // allocate, register, fill through a copy; deregister, then free.
        let first = |n: &str| c.iter().position(|x| x == n);
        let last = |n: &str| c.iter().rposition(|x| x == n);
        let order = [
            first("cuMemAlloc_v2"),
            first("cuPointerSetAttribute"),
            first("ibv_reg_mr_iova2"),
            first("cuMemcpyHtoD_v2"),
            last("ibv_dereg_mr"),
            last("cuMemFree_v2"),
        ];
        assert!(order.iter().all(Option::is_some), "{case} {side}: {c:?}");
        assert!(
            order.windows(2).all(|w| w[0] < w[1]),
            "{case} {side}: {c:?}"
        );
        assert_eq!(
            c.last().map(String::as_str),
            Some("cuDevicePrimaryCtxRelease_v2")
        );
    }
}

#[test]
fn gpu_memory_on_rxe_against_the_fake() {
    if let Err(why) = vm::available() {
        println!("SKIPPED: {why}");
        return;
    }
    let fake = common::fake_cuda::fake_cuda_dir(false);
    let r = vm::Batch::new()
        .bin(env!("CARGO_BIN_EXE_rdmaperf"))
        .env("FAKE", fake.to_str().unwrap())
        .env("LOGV", common::fake_cuda::log_verbs_so().to_str().unwrap())
        .run(SCRIPT);
    assert_eq!(r.status, 0, "VM batch failed:\n{}", r.console);

    for case in [
        "wbw", "wbw_val", "rbw_val", "sbw", "s32", "w32", "wbw_noro", "wbw_b", "wbw_q", "wbw_wr",
        "wbw_ps", "wbw_cm", "wbw_rev", "wbw_thr", "wbw_a", "slat", "rlat", "st_srv", "st_cli",
        "wbw_exp",
    ] {
        gpu_ok(&r, case);
    }
    let w = r.pair("wbw");
    assert!(
        w.client.out.contains("GPU memory")
            && w.client.out.contains("rdmaperf fake GPU 0")
            && w.client.out.contains("PCI 0000:1b:00.0")
            && w.client.out.contains("peer memory (ibv_reg_mr)"),
        "{}",
        w.client.out
    );
    let j = r.json("wbw");
    let gm = j["test_info"]["GPU_memory"].as_str().unwrap_or_default();
    assert!(
        gm.contains("0000:1b:00.0") && gm.contains("peer memory"),
        "{j}"
    );
    for case in ["wbw_val", "rbw_val"] {
        let p = r.pair(case);
        assert!(
            p.client.out.contains("VALIDATION: PASSED")
                || p.server.out.contains("VALIDATION: PASSED"),
            "{case}: {}\n{}",
            p.client.out,
            p.server.out
        );
        let log = r
            .file(&format!("{case}.client.cuda"))
            .unwrap_or_default()
            .to_string()
            + r.file(&format!("{case}.server.cuda")).unwrap_or_default();
        assert!(
            log.contains("cuMemcpyDtoH_v2"),
            "{case}: validation copies out: {log}"
        );
    }

    relaxed_ordering_and_scatter_to_cqe(&r);

    let e = r.pair("wbw_exp");
    assert!(
        e.client
            .out
            .contains("Explain: GPU 0000:1b:00.0's path to rxe0 not read")
            && e.client.out.contains("no NVIDIA GPU 0000:1b:00.0"),
        "--explain after a GPU run reads the GPU's path:\n{}",
        e.client.out
    );
    let c = r.single("cmp");
    assert_eq!(c.rc, Some(0), "compare on GPU memory:\n{}", c.out);
    let cmp_log = r.file("cmp.cuda").unwrap_or_default();
    assert!(
        cmp_log.contains("cuMemAlloc_v2"),
        "compare ran on GPU memory:\n{cmp_log}"
    );
    assert_eq!(
        cmp_log
            .lines()
            .filter(|l| l.starts_with("cuMemAlloc_v2"))
            .count(),
        cmp_log
            .lines()
            .filter(|l| l.starts_with("cuMemFree_v2"))
            .count(),
        "compare frees every GPU buffer it allocates:\n{cmp_log}"
    );
    let inf = r.file("inf.cli").unwrap_or_default();
    assert_eq!(r.file("inf.crc").map(str::trim), Some("130"), "{inf}");
    let rows = vm::bw_result_rows(inf);
    assert!(
        inf.contains("GPU memory")
            && rows.iter().filter(|(s, n)| *s == 4096 && *n > 0).count() >= 2,
        "--run_infinitely: period rows on GPU memory:\n{inf}"
    );

    r.pair("dmabuf").client.assert_failed_with(&[
        "registering GPU memory through dma-buf (ibv_reg_dmabuf_mr) on rxe0 failed",
        "try without --use_cuda_dmabuf",
        "rxe0 refuses dma-buf MRs",
    ]);
    r.pair("nopeer").client.assert_failed_with(&[
        "registering GPU memory through peer memory (ibv_reg_mr) on rxe0 failed",
        "errno 14",
        "no peer-memory client",
        "nvidia_peermem is not loaded",
        "--use_cuda_dmabuf",
    ]);
    r.pair("nolib").client.assert_failed_with(&[
        "cannot load the CUDA driver library libcuda.so.1",
        "install it, or drop the CUDA flags",
    ]);
}

/// Each buffer registration of `case`'s sides as the shim logged it:
/// (access flags, MLX5_SCATTER_TO_CQE then).
fn registrations(r: &vm::BatchResult, case: &str) -> Vec<(u32, String)> {
    let mut regs = Vec::new();
    for side in ["server", "client"] {
        let log = r.file(&format!("{case}.{side}.cuda")).unwrap_or_default();
        for l in log.lines().filter(|l| l.starts_with("ibv_reg_mr_iova2 ")) {
            let field = |k: &str| {
                l.split(' ')
                    .find_map(|w| w.strip_prefix(k))
                    .unwrap_or_else(|| panic!("{case}: no {k} in {l:?}"))
            };
            let access = u32::from_str_radix(field("access=0x"), 16).unwrap();
            regs.push((access, field("scatter_to_cqe=").to_string()));
        }
    }
    assert!(regs.len() >= 2, "{case}: both sides register: {regs:?}");
    regs
}

/// IBV_ACCESS_RELAXED_ORDERING (IBV_ACCESS_OPTIONAL_FIRST).
const RELAXED: u32 = 1 << 20;

/// What libibverbs was handed: RELAXED_ORDERING on every buffer's MR (GPU
/// and host) unless --disable_pcie_relaxed, and MLX5_SCATTER_TO_CQE=0 for a
/// GPU SEND of at most 64 bytes only, with perftest's line.
fn relaxed_ordering_and_scatter_to_cqe(r: &vm::BatchResult) {
    for (case, ro) in [
        ("wbw", true),
        ("sbw", true),
        ("host_ro", true),
        ("wbw_noro", false),
        ("host_noro", false),
    ] {
        let p = r.ok_pair(case);
        for (access, _) in registrations(r, case) {
            assert_eq!(access & RELAXED != 0, ro, "{case}: access {access:#x}");
        }
        let word = if ro { "ON" } else { "OFF" };
        assert!(
            p.client.out.contains(&format!("PCIe relax order: {word}"))
                && p.client.out.contains("MR access")
                && p.client.out.contains("REMOTE_WRITE"),
            "{case}:\n{}",
            p.client.out
        );
        assert_eq!(
            p.client.out.contains("RELAXED_ORDERING"),
            ro,
            "{case}:\n{}",
            p.client.out
        );
    }
    let line = SCATTER_OFF_NOTICE;
    for (case, off) in [
        ("s32", true),
        ("sbw", false),
        ("w32", false),
        ("wbw", false),
    ] {
        let want = if off { "0" } else { "unset" };
        for (_, s2c) in registrations(r, case) {
            assert_eq!(s2c, want, "{case}");
        }
        let p = r.pair(case);
        for out in [&p.client.out, &p.server.out] {
            assert_eq!(out.contains(line), off, "{case}:\n{out}");
        }
    }
}
