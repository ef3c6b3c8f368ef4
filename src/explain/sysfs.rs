//! Reading the facts sysfs holds about an RDMA device, its ports, its
//! netdev, its PCIe function and its NUMA node, under a root directory (`/`
//! on a host, a fixture tree in tests). Missing files are `None`, never an
//! error: drivers differ (rxe has no PCIe function and no PMA counters).

use std::path::{Path, PathBuf};

/// Where `sys/` lives (`/` normally).
#[derive(Clone, Debug)]
pub struct SysRoot(pub PathBuf);

impl Default for SysRoot {
    fn default() -> Self {
        SysRoot(PathBuf::from("/"))
    }
}

impl SysRoot {
    fn path(&self, rel: &str) -> PathBuf {
        self.0.join(rel.trim_start_matches('/'))
    }

    /// A file's text, trimmed; `None` if it cannot be read.
    pub fn read(&self, rel: &str) -> Option<String> {
        std::fs::read_to_string(self.path(rel))
            .ok()
            .map(|s| s.trim().to_string())
    }

    /// The names in a directory, sorted; empty if it cannot be read.
    pub fn list(&self, rel: &str) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(self.path(rel))
            .map(|d| {
                d.filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }

    /// RDMA devices (`/sys/class/infiniband/*`).
    pub fn devices(&self) -> Vec<String> {
        self.list("sys/class/infiniband")
    }

    /// Whether `rel` exists (a file, directory or link to one).
    pub fn exists(&self, rel: &str) -> bool {
        Path::exists(&self.path(rel))
    }
}

/// A port's state as sysfs shows it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PortFacts {
    pub port: u32,
    /// `state` ("4: ACTIVE" → "ACTIVE").
    pub state: String,
    /// `rate` in Gb/s (from "100 Gb/sec (4X EDR)").
    pub rate_gbps: Option<f64>,
    /// `rate` as printed.
    pub rate_text: String,
    /// `link_layer` ("Ethernet", "InfiniBand").
    pub link_layer: String,
    /// GID types present ("RoCE v2", "IB/RoCE v1").
    pub gid_types: Vec<String>,
    /// The netdev behind the port's GIDs (RoCE), if any.
    pub netdev: Option<String>,
    /// That netdev's MTU.
    pub netdev_mtu: Option<u32>,
}

/// The PCIe link of the device's function.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PcieFacts {
    /// GT/s per lane, trained and maximum ("16.0 GT/s PCIe" → 16.0).
    pub speed_gts: Option<f64>,
    pub max_speed_gts: Option<f64>,
    pub width: Option<u32>,
    pub max_width: Option<u32>,
}

/// One RDMA device's facts.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct DeviceFacts {
    pub name: String,
    pub ports: Vec<PortFacts>,
    /// `None` when the device has no PCIe function (rxe, siw).
    pub pcie: Option<PcieFacts>,
    /// `numa_node` of the function (`None`: unknown, or -1).
    pub numa_node: Option<u32>,
    /// A software device (rxe, siw): the host's CPUs run the transport.
    pub software: bool,
}

fn gts(s: &str) -> Option<f64> {
    s.split_whitespace().next()?.parse().ok()
}

impl SysRoot {
    /// Everything sysfs says about device `dev`.
    pub fn device(&self, dev: &str) -> DeviceFacts {
        let base = format!("sys/class/infiniband/{dev}");
        let ports = self
            .list(&format!("{base}/ports"))
            .iter()
            .filter_map(|p| p.parse().ok())
            .map(|p| self.port(dev, p))
            .collect();
        let fdir = format!("{base}/device");
        let pcie = self
            .exists(&format!("{fdir}/max_link_speed"))
            .then(|| PcieFacts {
                speed_gts: self
                    .read(&format!("{fdir}/current_link_speed"))
                    .as_deref()
                    .and_then(gts),
                max_speed_gts: self
                    .read(&format!("{fdir}/max_link_speed"))
                    .as_deref()
                    .and_then(gts),
                width: self
                    .read(&format!("{fdir}/current_link_width"))
                    .and_then(|s| s.parse().ok()),
                max_width: self
                    .read(&format!("{fdir}/max_link_width"))
                    .and_then(|s| s.parse().ok()),
            });
        let numa_node = self
            .read(&format!("{fdir}/numa_node"))
            .and_then(|s| s.parse::<i64>().ok())
            .and_then(|n| u32::try_from(n).ok());
        DeviceFacts {
            name: dev.to_string(),
            ports,
            pcie,
            numa_node,
            software: self.is_software(dev),
        }
    }

    /// Whether `dev` is a software device: no `device` link (current rxe
    /// and siw register without a parent device), or rxe's own `parent`
    /// attribute (older rxe linked `device` to its netdev's parent, a PCI
    /// function on a NIC), or siw's node description.
    pub fn is_software(&self, dev: &str) -> bool {
        let base = format!("sys/class/infiniband/{dev}");
        !self.exists(&format!("{base}/device"))
            || self.exists(&format!("{base}/parent"))
            || self
                .read(&format!("{base}/node_desc"))
                .is_some_and(|d| d.starts_with("Software iWARP"))
    }

    fn port(&self, dev: &str, port: u32) -> PortFacts {
        let base = format!("sys/class/infiniband/{dev}/ports/{port}");
        let rate_text = self.read(&format!("{base}/rate")).unwrap_or_default();
        let mut gid_types: Vec<String> = self
            .list(&format!("{base}/gid_attrs/types"))
            .iter()
            .filter_map(|i| self.read(&format!("{base}/gid_attrs/types/{i}")))
            .filter(|t| !t.is_empty())
            .collect();
        gid_types.sort();
        gid_types.dedup();
        let netdev = self
            .list(&format!("{base}/gid_attrs/ndevs"))
            .iter()
            .find_map(|i| {
                self.read(&format!("{base}/gid_attrs/ndevs/{i}"))
                    .filter(|n| !n.is_empty())
            })
            .or_else(|| self.read(&format!("sys/class/infiniband/{dev}/parent")));
        let netdev_mtu = netdev
            .as_ref()
            .and_then(|n| self.read(&format!("sys/class/net/{n}/mtu")))
            .and_then(|s| s.parse().ok());
        PortFacts {
            port,
            state: self
                .read(&format!("{base}/state"))
                .map(|s| s.split_once(": ").map_or(s.clone(), |x| x.1.to_string()))
                .unwrap_or_default(),
            rate_gbps: rate_text
                .split_whitespace()
                .next()
                .and_then(|x| x.parse().ok()),
            rate_text,
            link_layer: self.read(&format!("{base}/link_layer")).unwrap_or_default(),
            gid_types,
            netdev,
            netdev_mtu,
        }
    }

    /// The CPUs of NUMA node `n` (`node<n>/cpulist`, "0-3,8-11").
    pub fn node_cpus(&self, n: u32) -> Vec<usize> {
        self.read(&format!("sys/devices/system/node/node{n}/cpulist"))
            .map(|s| parse_cpulist(&s))
            .unwrap_or_default()
    }

    /// The NUMA nodes with a cpulist.
    pub fn nodes(&self) -> Vec<u32> {
        let mut v: Vec<u32> = self
            .list("sys/devices/system/node")
            .iter()
            .filter_map(|n| n.strip_prefix("node")?.parse().ok())
            .collect();
        v.sort_unstable();
        v
    }
}

/// "0-3,8,10-11" → [0, 1, 2, 3, 8, 10, 11].
pub fn parse_cpulist(s: &str) -> Vec<usize> {
    let mut v = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) {
                    v.extend(a..=b);
                }
            }
            None => v.extend(part.parse::<usize>().ok()),
        }
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpulists_and_speeds_parse() {
        assert_eq!(parse_cpulist("0-3,8,10-11"), [0, 1, 2, 3, 8, 10, 11]);
        assert_eq!(parse_cpulist(""), Vec::<usize>::new());
        assert_eq!(gts("16.0 GT/s PCIe"), Some(16.0));
        assert_eq!(gts("Unknown"), None);
    }

    #[test]
    fn a_missing_tree_gives_empty_facts_not_errors() {
        let r = SysRoot(PathBuf::from("/nonexistent-rdmaperf-root"));
        assert!(r.devices().is_empty());
        let d = r.device("mlx5_0");
        assert_eq!((d.ports.len(), d.pcie, d.numa_node), (0, None, None));
        assert!(d.software, "no device link: nothing behind it");
    }
}
