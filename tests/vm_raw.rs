//! The raw Ethernet tools in the soft-RoCE VM, one boot for the file:
//!
//! - rxe has no raw packet QPs, so each tool refuses before opening
//!   anything, in one sentence that names rxe0, why, and the fix (a
//!   ConnectX port), and exits 2 — by `-d rxe0`, as the first device, and
//!   through a multicall name.
//! - The queue model's Ethernet wire on a TAP device, Linux's network stack
//!   on the other end (`common::raw_tap`): this test binary runs its own
//!   guest half ([`tap_guest_half`]) in the VM, as root with `tun` loaded.

mod common;
use common::vm;
use std::sync::OnceLock;

const REFUSALS: &str = r#"
single node_desc 'cat /sys/class/infiniband/rxe0/node_desc'
single bw_rxe0 '"$RDMAPERF_BIN" raw-eth-bw -d rxe0 --server -B 02:00:00:00:00:01; echo "rc=$?"'
single lat_first '"$RDMAPERF_BIN" raw-eth-lat --client -B 02:00:00:00:00:01 -E 02:00:00:00:00:02; echo "rc=$?"'
single fs_multicall 'ln -sf "$RDMAPERF_BIN" /tmp/raw_ethernet_fs_rate && { /tmp/raw_ethernet_fs_rate --server -B 02:00:00:00:00:01; echo "rc=$?"; }'
"#;

/// The guest half's test name and the line it prints its counts on.
const GUEST_HALF: &str = "tap_guest_half";
const TAP_LINE: &str = "raw tap:";

/// Every case of this file in one VM boot.
fn batch() -> Option<&'static vm::BatchResult> {
    static BATCH: OnceLock<vm::BatchResult> = OnceLock::new();
    vm::shared_batch(&BATCH, env!("CARGO_BIN_EXE_rdmaperf"), 600, || {
        if !cfg!(feature = "model") {
            return REFUSALS.to_owned();
        }
        let me = std::env::current_exe().expect("this test binary's path");
        let tap = format!(
            "single raw_tap '{} --ignored --exact {GUEST_HALF} --nocapture'\n",
            me.display()
        );
        format!("{REFUSALS}{tap}")
    })
}

#[test]
fn raw_tools_refuse_rxe_naming_it() {
    let Some(r) = batch() else {
        return;
    };
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

/// The model's wire on tap0 in the VM, both ways: every frame of every raw
/// post method arrives as a datagram at a Linux socket, and Linux's
/// datagrams come through the model's flow table into the server's receive
/// loop (the guest half asserts each; here its verdict and counts).
#[test]
fn the_models_wire_on_a_tap_meets_linux() {
    if !cfg!(feature = "model") {
        println!("SKIPPED: the TAP test drives the queue model: needs `--features model`");
        return;
    }
    let Some(r) = batch() else {
        return;
    };
    let s = r.single("raw_tap");
    s.assert_ok_with(&["test result: ok. 1 passed", TAP_LINE]);
    let line = s.out.lines().find(|l| l.starts_with(TAP_LINE)).unwrap();
    println!("{line}");
    for method in ["direct=", "direct-mpw=", "direct-mpw-inline="] {
        assert!(line.contains(method), "no {method} in {line}");
    }
}

/// The guest half: needs root, `tun` and a network namespace of its own
/// (the VM's), so it runs only when the test above starts it there.
#[cfg(feature = "model")]
#[test]
#[ignore = "guest half: run inside the VM by the_models_wire_on_a_tap_meets_linux"]
fn tap_guest_half() {
    use common::raw_tap;
    let mut tap = raw_tap::open();
    let per = raw_tap::model_to_linux(&mut tap);
    let (all, dropped) = raw_tap::linux_to_model(&mut tap);
    let methods: Vec<String> = per.iter().map(|(m, n)| format!("{m}={n}")).collect();
    println!(
        "{TAP_LINE} model->linux datagrams {}; linux->model {all} frames, {dropped} dropped by \
         the flow table",
        methods.join(" ")
    );
}
