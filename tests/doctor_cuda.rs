//! `rdmaperf doctor --cuda` against the project's fake libcuda (host memory posing as GPUs): it
//! loads the driver at run time, opens each GPU, allocates, exports a dma-buf where the GPU says
//! it can, and frees; an injected CUDA error and a missing library are findings with their
//! sentence. What the fake cannot show: a real GPU's allocation, export and driver errors
//! (`scripts/gpu-check.sh` runs this on a GPU host).

mod common;

use std::process::{Command, Output};

fn doctor(env: &[(&str, &str)], lib_dir: Option<&std::path::Path>) -> Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_rdmaperf"));
    c.args(["doctor", "--cuda"]);
    for v in [
        "FAKE_CUDA_FAIL",
        "FAKE_CUDA_DEVICES",
        "FAKE_CUDA_DMABUF",
        "FAKE_CUDA_LOG",
        "FAKE_CUDA_INTEGRATED",
    ] {
        c.env_remove(v);
    }
    c.envs(env.iter().copied());
    match lib_dir {
        Some(d) => c.env("LD_LIBRARY_PATH", d),
        None => c.env("LD_LIBRARY_PATH", "/nonexistent"),
    };
    c.output().unwrap()
}

#[test]
fn allocates_exports_and_frees_on_every_gpu() {
    let dir = common::fake_cuda::fake_cuda_dir(false);
    let log = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("doctor_cuda.log");
    let _ = std::fs::remove_file(&log);
    let out = doctor(
        &[
            ("FAKE_CUDA_DEVICES", "2"),
            ("FAKE_CUDA_LOG", log.to_str().unwrap()),
        ],
        Some(&dir),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("2 CUDA device(s)"), "{text}");
    for i in 0..2 {
        assert!(text.contains(&format!("GPU {i}: ")), "{text}");
    }
    assert!(text.contains("cuMemAlloc_v2: 2097152 bytes"), "{text}");
    assert!(text.contains("(dma-buf): fd "), "the export ran:\n{text}");
    assert!(!text.contains("WARN cuda_"), "{text}");
    let calls = std::fs::read_to_string(&log).unwrap_or_default();
    let allocs = calls
        .lines()
        .filter(|l| l.starts_with("cuMemAlloc_v2"))
        .count();
    let frees = calls
        .lines()
        .filter(|l| l.starts_with("cuMemFree_v2"))
        .count();
    assert_eq!(allocs, 4, "two allocations per GPU:\n{calls}");
    assert_eq!(frees, allocs, "every allocation freed:\n{calls}");
}

#[test]
fn a_gpu_without_dma_buf_is_not_exported() {
    let dir = common::fake_cuda::fake_cuda_dir(false);
    let out = doctor(&[("FAKE_CUDA_DMABUF", "0")], Some(&dir));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("dma-buf no"), "{text}");
    assert!(!text.contains("(dma-buf): fd"), "{text}");
}

#[test]
fn failures_are_findings_with_their_sentence() {
    let dir = common::fake_cuda::fake_cuda_dir(false);
    // CUDA_ERROR_OUT_OF_MEMORY (2) on the allocation.
    let out = doctor(&[("FAKE_CUDA_FAIL", "cuMemAlloc_v2:2")], Some(&dir));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("WARN cuda_device") && text.contains("cuMemAlloc_v2"),
        "{text}"
    );
    assert_eq!(out.status.code(), Some(1), "{text}");
    // No driver library at all.
    let out = doctor(&[], None);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("WARN cuda_init") && text.contains("libcuda.so.1"),
        "{text}"
    );
}

#[test]
fn one_load_and_one_init_for_every_gpu() {
    let dir = common::fake_cuda::fake_cuda_dir(false);
    let log = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("doctor_cuda_once.log");
    let _ = std::fs::remove_file(&log);
    let out = doctor(
        &[
            ("FAKE_CUDA_DEVICES", "3"),
            ("FAKE_CUDA_LOG", log.to_str().unwrap()),
        ],
        Some(&dir),
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("GPU 2: "), "{text}");
    let calls = std::fs::read_to_string(&log).unwrap_or_default();
    let n = |name: &str| {
        calls
            .lines()
            .filter(|l| l.split(' ').next() == Some(name))
            .count()
    };
    assert_eq!(n("fake_cuda_loaded"), 1, "loaded once:\n{calls}");
    assert_eq!(
        n("cuInit"),
        1,
        "cuInit once for the count and three GPUs:\n{calls}"
    );
    assert!(n("fake_cuda_unloaded") <= 1, "at most at exit:\n{calls}");
}

#[test]
fn an_init_error_says_cuda_once_and_an_integrated_gpu_is_a_finding() {
    let dir = common::fake_cuda::fake_cuda_dir(false);
    let out = doctor(&[("FAKE_CUDA_FAIL", "cuInit:100")], Some(&dir));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("CUDA driver: cuInit failed with CUDA_ERROR_NO_DEVICE"),
        "{text}"
    );
    assert!(!text.contains("CUDA CUDA"), "{text}");
    let out = doctor(&[("FAKE_CUDA_INTEGRATED", "1")], Some(&dir));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("WARN cuda_device") && text.contains("integrated GPU"),
        "{text}"
    );
}
