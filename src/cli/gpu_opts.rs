//! The GPU memory options of perftest master (`--use_cuda`, `--use_cuda_bus_id`,
//! `--use_cuda_dmabuf`, `--use_cuda_pcie_mapping`, `--cuda_mem_type`) with
//! its rules: inline forced to 0 (the CPU would copy the payload out of GPU
//! memory), an explicit `-I` refused, write-lat refused (its ping-pong polls
//! the buffer with the CPU). Unlike perftest, `--use_cuda_dmabuf` may come
//! before `--use_cuda`. The memory itself: `crate::gpu`, `tool::setup::gpu_mem`.

pub use super::gpu_args::GpuArgs;
use super::kinds::{Kind, Tool, Verb};
use super::mem_opts::MemOpts;
use crate::gpu::GpuSelect;

/// The GPU memory a run uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GpuOpts {
    pub select: GpuSelect,
    /// `--use_cuda_dmabuf`.
    pub dmabuf: bool,
    /// `--use_cuda_pcie_mapping`.
    pub pcie_mapping: bool,
}

const NEEDS_GPU: &str = "needs --use_cuda=<idx> or --use_cuda_bus_id=<BDF> (it describes how \
GPU memory is used); add one of them or drop it";

/// The options alone (no other parameter needed).
pub fn gpu_opts(g: &GpuArgs) -> Result<Option<GpuOpts>, String> {
    let select = match (g.use_cuda, &g.use_cuda_bus_id) {
        (Some(_), Some(_)) => {
            return Err("--use_cuda and --use_cuda_bus_id both pick the GPU; give one".into())
        }
        (Some(i), None) => Some(GpuSelect::Index(i)),
        (None, Some(b)) => Some(GpuSelect::BusId(b.clone())),
        (None, None) => None,
    };
    match g.cuda_mem_type {
        None | Some(0) => {}
        Some(t @ (1 | 4)) => {
            let what = if t == 1 { "managed" } else { "malloc" };
            return Err(format!(
                "--cuda_mem_type={t} ({what}) needs --odp (perftest's rule): that memory is paged \
                 in by On-Demand Paging, which rdmaperf does not run with GPU memory on any \
                 device; use --cuda_mem_type=0 (device memory)"
            ));
        }
        Some(t @ (2 | 3)) => {
            return Err(format!(
                "--cuda_mem_type={t} is refused: perftest rejects host-allocated and \
                 host-registered CUDA memory too; use --cuda_mem_type=0 (device memory)"
            ))
        }
        Some(t) => {
            return Err(format!(
                "--cuda_mem_type={t}: the types are 0 (device), 1 (managed), 4 (malloc); use 0"
            ))
        }
    }
    let Some(select) = select else {
        for (given, flag) in [
            (g.use_cuda_dmabuf, "--use_cuda_dmabuf"),
            (g.use_cuda_pcie_mapping, "--use_cuda_pcie_mapping"),
            (g.cuda_mem_type.is_some(), "--cuda_mem_type"),
        ] {
            if given {
                return Err(format!("{flag} {NEEDS_GPU}"));
            }
        }
        return Ok(None);
    };
    if g.use_cuda_pcie_mapping && !g.use_cuda_dmabuf {
        return Err(
            "--use_cuda_pcie_mapping needs --use_cuda_dmabuf (perftest's rule): it picks \
                    how the dma-buf is mapped; add --use_cuda_dmabuf"
                .into(),
        );
    }
    Ok(Some(GpuOpts {
        select,
        dmabuf: g.use_cuda_dmabuf,
        pcie_mapping: g.use_cuda_pcie_mapping,
    }))
}

/// Why this tool and these memory options cannot run on GPU memory
/// (`inline`: an explicit -I above 0).
fn refusal(tool: Tool, inline: bool, mem: &MemOpts) -> Option<&'static str> {
    if tool.verb == Verb::Write && tool.kind == Kind::Lat {
        return Some(
            "write-lat's ping-pong polls the buffer's last byte with the CPU, which GPU memory \
             forbids (perftest needs --write_with_imm there, which rdmaperf's write-lat does not \
             implement yet); use send-lat or read-lat, or write-bw",
        );
    }
    if inline {
        return Some(
            "-I: inline sends copy the payload out of the buffer with the CPU, which GPU memory \
             forbids (perftest refuses it too); drop -I",
        );
    }
    if mem.hugepages || mem.mmap.is_some() {
        return Some(
            "the buffer is either GPU memory or --use_hugepages/--mmap (perftest: \"Can't use \
             multiple memory types\"); give one of them",
        );
    }
    if mem.odp {
        return Some(
            "--odp with GPU device memory: ODP pages host memory, not a GPU's; drop --odp",
        );
    }
    None
}

/// The GPU options of a resolved run (`inline_size`, `notices` and `mem`
/// are the resolved parameters'): the rules above, and inline forced to 0
/// with perftest's notice.
pub fn apply(
    g: &GpuArgs,
    tool: Tool,
    (inline_given, inline_size): (bool, &mut u32),
    mem: &MemOpts,
    notices: &mut Vec<String>,
) -> Result<Option<GpuOpts>, String> {
    let Some(opts) = gpu_opts(g)? else {
        return Ok(None);
    };
    if let Some(why) = refusal(tool, inline_given && *inline_size > 0, mem) {
        return Err(format!("--use_cuda: {why}"));
    }
    if *inline_size > 0 {
        *inline_size = 0;
        notices.push(
            "Device memory tests run without inline messages (as perftest): inline size set to 0"
                .into(),
        );
    }
    Ok(Some(opts))
}
