//! Explaining a number: the facts that decide how fast RDMA traffic can go
//! on this host (port, link, netdev, PCIe, NUMA — read from sysfs, never
//! inside a measured loop), the transport's hardware counters and their
//! deltas over a run, rules that turn counter rates into findings (a data
//! table, `rules::RULES`), the ceilings a number is set against, and
//! `rdmaperf doctor`, which checks a host before any run.
//!
//! Every reader takes a [`sysfs::SysRoot`], so the fixture tree in
//! `tests/data/sysfs/` goes through the same code as `/sys`.
//! Layers: `sysfs`, `ethtool` (reading) → `counters` (snapshots, deltas) → `ceiling`
//! (arithmetic) → `rules` (the table and its evaluation) → `direction`
//! (which way packets were lost, from both ends' counters) → `doctor` →
//! `bracket` (`--explain` around a tool run). GPUs: `pci_topo` (where a PCI
//! function sits, the PIX…SYS class of two) → `gpu_topo` (GPUs, NICs, peer
//! memory, IOMMU, dma-buf from sysfs and a verbs probe) → `gpu_findings`
//! (findings, doctor's GPU block); `gpu_findings::findings_for` is what a GPU
//! run's `--explain` calls.

pub mod bracket;
pub mod ceiling;
pub mod counters;
pub mod cuda_check;
pub mod direction;
pub mod doctor;
pub mod ethtool;
pub mod gpu_findings;
pub mod gpu_topo;
pub mod pci_topo;
pub mod rules;
pub mod sysfs;
