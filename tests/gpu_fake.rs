//! The CUDA loader and memory backend against the project's fake
//! `libcuda.so.1` (host memory posing as GPU memory), on the host, no VM:
//! the call order, every injected CUDA error as its sentence, a missing
//! library or symbol, device selection, dma-buf export, and that the fake's
//! protect mode really makes "device" memory unreachable for the CPU (what
//! the VM test relies on to catch a CPU touch). What the fake cannot show:
//! real GPU DMA, peer-memory pinning, BAR1, the driver's real error codes.

mod common;

use rdmaperf::gpu::cuda::{Cuda, CudaBuf};
use rdmaperf::gpu::GpuSelect;
use rdmaperf::verbs::DeviceMemory;
use std::sync::{Arc, Mutex, MutexGuard};

/// The fake reads its environment at each call: one test at a time.
static ENV: Mutex<()> = Mutex::new(());

struct Fake {
    _g: MutexGuard<'static, ()>,
    lib: String,
    log: std::path::PathBuf,
}

impl Fake {
    fn new(name: &str, env: &[(&str, &str)]) -> Fake {
        let g = ENV.lock().unwrap_or_else(|e| e.into_inner());
        for v in [
            "FAKE_CUDA_FAIL",
            "FAKE_CUDA_DEVICES",
            "FAKE_CUDA_DMABUF",
            "FAKE_CUDA_PROTECT",
            "FAKE_CUDA_NOPEER",
            "FAKE_CUDA_DRIVER_VERSION",
            "FAKE_CUDA_INTEGRATED",
            "FAKE_CUDA_FLUSH",
        ] {
            std::env::remove_var(v);
        }
        for (k, v) in env {
            std::env::set_var(k, v);
        }
        let log = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("fake_cuda_{name}.log"));
        let _ = std::fs::remove_file(&log);
        std::env::set_var("FAKE_CUDA_LOG", &log);
        // A copy of its own: the first open in it loads and inits it.
        let lib = common::fake_cuda::fresh_copy(name);
        Fake {
            _g: g,
            lib: lib.to_string_lossy().into_owned(),
            log,
        }
    }

    fn calls(&self) -> Vec<String> {
        std::fs::read_to_string(&self.log)
            .unwrap_or_default()
            .lines()
            .map(|l| l.split(' ').next().unwrap().to_string())
            .collect()
    }

    fn open(&self, sel: GpuSelect) -> Result<Arc<Cuda>, String> {
        Cuda::open(&self.lib, &sel)
    }

    /// A plain 4 KiB buffer (no dma-buf, no PCIe mapping) on GPU 0.
    fn page(&self) -> CudaBuf {
        self.open(GpuSelect::Index(0))
            .unwrap()
            .alloc(4096, false, false)
            .unwrap()
    }
}

fn pos(calls: &[String], name: &str) -> usize {
    calls
        .iter()
        .position(|c| c == name)
        .unwrap_or_else(|| panic!("{name} not called: {calls:?}"))
}

#[test]
fn call_order_init_first_free_last_and_data_round_trips() {
    let f = Fake::new("order", &[]);
    let cuda = f.open(GpuSelect::Index(0)).unwrap();
    assert_eq!(cuda.bus_id, "0000:1b:00.0");
    assert!(cuda.name.contains("fake GPU 0"), "{}", cuda.name);
    let buf: CudaBuf = cuda.alloc(100_000, false, false).unwrap();
    assert_eq!(buf.len(), 128 * 1024, "rounded up to 64 KiB units");
    assert_eq!(buf.va() % (64 * 1024), 0);
    assert!(buf.dmabuf().is_none());
    let data: Vec<u8> = (0..4096u32).map(|i| (i * 7) as u8).collect();
    buf.copy_from_host(1000, &data).unwrap();
    let mut back = vec![0u8; 4096];
    buf.copy_to_host(1000, &mut back).unwrap();
    assert_eq!(back, data);
    let c = f.calls();
    assert!(
        pos(&c, "cuFlushGPUDirectRDMAWrites") < pos(&c, "cuMemcpyDtoH_v2"),
        "the NIC's writes are flushed before the read-back: {c:?}"
    );
    let e = buf.copy_to_host(buf.len() - 10, &mut back).unwrap_err();
    assert!(e.contains("outside"), "{e}");
    drop(buf);
    drop(cuda);
    let c = f.calls();
    assert_eq!(c[..2], ["fake_cuda_loaded", "cuInit"], "{c:?}");
    assert!(pos(&c, "cuDevicePrimaryCtxRetain") < pos(&c, "cuMemAlloc_v2"));
    assert!(pos(&c, "cuMemAlloc_v2") < pos(&c, "cuPointerSetAttribute"));
    assert!(pos(&c, "cuMemFree_v2") < pos(&c, "cuDevicePrimaryCtxRelease_v2"));
    assert_eq!(c.last().unwrap(), "cuDevicePrimaryCtxRelease_v2", "{c:?}");
    let log = std::fs::read_to_string(&f.log).unwrap();
    assert!(
        log.contains("cuPointerSetAttribute attr=6 value=1"),
        "SYNC_MEMOPS: {log}"
    );
    assert!(!log.contains("cuMemGetHandleForAddressRange"), "{log}");
}

#[test]
fn every_injected_error_gives_its_sentence() {
    // (entry point, CUresult, driver's name, words of the fix, dma-buf?)
    let cases: &[(&str, i32, &str, &str, bool)] = &[
        ("cuInit", 100, "CUDA_ERROR_NO_DEVICE", "nvidia-smi", false),
        ("cuInit", 34, "CUDA_ERROR_STUB_LIBRARY", "stub", false),
        (
            "cuInit",
            803,
            "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH",
            "loaded NVIDIA kernel module are different versions",
            false,
        ),
        (
            "cuDeviceGetCount",
            999,
            "CUDA_ERROR_UNKNOWN",
            "dmesg",
            false,
        ),
        (
            "cuDeviceGet",
            101,
            "CUDA_ERROR_INVALID_DEVICE",
            "nvidia-smi -L",
            false,
        ),
        ("cuDeviceGetName", 999, "CUDA_ERROR_UNKNOWN", "dmesg", false),
        (
            "cuDeviceGetPCIBusId",
            999,
            "CUDA_ERROR_UNKNOWN",
            "dmesg",
            false,
        ),
        (
            "cuDevicePrimaryCtxRetain",
            2,
            "CUDA_ERROR_OUT_OF_MEMORY",
            "lower -s",
            false,
        ),
        ("cuCtxSetCurrent", 999, "CUDA_ERROR_UNKNOWN", "dmesg", false),
        (
            "cuMemAlloc_v2",
            2,
            "CUDA_ERROR_OUT_OF_MEMORY",
            "lower -s",
            false,
        ),
        (
            "cuPointerSetAttribute",
            1,
            "CUDA_ERROR_INVALID_VALUE",
            "dmesg",
            false,
        ),
        (
            "cuMemGetHandleForAddressRange",
            801,
            "CUDA_ERROR_NOT_SUPPORTED",
            "drop --use_cuda_dmabuf",
            true,
        ),
    ];
    for &(sym, code, name, fix, dmabuf) in cases {
        let fail = format!("{sym}:{code}");
        let f = Fake::new("inject", &[("FAKE_CUDA_FAIL", &fail)]);
        let e = f
            .open(GpuSelect::Index(0))
            .and_then(|c| c.alloc(4096, dmabuf, false).map(|_| ()))
            .expect_err(&fail);
        assert!(e.contains(sym), "{fail}: {e}");
        assert!(e.contains(&format!("{name} ({code})")), "{fail}: {e}");
        assert!(e.contains(fix), "{fail}: {e}");
        assert!(!e.contains('\n'), "one sentence: {e}");
    }
    for (sym, out) in [("cuMemcpyHtoD_v2", true), ("cuMemcpyDtoH_v2", false)] {
        let fail = format!("{sym}:999");
        let f = Fake::new("inject_copy", &[("FAKE_CUDA_FAIL", &fail)]);
        let buf = f.page();
        let e = if out {
            buf.copy_from_host(0, &[1, 2, 3]).unwrap_err()
        } else {
            buf.copy_to_host(0, &mut [0; 3]).unwrap_err()
        };
        assert!(
            e.contains(sym) && e.contains("CUDA_ERROR_UNKNOWN (999)"),
            "{e}"
        );
    }
}

#[test]
fn missing_library_and_missing_symbol_are_sentences() {
    let e = Cuda::open("libcuda-not-here.so.1", &GpuSelect::Index(0))
        .err()
        .unwrap();
    assert!(
        e.contains("cannot load the CUDA driver library libcuda-not-here.so.1"),
        "{e}"
    );
    assert!(e.contains("install it, or drop the CUDA flags"), "{e}");
    let _g = ENV.lock().unwrap_or_else(|e| e.into_inner());
    let lib = common::fake_cuda::fake_cuda_dir(true).join("libcuda.so.1");
    let e = Cuda::open(lib.to_str().unwrap(), &GpuSelect::Index(0))
        .err()
        .unwrap();
    assert!(e.contains("has no cuMemAlloc_v2"), "{e}");
    assert!(e.contains("install a current NVIDIA driver"), "{e}");
}

#[test]
fn device_selection_by_index_and_bus_id() {
    let f = Fake::new("select", &[("FAKE_CUDA_DEVICES", "2")]);
    let e = f.open(GpuSelect::Index(2)).err().unwrap();
    assert!(
        e.contains("--use_cuda=2: this host has 2 CUDA device(s), numbered 0..1"),
        "{e}"
    );
    let c = f.open(GpuSelect::BusId("0000:1c:00.0".into())).unwrap();
    assert_eq!(c.bus_id, "0000:1c:00.0");
    assert!(c.describe().contains("fake GPU 1"), "{}", c.describe());
    drop(c);
    let e = f
        .open(GpuSelect::BusId("0000:99:01.0".into()))
        .err()
        .unwrap();
    assert!(
        e.contains("cuDeviceGetByPCIBusId failed with CUDA_ERROR_INVALID_DEVICE"),
        "{e}"
    );
    drop(f);
    let f = Fake::new("none", &[("FAKE_CUDA_DEVICES", "0")]);
    let e = f.open(GpuSelect::Index(0)).err().unwrap();
    assert!(
        e.contains("there are no available device(s) that support CUDA"),
        "{e}"
    );
}

#[test]
fn dmabuf_export_gives_fd_and_offset() {
    let f = Fake::new("dmabuf", &[("FAKE_CUDA_DRIVER_VERSION", "12080")]);
    let cuda = f.open(GpuSelect::Index(0)).unwrap();
    assert_eq!(cuda.caps.dmabuf, Some(true));
    let buf = cuda.alloc(4096, true, true).unwrap();
    let d = buf.dmabuf().unwrap();
    assert!(d.fd >= 0);
    assert_eq!(d.offset, 0, "64 KiB-aligned, so at the start of the export");
    let c = f.calls();
    assert!(pos(&c, "cuPointerSetAttribute") < pos(&c, "cuMemGetHandleForAddressRange"));
    drop((buf, cuda, f));
    let f2 = Fake::new("nodmabuf", &[("FAKE_CUDA_DMABUF", "0")]);
    assert_eq!(
        f2.open(GpuSelect::Index(0)).unwrap().caps.dmabuf,
        Some(false)
    );
}

/// Can the CPU (through the kernel's copy_from_user) read `va`? A write(2)
/// of the range to a pipe fails with EFAULT where the pages are PROT_NONE.
fn cpu_can_read(va: u64, len: usize) -> bool {
    let mut fds = [0; 2];
    // SAFETY: valid out-array.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
    // SAFETY: write(2) only reads `va..va+len`, and reports EFAULT instead of
    // faulting where it is not readable.
    let n = unsafe { libc::write(fds[1], va as *const libc::c_void, len) };
    // SAFETY: fds from pipe().
    unsafe {
        libc::close(fds[0]);
        libc::close(fds[1]);
    }
    n == len as isize
}

#[test]
fn protect_mode_makes_device_memory_unreadable_by_the_cpu() {
    let f = Fake::new("protect", &[("FAKE_CUDA_PROTECT", "1")]);
    let buf = f.page();
    assert!(
        cpu_can_read(buf.va(), 64),
        "open until the first copy (registration pins it)"
    );
    buf.copy_from_host(0, &[7; 64]).unwrap();
    assert!(!cpu_can_read(buf.va(), 64), "PROT_NONE after the copy");
    let mut back = [0u8; 64];
    buf.copy_to_host(0, &mut back).unwrap();
    assert_eq!(back, [7; 64], "copies still work");
    assert!(!cpu_can_read(buf.va(), 64));
}

#[test]
fn the_driver_is_loaded_and_initialised_once_and_never_unloaded() {
    let f = Fake::new("once", &[("FAKE_CUDA_DEVICES", "2")]);
    drop(f.open(GpuSelect::Index(0)).unwrap());
    let c = std::ffi::CString::new(f.lib.as_str()).unwrap();
    // SAFETY: RTLD_NOLOAD only looks the library up (a reference if it is mapped).
    let h = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_NOW | libc::RTLD_NOLOAD) };
    assert!(
        !h.is_null(),
        "libcuda was unloaded when its last GPU closed"
    );
    // SAFETY: drops the reference the NOLOAD lookup took.
    unsafe { libc::dlclose(h) };
    drop(f.open(GpuSelect::Index(1)).unwrap());
    drop(f.open(GpuSelect::BusId("0000:1b:00.0".into())).unwrap());
    let calls = f.calls();
    let n = |name: &str| calls.iter().filter(|c| *c == name).count();
    assert_eq!(n("fake_cuda_loaded"), 1, "{calls:?}");
    assert_eq!(n("fake_cuda_unloaded"), 0, "{calls:?}");
    assert_eq!(n("cuInit"), 1, "three opens, one cuInit: {calls:?}");
    drop(f);
    // A failed init stays failed (as the driver's does): the next open says so too.
    let f = Fake::new("init_fails", &[("FAKE_CUDA_FAIL", "cuInit:100")]);
    let e1 = f.open(GpuSelect::Index(0)).err().unwrap();
    std::env::remove_var("FAKE_CUDA_FAIL");
    let e2 = f.open(GpuSelect::Index(0)).err().unwrap();
    assert_eq!(e1, e2);
    assert!(
        e1.contains("CUDA GPU 0: cuInit failed with CUDA_ERROR_NO_DEVICE"),
        "{e1}"
    );
    assert_eq!(f.calls().iter().filter(|c| *c == "cuInit").count(), 1);
}

#[test]
fn pcie_mapping_needs_a_12_8_driver() {
    let f = Fake::new("pcie_old", &[]);
    let cuda = f.open(GpuSelect::Index(0)).unwrap();
    assert_eq!(cuda.caps.driver_version, Some(12040));
    let e = cuda.alloc(4096, true, true).err().unwrap();
    assert!(
        e.contains("--use_cuda_pcie_mapping needs a CUDA 12.8 driver")
            && e.contains("has CUDA 12.4 (12040)"),
        "{e}"
    );
    assert!(
        cuda.alloc(4096, true, false).is_ok(),
        "without the mapping type it exports"
    );
    drop((cuda, f));
    let f = Fake::new("pcie_new", &[("FAKE_CUDA_DRIVER_VERSION", "12080")]);
    let cuda = f.open(GpuSelect::Index(0)).unwrap();
    assert!(cuda.alloc(4096, true, true).unwrap().dmabuf().is_some());
}

#[test]
fn an_integrated_gpu_is_refused_with_the_reason() {
    let f = Fake::new("integrated", &[("FAKE_CUDA_INTEGRATED", "1")]);
    let e = f.open(GpuSelect::Index(0)).err().unwrap();
    assert!(
        e.contains("is an integrated GPU (CU_DEVICE_ATTRIBUTE_INTEGRATED)")
            && e.contains("drop the CUDA flags to test host memory"),
        "{e}"
    );
    assert!(
        !f.calls()
            .iter()
            .any(|c| c == "cuMemAlloc_v2" || c == "cuDevicePrimaryCtxRetain"),
        "refused before any context or allocation"
    );
}

#[test]
fn no_flush_where_the_gpu_has_no_flush_option() {
    let f = Fake::new("noflush", &[("FAKE_CUDA_FLUSH", "0")]);
    let buf = f.page();
    buf.copy_to_host(0, &mut [0; 16]).unwrap();
    let c = f.calls();
    assert!(c.iter().any(|c| c == "cuMemcpyDtoH_v2"), "{c:?}");
    assert!(
        !c.iter().any(|c| c == "cuFlushGPUDirectRDMAWrites"),
        "{c:?}"
    );
}
