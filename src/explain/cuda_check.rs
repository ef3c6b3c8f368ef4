//! `rdmaperf doctor --cuda`: the CUDA side of a GPUDirect host, checked by doing what a GPU run
//! does, without a NIC: load the driver (`libcuda.so.1`, at run time), and for each GPU open its
//! primary context, allocate device memory, export it as a dma-buf where the GPU says it can,
//! and free it. Each step that fails is a finding naming the call and the fix (the loader's own
//! sentence). `scripts/gpu-check.sh` runs it on a GPU host.

use super::rules::Check;
use crate::gpu::cuda::{device_count, Cuda};
use crate::gpu::GpuSelect;
use crate::verbs::DeviceMemory;

/// What one allocation is: 2 MiB, a multiple of the 64 KiB GPU page.
const PROBE_LEN: usize = 2 << 20;

/// The report's text and its findings, for the CUDA driver `lib`.
pub fn report(lib: &str) -> (String, Vec<Check>) {
    let mut s = String::from("CUDA (doctor --cuda: init, allocate, export, free)\n");
    let n = match device_count(lib) {
        Ok(n) => n,
        Err(e) => return (s, vec![failed("cuda_init", e)]),
    };
    s += &format!("  {n} CUDA device(s)\n");
    if n == 0 {
        let c = Check {
            code: "cuda_no_device",
            what: "the CUDA driver loads but shows no device".into(),
            fix: "check `nvidia-smi -L` and CUDA_VISIBLE_DEVICES".into(),
        };
        return (s, vec![c]);
    }
    let mut checks = Vec::new();
    for i in 0..n {
        match device(lib, i) {
            Ok(line) => s += &line,
            Err(e) => checks.push(failed("cuda_device", e)),
        }
    }
    (s, checks)
}

/// GPU `i`: opened, described, allocated (and exported where it can be), freed.
fn device(lib: &str, i: u32) -> Result<String, String> {
    let cuda = Cuda::open(lib, &GpuSelect::Index(i))?;
    let mut line = format!("  GPU {i}: {}", cuda.describe());
    line += &format!(
        ", GPUDirect RDMA {}, dma-buf {}, driver {}\n",
        yes_no(cuda.caps.gdr),
        yes_no(cuda.caps.dmabuf),
        cuda.caps
            .driver_version
            .map_or("version unknown".into(), |v| format!(
                "CUDA {}.{}",
                v / 1000,
                v % 1000 / 10
            ))
    );
    let plain = cuda.alloc(PROBE_LEN, false, false)?;
    line += &format!(
        "    cuMemAlloc_v2: {} bytes at {:#x}; freed\n",
        plain.len(),
        plain.va()
    );
    drop(plain);
    if cuda.caps.dmabuf == Some(true) {
        let b = cuda.alloc(PROBE_LEN, true, false)?;
        let d = b.dmabuf().map_or("no fd".into(), |d| {
            format!("fd {} offset {}", d.fd, d.offset)
        });
        line += &format!("    cuMemGetHandleForAddressRange (dma-buf): {d}; closed and freed\n");
    }
    Ok(line)
}

fn yes_no(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "yes",
        Some(false) => "no",
        None => "unknown",
    }
}

fn failed(code: &'static str, e: String) -> Check {
    Check {
        code,
        what: e,
        fix: "see the sentence above; on a host without an NVIDIA GPU drop --cuda".into(),
    }
}
