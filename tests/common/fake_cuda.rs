//! Builds the project's fake CUDA driver (`tests/fake_cuda/fake_cuda.c`) into
//! `libcuda.so.1` under the tests' target tmp dir: host memory posing as GPU
//! memory, with call logging and error injection (see the C file's header).
//! A second build lacks `cuMemAlloc_v2`, for the missing-symbol sentence;
//! `log_verbs.so` (LD_PRELOAD) logs the MR verbs into the same call log.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

fn cc(src: &Path, out: &Path, soname: &str, defs: &[&str]) {
    std::fs::create_dir_all(out.parent().unwrap()).unwrap();
    let st = Command::new("cc")
        .args(["-shared", "-fPIC", "-O1", "-Wall"])
        .arg(format!("-Wl,-soname,{soname}"))
        .args(defs)
        .arg("-o")
        .arg(out)
        .arg(src)
        .arg("-ldl")
        .status()
        .expect("run cc to build the fake libcuda");
    assert!(st.success(), "cc failed building {}", out.display());
}

/// The build root, compiled once per process.
fn root() -> &'static PathBuf {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fake_cuda");
        let here = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fake_cuda");
        let fake = here.join("fake_cuda.c");
        cc(&fake, &root.join("full/libcuda.so.1"), "libcuda.so.1", &[]);
        let omit = root.join("omit_memalloc/libcuda.so.1");
        cc(&fake, &omit, "libcuda.so.1", &["-DFAKE_OMIT_MEMALLOC"]);
        let log = root.join("log_verbs/log_verbs.so");
        cc(&here.join("log_verbs.c"), &log, "log_verbs.so", &[]);
        root
    })
}

/// The directory holding the fake `libcuda.so.1` (`omit_memalloc`: the
/// variant without `cuMemAlloc_v2`).
pub fn fake_cuda_dir(omit_memalloc: bool) -> PathBuf {
    root().join(if omit_memalloc {
        "omit_memalloc"
    } else {
        "full"
    })
}

/// The LD_PRELOAD library that logs `ibv_reg_mr_iova2`/`ibv_dereg_mr` to `FAKE_CUDA_LOG`.
pub fn log_verbs_so() -> PathBuf {
    root().join("log_verbs/log_verbs.so")
}

/// A copy of the fake `libcuda.so.1` at a path of its own (`tag`, then a
/// counter): the loader keeps each library loaded and `cuInit`ed once per
/// process, so a test that needs a fresh driver (a first `cuInit`, an
/// injected init error) opens its own copy; dlopen maps a copy afresh, as
/// it is another file.
pub fn fresh_copy(tag: &str) -> PathBuf {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let n = N.fetch_add(1, Ordering::Relaxed);
    let dir = root().join(format!("fresh/{tag}-{n}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let lib = dir.join("libcuda.so.1");
    std::fs::copy(fake_cuda_dir(false).join("libcuda.so.1"), &lib).unwrap();
    lib
}
