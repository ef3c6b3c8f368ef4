//! Where a PCI function sits in the PCIe tree, and how far apart two sit:
//! the topology class nvidia-smi's `topo -m` and NCCL print (PIX, PXB,
//! PHB, NODE, SYS), computed from sysfs alone (gpu-memory.md §2). The
//! kernel's device path (`realpath /sys/bus/pci/devices/<bdf>`) reads
//! `/sys/devices/pciDDDD:BB/<root port>/<switch up>/<switch down>/…/<bdf>`:
//! two functions under one host bridge share the `pciDDDD:BB` root, under
//! one switch they share its upstream port too.

use super::sysfs::SysRoot;

/// How far apart two PCI functions are, nearest first (the order of the
/// variants is the order of the words; nvidia-smi's legend). Computed here,
/// never read from a device, so a plain enum: every value is one of these.
#[allow(clippy::upper_case_acronyms)] // nvidia-smi's and NCCL's words
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    /// At most one PCIe switch between them.
    PIX,
    /// Several switches, no host bridge.
    PXB,
    /// Through a PCIe host bridge (the CPU's root complex).
    PHB,
    /// Across host bridges within one NUMA node.
    NODE,
    /// Across the NUMA (socket) interconnect.
    SYS,
}

impl Class {
    /// 0 (PIX) to 4 (SYS), for ranking.
    pub fn rank(self) -> u8 {
        self as u8
    }

    pub fn name(self) -> &'static str {
        ["PIX", "PXB", "PHB", "NODE", "SYS"][self.rank() as usize]
    }

    /// What the word means, for a report.
    pub fn meaning(self) -> &'static str {
        [
            "at most one PCIe switch between them",
            "several PCIe switches between them, no host bridge",
            "through the CPU's PCIe host bridge",
            "across PCIe host bridges within one NUMA node",
            "across the interconnect between NUMA nodes (sockets)",
        ][self.rank() as usize]
    }
}

/// One PCI function's place: its path below `/sys/devices/` and its NUMA
/// node (`None`: -1 or unreadable).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PciPlace {
    pub bdf: String,
    /// `["pci0000:00", "0000:00:01.0", …, bdf]`.
    pub path: Vec<String>,
    pub numa: Option<u32>,
}

impl PciPlace {
    /// The place of the function that `rel` (a sysfs path under `root`,
    /// e.g. `sys/bus/pci/devices/0000:05:00.0` or
    /// `sys/class/infiniband/mlx5_0/device`) resolves to; `None` when it is
    /// missing or not below a PCI root (a software device, a platform one).
    /// A device below a PCI function (an mlx5 sub-function,
    /// `…/0000:05:00.0/mlx5_core.sf.2`, on the auxiliary bus) is placed at
    /// that function, as NCCL places it: its traffic goes through it, and
    /// the function has the NUMA node.
    pub fn of(root: &SysRoot, rel: &str) -> Option<PciPlace> {
        let real = std::fs::canonicalize(root.0.join(rel)).ok()?;
        let devices = std::fs::canonicalize(root.0.join("sys/devices")).ok()?;
        let below = real.strip_prefix(&devices).ok()?;
        let mut path: Vec<String> = below
            .iter()
            .map(|c| c.to_string_lossy().into_owned())
            .collect();
        while path
            .last()
            .is_some_and(|c| normalize_bdf(c).as_deref() != Some(c.as_str()))
        {
            path.pop();
        }
        if !path.first()?.starts_with("pci") || path.len() < 2 {
            return None;
        }
        let bdf = path.last()?.clone();
        let func: std::path::PathBuf = path.iter().collect();
        let numa = std::fs::read_to_string(devices.join(func).join("numa_node"))
            .ok()
            .and_then(|s| s.trim().parse::<i64>().ok())
            .and_then(|n| u32::try_from(n).ok());
        Some(PciPlace { bdf, path, numa })
    }

    /// The class between two functions. Different `pciDDDD:BB` roots:
    /// NODE on one NUMA node (or when neither knows its node: a host
    /// without NUMA is one node), SYS otherwise. One root: PHB when the
    /// paths part at the root; else the bridge ports below the last shared
    /// component decide, NCCL-style (a switch is two path levels, its
    /// upstream and downstream port): both functions at most one port below
    /// it is one switch, PIX; more is PXB.
    pub fn class_to(&self, other: &PciPlace) -> Class {
        if self.path[0] != other.path[0] {
            return match (self.numa, other.numa) {
                (Some(a), Some(b)) if a == b => Class::NODE,
                (None, None) => Class::NODE,
                _ => Class::SYS,
            };
        }
        let common = self
            .path
            .iter()
            .zip(&other.path)
            .take_while(|(a, b)| a == b)
            .count();
        if common <= 1 {
            return Class::PHB;
        }
        // Components below the shared one, the endpoints left out.
        let ports = (self.path.len() - common).saturating_sub(1)
            + (other.path.len() - common).saturating_sub(1);
        if ports <= 2 {
            Class::PIX
        } else {
            Class::PXB
        }
    }
}

/// `0000:05:00.0` as sysfs spells it, from what a user or CUDA gives
/// (`05:00.0`, `0000:05:00.0`, CUDA's `00000000:05:00.0`, any case).
pub fn normalize_bdf(s: &str) -> Option<String> {
    let s = s.trim().to_ascii_lowercase();
    let (dom, rest) = match s.matches(':').count() {
        1 => ("0000".to_string(), s.as_str()),
        2 => {
            let (d, r) = s.split_once(':')?;
            let d = u32::from_str_radix(d, 16).ok()?;
            (format!("{d:04x}"), r)
        }
        _ => return None,
    };
    let (bus, devfn) = rest.split_once(':')?;
    let (dev, func) = devfn.split_once('.')?;
    let ok = |x: &str, n: usize| x.len() <= n && !x.is_empty() && u8::from_str_radix(x, 16).is_ok();
    if !(ok(bus, 2) && ok(dev, 2) && ok(func, 1)) {
        return None;
    }
    let (b, d, f) = (
        u8::from_str_radix(bus, 16).ok()?,
        u8::from_str_radix(dev, 16).ok()?,
        u8::from_str_radix(func, 16).ok()?,
    );
    (d < 32 && f < 8).then(|| format!("{dom}:{b:02x}:{d:02x}.{f}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn place(path: &str, numa: Option<u32>) -> PciPlace {
        let path: Vec<String> = path.split('/').map(String::from).collect();
        PciPlace {
            bdf: path.last().unwrap().clone(),
            path,
            numa,
        }
    }

    #[test]
    fn classes_from_paths() {
        let gpu = place(
            "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:05:00.0",
            Some(0),
        );
        // Same switch, another downstream port: PIX.
        let nic = place(
            "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:10.0/0000:06:00.0",
            Some(0),
        );
        assert_eq!(gpu.class_to(&nic), Class::PIX);
        // Same downstream port (two functions of one card): PIX.
        let f1 = place(
            "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:05:00.1",
            Some(0),
        );
        assert_eq!(gpu.class_to(&f1), Class::PIX);
        // Behind a second switch below the first: PXB.
        let deep = place(
            "pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:10.0/0000:07:00.0/0000:08:00.0/0000:09:00.0",
            Some(0),
        );
        assert_eq!(gpu.class_to(&deep), Class::PXB);
        // Another root port of the same host bridge: PHB.
        let phb = place("pci0000:00/0000:00:03.0/0000:0a:00.0", Some(0));
        assert_eq!(gpu.class_to(&phb), Class::PHB);
        // Another host bridge, same node: NODE; another node: SYS.
        let node = place("pci0000:40/0000:40:01.0/0000:41:00.0", Some(0));
        assert_eq!(gpu.class_to(&node), Class::NODE);
        let sys = place("pci0000:80/0000:80:01.0/0000:81:00.0", Some(1));
        assert_eq!(gpu.class_to(&sys), Class::SYS);
        let unknown = place("pci0000:80/0000:80:01.0/0000:81:00.0", None);
        assert_eq!(gpu.class_to(&unknown), Class::SYS);
        assert!(Class::PIX < Class::PXB && Class::PXB < Class::PHB && Class::NODE < Class::SYS);
        assert_eq!(Class::NODE.name(), "NODE");
    }

    #[test]
    fn bus_ids_normalize() {
        for (bdf, want) in [
            ("05:00.0", "0000:05:00.0"),
            ("00000000:3B:00.0", "0000:3b:00.0"),
            ("0001:81:1f.7", "0001:81:1f.7"),
        ] {
            assert_eq!(normalize_bdf(bdf).as_deref(), Some(want), "{bdf}");
        }
        for bad in ["", "05:00", "zz:00.0", "05:40.0", "05:00.9", "1:2:3:4.0"] {
            assert_eq!(normalize_bdf(bad), None, "{bad}");
        }
    }
}
