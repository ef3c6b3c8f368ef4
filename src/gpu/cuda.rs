//! The CUDA memory backend: one GPU picked as perftest picks it (CUDA
//! ordinal or PCI bus id), its primary context (no `cuCtxCreate`, whose ABI
//! changed across CUDA versions), allocations rounded to 64 KiB with
//! `SYNC_MEMOPS` set on the range, optionally exported as a dma-buf.

use super::cuda_api::*;
use super::GpuSelect;
use crate::verbs::{DeviceMemory, DmaBuf};
use std::ffi::{c_char, c_int, c_void, CStr, CString};
use std::sync::Arc;

/// GPU memory is allocated in 64 KiB units (the GPU page peer memory pins).
pub const GPU_PAGE: usize = 64 * 1024;

/// What the driver says, at open, about the GPU's registration paths and
/// itself (`doctor --gpu` prints the three on one line); `None` where it does
/// not say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GpuCaps {
    /// `CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_SUPPORTED`: peer memory.
    pub gdr: Option<bool>,
    /// `CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED`: dma-buf export.
    pub dmabuf: Option<bool>,
    /// `cuDriverGetVersion` (12080 is CUDA 12.8).
    pub driver_version: Option<c_int>,
}

/// One GPU with its primary context current on the opening thread.
pub struct Cuda {
    api: &'static CudaApi,
    dev: CuDevice,
    ctx: CuContext,
    /// The CUDA ordinal or bus id as given, for messages.
    pub label: String,
    pub name: String,
    pub bus_id: String,
    pub caps: GpuCaps,
    /// `cuFlushGPUDirectRDMAWrites` works on this GPU (CUDA 11.3+, the
    /// flush-options attribute's HOST bit).
    flush: bool,
}

// SAFETY: the context handle is only passed to the (thread-safe) driver API.
unsafe impl Send for Cuda {}
// SAFETY: as above.
unsafe impl Sync for Cuda {}

/// What a failed CUDA call usually needs.
fn fix_for(r: CuResult) -> &'static str {
    match r {
        100 => "no CUDA device is visible to this process: check `nvidia-smi` and CUDA_VISIBLE_DEVICES",
        101 => "the device does not exist: pick another --use_cuda index or bus id (`nvidia-smi -L`)",
        2 => "the GPU is out of memory: free GPU memory or lower -s/-q",
        34 => "this libcuda.so.1 is the CUDA toolkit's stub, not the driver's: put the NVIDIA driver's library first on the loader path",
        803 => "the CUDA driver library (libcuda.so.1) and the loaded NVIDIA kernel module are different versions (a driver upgrade without a reboot, or a second libcuda on the loader path): reboot or reload the nvidia modules, or put the libcuda of the loaded driver first (`cat /proc/driver/nvidia/version`)",
        46 => "the GPU is busy or in exclusive-process mode: free it or change its compute mode (`nvidia-smi -c DEFAULT`)",
        801 => "the driver does not support this operation on this GPU (dma-buf export needs CUDA 11.7+ with the open kernel modules): drop --use_cuda_dmabuf to use peer memory",
        _ => "check the NVIDIA driver (`nvidia-smi`) and the kernel log (`dmesg`)",
    }
}

/// How many CUDA devices the driver shows (`cuInit`, `cuDeviceGetCount`), for `doctor --cuda`.
pub fn device_count(lib: &str) -> Result<u32, String> {
    let drv = driver(lib)?;
    let api = &drv.api;
    check(api, "driver", "cuInit", drv.init)?;
    let mut n: c_int = 0;
    // SAFETY: valid out-pointer.
    check(api, "driver", "cuDeviceGetCount", unsafe {
        (api.device_count)(&mut n)
    })?;
    Ok(n.max(0) as u32)
}

impl Cuda {
    /// A failed call `what` as one sentence: the driver's name for `r` and the fix.
    fn check(&self, what: &str, r: CuResult) -> Result<(), String> {
        check(self.api, &self.label, what, r)
    }

    /// Loads `lib` (normally [`LIBCUDA`]), inits the driver and opens the GPU.
    pub fn open(lib: &str, sel: &GpuSelect) -> Result<Arc<Cuda>, String> {
        let drv = driver(lib)?;
        let api = &drv.api;
        let label = sel.label();
        check(api, &label, "cuInit", drv.init)?;
        let dev = pick(api, sel, &label)?;
        let mut name = [0 as c_char; 256];
        // SAFETY: a 256-byte buffer, its length given.
        let r = unsafe { (api.device_name)(name.as_mut_ptr(), 256, dev) };
        check(api, &label, "cuDeviceGetName", r)?;
        let mut bus = [0 as c_char; 64];
        // SAFETY: a 64-byte buffer, its length given.
        let r = unsafe { (api.device_bus_id)(bus.as_mut_ptr(), 64, dev) };
        check(api, &label, "cuDeviceGetPCIBusId", r)?;
        let attr = |a: c_int| {
            let mut v = 0;
            // SAFETY: valid out-pointer, a device from the driver.
            (unsafe { (api.device_attr)(&mut v, a, dev) } == CUDA_SUCCESS).then_some(v)
        };
        if attr(ATTR_INTEGRATED).is_some_and(|v| v != 0) {
            return Err(integrated(&label, &name));
        }
        let flush = api.flush_rdma_writes.is_some()
            && attr(ATTR_GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS)
                .is_some_and(|v| v & FLUSH_OPTION_HOST != 0);
        let mut version: c_int = 0;
        let caps = GpuCaps {
            gdr: attr(ATTR_GPU_DIRECT_RDMA_SUPPORTED).map(|v| v != 0),
            dmabuf: attr(ATTR_DMA_BUF_SUPPORTED).map(|v| v != 0),
            // SAFETY: valid out-pointer.
            driver_version: (unsafe { (api.driver_version)(&mut version) } == CUDA_SUCCESS)
                .then_some(version),
        };
        let mut ctx: CuContext = std::ptr::null_mut();
        // SAFETY: valid out-pointer, a device from the driver.
        let r = unsafe { (api.ctx_retain)(&mut ctx, dev) };
        check(api, &label, "cuDevicePrimaryCtxRetain", r)?;
        let cuda = Cuda {
            api,
            dev,
            ctx,
            label,
            // SAFETY: the driver NUL-terminates within the given lengths.
            name: unsafe { CStr::from_ptr(name.as_ptr()) }
                .to_string_lossy()
                .into_owned(),
            // SAFETY: as above.
            bus_id: unsafe { CStr::from_ptr(bus.as_ptr()) }
                .to_string_lossy()
                .into_owned(),
            caps,
            flush,
        };
        cuda.make_current()?;
        Ok(Arc::new(cuda))
    }

    /// The primary context current on this thread (copies and frees may
    /// run on another thread than the open).
    fn make_current(&self) -> Result<(), String> {
        // SAFETY: the context is retained until Drop.
        self.check("cuCtxSetCurrent", unsafe {
            (self.api.ctx_set_current)(self.ctx)
        })
    }

    /// "NVIDIA H100 (PCI 0000:1b:00.0)".
    pub fn describe(&self) -> String {
        format!("{} (PCI {})", self.name, self.bus_id)
    }

    /// `len` bytes (rounded up to 64 KiB) of device memory, `SYNC_MEMOPS` set;
    /// with `dmabuf`, exported (`pcie`: BAR1 mapping type).
    pub fn alloc(
        self: &Arc<Self>,
        len: usize,
        dmabuf: bool,
        pcie: bool,
    ) -> Result<CudaBuf, String> {
        self.make_current()?;
        let size = len.div_ceil(GPU_PAGE).max(1) * GPU_PAGE;
        let mut ptr: CuDevicePtr = 0;
        // SAFETY: valid out-pointer.
        let r = unsafe { (self.api.mem_alloc)(&mut ptr, size) };
        self.check(&format!("cuMemAlloc_v2({size} bytes)"), r)?;
        let mut buf = CudaBuf {
            cuda: Arc::clone(self),
            ptr,
            len: size,
            dmabuf: None,
        };
        let one: c_int = 1;
        // SAFETY: `one` outlives the call; the range was just allocated.
        let r = unsafe {
            (self.api.pointer_set_attr)(
                (&one as *const c_int).cast(),
                POINTER_ATTR_SYNC_MEMOPS,
                ptr,
            )
        };
        self.check("cuPointerSetAttribute(SYNC_MEMOPS)", r)?;
        if dmabuf {
            buf.dmabuf = Some(self.export(ptr, size, pcie)?);
        }
        Ok(buf)
    }

    /// `--use_cuda_pcie_mapping` needs a CUDA 12.8 driver: an older one
    /// rejects the mapping flag (or ignores it); say which version this is.
    pub fn check_pcie_mapping(&self) -> Result<(), String> {
        match self.caps.driver_version {
            Some(v) if v >= DRIVER_PCIE_MAPPING => Ok(()),
            v => Err(format!(
                "--use_cuda_pcie_mapping needs a CUDA 12.8 driver or newer (the PCIe/BAR1 dma-buf \
                 mapping type), but {} {} has {}; update the NVIDIA driver or drop \
                 --use_cuda_pcie_mapping",
                self.label,
                self.describe(),
                v.map_or(
                    "a driver whose version cuDriverGetVersion does not give".into(),
                    |v| { format!("CUDA {}.{} ({v})", v / 1000, v % 1000 / 10) }
                )
            )),
        }
    }

    fn export(&self, ptr: CuDevicePtr, size: usize, pcie: bool) -> Result<DmaBuf, String> {
        if pcie {
            self.check_pcie_mapping()?;
        }
        let get = self.api.get_handle.ok_or_else(|| {
            "--use_cuda_dmabuf: this NVIDIA driver's libcuda has no cuMemGetHandleForAddressRange \
                 (CUDA 11.7+); update the driver or drop --use_cuda_dmabuf to use peer memory"
                .to_string()
        })?;
        let page = crate::verbs::mr::page_size() as u64;
        let start = ptr / page * page;
        let end = (ptr + size as u64).div_ceil(page) * page;
        let mut fd: c_int = -1;
        let flags = if pcie {
            RANGE_FLAG_MAPPING_TYPE_PCIE
        } else {
            0
        };
        // SAFETY: valid out-pointer for the fd; the range is ours.
        let r = unsafe {
            get(
                (&mut fd as *mut c_int).cast::<c_void>(),
                start,
                (end - start) as usize,
                HANDLE_TYPE_DMA_BUF_FD,
                flags,
            )
        };
        self.check("cuMemGetHandleForAddressRange(DMA_BUF_FD)", r)?;
        Ok(DmaBuf {
            fd,
            offset: ptr - start,
        })
    }
}

/// Why an integrated GPU (Tegra, Grace-Hopper's iGPU mode) is refused:
/// its memory is the host's, which perftest allocates with `cuMemAllocHost`;
/// rdmaperf's GPU path is device memory only.
fn integrated(label: &str, name: &[c_char]) -> String {
    // SAFETY: the driver NUL-terminated the name within its buffer.
    let name = unsafe { CStr::from_ptr(name.as_ptr()) }.to_string_lossy();
    format!(
        "CUDA {label}: {name} is an integrated GPU (CU_DEVICE_ATTRIBUTE_INTEGRATED): its memory \
         is host memory (perftest uses cuMemAllocHost there), which rdmaperf does not test as GPU \
         memory; drop the CUDA flags to test host memory, or pick a discrete GPU"
    )
}

fn check(api: &CudaApi, label: &str, what: &str, r: CuResult) -> Result<(), String> {
    if r == CUDA_SUCCESS {
        return Ok(());
    }
    Err(format!(
        "CUDA {label}: {what} failed with {}; {}",
        api.describe(r),
        fix_for(r)
    ))
}

/// The device `sel` names.
fn pick(api: &CudaApi, sel: &GpuSelect, label: &str) -> Result<CuDevice, String> {
    let mut dev: CuDevice = 0;
    match sel {
        GpuSelect::Index(i) => {
            let mut n = 0;
            // SAFETY: valid out-pointer.
            check(api, label, "cuDeviceGetCount", unsafe {
                (api.device_count)(&mut n)
            })?;
            if n == 0 {
                return Err(format!(
                    "CUDA {label}: there are no available device(s) that support CUDA (cuDeviceGetCount \
                     is 0); check `nvidia-smi` and CUDA_VISIBLE_DEVICES"
                ));
            }
            if *i >= n as u32 {
                return Err(format!(
                    "--use_cuda={i}: this host has {n} CUDA device(s), numbered 0..{}; pick one of \
                     them (`nvidia-smi -L`)",
                    n - 1
                ));
            }
            // SAFETY: valid out-pointer, ordinal in range.
            check(api, label, "cuDeviceGet", unsafe {
                (api.device_get)(&mut dev, *i as c_int)
            })?;
        }
        GpuSelect::BusId(b) => {
            let c = CString::new(b.as_str()).map_err(|_| format!("bad bus id {b:?}"))?;
            // SAFETY: valid out-pointer and NUL-terminated string.
            let r = unsafe { (api.device_by_bus_id)(&mut dev, c.as_ptr()) };
            check(api, label, "cuDeviceGetByPCIBusId", r)?;
        }
    }
    Ok(dev)
}

impl Drop for Cuda {
    fn drop(&mut self) {
        // SAFETY: retained once in `open`, released once here.
        let r = unsafe { (self.api.ctx_release)(self.dev) };
        if r != CUDA_SUCCESS {
            eprintln!(
                "warning: CUDA {}: cuDevicePrimaryCtxRelease_v2 failed with {}",
                self.label,
                self.api.describe(r)
            );
        }
    }
}

/// Device memory from [`Cuda::alloc`]; freed (and its dma-buf fd closed) on drop.
pub struct CudaBuf {
    cuda: Arc<Cuda>,
    ptr: CuDevicePtr,
    len: usize,
    dmabuf: Option<DmaBuf>,
}

impl CudaBuf {
    fn range(&self, off: usize, n: usize) -> Result<CuDevicePtr, String> {
        if off.checked_add(n).map_or(true, |e| e > self.len) {
            return Err(format!(
                "internal: a copy of {n} bytes at {off} lies outside the {} byte GPU buffer; please report this",
                self.len
            ));
        }
        self.cuda.make_current()?;
        Ok(self.ptr + off as u64)
    }
}

impl DeviceMemory for CudaBuf {
    fn va(&self) -> u64 {
        self.ptr
    }
    fn len(&self) -> usize {
        self.len
    }
    fn dmabuf(&self) -> Option<DmaBuf> {
        self.dmabuf
    }
    fn copy_from_host(&self, off: usize, src: &[u8]) -> Result<(), String> {
        let d = self.range(off, src.len())?;
        // SAFETY: `src` is valid for its length; `d..` lies in our allocation.
        let r = unsafe { (self.cuda.api.htod)(d, src.as_ptr().cast(), src.len()) };
        self.cuda.check("cuMemcpyHtoD_v2", r)
    }
    fn copy_to_host(&self, off: usize, dst: &mut [u8]) -> Result<(), String> {
        let d = self.range(off, dst.len())?;
        // A NIC's writes may still sit in the GPU's write path: flush them
        // to the memory before the copy reads it (NCCL does the same).
        if let Some(flush) = self.cuda.api.flush_rdma_writes.filter(|_| self.cuda.flush) {
            // SAFETY: a plain driver call; the context is current (range).
            let r = unsafe { flush(FLUSH_TARGET_CURRENT_CTX, FLUSH_TO_OWNER) };
            self.cuda.check("cuFlushGPUDirectRDMAWrites", r)?;
        }
        // SAFETY: `dst` is valid for its length; `d..` lies in our allocation.
        let r = unsafe { (self.cuda.api.dtoh)(dst.as_mut_ptr().cast(), d, dst.len()) };
        self.cuda.check("cuMemcpyDtoH_v2", r)
    }
}

impl Drop for CudaBuf {
    fn drop(&mut self) {
        if let Some(d) = self.dmabuf {
            // SAFETY: the fd the export gave us, closed once.
            unsafe { libc::close(d.fd) };
        }
        let r = self
            .cuda
            .make_current()
            // SAFETY: allocated once in `alloc`, freed once here (after the MR
            // that owned us was deregistered).
            .map(|_| unsafe { (self.cuda.api.mem_free)(self.ptr) });
        if let Ok(r) = r {
            if r != CUDA_SUCCESS {
                eprintln!(
                    "warning: CUDA {}: cuMemFree_v2 failed with {}",
                    self.cuda.label,
                    self.cuda.api.describe(r)
                );
            }
        }
    }
}
