//! The GPU–NIC findings (`super::gpu_topo`'s facts turned into evidence
//! and a fix) and doctor's GPU block: a GPU far from the NIC (worse than
//! PXB, where NCCL stops using GPUDirect by default), no GPUDirect path at
//! all (no peer-memory client and no dma-buf MRs), and an IOMMU that
//! translates the GPU's or the NIC's DMA.

use std::fmt::Write;
use std::path::Path;

use super::gpu_topo::{dmabuf, Gpu, Nic, Topo};
use super::pci_topo::{normalize_bdf, Class};
use super::rules::Finding;
use super::sysfs::SysRoot;

/// The findings for one GPU (PCI bus id in any usual spelling) and one
/// RDMA device, read from sysfs under `root` (`/` on a host), with the
/// NIC's dma-buf support probed there. For `--explain` after a GPU run:
/// the findings rank with the counter findings by their `score`.
/// `Err` names what is not there (a bus id that is no NVIDIA GPU under
/// `root`, a device that is not in `sys/class/infiniband`).
pub fn findings_for(root: &Path, gpu_bdf: &str, nic: &str) -> Result<Vec<Finding>, String> {
    let root = SysRoot(root.to_path_buf());
    let topo = Topo::read(&root);
    let bdf = normalize_bdf(gpu_bdf)
        .ok_or_else(|| format!("'{gpu_bdf}' is not a PCI bus id (expected like 0000:05:00.0)"))?;
    let gpu = topo.gpu(&bdf).ok_or_else(|| {
        format!(
            "no NVIDIA GPU {bdf} under {}: GPUs there: {}",
            root.0.join("sys/bus/pci/devices").display(),
            list_or_none(topo.gpus.iter().map(|g| g.bdf.as_str()))
        )
    })?;
    let nic = topo.nic(nic).ok_or_else(|| {
        format!(
            "no RDMA device '{nic}' under {}: devices there: {}",
            root.0.join("sys/class/infiniband").display(),
            list_or_none(topo.nics.iter().map(|n| n.name.as_str()))
        )
    })?;
    let dmabuf = dmabuf(&root, &nic.name);
    Ok(pair(&topo, gpu, nic, &dmabuf))
}

fn list_or_none<'a>(v: impl Iterator<Item = &'a str>) -> String {
    let v: Vec<&str> = v.collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

/// The findings of one GPU and one NIC (what `--explain` ranks after a
/// GPU run); `dmabuf` is the NIC's probe answer.
pub fn pair(topo: &Topo, gpu: &Gpu, nic: &Nic, dmabuf: &Result<bool, String>) -> Vec<Finding> {
    let mut v = Vec::new();
    if let Some(c) = Topo::class(gpu, nic).filter(|c| *c > Class::PXB) {
        v.push(far(topo, gpu, nic, c));
    }
    v.extend(gpudirect(topo, &[(nic.name.as_str(), dmabuf)]));
    v.extend(iommu(topo, &[gpu], &[nic]));
    v
}

/// Where a function is, for evidence: "0000:06:00.0, NUMA 0".
fn where_(place: &Option<super::pci_topo::PciPlace>) -> String {
    match place {
        Some(p) => format!(
            "{}, NUMA {}",
            p.bdf,
            p.numa.map_or("unknown".into(), |n| n.to_string())
        ),
        None => "no PCI path".into(),
    }
}

fn numa_of(g: &Gpu) -> String {
    g.place
        .as_ref()
        .and_then(|p| p.numa)
        .map_or("unknown".into(), |n| n.to_string())
}

/// Those of `others` nearer than `c`, each as "name (class)"; `named` gives
/// one's name and class (`None`: its class is unknown, so it is left out).
fn nearer<'a, T: 'a>(
    others: impl Iterator<Item = &'a T>,
    c: Class,
    named: impl Fn(&T) -> Option<(String, Class)>,
) -> Vec<String> {
    others
        .filter_map(named)
        .filter(|(_, k)| *k < c)
        .map(|(name, k)| format!("{name} ({})", k.name()))
        .collect()
}

fn far(topo: &Topo, gpu: &Gpu, nic: &Nic, c: Class) -> Finding {
    let mut ev = format!(
        "GPU {} (NUMA {}) and {} ({}): {}, {}",
        gpu.bdf,
        numa_of(gpu),
        nic.name,
        where_(&nic.place),
        c.name(),
        c.meaning()
    );
    let other_gpus = topo.gpus.iter().filter(|g| g.bdf != gpu.bdf);
    let nearer_gpus = nearer(other_gpus, c, |g| {
        Some((format!("GPU {}", g.bdf), Topo::class(g, nic)?))
    });
    let other_nics = topo.nics.iter().filter(|n| n.name != nic.name);
    let nearer_nics = nearer(other_nics, c, |n| {
        Some((n.name.clone(), Topo::class(gpu, n)?))
    });
    if !nearer_gpus.is_empty() {
        let _ = write!(ev, "; nearer to {}: {}", nic.name, nearer_gpus.join(", "));
    }
    if !nearer_nics.is_empty() {
        let _ = write!(ev, "; nearer to this GPU: {}", nearer_nics.join(", "));
    }
    if nearer_gpus.is_empty() && nearer_nics.is_empty() {
        ev.push_str("; no GPU or NIC here is nearer");
    }
    Finding {
        code: "gpu_far",
        title: "the GPU is far from the NIC (worse than PXB): GPUDirect traffic crosses the CPU's \
                root complex or the socket interconnect, which can halve its bandwidth",
        evidence: ev,
        fix: "use a GPU and a NIC under one PCIe switch (PIX or PXB): the nearer GPU \
              (--use_cuda_bus_id) or NIC (-d) the evidence names; otherwise a slot under the \
              NIC's switch. NCCL uses GPUDirect only up to PXB by default",
        score: f64::from(c.rank()),
    }
}

/// No peer-memory client and no dma-buf path (a NIC that takes dma-buf MRs
/// and a GPU that can export one): GPU memory cannot be registered. Without
/// a client and with dma-buf unknown, what plain `--use_cuda` will hit.
pub fn gpudirect(topo: &Topo, nics: &[(&str, &Result<bool, String>)]) -> Vec<Finding> {
    // A NIC that answers the dma-buf probe is no path where the GPU cannot export.
    let gpu_exports = topo.nvidia_open != Some(false);
    if topo.peermem
        || topo.nv_mem
        || (gpu_exports && nics.iter().any(|(_, d)| matches!(d, Ok(true))))
    {
        return Vec::new();
    }
    let answers: Vec<String> = nics
        .iter()
        .map(|(n, d)| match d {
            Ok(true) => format!("{n}: dma-buf MRs supported"),
            Ok(false) => format!("{n}: dma-buf MRs unsupported"),
            Err(why) => format!("{n}: dma-buf {why}"),
        })
        .collect();
    let mut evidence = format!(
        "peer memory: {}; {}",
        topo.peermem_text(),
        answers.join("; ")
    );
    if !gpu_exports {
        let _ = write!(evidence, "; GPU dma-buf export {}", topo.gpu_export_text());
    }
    if !gpu_exports || nics.iter().all(|(_, d)| matches!(d, Ok(false))) {
        vec![Finding {
            code: "no_gpudirect",
            title: "no GPUDirect path: no peer-memory client is loaded and the NIC takes no dma-buf \
                    MRs, so GPU memory cannot be registered (perftest: error=14 or 95)",
            evidence,
            fix: "load nvidia-peermem (`modprobe nvidia-peermem`; it needs a kernel with peer-memory \
                  support, e.g. MLNX_OFED's), or use dma-buf (--use_cuda_dmabuf: Linux 5.12+, the NVIDIA \
                  open kernel modules 515+ in place of the proprietary ones, a NIC driver with \
                  dma-buf MRs such as mlx5)",
            score: 100.0,
        }]
    } else {
        vec![Finding {
            code: "no_peermem",
            title: "no peer-memory client is loaded: --use_cuda without --use_cuda_dmabuf cannot \
                    register GPU memory (EFAULT, perftest's error=14)",
            evidence,
            fix: "`modprobe nvidia-peermem`, or use --use_cuda_dmabuf where the NIC takes dma-buf MRs",
            score: 1.0,
        }]
    }
}

/// The IOMMU translating a GPU's or a NIC's DMA.
pub fn iommu(topo: &Topo, gpus: &[&Gpu], nics: &[&Nic]) -> Vec<Finding> {
    let mut parts: Vec<String> = gpus
        .iter()
        .filter(|g| g.iommu.translated())
        .map(|g| format!("GPU {}: {}", g.bdf, g.iommu.text()))
        .collect();
    parts.extend(
        nics.iter()
            .filter(|n| n.iommu.translated())
            .map(|n| format!("{}: {}", n.name, n.iommu.text())),
    );
    if parts.is_empty() {
        return Vec::new();
    }
    vec![Finding {
        code: "iommu_translating",
        title: "the IOMMU translates the GPU's or the NIC's DMA: peer-to-peer traffic between them \
                pays address translation and may be sent up through the root complex",
        evidence: format!(
            "IOMMU units: {}; {}",
            topo.iommu_units.join(", "),
            parts.join("; ")
        ),
        fix: "boot with the IOMMU in passthrough (`iommu=pt` beside intel_iommu=on or amd_iommu=on) \
              or set these groups' type to identity; as root, check ACS redirect on the PCIe switch \
              ports between GPU and NIC (`lspci -vvv`, ACSCtl)",
        score: 2.0,
    }]
}

fn dmabuf_lines(s: &mut String, dmabuf: &[(String, Result<bool, String>)]) {
    for (n, d) in dmabuf {
        let answer = match d {
            Ok(true) => "supported".to_string(),
            Ok(false) => "unsupported".to_string(),
            Err(why) => why.clone(),
        };
        let _ = writeln!(s, " {:<10} dma-buf MRs on {n}: {answer}", "");
    }
}

/// Doctor's GPU block and its findings: each GPU with its class to every
/// RDMA device, peer memory, each NIC's dma-buf answer, the IOMMU; a GPU is
/// far only when its nearest NIC is worse than PXB.
/// One GPU's line and its class to each NIC; the `gpu_far` finding when
/// even its nearest NIC is further than a PCIe switch.
fn gpu_lines(s: &mut String, topo: &Topo, g: &Gpu) -> Option<Finding> {
    let _ = writeln!(
        s,
        " GPU {}  NUMA {}  IOMMU {}",
        g.bdf,
        numa_of(g),
        g.iommu.text()
    );
    for n in &topo.nics {
        let class = match Topo::class(g, n) {
            Some(c) => format!("{:<4} ({}: {})", c.name(), where_(&n.place), c.meaning()),
            None if n.software => "software device: no PCIe path to the GPU".into(),
            None => "no PCI path (topology unknown)".into(),
        };
        let _ = writeln!(
            s,
            " {:<10} {:<10} {class}  IOMMU {}",
            "",
            n.name,
            n.iommu.text()
        );
    }
    let nearest = topo
        .nics
        .iter()
        .filter_map(|n| Some((n, Topo::class(g, n)?)))
        .min_by_key(|(_, c)| *c);
    let (n, c) = nearest.filter(|(_, c)| *c > Class::PXB)?;
    Some(far(topo, g, n, c))
}

pub fn doctor_block(
    topo: &Topo,
    dmabuf: &[(String, Result<bool, String>)],
) -> (String, Vec<Finding>) {
    let mut s = String::new();
    if topo.gpus.is_empty() {
        let _ = writeln!(
            s,
            " {:<10} none (no NVIDIA display/3D PCI function under sys/bus/pci/devices)",
            "GPUs"
        );
        dmabuf_lines(&mut s, dmabuf);
        return (s, Vec::new());
    }
    let mut out = Vec::new();
    for g in &topo.gpus {
        out.extend(gpu_lines(&mut s, topo, g));
    }
    let _ = writeln!(
        s,
        " {:<10} peer memory: {}",
        "GPUDirect",
        topo.peermem_text()
    );
    if topo.nvidia_open.is_some() {
        let _ = writeln!(
            s,
            " {:<10} GPU dma-buf export: {}",
            "",
            topo.gpu_export_text()
        );
    }
    dmabuf_lines(&mut s, dmabuf);
    let _ = writeln!(
        s,
        " {:<10} {}",
        "IOMMU",
        if topo.iommu_units.is_empty() {
            "off (no /sys/class/iommu entries)".to_string()
        } else {
            format!("on ({})", topo.iommu_units.join(", "))
        }
    );
    let refs: Vec<(&str, &Result<bool, String>)> =
        dmabuf.iter().map(|(n, d)| (n.as_str(), d)).collect();
    out.extend(gpudirect(topo, &refs));
    let gpus: Vec<&Gpu> = topo.gpus.iter().collect();
    let nics: Vec<&Nic> = topo.nics.iter().collect();
    out.extend(iommu(topo, &gpus, &nics));
    (s, out)
}
