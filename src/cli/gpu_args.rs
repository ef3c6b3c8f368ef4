//! perftest master's CUDA flags as clap parses them (flattened into
//! `args::PerfArgs`); their rules are in `gpu_opts`.

use clap::Args;

/// The flags as clap parses them (flattened into `PerfArgs`).
#[derive(Args, Debug, Clone, Default)]
pub struct GpuArgs {
    /// Test buffers in the memory of this CUDA device (ordinal, as
    /// CUDA_VISIBLE_DEVICES orders them), registered for GPUDirect RDMA.
    #[arg(long = "use_cuda", value_parser = cuda_ordinal)]
    pub use_cuda: Option<u32>,
    /// Test buffers in the memory of the CUDA device at this PCI bus id
    /// (e.g. 0000:1b:00.0).
    #[arg(long = "use_cuda_bus_id")]
    pub use_cuda_bus_id: Option<String>,
    /// Register GPU memory as a dma-buf (ibv_reg_dmabuf_mr) instead of
    /// through a peer-memory client (ibv_reg_mr + nvidia-peermem).
    #[arg(long = "use_cuda_dmabuf")]
    pub use_cuda_dmabuf: bool,
    /// Export the dma-buf with the PCIe (BAR1) mapping type (CUDA 12.8+).
    #[arg(long = "use_cuda_pcie_mapping")]
    pub use_cuda_pcie_mapping: bool,
    /// CUDA memory type: 0 device memory (the only one rdmaperf runs).
    #[arg(long = "cuda_mem_type")]
    pub cuda_mem_type: Option<u32>,
}

/// `--use_cuda`'s value: a CUDA ordinal, or a sentence naming what to give instead.
fn cuda_ordinal(v: &str) -> Result<u32, String> {
    v.parse().map_err(|_| {
        format!(
            "{v:?} is not a CUDA device ordinal: give one like 0 or 1 (`nvidia-smi -L`), pick by \
             PCI address with --use_cuda_bus_id=<BDF>; `auto` and lists (0,1,...) are for \
             `rdmaperf fabric`"
        )
    })
}
