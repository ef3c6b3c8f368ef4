//! One sentence for a GPU registration that failed: which path, errno read
//! as the GPUDirect failures read (EFAULT on ibv_reg_mr = nobody claims
//! the device address; EOPNOTSUPP/EPROTONOSUPPORT on ibv_reg_dmabuf_mr =
//! the provider or kernel has no dma-buf MRs), the other way to try, and
//! what this host shows.

use crate::verbs::DevReg;
use std::path::Path;

/// What the host shows about the two GPUDirect paths.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct HostPaths {
    /// `/sys/module/nvidia_peermem` (or the legacy nv_peer_mem's
    /// `/sys/kernel/mm/memory_peers/nv_mem`) exists.
    pub peermem: bool,
    /// The NCCL-style probe on this device: `None` = dma-buf MRs supported,
    /// `Some(errno)` = refused.
    pub dmabuf_refused: Option<i32>,
}

impl HostPaths {
    /// Reads the peer-memory facts under `root` (`/` normally).
    pub fn read(root: &Path, dmabuf_refused: Option<i32>) -> HostPaths {
        let peermem = root.join("sys/module/nvidia_peermem").exists()
            || root
                .join("sys/kernel/mm/memory_peers/nv_mem/version")
                .exists();
        HostPaths {
            peermem,
            dmabuf_refused,
        }
    }

    fn peermem_text(&self) -> &'static str {
        if self.peermem {
            "nvidia_peermem is loaded"
        } else {
            "nvidia_peermem is not loaded (/sys/module/nvidia_peermem is absent)"
        }
    }

    fn dmabuf_text(&self, dev: &str) -> String {
        match self.dmabuf_refused {
            None => format!("{dev} accepts dma-buf MRs (probe answered EBADF)"),
            Some(e) => format!(
                "{dev} refuses dma-buf MRs (probe: {})",
                std::io::Error::from_raw_os_error(e)
            ),
        }
    }
}

/// The sentence for `how` failing with `errno` on device `dev` (`gdr`: the
/// GPU's GPU_DIRECT_RDMA_SUPPORTED attribute, where reported).
pub fn registration_failure(
    how: DevReg,
    errno: i32,
    dev: &str,
    host: &HostPaths,
    gdr: Option<bool>,
) -> String {
    let err = std::io::Error::from_raw_os_error(errno);
    let why = match (how, errno) {
        (DevReg::PeerMemory, libc::EFAULT) => {
            "no peer-memory client claimed the GPU address, so the kernel tried to pin it as host memory"
        }
        (DevReg::PeerMemory, libc::ENOMEM) => "pinning ran out of memory or the GPU's BAR1 space",
        (DevReg::DmaBuf, libc::EOPNOTSUPP) => {
            "the provider library or kernel driver of this device has no dma-buf MRs"
        }
        (DevReg::DmaBuf, libc::EPROTONOSUPPORT) => {
            "the kernel's uverbs has no dma-buf MR method (Linux 5.12+ needed)"
        }
        (DevReg::DmaBuf, libc::EBADF) => "the exported dma-buf fd was not accepted",
        _ => "the device refused the range",
    };
    let other = match how {
        DevReg::PeerMemory => format!(
            "try --use_cuda_dmabuf (dma-buf: {}) or `modprobe nvidia-peermem` ({})",
            host.dmabuf_text(dev),
            host.peermem_text()
        ),
        DevReg::DmaBuf => format!(
            "try without --use_cuda_dmabuf (peer memory: {}; {})",
            host.peermem_text(),
            host.dmabuf_text(dev)
        ),
    };
    let gdr = match gdr {
        Some(false) => "; this GPU reports no GPUDirect RDMA support (GPU_DIRECT_RDMA_SUPPORTED=0)",
        _ => "",
    };
    format!(
        "registering GPU memory through {} on {dev} failed: {err} (errno {errno}): {why}; {other}{gdr}",
        how.name()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peer_memory_efault_names_peermem_and_dmabuf() {
        let h = HostPaths {
            peermem: false,
            dmabuf_refused: Some(libc::EOPNOTSUPP),
        };
        let s = registration_failure(DevReg::PeerMemory, libc::EFAULT, "rxe0", &h, Some(true));
        for want in [
            "peer memory (ibv_reg_mr) on rxe0 failed",
            "no peer-memory client",
            "nvidia_peermem is not loaded",
            "rxe0 refuses dma-buf MRs",
            "--use_cuda_dmabuf",
        ] {
            assert!(s.contains(want), "{want:?} missing: {s}");
        }
        assert!(!s.contains("GPU_DIRECT_RDMA_SUPPORTED"), "{s}");
    }

    #[test]
    fn dmabuf_eopnotsupp_suggests_peer_memory() {
        let h = HostPaths {
            peermem: true,
            dmabuf_refused: None,
        };
        let s = registration_failure(DevReg::DmaBuf, libc::EOPNOTSUPP, "mlx5_0", &h, Some(false));
        for want in [
            "dma-buf (ibv_reg_dmabuf_mr) on mlx5_0",
            "has no dma-buf MRs",
            "try without --use_cuda_dmabuf",
            "nvidia_peermem is loaded",
            "GPU_DIRECT_RDMA_SUPPORTED=0",
        ] {
            assert!(s.contains(want), "{want:?} missing: {s}");
        }
    }

    #[test]
    fn host_paths_read_sysfs() {
        let d = std::env::temp_dir().join(format!("rdmaperf-peermem-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        assert!(!HostPaths::read(&d, None).peermem);
        std::fs::create_dir_all(d.join("sys/module/nvidia_peermem")).unwrap();
        assert!(HostPaths::read(&d, None).peermem);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
