//! The criterion bench's device group (`verbs_post`: ibv_post_send vs the WR
//! API on a loopback RC pair) run on soft-RoCE in the VM, so the part that
//! prints SKIPPED on machines without a device is proven to run on one.
//! Criterion's `--test` mode runs every benchmark once.

mod common;
use common::vm;
use std::path::PathBuf;

/// The newest built `post_path` bench executable in the debug build
/// (`cargo build --all-targets --all-features`, scripts/test.sh's build step, leaves it
/// in target/debug/deps). Test mode times nothing, so it need not be optimised.
fn bench_binary() -> Option<PathBuf> {
    vm::newest_bin(&vm::repo().join("target/debug/deps"), "post_path")
}

#[test]
fn verbs_post_bench_runs_on_rxe() {
    if let Err(why) = vm::available() {
        println!("SKIPPED: {why}");
        return;
    }
    let Some(bin) = bench_binary() else {
        let why = "no post_path bench binary in target/debug/deps; build it with \
                   `cargo build --all-features --benches` (scripts/test.sh's build step does)";
        // Under CI/scripts/test.sh the build step ran first: a missing binary
        // there is a failure, not a skip.
        assert!(!vm::vm_required(), "{why}");
        println!("SKIPPED: {why}");
        return;
    };
    let script = format!(
        "cd $RESULTS; timeout 300 {} --test verbs_post > $RESULTS/bench.out 2>&1; echo $? > $RESULTS/bench.rc\nexit 0\n",
        bin.display()
    );
    let r = vm::Batch::new().timeout_s(400).run(&script);
    let out = r.file("bench.out").unwrap_or("").to_string();
    println!("{out}");
    assert_eq!(r.file("bench.rc").map(str::trim), Some("0"), "{out}");
    for case in [
        "write_64B_x1/ibv_post_send",
        "write_64B_x1/wr_api",
        "write_64B_x16/wr_api",
    ] {
        assert!(
            out.contains(&format!("verbs_post/rxe0/{case}")),
            "the device group must run {case} on rxe0:\n{out}"
        );
    }
    assert!(!out.contains("SKIPPED: verbs post methods"), "{out}");
}
