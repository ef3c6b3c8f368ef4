//! What a raw tool checks before it opens anything: that the device can
//! create raw packet QPs at all (rxe and siw cannot: rxe's QP check accepts
//! SMI, GSI, RC, UC and UD only, siw RC only), and that this process holds
//! `CAP_NET_RAW`, which the kernel asks of a raw packet QP. Each refusal is
//! one sentence that names the cause and the fix.

use std::path::Path;

use crate::verbs::device::{DeviceInfo, TransportType};

/// What sysfs says about a device's raw packet QPs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RawSupport {
    /// mlx5 (ConnectX) or mlx4: raw packet QPs and flow steering.
    Yes(&'static str),
    /// A software device that has none (`rxe`, `siw`).
    Software(&'static str),
    /// Another driver: only creating the QP will tell.
    Unknown,
}

/// Reads `<ibdev_path>/device/driver` (the PCI driver) and `node_desc`
/// (rxe writes "rxe", siw "Software iWARP stack") under the device's sysfs
/// directory.
pub fn raw_support(ibdev_path: &Path, transport: TransportType) -> RawSupport {
    let driver = std::fs::read_link(ibdev_path.join("device/driver"))
        .ok()
        .and_then(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .unwrap_or_default();
    match driver.as_str() {
        "mlx5_core" => return RawSupport::Yes("mlx5"),
        "mlx4_core" => return RawSupport::Yes("mlx4"),
        _ => {}
    }
    let desc = std::fs::read_to_string(ibdev_path.join("node_desc")).unwrap_or_default();
    let desc = desc.trim();
    if desc == "rxe" || desc.starts_with("rxe") {
        RawSupport::Software("rxe")
    } else if desc.starts_with("Software iWARP")
        || (transport == TransportType::IWARP && driver.is_empty())
    {
        RawSupport::Software("siw")
    } else {
        RawSupport::Unknown
    }
}

/// The refusal for a software device, or none.
pub fn device_refusal(tool: &str, dev: &str, support: &RawSupport) -> Option<String> {
    match support {
        RawSupport::Software(kind) => Some(format!(
            "{tool}: {dev} is a {kind} (software RDMA) device, which has no raw packet QPs \
             (IBV_QPT_RAW_PACKET) or flow steering: run it on a ConnectX (mlx5) port with -d mlx5_N"
        )),
        _ => None,
    }
}

/// CAP_NET_RAW's bit in the capability sets.
pub const CAP_NET_RAW: u32 = 13;

/// Whether `CapEff:` in a `/proc/<pid>/status` text holds CAP_NET_RAW.
pub fn has_net_raw(status: &str) -> bool {
    status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|h| u64::from_str_radix(h.trim(), 16).ok())
        .is_some_and(|caps| caps >> CAP_NET_RAW & 1 == 1)
}

/// The refusal when this process lacks CAP_NET_RAW, or none.
pub fn cap_refusal(tool: &str, status: &str) -> Option<String> {
    (!has_net_raw(status)).then(|| {
        format!(
            "{tool}: creating a raw packet QP needs CAP_NET_RAW, which this process lacks: run it \
             as root or grant it once with `sudo setcap cap_net_raw+ep $(command -v rdmaperf)`"
        )
    })
}

/// The device a raw tool would use: `-d`'s, or the first (perftest's
/// `ctx_find_dev`). An error names the devices there are.
pub fn pick<'a>(list: &'a [DeviceInfo], name: Option<&str>) -> Result<&'a DeviceInfo, String> {
    match name {
        None => list.first().ok_or_else(|| "no RDMA devices".to_string()),
        Some(n) => list.iter().find(|d| d.name == n).ok_or_else(|| {
            let have: Vec<&str> = list.iter().map(|d| d.name.as_str()).collect();
            format!(
                "-d {n}: no such RDMA device; this host has {}: pick one of them",
                have.join(", ")
            )
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sysfs(driver: Option<&str>, desc: &str) -> tempdir::Dir {
        let d = tempdir::Dir::new();
        std::fs::write(d.0.join("node_desc"), format!("{desc}\n")).unwrap();
        if let Some(drv) = driver {
            let target = d.0.join("bus/pci/drivers").join(drv);
            std::fs::create_dir_all(&target).unwrap();
            std::fs::create_dir_all(d.0.join("device")).unwrap();
            std::os::unix::fs::symlink(&target, d.0.join("device/driver")).unwrap();
        }
        d
    }

    mod tempdir {
        pub struct Dir(pub std::path::PathBuf);
        impl Dir {
            pub fn new() -> Self {
                use std::sync::atomic::{AtomicU32, Ordering};
                static N: AtomicU32 = AtomicU32::new(0);
                let p = std::env::temp_dir().join(format!(
                    "rdmaperf-raw-sysfs-{}-{}",
                    std::process::id(),
                    N.fetch_add(1, Ordering::Relaxed)
                ));
                std::fs::create_dir_all(&p).unwrap();
                Self(p)
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    #[test]
    fn drivers_and_software_devices_are_told_apart() {
        let ib = TransportType::IB;
        assert_eq!(
            raw_support(&sysfs(Some("mlx5_core"), "host mlx5_0").0, ib),
            RawSupport::Yes("mlx5")
        );
        assert_eq!(
            raw_support(&sysfs(Some("mlx4_core"), "x").0, ib),
            RawSupport::Yes("mlx4")
        );
        assert_eq!(
            raw_support(&sysfs(None, "rxe").0, ib),
            RawSupport::Software("rxe")
        );
        let siw = sysfs(None, "Software iWARP stack");
        assert_eq!(
            raw_support(&siw.0, TransportType::IWARP),
            RawSupport::Software("siw")
        );
        assert_eq!(
            raw_support(&sysfs(Some("bnxt_en"), "x").0, ib),
            RawSupport::Unknown
        );
    }

    #[test]
    fn the_rxe_refusal_names_device_cause_and_fix() {
        let e = device_refusal("raw-eth-bw", "rxe0", &RawSupport::Software("rxe")).unwrap();
        for want in [
            "rxe0",
            "rxe",
            "no raw packet QPs",
            "ConnectX (mlx5)",
            "-d mlx5_N",
        ] {
            assert!(e.contains(want), "{want}: {e}");
        }
        assert_eq!(
            e.matches(": ").count(),
            2,
            "one sentence after the tool's name: {e}"
        );
        assert!(device_refusal("t", "mlx5_0", &RawSupport::Yes("mlx5")).is_none());
    }

    #[test]
    fn cap_net_raw_from_cap_eff() {
        let root = "Name:\tx\nCapEff:\t000001ffffffffff\n";
        let none = "CapEff:\t0000000000000000\n";
        let only_raw = "CapEff:\t0000000000002000\n";
        assert!(has_net_raw(root) && has_net_raw(only_raw) && !has_net_raw(none));
        let e = cap_refusal("raw-eth-lat", none).unwrap();
        assert!(
            e.contains("CAP_NET_RAW") && e.contains("setcap cap_net_raw+ep"),
            "{e}"
        );
        assert!(cap_refusal("raw-eth-lat", root).is_none());
        assert!(!has_net_raw("no such line"));
    }
}
