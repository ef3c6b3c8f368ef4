//! `--post direct` on a device without mlx5dv (rxe in the soft-RoCE VM) is a
//! clear error naming the device and the alternatives, never a silent fallback.

mod common;
use common::vm;

#[test]
fn post_direct_on_rxe_is_a_clear_error() {
    if let Err(why) = vm::available() {
        println!("SKIPPED: {why}");
        return;
    }
    let script = r#"
timeout 60 $RDMAPERF_BIN write-bw --loopback -d rxe0 -x 0 -n 100 -s 64 --post direct > $RESULTS/direct.out 2>&1
echo "rc=$?" > $RESULTS/rc.txt
"#;
    let r = vm::Batch::new()
        .bin(env!("CARGO_BIN_EXE_rdmaperf"))
        .timeout_s(180)
        .run(script);
    let rc = r.file("rc.txt").unwrap_or("").trim().to_string();
    let out = r.file("direct.out").unwrap_or("").to_string();
    println!("{rc}\n{out}");
    assert_eq!(
        rc, "rc=1",
        "--post direct on rxe must fail with status 1:\n{out}"
    );
    for want in ["--post direct", "rxe0", "EOPNOTSUPP", "--post wr-api"] {
        assert!(out.contains(want), "message must mention {want:?}:\n{out}");
    }
}
