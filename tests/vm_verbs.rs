//! Runs the real-device verbs tests (`tests/verbs_loopback.rs`) inside the
//! soft-RoCE VM, so they are exercised for real rather than SKIPPED on a host
//! without RDMA.

mod common;
use common::vm;
use std::path::PathBuf;

/// The newest `verbs_loopback-*` test executable next to this one.
fn verbs_loopback_bin() -> Option<PathBuf> {
    let dir = std::env::current_exe().ok()?.parent()?.to_path_buf();
    std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            let n = p.file_name().and_then(|n| n.to_str()).unwrap_or("");
            n.starts_with("verbs_loopback-") && p.extension().is_none()
        })
        .max_by_key(|p| p.metadata().and_then(|m| m.modified()).ok())
}

#[test]
fn verbs_layer_on_rxe() {
    if let Err(why) = vm::available() {
        println!("SKIPPED: {why}");
        return;
    }
    let Some(bin) = verbs_loopback_bin() else {
        panic!("verbs_loopback test binary not found: build it with `cargo test --no-run` first");
    };
    let script = format!(
        "single verbs '{} --test-threads=1 --nocapture'\n",
        bin.display()
    );
    let r = vm::run_batch(&script);
    let s = r.single("verbs");
    println!("{}", s.out);
    s.assert_ok_with(&["test result: ok. 8 passed"]);
    assert!(
        !s.out.contains("SKIPPED: no RDMA device"),
        "rxe0 was not found in the VM:\n{}",
        s.out
    );
}
