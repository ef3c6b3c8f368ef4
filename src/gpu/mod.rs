//! Accelerator memory for the test buffers (GPUDirect RDMA). A backend
//! opens one device, allocates ranges the CPU never touches (they reach the
//! verbs layer as `verbs::DeviceMemory`, which has no slice), and copies
//! in and out. CUDA is the one backend today (`cuda`, over the driver API
//! loaded at run time by `cuda_api`); ROCm would be a sibling with the same
//! shape. `reg_hint` words a failed registration of such memory.

pub mod cuda;
pub mod cuda_api;
pub mod reg_hint;

/// Which GPU: perftest's `--use_cuda=<idx>` or `--use_cuda_bus_id=<BDF>`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GpuSelect {
    /// CUDA ordinal (subject to CUDA_VISIBLE_DEVICES / CUDA_DEVICE_ORDER).
    Index(u32),
    /// PCI bus id, e.g. `0000:1b:00.0`.
    BusId(String),
}

impl GpuSelect {
    /// "GPU 0" / "GPU 0000:1b:00.0", for messages.
    pub fn label(&self) -> String {
        match self {
            GpuSelect::Index(i) => format!("GPU {i}"),
            GpuSelect::BusId(b) => format!("GPU {b}"),
        }
    }
}
