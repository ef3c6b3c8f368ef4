//! The CUDA driver API, loaded at run time: `dlopen("libcuda.so.1")` (the
//! driver's runtime name; `libcuda.so` is the toolkit's development link)
//! and every entry point bound by the name of the ABI it is called with
//! (`cuMemAlloc_v2` etc.: the unversioned memory calls are the legacy 32-bit
//! ABI). No CUDA header, toolkit or library is needed to build; a missing
//! library or symbol is a sentence, never a panic. Why not cudarc: it panics
//! when libcuda is absent or a symbol is missing, needs a CUDA version
//! feature at build, and raises the MSRV; these 20 calls are all rdmaperf needs.
//! [`driver`] loads each library once per process and never unloads it, and
//! calls `cuInit` once: the driver keeps per-process state that a `dlclose`
//! and a second `cuInit` would throw away or repeat (doctor's GPUs, the
//! fabric mode's threads each open a GPU).

use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::sync::Mutex;

pub type CuResult = c_int;
pub type CuDevice = c_int;
pub type CuContext = *mut c_void;
pub type CuDevicePtr = u64;

pub const CUDA_SUCCESS: CuResult = 0;
pub const ATTR_INTEGRATED: c_int = 18;
pub const ATTR_GPU_DIRECT_RDMA_SUPPORTED: c_int = 116;
pub const ATTR_DMA_BUF_SUPPORTED: c_int = 124;
/// `CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS`: a bit mask.
pub const ATTR_GPU_DIRECT_RDMA_FLUSH_WRITES_OPTIONS: c_int = 117;
/// `CU_FLUSH_GPU_DIRECT_RDMA_WRITES_OPTION_HOST`: `cuFlushGPUDirectRDMAWrites` works.
pub const FLUSH_OPTION_HOST: c_int = 1;
/// `CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TARGET_CURRENT_CTX`.
pub const FLUSH_TARGET_CURRENT_CTX: c_int = 0;
/// `CU_FLUSH_GPU_DIRECT_RDMA_WRITES_TO_OWNER`.
pub const FLUSH_TO_OWNER: c_int = 100;
/// `cuDriverGetVersion` of CUDA 12.8, the first with the PCIe (BAR1) dma-buf mapping type.
pub const DRIVER_PCIE_MAPPING: c_int = 12080;
/// `CU_POINTER_ATTRIBUTE_SYNC_MEMOPS`.
pub const POINTER_ATTR_SYNC_MEMOPS: c_int = 6;
/// `CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD`.
pub const HANDLE_TYPE_DMA_BUF_FD: c_int = 1;
/// `CU_MEM_RANGE_FLAG_DMA_BUF_MAPPING_TYPE_PCIE` (CUDA 12.8+).
pub const RANGE_FLAG_MAPPING_TYPE_PCIE: u64 = 1;

/// The library rdmaperf opens.
pub const LIBCUDA: &str = "libcuda.so.1";

macro_rules! api {
    (required { $( $field:ident = $sym:literal : fn($($a:ty),*) ; )* } optional { $( $ofield:ident = $osym:literal : fn($($oa:ty),*) ; )* }) => {
        /// The bound entry points (each the ABI its name says).
        pub struct CudaApi {
            $( pub $field: unsafe extern "C" fn($($a),*) -> CuResult, )*
            $( pub $ofield: Option<unsafe extern "C" fn($($oa),*) -> CuResult>, )*
        }

        impl CudaApi {
            fn bind(lib: *mut c_void, path: &str) -> Result<CudaApi, String> {
                Ok(CudaApi {
                    // SAFETY: each symbol is the CUDA driver entry point of
                    // that exact versioned name, whose C signature is the one given.
                    $( $field: unsafe { std::mem::transmute::<*mut c_void, unsafe extern "C" fn($($a),*) -> CuResult>(sym(lib, path, $sym)?) }, )*
                    // SAFETY: as above; absent in older drivers, hence optional.
                    $( $ofield: sym(lib, path, $osym).ok().map(|p| unsafe { std::mem::transmute::<*mut c_void, unsafe extern "C" fn($($oa),*) -> CuResult>(p) }), )*
                })
            }
        }
    };
}

api! {
    required {
    init = "cuInit": fn(c_uint);
    driver_version = "cuDriverGetVersion": fn(*mut c_int);
    device_count = "cuDeviceGetCount": fn(*mut c_int);
    device_get = "cuDeviceGet": fn(*mut CuDevice, c_int);
    device_by_bus_id = "cuDeviceGetByPCIBusId": fn(*mut CuDevice, *const c_char);
    device_bus_id = "cuDeviceGetPCIBusId": fn(*mut c_char, c_int, CuDevice);
    device_attr = "cuDeviceGetAttribute": fn(*mut c_int, c_int, CuDevice);
    device_name = "cuDeviceGetName": fn(*mut c_char, c_int, CuDevice);
    total_mem = "cuDeviceTotalMem_v2": fn(*mut usize, CuDevice);
    ctx_retain = "cuDevicePrimaryCtxRetain": fn(*mut CuContext, CuDevice);
    ctx_release = "cuDevicePrimaryCtxRelease_v2": fn(CuDevice);
    ctx_set_current = "cuCtxSetCurrent": fn(CuContext);
    mem_alloc = "cuMemAlloc_v2": fn(*mut CuDevicePtr, usize);
    mem_free = "cuMemFree_v2": fn(CuDevicePtr);
    htod = "cuMemcpyHtoD_v2": fn(CuDevicePtr, *const c_void, usize);
    dtoh = "cuMemcpyDtoH_v2": fn(*mut c_void, CuDevicePtr, usize);
    pointer_set_attr = "cuPointerSetAttribute": fn(*const c_void, c_int, CuDevicePtr);
    }
    optional {
        get_handle = "cuMemGetHandleForAddressRange": fn(*mut c_void, CuDevicePtr, usize, c_int, u64);
        error_name = "cuGetErrorName": fn(CuResult, *mut *const c_char);
        error_string = "cuGetErrorString": fn(CuResult, *mut *const c_char);
        flush_rdma_writes = "cuFlushGPUDirectRDMAWrites": fn(c_int, c_int);
    }
}

// SAFETY: the driver API is thread-safe; the struct holds only function
// pointers.
unsafe impl Send for CudaApi {}
// SAFETY: as above.
unsafe impl Sync for CudaApi {}

fn dlerror_text() -> String {
    // SAFETY: dlerror returns NULL or a NUL-terminated string owned by libc.
    let e = unsafe { libc::dlerror() };
    if e.is_null() {
        "no reason given".into()
    } else {
        // SAFETY: non-null, NUL-terminated (above).
        unsafe { CStr::from_ptr(e) }.to_string_lossy().into_owned()
    }
}

fn sym(lib: *mut c_void, path: &str, name: &str) -> Result<*mut c_void, String> {
    let c = CString::new(name).map_err(|_| format!("bad symbol name {name}"))?;
    // SAFETY: `lib` is a live dlopen handle, `c` NUL-terminated.
    let p = unsafe { libc::dlsym(lib, c.as_ptr()) };
    if p.is_null() {
        return Err(format!(
            "{path} has no {name} ({}): the NVIDIA driver is too old or this is not the driver's \
             libcuda; install a current NVIDIA driver (its libcuda.so.1)",
            dlerror_text()
        ));
    }
    Ok(p)
}

impl CudaApi {
    /// Opens `path` (a library name dlopen resolves, or a path) and binds
    /// every entry point; the library stays loaded (see [`driver`]).
    fn load(path: &str) -> Result<CudaApi, String> {
        let c = CString::new(path).map_err(|_| format!("bad library path {path:?}"))?;
        // SAFETY: `c` is NUL-terminated; RTLD_LOCAL keeps its symbols to us.
        let lib = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL) };
        if lib.is_null() {
            return Err(format!(
                "cannot load the CUDA driver library {path} ({}): CUDA memory needs the NVIDIA \
                 driver installed (it provides {LIBCUDA}); install it, or drop the CUDA flags to \
                 test host memory",
                dlerror_text()
            ));
        }
        CudaApi::bind(lib, path).inspect_err(|_| {
            // SAFETY: the handle just opened, used by nothing else.
            unsafe { libc::dlclose(lib) };
        })
    }

    /// The driver's name and description of `r` (`CUDA_ERROR_NO_DEVICE: no
    /// CUDA-capable device is detected`), or the number where it has none.
    pub fn describe(&self, r: CuResult) -> String {
        let text = |f: Option<unsafe extern "C" fn(CuResult, *mut *const c_char) -> CuResult>| {
            let f = f?;
            let mut s: *const c_char = std::ptr::null();
            // SAFETY: valid out-pointer; the driver returns a static string.
            if unsafe { f(r, &mut s) } != CUDA_SUCCESS || s.is_null() {
                return None;
            }
            // SAFETY: non-null static NUL-terminated string.
            Some(unsafe { CStr::from_ptr(s) }.to_string_lossy().into_owned())
        };
        match (text(self.error_name), text(self.error_string)) {
            (Some(n), Some(s)) => format!("{n} ({r}): {s}"),
            (Some(n), None) => format!("{n} ({r})"),
            _ => format!("CUresult {r}"),
        }
    }
}

/// A loaded driver library and what its one `cuInit(0)` returned.
pub struct Driver {
    pub api: CudaApi,
    /// `cuInit`'s result: the driver keeps a failed init's error, so every
    /// later open reports the same one.
    pub init: CuResult,
}

/// The driver library `path`, loaded and `cuInit`ed on the first call in
/// this process and kept loaded to its end (never `dlclose`d). A library
/// that fails to load is not kept: the next call tries again.
pub fn driver(path: &str) -> Result<&'static Driver, String> {
    static LOADED: Mutex<Vec<(String, &'static Driver)>> = Mutex::new(Vec::new());
    let mut loaded = LOADED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, d)) = loaded.iter().find(|(p, _)| p == path) {
        return Ok(d);
    }
    let api = CudaApi::load(path)?;
    // SAFETY: a plain driver call, made once per library.
    let init = unsafe { (api.init)(0) };
    let d: &'static Driver = Box::leak(Box::new(Driver { api, init }));
    loaded.push((path.to_string(), d));
    Ok(d)
}
