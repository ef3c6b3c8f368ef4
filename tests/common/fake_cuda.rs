//! Builds the project's fake CUDA driver (`tests/fake_cuda/fake_cuda.c`) into
//! `libcuda.so.1` under the tests' target tmp dir: host memory posing as GPU
//! memory, with call logging and error injection (see the C file's header).
//! A second build lacks `cuMemAlloc_v2`, for the missing-symbol sentence.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

/// Compiles once per process; returns the directory holding `libcuda.so.1`
/// (`omit_memalloc`: the variant without `cuMemAlloc_v2`).
pub fn fake_cuda_dir(omit_memalloc: bool) -> PathBuf {
    static BUILT: OnceLock<(PathBuf, PathBuf)> = OnceLock::new();
    let (full, omit) = BUILT.get_or_init(|| {
        let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("fake_cuda");
        let src = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fake_cuda/fake_cuda.c");
        let build = |name: &str, defs: &[&str]| {
            let dir = root.join(name);
            std::fs::create_dir_all(&dir).unwrap();
            let out = dir.join("libcuda.so.1");
            let st = Command::new("cc")
                .args([
                    "-shared",
                    "-fPIC",
                    "-O1",
                    "-Wall",
                    "-Wl,-soname,libcuda.so.1",
                ])
                .args(defs)
                .arg("-o")
                .arg(&out)
                .arg(&src)
                .status()
                .expect("run cc to build the fake libcuda");
            assert!(st.success(), "cc failed building {}", out.display());
            dir
        };
        (
            build("full", &[]),
            build("omit_memalloc", &["-DFAKE_OMIT_MEMALLOC"]),
        )
    });
    if omit_memalloc {
        omit.clone()
    } else {
        full.clone()
    }
}
