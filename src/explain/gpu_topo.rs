//! GPU–NIC topology for `rdmaperf doctor` and `--explain`, from sysfs
//! alone (no CUDA): the NVIDIA GPUs (PCI vendor 0x10de, class 0x03xx:
//! display or 3D controller), the RDMA devices, the topology class of each
//! pair (`super::pci_topo`), whether a peer-memory client is loaded, the
//! IOMMU mode of each function, and whether the NIC takes dma-buf MRs (a
//! verbs probe, `crate::verbs::dmabuf_probe`, on a real host; a fixture
//! file under a fixture root). gpu-memory.md §2 has the facts and sources.

use std::path::Path;

use super::pci_topo::{Class, PciPlace};
use super::sysfs::SysRoot;

/// One NVIDIA GPU's PCI function.
#[derive(Clone, Debug, PartialEq)]
pub struct Gpu {
    pub bdf: String,
    pub place: Option<PciPlace>,
    pub iommu: Iommu,
}

/// One RDMA device.
#[derive(Clone, Debug, PartialEq)]
pub struct Nic {
    pub name: String,
    /// `None`: a software device or one with no PCI function.
    pub place: Option<PciPlace>,
    pub software: bool,
    pub iommu: Iommu,
}

/// A function's IOMMU group and its `type` (`identity`, `DMA`, `DMA-FQ`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Iommu {
    pub group: Option<String>,
    pub kind: Option<String>,
}

impl Iommu {
    fn of(root: &SysRoot, dev_rel: &str) -> Iommu {
        let real = std::fs::canonicalize(root.0.join(dev_rel).join("iommu_group")).ok();
        Iommu {
            group: real.and_then(|p| Some(p.file_name()?.to_string_lossy().into_owned())),
            kind: root.read(&format!("{dev_rel}/iommu_group/type")),
        }
    }

    /// Whether DMA through this function's group is translated
    /// (`DMA`, `DMA-FQ`; `identity` is passthrough).
    pub fn translated(&self) -> bool {
        matches!(self.kind.as_deref(), Some("DMA" | "DMA-FQ"))
    }

    /// "passthrough (group 12: identity)", "translated (group 3: DMA-FQ)",
    /// "no IOMMU group".
    pub fn text(&self) -> String {
        match (&self.group, &self.kind) {
            (None, _) => "no IOMMU group".into(),
            (Some(g), Some(k)) if k == "identity" => format!("passthrough (group {g}: identity)"),
            (Some(g), Some(k)) if self.translated() => format!("translated (group {g}: {k})"),
            (Some(g), Some(k)) => format!("group {g}: {k}"),
            (Some(g), None) => format!("group {g}: type unknown (kernel before 5.11)"),
        }
    }
}

/// What sysfs says about GPUs, NICs, peer memory and the IOMMU.
#[derive(Clone, Debug, PartialEq)]
pub struct Topo {
    pub gpus: Vec<Gpu>,
    pub nics: Vec<Nic>,
    /// `nvidia_peermem` loaded (`/sys/module/nvidia_peermem`).
    pub peermem: bool,
    /// MLNX_OFED's legacy `nv_peer_mem` (`/sys/kernel/mm/memory_peers/nv_mem/version`,
    /// or its non-contiguous twin `nv_mem_nc`, which NCCL reads too).
    pub nv_mem: bool,
    /// Whether the loaded NVIDIA kernel modules are the open ones, which
    /// GPU dma-buf export needs (`/proc/driver/nvidia/version` names "Open
    /// Kernel Module"); `None` where no NVIDIA driver is loaded.
    pub nvidia_open: Option<bool>,
    /// IOMMU units (`/sys/class/iommu/*`): empty when the IOMMU is off.
    pub iommu_units: Vec<String>,
}

impl Topo {
    /// Reads everything from `root`.
    pub fn read(root: &SysRoot) -> Topo {
        let gpus = root
            .list("sys/bus/pci/devices")
            .into_iter()
            .filter(|b| is_nvidia_gpu(root, b))
            .map(|bdf| {
                let rel = format!("sys/bus/pci/devices/{bdf}");
                Gpu {
                    place: PciPlace::of(root, &rel),
                    iommu: Iommu::of(root, &rel),
                    bdf,
                }
            })
            .collect();
        let nics = root
            .devices()
            .into_iter()
            .map(|name| {
                let rel = format!("sys/class/infiniband/{name}/device");
                let software = root.is_software(&name);
                Nic {
                    place: (!software).then(|| PciPlace::of(root, &rel)).flatten(),
                    iommu: Iommu::of(root, &rel),
                    software,
                    name,
                }
            })
            .collect();
        Topo {
            gpus,
            nics,
            peermem: root.exists("sys/module/nvidia_peermem"),
            nv_mem: ["nv_mem", "nv_mem_nc"]
                .iter()
                .any(|c| root.exists(&format!("sys/kernel/mm/memory_peers/{c}/version"))),
            nvidia_open: root
                .read("proc/driver/nvidia/version")
                .map(|v| v.contains("Open Kernel Module")),
            iommu_units: root.list("sys/class/iommu"),
        }
    }

    /// The peer-memory client, as a report says it.
    pub fn peermem_text(&self) -> &'static str {
        match (self.peermem, self.nv_mem) {
            (true, _) => "nvidia_peermem loaded",
            (false, true) => "nv_peer_mem loaded (MLNX_OFED's legacy client)",
            (false, false) => {
                "none (no /sys/module/nvidia_peermem, no /sys/kernel/mm/memory_peers/nv_mem)"
            }
        }
    }

    /// Whether the GPUs can export dma-buf, as a report says it.
    pub fn gpu_export_text(&self) -> &'static str {
        match self.nvidia_open {
            Some(true) => "possible (NVIDIA open kernel modules)",
            Some(false) => {
                "impossible: the NVIDIA kernel modules are the proprietary ones \
                 (/proc/driver/nvidia/version names no Open Kernel Module)"
            }
            None => "unknown (no /proc/driver/nvidia/version)",
        }
    }

    pub fn gpu(&self, bdf: &str) -> Option<&Gpu> {
        self.gpus.iter().find(|g| g.bdf == bdf)
    }

    pub fn nic(&self, name: &str) -> Option<&Nic> {
        self.nics.iter().find(|n| n.name == name)
    }

    /// The class of a GPU and a NIC; `None` when either has no PCI place.
    pub fn class(gpu: &Gpu, nic: &Nic) -> Option<Class> {
        Some(gpu.place.as_ref()?.class_to(nic.place.as_ref()?))
    }
}

fn is_nvidia_gpu(root: &SysRoot, bdf: &str) -> bool {
    let base = format!("sys/bus/pci/devices/{bdf}");
    root.read(&format!("{base}/vendor")).as_deref() == Some("0x10de")
        && root
            .read(&format!("{base}/class"))
            .is_some_and(|c| c.starts_with("0x03"))
}

/// Whether `nic` takes dma-buf MRs: on a real host (`root` is `/`) the
/// verbs probe; under a fixture root the file `dmabuf/<nic>` ("supported"
/// or "unsupported"). `Err` says why it is unknown.
pub fn dmabuf(root: &SysRoot, nic: &str) -> Result<bool, String> {
    if root.0 != Path::new("/") {
        return match root.read(&format!("dmabuf/{nic}")).as_deref() {
            Some("supported") => Ok(true),
            Some("unsupported") => Ok(false),
            Some(other) => Err(format!("fixture dmabuf/{nic} says '{other}'")),
            None => Err(format!("not probed (no dmabuf/{nic} in the fixture)")),
        };
    }
    crate::verbs::dmabuf_probe::probe(nic)
}
