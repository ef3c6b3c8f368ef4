//! `--post direct` on a device without mlx5dv (rxe in the soft-RoCE VM) is a
//! clear error naming the device and the alternatives, never a silent
//! fallback; and `rdmaperf selfcheck` there (same boot): the verbs methods
//! pass every case, direct is listed unavailable with the reason.

mod common;
use common::vm;

#[test]
fn post_direct_on_rxe_is_a_clear_error() {
    let script = r#"
timeout 60 $RDMAPERF_BIN write-bw --loopback -d rxe0 -x 0 -n 100 -s 64 --post direct > $RESULTS/direct.out 2>&1
echo "rc=$?" > $RESULTS/rc.txt
timeout 1200 $RDMAPERF_BIN selfcheck -d rxe0 --json $RESULTS/sc.json > $RESULTS/sc.out 2> $RESULTS/sc.err
echo "rc=$?" > $RESULTS/sc_rc.txt
"#;
    let Some(r) = vm::Batch::rdmaperf().timeout_s(1500).run_or_skip(script) else {
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
    selfcheck_on_rxe(&r);
}

/// selfcheck's table and JSON: every verbs case ok, exit 0, direct
/// unavailable because rxe is not mlx5.
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
    let d = methods.iter().find(|x| x["method"] == "direct").unwrap();
    assert!(
        d["unavailable"]
            .as_str()
            .unwrap_or("")
            .contains("not an mlx5"),
        "{d}"
    );
}
