//! `explain` and `rdmaperf doctor` over the fixture sysfs tree
//! (tests/data/sysfs/mlx5-gen3x8/README.md): the same readers as on `/sys`
//! find the PCIe link trained below its maximum and below the port's rate,
//! the far NUMA node, the MTU that limits RoCE packets, the link that went
//! down since boot, and the host's governor and memlock limit; the healthy
//! soft-RoCE device gives nothing. The binary exits 1 with findings, 2 on a
//! bad command line.

mod common;

use std::path::PathBuf;

use common::cli::doctor;
use rdmaperf::explain::counters::Snapshot;
use rdmaperf::explain::doctor::{device_checks, host_checks, HostFacts};
use rdmaperf::explain::sysfs::SysRoot;

fn fixture() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/sysfs/mlx5-gen3x8")
}

#[test]
fn the_fixture_reads_through_the_real_readers() {
    let root = SysRoot(fixture());
    assert_eq!(root.devices(), ["mlx5_0", "rxe0"]);
    let d = root.device("mlx5_0");
    let p = &d.ports[0];
    assert_eq!(
        (p.port, p.state.as_str(), p.rate_gbps),
        (1, "ACTIVE", Some(100.0))
    );
    assert_eq!(p.gid_types, ["IB/RoCE v1", "RoCE v2"]);
    assert_eq!(
        (p.netdev.as_deref(), p.netdev_mtu),
        (Some("ens1f0np0"), Some(1500))
    );
    let pcie = d.pcie.as_ref().expect("a PCIe function");
    assert_eq!((pcie.speed_gts, pcie.width), (Some(8.0), Some(8)));
    assert_eq!((pcie.max_speed_gts, pcie.max_width), (Some(16.0), Some(16)));
    assert_eq!(d.numa_node, Some(1));
    let rxe = root.device("rxe0");
    assert_eq!(
        (rxe.pcie.as_ref(), rxe.ports[0].netdev.as_deref()),
        (None, Some("eth0"))
    );
    // rxe has no PCIe function: a software device (the CPU is its ceiling).
    assert!(rxe.software && !d.software);
    // Counters: hw_counters by name, the PMA under pma., lifespan left out.
    let s = Snapshot::read(&root, "mlx5_0", 1);
    assert_eq!(s.0.get("pma.link_downed"), Some(&2));
    assert_eq!(s.0.get("out_of_sequence"), Some(&0));
    assert!(!s.0.contains_key("lifespan"));
    // The netdev's driver statistics (`ethtool/<netdev>` in `ethtool -S`
    // text, the same parser as a real host's ioctl) join under `eth.`.
    let (s, why) = Snapshot::read_port(&root, "mlx5_0", 1, Some("ens1f0np0"));
    assert_eq!(why, None);
    assert_eq!(s.0.get("eth.rx_prio3_pause"), Some(&800));
    assert_eq!(s.0.get("pma.link_downed"), Some(&2));
    let (s, why) = Snapshot::read_port(&root, "rxe0", 1, Some("eth0"));
    assert!(why.is_some_and(|w| w.contains("eth0")));
    assert!(!s.0.keys().any(|k| k.starts_with("eth.")));
}

#[test]
fn the_fixture_gives_its_findings() {
    let root = SysRoot(fixture());
    let host = HostFacts::with(&root, vec![0, 1], Some(8 << 20), false);
    let codes = |dev: &str| -> Vec<&'static str> {
        device_checks(&root, &root.device(dev), &host)
            .iter()
            .map(|c| c.code)
            .collect()
    };
    assert_eq!(
        codes("mlx5_0"),
        [
            "mtu_limited",
            "link_errors_since_boot",
            "netdev_discards_since_boot",
            "pcie_below_max",
            "pcie_below_port",
            "numa_far"
        ]
    );
    assert!(codes("rxe0").is_empty(), "{:?}", codes("rxe0"));
    let all = device_checks(&root, &root.device("mlx5_0"), &host);
    let numa = all.iter().find(|c| c.code == "numa_far").unwrap();
    // Runnable as written: --cpus pins a single-thread run too.
    assert!(
        numa.fix
            .contains("add `--cpus 2-3` to the rdmaperf command line"),
        "{}",
        numa.fix
    );
    let pcie = all.iter().find(|c| c.code == "pcie_below_max").unwrap();
    assert!(
        pcie.what.contains("8.0 GT/s x8") && pcie.what.contains("56.4"),
        "{}",
        pcie.what
    );
    let host_codes: Vec<_> = host_checks(&host).iter().map(|c| c.code).collect();
    assert_eq!(host_codes, ["memlock", "cpu_governor"]);
    // Near the NIC's node, the NUMA finding goes away.
    let near = HostFacts::with(&root, vec![2, 3], None, true);
    let d = root.device("mlx5_0");
    assert!(device_checks(&root, &d, &near)
        .iter()
        .all(|c| c.code != "numa_far"));
}

#[test]
fn doctor_on_the_fixture_prints_facts_and_findings() {
    let root = fixture();
    let root = root.to_str().unwrap();
    let (rc, out, err) = doctor(&["--sysfs-root", root]);
    assert_eq!(rc, 1, "{out}{err}");
    for want in [
        "mlx5_0     port 1  ACTIVE  100 Gb/sec (4X EDR)",
        "PCIe 8 GT/s x8 (max 16 GT/s x16)",
        "NUMA node 1",
        "WARN pcie_below_max",
        "WARN mtu_limited",
        "RoCE MTU 1024",
        "no PCIe function (software device)",
        "netdev ens1f0np0 since boot: rx_pause_ctrl_phy 1200, tx_pause_ctrl_phy 0, rx_prio3_pause 800, tx_prio3_pause 0",
        "WARN netdev_discards_since_boot",
        "rx_discards_phy = 17 since boot",
        "netdev statistics: none (no ethtool statistics for eth0 in the fixture)",
    ] {
        assert!(out.contains(want), "no '{want}' in:\n{out}");
    }
    let (rc, _, err) = doctor(&["--sysfs-root", root, "-d", "mlx4_9"]);
    assert_eq!(rc, 2);
    assert!(
        err.contains("no RDMA device 'mlx4_9'") && err.contains("mlx5_0, rxe0"),
        "{err}"
    );
    let (rc, _, err) = doctor(&["--bogus"]);
    assert_eq!(rc, 2);
    assert!(
        err.contains("unknown argument '--bogus'") && err.contains("usage:"),
        "{err}"
    );
}
