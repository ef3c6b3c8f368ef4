//! The soft-RoCE VM test bed and the tools' first checks on it, in one boot:
//! - rxe0 is up and stock perftest runs a pair; `rdmaperf doctor` on rxe0
//!   prints its facts and finds nothing wrong (exit 0);
//! - the real-device verbs tests (`tests/verbs_loopback.rs`) run inside it, so
//!   they are exercised for real rather than SKIPPED on a host without RDMA;
//! - `--post direct` on a device without mlx5dv (rxe) is a clear error naming
//!   the device and the alternatives, never a silent fallback; and `rdmaperf
//!   selfcheck` there: the verbs methods pass every case, direct is listed
//!   unavailable with the reason.

mod common;
use common::vm;
use std::path::PathBuf;
use std::sync::OnceLock;

/// Every case of this file in one VM boot: the smoke pair and doctor, the
/// verbs tests' binary, `--post direct` and selfcheck.
fn batch() -> Option<&'static vm::BatchResult> {
    static BATCH: OnceLock<vm::BatchResult> = OnceLock::new();
    vm::shared_batch(&BATCH, env!("CARGO_BIN_EXE_rdmaperf"), 1500, || {
        let bin = verbs_loopback_bin().expect(
            "verbs_loopback test binary not found: build it with `cargo test --no-run` first",
        );
        let verbs = format!(
            "single verbs '{} --test-threads=1 --nocapture'\n",
            bin.display()
        );
        format!("{SMOKE}{verbs}{DIRECT}")
    })
}

/// ibv_devinfo, doctor and a stock perftest pair.
const SMOKE: &str = r#"
single devinfo 'ibv_devinfo -d rxe0'
single doctor '"$RDMAPERF_BIN" doctor -d rxe0'
pair write_bw 'ib_write_bw -d rxe0 -x 0 -F -n 100 -p $PORT' 'ib_write_bw -d rxe0 -x 0 -F -n 100 -p $PORT 127.0.0.1'
"#;

/// `--post direct` on rxe, then selfcheck on every method.
const DIRECT: &str = r#"
timeout 60 $RDMAPERF_BIN write-bw --loopback -d rxe0 -x 0 -n 100 -s 64 --post direct > $RESULTS/direct.out 2>&1
echo "rc=$?" > $RESULTS/rc.txt
timeout 1200 $RDMAPERF_BIN selfcheck -d rxe0 --json $RESULTS/sc.json > $RESULTS/sc.out 2> $RESULTS/sc.err
echo "rc=$?" > $RESULTS/sc_rc.txt
"#;

/// A perftest BW result row: bytes, iterations, then numbers (e.g. `65536 100 21.86 20.19 0.000323`).
fn has_result_row(out: &str) -> bool {
    out.lines().any(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        f.len() >= 5 && f.iter().all(|x| x.parse::<f64>().is_ok())
    })
}

#[test]
fn result_row_detection() {
    assert!(has_result_row(
        " 65536      100              21.86              20.19  \t\t   0.000323\n"
    ));
    assert!(!has_result_row(
        " #bytes     #iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n"
    ));
    assert!(!has_result_row(" Couldn't connect to 127.0.0.1:18515\n"));
}

#[test]
fn vm_runs_stock_perftest_pair() {
    let Some(r) = batch() else {
        return;
    };

    // ibv_devinfo lists rxe0 with its port active; doctor finds nothing wrong on it.
    r.single("devinfo")
        .assert_ok_with(&["hca_id:\trxe0", "PORT_ACTIVE"]);
    r.single("doctor").assert_ok_with(&[
        "rxe0",
        "port 1  ACTIVE",
        "no PCIe function (software device)",
        "host",
        "doctor: nothing wrong found",
    ]);

    let p = r.ok_pair("write_bw");
    for (side, out) in [("server", &p.server.out), ("client", &p.client.out)] {
        assert!(has_result_row(out), "{side} printed no result row:\n{out}");
    }
}

/// The newest `verbs_loopback-*` test executable next to this one.
fn verbs_loopback_bin() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    vm::newest_bin(exe.parent()?, "verbs_loopback")
}

#[test]
fn verbs_layer_on_rxe() {
    let Some(r) = batch() else {
        return;
    };
    let s = r.single("verbs");
    println!("{}", s.out);
    s.assert_ok_with(&["test result: ok. 8 passed"]);
    assert!(
        !s.out.contains("SKIPPED: no RDMA device"),
        "rxe0 was not found in the VM:\n{}",
        s.out
    );
}

#[test]
fn post_direct_on_rxe_is_a_clear_error() {
    let Some(r) = batch() else {
        return;
    };
    let [rc, out] = r.shown_files(["rc.txt", "direct.out"]);
    let rc = rc.trim();
    assert_eq!(
        rc, "rc=2",
        "--post direct on rxe is refused before any run (status 2):\n{out}"
    );
    for want in ["--post direct", "rxe0", "EOPNOTSUPP", "--post wr-api"] {
        assert!(out.contains(want), "message must mention {want:?}:\n{out}");
    }
    selfcheck_on_rxe(r);
}

/// selfcheck's table and JSON: every verbs case ok, exit 0, direct
/// unavailable and the raw cases SKIPPED because rxe is not mlx5.
fn selfcheck_on_rxe(r: &vm::BatchResult) {
    let [rc, out, err] = r.shown_files(["sc_rc.txt", "sc.out", "sc.err"]);
    let rc = rc.trim();
    assert_eq!(rc, "rc=0", "selfcheck on rxe0 must pass:\n{out}\n{err}");
    assert!(out.contains(" device                : rxe0"), "{out}");
    assert!(
        out.contains("direct: unavailable: rxe0 is not an mlx5 device"),
        "{out}"
    );
    assert!(out.contains(" selfcheck: all "), "{out}");
    assert!(!out.contains("FAILED"), "{out}");
    let j: serde_json::Value =
        serde_json::from_str(r.file("sc.json").unwrap_or("{}")).expect("sc.json is JSON");
    assert_eq!(j["failed"], 0, "{j}");
    let methods = j["methods"].as_array().expect("methods");
    for m in ["post-send", "wr-api"] {
        let e = methods.iter().find(|x| x["method"] == m).expect(m);
        let cases = e["cases"].as_array().unwrap();
        // Every op of RC, UC and UD in every shape, plus the bad rkey.
        assert!(cases.len() > 90, "{m}: {} cases", cases.len());
        assert!(cases.iter().all(|c| c["status"] == "ok"), "{m}: {e}");
        assert!(cases
            .iter()
            .any(|c| c["case"] == "RC write bad rkey + recovery"));
        assert!(cases
            .iter()
            .any(|c| c["case"] == "UD send_imm ring wrap x2"));
        assert!(cases.iter().any(|c| c["case"] == "RC cmp-swap list 64"));
        // The receive side: sizes around scatter-to-CQE's limits, every
        // transport, and RC's SEND that waits out RNR for a late receive.
        for case in [
            "RC send receive 0 B",
            "UC send_imm receive 33 B",
            "UD send receive 65 B",
            "RC send RNR until the receive is posted",
        ] {
            assert!(cases.iter().any(|c| c["case"] == case), "{m}: no {case:?}");
        }
    }
    // The raw packet cases are listed, each SKIPPED with the reason.
    assert!(
        out.contains(" raw cases SKIPPED: rxe0 is not an mlx5 device"),
        "{out}"
    );
    let raw = j["raw"]["cases"].as_array().expect("raw cases");
    assert!(
        !raw.is_empty() && raw.iter().all(|c| c["status"] == "skipped"),
        "{raw:?}"
    );
    let d = methods.iter().find(|x| x["method"] == "direct").unwrap();
    assert!(
        d["unavailable"]
            .as_str()
            .unwrap_or("")
            .contains("not an mlx5"),
        "{d}"
    );
}
