//! GPU–NIC topology from sysfs alone (`explain::gpu_topo`), over the
//! fixture trees `tests/data/sysfs/gpu-near` (PIX and PXB pairs, peer
//! memory, IOMMU passthrough: nothing wrong) and `gpu-far` (SYS, NODE and
//! PHB pairs, no GPUDirect path, the IOMMU translating): the same readers
//! as on `/sys` (realpath of each PCI function), the findings
//! `findings_for` gives `--explain` after a GPU run, and what `rdmaperf
//! doctor` prints.

mod common;

use std::path::PathBuf;
use std::process::Command;

use rdmaperf::explain::gpu_findings::findings_for;
use rdmaperf::explain::gpu_topo::Topo;
use rdmaperf::explain::pci_topo::Class;
use rdmaperf::explain::sysfs::SysRoot;

fn tree(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/sysfs")
        .join(name)
}

fn class(t: &Topo, gpu: &str, nic: &str) -> Option<Class> {
    Topo::class(t.gpu(gpu).expect(gpu), t.nic(nic).expect(nic))
}

#[test]
fn gpus_nics_and_classes_come_from_the_pci_paths() {
    let near = Topo::read(&SysRoot(tree("gpu-near")));
    // The NVIDIA audio function and the Intel display are not GPUs.
    let gpus: Vec<&str> = near.gpus.iter().map(|g| g.bdf.as_str()).collect();
    assert_eq!(gpus, ["0000:05:00.0", "0000:0a:00.0"]);
    assert_eq!(class(&near, "0000:05:00.0", "mlx5_0"), Some(Class::PIX));
    assert_eq!(class(&near, "0000:0a:00.0", "mlx5_0"), Some(Class::PXB));
    assert!(near.peermem && !near.nv_mem);
    assert_eq!(near.iommu_units, ["dmar0"]);
    let g = near.gpu("0000:05:00.0").unwrap();
    assert!(!g.iommu.translated());
    assert_eq!(g.iommu.text(), "passthrough (group 12: identity)");

    let far = Topo::read(&SysRoot(tree("gpu-far")));
    assert_eq!(class(&far, "0000:05:00.0", "mlx5_0"), Some(Class::SYS));
    assert_eq!(class(&far, "0000:05:00.0", "mlx5_1"), Some(Class::NODE));
    assert_eq!(class(&far, "0000:82:00.0", "mlx5_0"), Some(Class::PHB));
    assert_eq!(class(&far, "0000:05:00.0", "rxe0"), None);
    let rxe = far.nic("rxe0").unwrap();
    assert!(rxe.software && rxe.place.is_none());
    assert!(!far.peermem && !far.nv_mem);
    assert!(far.gpu("0000:82:00.0").unwrap().iommu.translated());
}

#[test]
fn findings_for_a_gpu_run() {
    let codes = |tree_name: &str, gpu: &str, nic: &str| -> Vec<&'static str> {
        findings_for(&tree(tree_name), gpu, nic)
            .unwrap()
            .iter()
            .map(|f| f.code)
            .collect()
    };
    // PIX and PXB, peer memory, passthrough: nothing to say. CUDA's bus id
    // spelling (8-digit domain, upper case) is accepted.
    assert!(codes("gpu-near", "00000000:05:00.0", "mlx5_0").is_empty());
    assert!(codes("gpu-near", "0a:00.0", "mlx5_0").is_empty());
    // SYS: far, with the nearer GPU and NIC named; no GPUDirect; IOMMU.
    assert_eq!(
        codes("gpu-far", "0000:05:00.0", "mlx5_0"),
        ["gpu_far", "no_gpudirect", "iommu_translating"]
    );
    let f = findings_for(&tree("gpu-far"), "0000:05:00.0", "mlx5_0").unwrap();
    let far = &f[0];
    for want in [
        "GPU 0000:05:00.0 (NUMA 0) and mlx5_0 (0000:81:00.0, NUMA 1): SYS",
        "nearer to mlx5_0: GPU 0000:82:00.0 (PHB)",
        "nearer to this GPU: mlx5_1 (NODE)",
    ] {
        assert!(far.evidence.contains(want), "{want}: {}", far.evidence);
    }
    assert!(far.score > f[2].score, "SYS ranks above the IOMMU finding");
    assert!(
        f[1].evidence.contains("mlx5_0: dma-buf MRs unsupported"),
        "{}",
        f[1].evidence
    );
    assert!(
        f[2].evidence.contains("mlx5_0: translated (group 30: DMA)"),
        "{}",
        f[2].evidence
    );
    // Bad input names the problem and what is there.
    let e = findings_for(&tree("gpu-far"), "0000:99:00.0", "mlx5_0").unwrap_err();
    assert!(
        e.contains("no NVIDIA GPU 0000:99:00.0") && e.contains("0000:05:00.0, 0000:82:00.0"),
        "{e}"
    );
    let e = findings_for(&tree("gpu-far"), "nonsense", "mlx5_0").unwrap_err();
    assert!(e.contains("not a PCI bus id"), "{e}");
    let e = findings_for(&tree("gpu-far"), "05:00.0", "mlx5_9").unwrap_err();
    assert!(
        e.contains("no RDMA device 'mlx5_9'") && e.contains("mlx5_0, mlx5_1, rxe0"),
        "{e}"
    );
}

/// doctor's exit code and everything it printed.
fn doctor(args: &[&str]) -> (i32, String) {
    let (rc, out, err) = common::cli::doctor(args);
    (rc, out + &err)
}

#[test]
fn doctor_prints_each_gpu_against_each_nic() {
    let near = tree("gpu-near");
    let (_, out) = doctor(&["--sysfs-root", near.to_str().unwrap()]);
    for want in [
        " GPU 0000:05:00.0  NUMA 0  IOMMU passthrough (group 12: identity)",
        "mlx5_0     PIX  (0000:06:00.0, NUMA 0: at most one PCIe switch between them)",
        " GPU 0000:0a:00.0  NUMA 0",
        "mlx5_0     PXB  (0000:06:00.0",
        " GPUDirect  peer memory: nvidia_peermem loaded",
        "dma-buf MRs on mlx5_0: supported",
        " IOMMU      on (dmar0)",
    ] {
        assert!(out.contains(want), "no '{want}' in:\n{out}");
    }
    assert!(
        !out.contains("WARN gpu_") && !out.contains("WARN iommu") && !out.contains("WARN no_"),
        "{out}"
    );

    let far = tree("gpu-far");
    let (rc, out) = doctor(&["--sysfs-root", far.to_str().unwrap()]);
    assert_eq!(rc, 1, "{out}");
    for want in [
        "mlx5_0     SYS  (0000:81:00.0, NUMA 1: across the interconnect between NUMA nodes (sockets))",
        "mlx5_1     NODE (0000:41:00.0, NUMA 0",
        "mlx5_0     PHB  (0000:81:00.0, NUMA 1: through the CPU's PCIe host bridge)",
        "rxe0       software device: no PCIe path to the GPU",
        "peer memory: none",
        "dma-buf MRs on mlx5_1: unsupported",
        " IOMMU      on (dmar0, dmar1)",
        // Each GPU's nearest NIC is still worse than PXB.
        "WARN gpu_far: the GPU is far from the NIC (worse than PXB)",
        "GPU 0000:05:00.0 (NUMA 0) and mlx5_1 (0000:41:00.0, NUMA 0): NODE",
        "GPU 0000:82:00.0 (NUMA 1) and mlx5_0 (0000:81:00.0, NUMA 1): PHB",
        "WARN no_gpudirect",
        "WARN iommu_translating",
    ] {
        assert!(out.contains(want), "no '{want}' in:\n{out}");
    }
    // One device: its GPU lines only.
    let (_, out) = doctor(&["--sysfs-root", far.to_str().unwrap(), "-d", "mlx5_0"]);
    assert!(
        out.contains("mlx5_0     SYS") && !out.contains("mlx5_1     NODE"),
        "{out}"
    );

    // A tree without GPUs says so; --probe-dmabuf reads the probe's answer.
    let mlx = tree("mlx5-gen3x8");
    let (_, out) = doctor(&["--sysfs-root", mlx.to_str().unwrap()]);
    assert!(
        out.contains(" GPUs       none (no NVIDIA display/3D PCI function"),
        "{out}"
    );
    assert!(
        !out.contains("dma-buf"),
        "no probe without a GPU unless asked:\n{out}"
    );
    let (_, out) = doctor(&["--sysfs-root", mlx.to_str().unwrap(), "--probe-dmabuf"]);
    assert!(
        out.contains("dma-buf MRs on mlx5_0: not probed (no dmabuf/mlx5_0 in the fixture)"),
        "{out}"
    );
}

fn gpu_check(root: &str) -> (i32, String) {
    let o = Command::new("bash")
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/gpu-check.sh"))
        .env("RDMAPERF_BIN", env!("CARGO_BIN_EXE_rdmaperf"))
        .env("RDMAPERF_SYSFS_ROOT", tree(root))
        .output()
        .expect("run scripts/gpu-check.sh");
    let (rc, out, err) = common::cli::outcome(o);
    (rc, out + &err)
}

/// scripts/gpu-check.sh: without an NVIDIA GPU in the tree it skips with
/// the reason and exit 0; with one it lists the GPUs and their classes
/// against every RDMA device (doctor on the same tree), skips the loopback
/// runs (no real device under a copied tree) with that reason, and ends
/// with what it checked.
#[test]
fn gpu_check_skips_without_a_gpu_and_reports_with_one() {
    let (rc, out) = gpu_check("mlx5-gen3x8");
    assert_eq!(rc, 0, "{out}");
    assert!(out.starts_with("SKIPPED: "), "{out}");
    let (rc, out) = gpu_check("gpu-near");
    assert_eq!(rc, 0, "{out}");
    for want in [
        "== GPUs (PCI bus ids from sysfs)\n0000:05:00.0\n0000:0a:00.0\n",
        "mlx5_0     PIX  (0000:06:00.0",
        "mlx5_0     PXB  (0000:06:00.0",
        "dma-buf MRs on mlx5_0: supported",
        // No loopback runs on a copied tree: said, with the reason, and in the summary.
        "SKIPPED: the runs: ",
        "is a copied sysfs tree (RDMAPERF_SYSFS_ROOT), with no device to run on",
        "== checked\n",
        "gpu-check: GPU memory registration and traffic: not run",
    ] {
        assert!(out.contains(want), "no '{want}' in:\n{out}");
    }
}

/// A host built under the tests' tmp dir: GPU 0000:05:00.0 and NIC function
/// 0000:06:00.0 under one switch, both on NUMA node 1, the RDMA device
/// `mlx5_2` an mlx5 sub-function of that NIC (`…/0000:06:00.0/mlx5_core.sf.2`,
/// no NUMA node of its own), `extra` files (relative path, contents) added.
fn sf_host(name: &str, extra: &[(&str, &str)]) -> PathBuf {
    use std::os::unix::fs::symlink;
    let root = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("gpu-sf-{name}"));
    let _ = std::fs::remove_dir_all(&root);
    let sw = "sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0";
    let gpu = format!("{sw}/0000:02:08.0/0000:05:00.0");
    let nic = format!("{sw}/0000:02:10.0/0000:06:00.0");
    let files = [
        (format!("{gpu}/vendor"), "0x10de"),
        (format!("{gpu}/class"), "0x030200"),
        (format!("{gpu}/numa_node"), "1"),
        (format!("{nic}/vendor"), "0x15b3"),
        (format!("{nic}/class"), "0x020000"),
        (format!("{nic}/numa_node"), "1"),
        (
            format!("{nic}/mlx5_core.sf.2/uevent"),
            "DRIVER=mlx5_core.sf",
        ),
    ];
    let extra = extra.iter().map(|(p, c)| (p.to_string(), *c));
    for (p, c) in files.into_iter().chain(extra) {
        let p = root.join(p);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, format!("{c}\n")).unwrap();
    }
    for d in ["sys/bus/pci/devices", "sys/class/infiniband/mlx5_2"] {
        std::fs::create_dir_all(root.join(d)).unwrap();
    }
    symlink(
        root.join(&gpu),
        root.join("sys/bus/pci/devices/0000:05:00.0"),
    )
    .unwrap();
    symlink(
        root.join(format!("{nic}/mlx5_core.sf.2")),
        root.join("sys/class/infiniband/mlx5_2/device"),
    )
    .unwrap();
    root
}

#[test]
fn a_sub_function_is_placed_at_its_pci_function() {
    let t = Topo::read(&SysRoot(sf_host("place", &[])));
    let nic = t.nic("mlx5_2").unwrap();
    let place = nic.place.as_ref().expect("the SF has a PCI place");
    assert_eq!(place.bdf, "0000:06:00.0");
    assert_eq!(place.numa, Some(1), "the function's NUMA node");
    // One switch between them, as for the function itself (not PXB from the extra level).
    assert_eq!(class(&t, "0000:05:00.0", "mlx5_2"), Some(Class::PIX));
}

#[test]
fn a_dma_buf_nic_is_no_path_where_the_gpu_cannot_export() {
    let proprietary = (
        "proc/driver/nvidia/version",
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023",
    );
    let open = (
        "proc/driver/nvidia/version",
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  535.104.05  Release Build",
    );
    let nic_dmabuf = ("dmabuf/mlx5_2", "supported");
    let codes = |root: PathBuf| -> Vec<&'static str> {
        findings_for(&root, "0000:05:00.0", "mlx5_2")
            .unwrap()
            .iter()
            .map(|f| f.code)
            .collect()
    };
    // The NIC takes dma-buf MRs but the proprietary modules export none: no path.
    let root = sf_host("proprietary", &[proprietary, nic_dmabuf]);
    let f = findings_for(&root, "0000:05:00.0", "mlx5_2").unwrap();
    let g = f
        .iter()
        .find(|f| f.code == "no_gpudirect")
        .expect("no_gpudirect");
    assert!(
        g.evidence.contains("mlx5_2: dma-buf MRs supported") && g.evidence.contains("proprietary"),
        "{}",
        g.evidence
    );
    // Open modules: the dma-buf path is there.
    assert_eq!(
        codes(sf_host("open", &[open, nic_dmabuf])),
        Vec::<&str>::new()
    );
    // No driver loaded: the GPU side is unknown, the NIC's answer stands.
    assert_eq!(
        codes(sf_host("nodriver", &[nic_dmabuf])),
        Vec::<&str>::new()
    );
    // MLNX_OFED's non-contiguous nv_peer_mem is a peer-memory client too.
    let nc = ("sys/kernel/mm/memory_peers/nv_mem_nc/version", "1.3");
    let t = Topo::read(&SysRoot(sf_host("nc", &[nc, proprietary])));
    assert!(t.nv_mem, "nv_mem_nc read");
    assert_eq!(
        codes(sf_host(
            "nc2",
            &[nc, proprietary, ("dmabuf/mlx5_2", "unsupported")]
        )),
        Vec::<&str>::new()
    );
}
