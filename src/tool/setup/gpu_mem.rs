//! The test buffer in GPU memory (`--use_cuda`): open the GPU once per side,
//! allocate each buffer there, register it (peer memory or dma-buf, as the
//! flags say) and give it its starting contents through a host staging copy
//! (`cuMemcpyHtoD`), never a CPU store. Registration comes before the copy,
//! so a range the CPU cannot reach (the test fake's protect mode) still
//! gets pinned.

use super::memory;
use crate::cli::gpu_opts::GpuOpts;
use crate::cli::params::Params;
use crate::gpu::cuda::Cuda;
use crate::gpu::cuda_api::LIBCUDA;
use crate::gpu::reg_hint::{registration_failure, HostPaths};
use crate::tool::common::fail::Fail;
use crate::verbs::devmem::dmabuf_probe;
use crate::verbs::rdma_core::reg_dmabuf_mr;
use crate::verbs::{Access, Context, DevReg, Mr, Pd};
use std::sync::{Arc, Mutex};

/// The PCI bus id of the GPU this process opened last: `--explain` reads it after the run to
/// rank the GPU–NIC path's findings (`explain::gpu_topo`) with the counters'.
static OPENED: Mutex<Option<String>> = Mutex::new(None);

/// The bus id [`GpuMem::open`] recorded, if a GPU was opened.
pub fn opened_bus_id() -> Option<String> {
    OPENED.lock().ok()?.clone()
}

/// The opened GPU of one side.
pub struct GpuMem {
    pub cuda: Arc<Cuda>,
    pub opts: GpuOpts,
}

impl GpuMem {
    /// Opens the GPU `p` asks for (None without a CUDA flag: libcuda is
    /// never loaded then). perftest prints which device it picked.
    pub fn open(p: &Params) -> Result<Option<GpuMem>, Fail> {
        let Some(opts) = &p.gpu else {
            return Ok(None);
        };
        if opts.dmabuf {
            // rdma-core older than 34 has no ibv_reg_dmabuf_mr: refuse before the GPU opens.
            reg_dmabuf_mr().map_err(|e| Fail::refused(format!("--use_cuda_dmabuf: {e}")))?;
        }
        let cuda = Cuda::open(LIBCUDA, &opts.select).map_err(Fail::new)?;
        if opts.dmabuf && cuda.caps.dmabuf == Some(false) {
            return Err(Fail::new(format!(
                "--use_cuda_dmabuf: DMA-BUF is not supported on {} {} \
                 (CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED is 0: it needs CUDA 11.7+ and the open \
                 kernel modules); drop --use_cuda_dmabuf to use peer memory",
                cuda.label,
                cuda.describe()
            )));
        }
        if opts.pcie_mapping {
            cuda.check_pcie_mapping().map_err(Fail::new)?;
        }
        if let Ok(mut o) = OPENED.lock() {
            *o = Some(cuda.bus_id.clone());
        }
        Ok(Some(GpuMem {
            cuda,
            opts: opts.clone(),
        }))
    }

    /// A registered GPU buffer of `len` bytes holding what `memory::fill`
    /// gives a host buffer of this side (zeros elsewhere).
    pub fn buffer(
        &self,
        p: &Params,
        pd: &Arc<Pd>,
        ctx: &Context,
        len: usize,
        (slot, slots): (usize, usize),
        access: Access,
    ) -> Result<Mr, Fail> {
        let o = &self.opts;
        let buf = self
            .cuda
            .alloc(len, o.dmabuf, o.pcie_mapping)
            .map_err(Fail::new)?;
        let how = if o.dmabuf {
            DevReg::DmaBuf
        } else {
            DevReg::PeerMemory
        };
        let mr = Mr::device(pd, Box::new(buf), access).map_err(|e| {
            let host = HostPaths::read(std::path::Path::new("/"), dmabuf_probe(pd).err());
            let gdr = self.cuda.caps.gdr;
            Fail::new(registration_failure(how, e.errno, ctx.name(), &host, gdr))
        })?;
        let mut staging = vec![0u8; mr.len()];
        memory::fill(p, &mut staging[..len.min(mr.len())], slot, slots);
        if let Some((dev, _)) = mr.device_mem() {
            dev.copy_from_host(0, &staging).map_err(Fail::new)?;
        }
        Ok(mr)
    }

    /// "GPU 0: NVIDIA H100 (PCI 0000:1b:00.0), dma-buf (ibv_reg_dmabuf_mr)".
    pub fn describe(&self) -> String {
        let how = if self.opts.dmabuf {
            DevReg::DmaBuf
        } else {
            DevReg::PeerMemory
        };
        format!(
            "{}: {}, {}",
            self.cuda.label,
            self.cuda.describe(),
            how.name()
        )
    }
}
