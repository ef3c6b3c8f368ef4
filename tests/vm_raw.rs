//! The raw Ethernet tools on soft-RoCE: rxe has no raw packet QPs, so each
//! tool refuses before opening anything, in one sentence that names rxe0,
//! why, and the fix (a ConnectX port), and exits 2 — by `-d rxe0`, as the
//! first device, and through a multicall name.

mod common;
use common::vm;

#[test]
fn raw_tools_refuse_rxe_naming_it() {
    let script = r#"
single node_desc 'cat /sys/class/infiniband/rxe0/node_desc'
single bw_rxe0 '"$RDMAPERF_BIN" raw-eth-bw -d rxe0 --server -B 02:00:00:00:00:01; echo "rc=$?"'
single lat_first '"$RDMAPERF_BIN" raw-eth-lat --client -B 02:00:00:00:00:01 -E 02:00:00:00:00:02; echo "rc=$?"'
single fs_multicall 'ln -sf "$RDMAPERF_BIN" /tmp/raw_ethernet_fs_rate && { /tmp/raw_ethernet_fs_rate --server -B 02:00:00:00:00:01; echo "rc=$?"; }'
"#;
    let Some(r) = vm::Batch::rdmaperf().run_or_skip(script) else {
        return;
    };
    assert_eq!(r.status, 0, "VM batch failed:\n{}", r.console);
    r.single("node_desc").assert_ok_with(&["rxe"]);
    for (case, tool) in [
        ("bw_rxe0", "raw-eth-bw"),
        ("lat_first", "raw-eth-lat"),
        ("fs_multicall", "raw-eth-fs-rate"),
    ] {
        // Each case echoes the tool's status, so the batch itself succeeds.
        let s = r.single(case);
        assert_eq!(s.rc, Some(0), "{case}: {}", s.out);
        let (sentence, rc) = s.out.trim().rsplit_once('\n').unwrap_or(("", ""));
        // The guest's output may end its lines with \r\n.
        let sentence = sentence.trim();
        assert_eq!(rc, "rc=2", "{case}: {}", s.out);
        let head = format!("rdmaperf {tool}: rxe0 is a rxe (software RDMA) device");
        for want in [head.as_str(), "no raw packet QPs", "ConnectX (mlx5) port"] {
            assert!(
                sentence.contains(want),
                "{case}: no {want:?} in:\n{}",
                s.out
            );
        }
        assert_eq!(
            sentence.lines().count(),
            1,
            "{case}: one sentence:\n{}",
            s.out
        );
    }
}
