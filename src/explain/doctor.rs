//! `rdmaperf doctor [-d DEV] [--sysfs-root DIR]`: the static facts that cap
//! a number, for every (or one) RDMA device of this host, before any run —
//! port state and rate, GID types, the netdev's MTU and the RoCE MTU it
//! allows, the PCIe link trained versus its maximum and the ceiling that
//! gives, the NUMA node versus the cores this process may run on, error
//! counters since boot, and the host's memlock limit, huge pages and CPU
//! frequency governor. Each wrong fact is a finding with its fix; the exit
//! status is 1 when there is one (2 for a bad command line).

use std::fmt::Write;

use super::ceiling::{pcie_gbps, roce_mtu};
use super::counters::Snapshot;
use super::rules::Check;
use super::sysfs::{DeviceFacts, PortFacts, SysRoot};

/// What the host around the devices looks like.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct HostFacts {
    /// The cores this process may run on.
    pub cpus: Vec<usize>,
    /// RLIMIT_MEMLOCK soft limit in bytes (`None`: unlimited).
    pub memlock: Option<u64>,
    pub root: bool,
    pub hugepages: Option<u64>,
    /// Governors of the allowed cores, deduplicated.
    pub governors: Vec<String>,
}

impl HostFacts {
    /// This process's view of the host (affinity, limits) with the files
    /// under `root`.
    pub fn read(root: &SysRoot) -> HostFacts {
        let cpus: Vec<usize> = core_affinity::get_core_ids()
            .map(|v| v.into_iter().map(|c| c.id).collect())
            .unwrap_or_default();
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: `lim` is a valid, writable rlimit for the call.
        let ok = unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut lim) } == 0;
        let memlock = (ok && lim.rlim_cur != libc::RLIM_INFINITY).then_some(lim.rlim_cur);
        // SAFETY: geteuid has no preconditions.
        let is_root = unsafe { libc::geteuid() } == 0;
        Self::with(root, cpus, memlock, is_root)
    }

    /// The same from given process facts (tests, fixtures).
    pub fn with(
        root: &SysRoot,
        cpus: Vec<usize>,
        memlock: Option<u64>,
        is_root: bool,
    ) -> HostFacts {
        let hugepages = root
            .read("proc/meminfo")
            .and_then(|m| {
                m.lines().find_map(|l| {
                    l.strip_prefix("HugePages_Total:")
                        .map(|v| v.trim().parse().ok())
                })
            })
            .flatten();
        let mut governors: Vec<String> = cpus
            .iter()
            .filter_map(|c| {
                root.read(&format!(
                    "sys/devices/system/cpu/cpu{c}/cpufreq/scaling_governor"
                ))
            })
            .collect();
        governors.sort();
        governors.dedup();
        HostFacts {
            cpus,
            memlock,
            root: is_root,
            hugepages,
            governors,
        }
    }
}

/// The checks of one device: its facts, and its error counters since boot.
pub fn device_checks(root: &SysRoot, d: &DeviceFacts, host: &HostFacts) -> Vec<Check> {
    let mut v = Vec::new();
    for p in &d.ports {
        v.extend(port_checks(&d.name, p));
        v.extend(port_counter_checks(root, &d.name, p));
    }
    v.extend(pcie_checks(d));
    v.extend(numa_check(root, d, host));
    v
}

/// The checks of one device's facts alone (`--explain` reads the counters
/// around the run itself).
pub fn fact_checks(root: &SysRoot, d: &DeviceFacts, host: &HostFacts) -> Vec<Check> {
    let mut v: Vec<Check> = d
        .ports
        .iter()
        .flat_map(|p| port_checks(&d.name, p))
        .collect();
    v.extend(pcie_checks(d));
    v.extend(numa_check(root, d, host));
    v
}

/// A port's state and the RoCE MTU its netdev allows.
fn port_checks(name: &str, p: &PortFacts) -> Vec<Check> {
    let mut v = Vec::new();
    if p.state != "ACTIVE" {
        v.push(Check {
            code: "port_down",
            what: format!("{name} port {}: state {}", p.port, if p.state.is_empty() { "unknown" } else { &p.state }),
            fix: "bring the link up (cable, switch port, `ip link set <netdev> up`) or use another port".into(),
        });
    }
    if let (Some(mtu), Some(rate)) = (p.netdev_mtu, p.rate_gbps) {
        if p.link_layer == "Ethernet" && roce_mtu(mtu) < 4096 && rate >= 100.0 {
            v.push(Check {
                code: "mtu_limited",
                what: format!(
                    "{name} port {}: netdev {} MTU {mtu} allows RoCE packets of {} B on a {rate} Gb/s link \
                     (payload ceiling {:.0} % of the rate, 98 % at 4096)",
                    p.port,
                    p.netdev.as_deref().unwrap_or("?"),
                    roce_mtu(mtu),
                    100.0 * super::ceiling::payload_fraction(roce_mtu(mtu), super::ceiling::ROCE_V2_OVERHEAD)
                ),
                fix: "set the netdev MTU to 4200 or more (9000 is usual) on both hosts and the switch ports".into(),
            });
        }
    }
    v
}

/// A port's error counters since they were last cleared.
fn port_counter_checks(root: &SysRoot, name: &str, p: &PortFacts) -> Vec<Check> {
    let mut v = Vec::new();
    let pma = Snapshot::read(root, name, p.port);
    for c in [
        "pma.link_downed",
        "pma.symbol_error",
        "pma.port_rcv_errors",
        "link_downed",
    ] {
        if let Some(&n) = pma.0.get(c).filter(|n| **n > 0) {
            v.push(Check {
                code: "link_errors_since_boot",
                what: format!("{name} port {}: {} = {n} since the counters were last cleared", p.port, c.trim_start_matches("pma.")),
                fix: "if it grows during runs: cable/transceiver/switch port (reset with `perfquery -R` to watch)".into(),
            });
        }
    }
    let Some(dev) = &p.netdev else { return v };
    let Ok(eth) = super::ethtool::read(root, dev) else {
        return v;
    };
    for (k, n) in eth.iter().filter(|(_, n)| *n > 0) {
        let (code, fix) = if ETH_ERRORS.iter().any(|e| super::rules::named_by(e, k)) {
            (
                "netdev_errors_since_boot",
                "if it grows during runs: cable, transceiver or switch port; check FEC on both ends",
            )
        } else if ETH_DISCARDS.iter().any(|e| super::rules::named_by(e, k)) {
            (
                "netdev_discards_since_boot",
                "the NIC ran out of port buffer: enable PFC on the RoCE priority or ECN (`--explain` \
                 tells whether it happens during a run)",
            )
        } else {
            continue;
        };
        v.push(Check {
            code,
            what: format!("{name} port {}: netdev {dev} {k} = {n} since boot", p.port),
            fix: fix.into(),
        });
    }
    v
}

/// Netdev statistics that are wrong at any count (mlx5 names, en_stats.c).
const ETH_ERRORS: [&str; 3] = [
    "rx_crc_errors_phy",
    "rx_symbol_err_phy",
    "rx_pcs_symbol_err_phy",
];
/// Netdev statistics of dropped packets (no port buffer).
const ETH_DISCARDS: [&str; 4] = [
    "rx_discards_phy",
    "tx_discards_phy",
    "rx_prio*_buf_discard",
    "rx_prio*_cong_discard",
];

/// The netdev's pause counts since boot, for the report (facts: pauses
/// are how a lossless fabric works, not wrong by themselves), or why there
/// are none.
fn pause_line(root: &SysRoot, dev: &str) -> String {
    match super::ethtool::read(root, dev) {
        Ok(eth) => {
            let pauses: Vec<String> = eth
                .iter()
                .filter(|(k, _)| {
                    [
                        "rx_pause_ctrl_phy",
                        "tx_pause_ctrl_phy",
                        "rx_prio*_pause",
                        "tx_prio*_pause",
                    ]
                    .iter()
                    .any(|p| super::rules::named_by(p, k))
                })
                .map(|(k, n)| format!("{k} {n}"))
                .collect();
            if pauses.is_empty() {
                format!("netdev {dev}: {} statistics, no pause counters", eth.len())
            } else {
                format!("netdev {dev} since boot: {}", pauses.join(", "))
            }
        }
        Err(e) => format!("netdev statistics: none ({e})"),
    }
}

fn pcie_checks(d: &DeviceFacts) -> Vec<Check> {
    let mut v = Vec::new();
    let Some(p) = &d.pcie else { return v };
    let (Some(s), Some(ms), Some(w), Some(mw)) =
        (p.speed_gts, p.max_speed_gts, p.width, p.max_width)
    else {
        return v;
    };
    let now = pcie_gbps(s, w);
    if s < ms || w < mw {
        v.push(Check {
            code: "pcie_below_max",
            what: format!(
                "{}: PCIe link trained at {s:.1} GT/s x{w}, below its maximum {ms:.1} GT/s x{mw} \
                 (ceiling {now:.1} Gb/s instead of {:.1})",
                d.name,
                pcie_gbps(ms, mw)
            ),
            fix:
                "check the slot (width, bifurcation), riser and BIOS PCIe settings; reseat the card"
                    .into(),
        });
    }
    let port = d
        .ports
        .iter()
        .filter_map(|p| p.rate_gbps)
        .fold(0.0, f64::max);
    if port > 0.0 && now < port {
        v.push(Check {
            code: "pcie_below_port",
            what: format!(
                "{}: the PCIe link carries about {now:.1} Gb/s, less than the port's {port} Gb/s",
                d.name
            ),
            fix: "a slot that trains at the NIC's full PCIe speed and width".into(),
        });
    }
    v
}

fn numa_check(root: &SysRoot, d: &DeviceFacts, host: &HostFacts) -> Option<Check> {
    let node = d.numa_node?;
    let near = root.node_cpus(node);
    if near.is_empty() || host.cpus.is_empty() || host.cpus.iter().any(|c| near.contains(c)) {
        return None;
    }
    let list = cpulist(&near);
    Some(Check {
        code: "numa_far",
        what: format!(
            "{}: the NIC is on NUMA node {node}, but this process may run only on cores {} (another node)",
            d.name,
            cpulist(&host.cpus)
        ),
        fix: format!(
            "run on the NIC's node: add `--cpus {list}` to the rdmaperf command line (or start \
             it under `numactl -N {node} -m {node}`)"
        ),
    })
}

/// [0, 1, 2, 5] → "0-2,5".
pub fn cpulist(v: &[usize]) -> String {
    let mut s = String::new();
    let mut i = 0;
    while i < v.len() {
        let mut j = i;
        while j + 1 < v.len() && v[j + 1] == v[j] + 1 {
            j += 1;
        }
        if !s.is_empty() {
            s.push(',');
        }
        if j > i {
            let _ = write!(s, "{}-{}", v[i], v[j]);
        } else {
            let _ = write!(s, "{}", v[i]);
        }
        i = j + 1;
    }
    s
}

/// The host's own checks.
pub fn host_checks(h: &HostFacts) -> Vec<Check> {
    let mut v = Vec::new();
    if let Some(m) = h.memlock.filter(|m| !h.root && *m < 64 << 20) {
        v.push(Check {
            code: "memlock",
            what: format!("memlock limit {} KiB: registering large buffers or many QPs fails", m >> 10),
            fix: "`ulimit -l unlimited` (or a memlock line in /etc/security/limits.conf) for the user that runs it".into(),
        });
    }
    let slow: Vec<&String> = h.governors.iter().filter(|g| *g != "performance").collect();
    if !slow.is_empty() {
        v.push(Check {
            code: "cpu_governor",
            what: format!(
                "CPU frequency governor {} on the cores this runs on",
                slow.iter()
                    .map(|s| s.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            fix: "`cpupower frequency-set -g performance` for stable post/poll cost and latency"
                .into(),
        });
    }
    v
}

/// The facts block and the findings, as printed.
pub fn report(root: &SysRoot, devs: &[DeviceFacts], host: &HostFacts) -> (String, Vec<Check>) {
    let mut s = String::new();
    let mut checks = Vec::new();
    for d in devs {
        for p in &d.ports {
            let _ = write!(
                s,
                " {:<10} port {}  {}  {}  {}",
                d.name, p.port, p.state, p.rate_text, p.link_layer
            );
            if !p.gid_types.is_empty() {
                let _ = write!(s, "  GIDs: {}", p.gid_types.join(", "));
            }
            if let (Some(n), Some(m)) = (&p.netdev, p.netdev_mtu) {
                let _ = write!(s, "  netdev {n} MTU {m} (RoCE MTU {})", roce_mtu(m));
            }
            s.push('\n');
            if let Some(n) = &p.netdev {
                let _ = writeln!(s, " {:<10} {}", "", pause_line(root, n));
            }
        }
        match &d.pcie {
            Some(p) => {
                let _ = write!(
                    s,
                    " {:<10} PCIe {} GT/s x{} (max {} GT/s x{})",
                    "",
                    opt(p.speed_gts),
                    opt(p.width),
                    opt(p.max_speed_gts),
                    opt(p.max_width)
                );
            }
            None => {
                let _ = write!(s, " {:<10} no PCIe function (software device)", "");
            }
        }
        let _ = writeln!(
            s,
            "  NUMA node {}",
            d.numa_node.map_or("unknown".into(), |n| n.to_string())
        );
        checks.extend(device_checks(root, d, host));
    }
    let _ = writeln!(
        s,
        " {:<10} cores {}  memlock {}  huge pages {}  CPU governor {}",
        "host",
        cpulist(&host.cpus),
        host.memlock
            .map_or("unlimited".into(), |m| format!("{} KiB", m >> 10)),
        host.hugepages.map_or("unknown".into(), |n| n.to_string()),
        if host.governors.is_empty() {
            "unknown".into()
        } else {
            host.governors.join(",")
        }
    );
    checks.extend(host_checks(host));
    (s, checks)
}

fn opt<T: std::fmt::Display>(v: Option<T>) -> String {
    v.map_or("?".into(), |x| x.to_string())
}

const USAGE: &str =
    "usage: rdmaperf doctor [-d DEV] [--sysfs-root DIR] [--probe-dmabuf] [--cuda]\n\
    Checks every RDMA device of this host (or DEV) for what caps a benchmark before any run:\n\
    port state and rate, RoCE MTU, PCIe link versus its maximum, NUMA placement, error counters,\n\
    memlock limit, CPU governor; and with NVIDIA GPUs present, each GPU's PCIe topology class to\n\
    every device (PIX/PXB/PHB/NODE/SYS), peer memory, dma-buf MRs, the IOMMU mode.\n\
    Exit status 1 when something is wrong.\n\
    --sysfs-root DIR: read DIR/sys and DIR/proc instead of /sys and /proc (a copied tree)\n\
    --probe-dmabuf: ask each device whether it takes dma-buf MRs even without a GPU\n\
    --cuda: load the CUDA driver (libcuda.so.1) and, for each GPU, allocate, export (dma-buf)\n\
    and free device memory\n";

/// `--cuda`: the CUDA report printed, its findings returned (none without the flag).
fn cuda_section(cuda: bool) -> Vec<Check> {
    if !cuda {
        return Vec::new();
    }
    let (text, checks) = super::cuda_check::report(crate::gpu::cuda_api::LIBCUDA);
    print!("{text}");
    checks
}

fn print_warnings(checks: &[Check]) {
    for c in checks {
        println!("WARN {}: {}\n     fix: {}", c.code, c.what, c.fix);
    }
}

/// `rdmaperf doctor ARGS`: the exit status.
pub fn main(args: &[String]) -> i32 {
    let (mut dev, mut root, mut probe, mut cuda) = (None, SysRoot::default(), false, false);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "-h" | "--help" => {
                print!("{USAGE}");
                return 0;
            }
            "-d" | "--ib-dev" => dev = it.next().cloned(),
            "--probe-dmabuf" => probe = true,
            "--cuda" => cuda = true,
            "--sysfs-root" => match it.next() {
                Some(d) => root = SysRoot(d.into()),
                None => return usage_error("--sysfs-root needs a directory"),
            },
            other => return usage_error(&format!("unknown argument '{other}'")),
        }
    }
    let all = root.devices();
    let names: Vec<String> = match &dev {
        Some(d) if all.contains(d) => vec![d.clone()],
        Some(d) => {
            eprintln!(
                "rdmaperf doctor: no RDMA device '{d}' under {}: devices here: {}",
                root.0.join("sys/class/infiniband").display(),
                if all.is_empty() {
                    "none".into()
                } else {
                    all.join(", ")
                }
            );
            return 2;
        }
        None => all,
    };
    if names.is_empty() {
        println!(
            "rdmaperf doctor: no RDMA devices (load the NIC's driver, or for soft-RoCE \
             `modprobe rdma_rxe && rdma link add rxe0 type rxe netdev <iface>`)"
        );
        // The GPU side can still be checked on a host without a NIC.
        print_warnings(&cuda_section(cuda));
        return 1;
    }
    let devs: Vec<DeviceFacts> = names.iter().map(|n| root.device(n)).collect();
    let host = HostFacts::read(&root);
    let (facts, mut checks) = report(&root, &devs, &host);
    print!("{facts}");
    let (gpu_text, gpu_checks) = gpu_report(&root, &names, probe);
    print!("{gpu_text}");
    checks.extend(gpu_checks);
    checks.extend(cuda_section(cuda));
    print_warnings(&checks);
    if checks.is_empty() {
        println!("doctor: nothing wrong found ({} device(s))", devs.len());
        0
    } else {
        println!("doctor: {} finding(s)", checks.len());
        1
    }
}

/// The GPU block (`super::gpu_findings::doctor_block`) for the devices
/// `names`, the dma-buf probe asked when there is a GPU or `probe`.
pub fn gpu_report(root: &SysRoot, names: &[String], probe: bool) -> (String, Vec<Check>) {
    let mut topo = super::gpu_topo::Topo::read(root);
    topo.nics.retain(|n| names.contains(&n.name));
    let dmabuf: Vec<(String, Result<bool, String>)> = if probe || !topo.gpus.is_empty() {
        topo.nics
            .iter()
            .map(|n| (n.name.clone(), super::gpu_topo::dmabuf(root, &n.name)))
            .collect()
    } else {
        Vec::new()
    };
    let (text, findings) = super::gpu_findings::doctor_block(&topo, &dmabuf);
    let checks = findings
        .into_iter()
        .map(|f| Check {
            code: f.code,
            what: format!("{}: {}", f.title, f.evidence),
            fix: f.fix.to_string(),
        })
        .collect();
    (text, checks)
}

fn usage_error(msg: &str) -> i32 {
    eprint!("rdmaperf doctor: {msg}\n{USAGE}");
    2
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpulists_print_as_ranges() {
        use crate::explain::sysfs::parse_cpulist;
        assert_eq!(cpulist(&[0, 1, 2, 5, 7, 8]), "0-2,5,7-8");
        assert_eq!(cpulist(&[]), "");
        assert_eq!(parse_cpulist(&cpulist(&[3, 4, 9])), [3, 4, 9]);
    }

    #[test]
    fn host_checks_flag_memlock_and_governor() {
        let h = HostFacts {
            cpus: vec![0],
            memlock: Some(8 << 20),
            root: false,
            hugepages: Some(0),
            governors: vec!["powersave".into()],
        };
        let c: Vec<_> = host_checks(&h).iter().map(|c| c.code).collect();
        assert_eq!(c, ["memlock", "cpu_governor"]);
        let root = HostFacts {
            root: true,
            governors: vec!["performance".into()],
            ..h
        };
        assert!(host_checks(&root).is_empty());
    }
}
