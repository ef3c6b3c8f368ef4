//! The GPU memory options of perftest master (`--use_cuda`, `--use_cuda_bus_id`,
//! `--use_cuda_dmabuf`, `--use_cuda_pcie_mapping`, `--cuda_mem_type`) with
//! its rules: the default inline size forced to 0 (the CPU would copy the
//! payload out of GPU memory), an explicit `-I` refused where a message
//! would be inlined (size ≤ inline size), write-lat refused (its ping-pong
//! polls the buffer with the CPU), `--use_cuda_pcie_mapping` refused without
//! `--use_cuda_dmabuf`, `--use_cuda_bus_id` winning over `--use_cuda`, and
//! libmlx5's scatter-to-CQE turned off for SENDs of at most 64 bytes.
//!
//! Where rdmaperf differs on purpose: `--use_cuda_dmabuf` may come before
//! `--use_cuda` (perftest's parser needs it after); an explicit `-I` with
//! `-a` is refused (perftest checks only the largest size there and would
//! inline the small ones from GPU memory). The memory itself: `crate::gpu`,
//! `tool::setup::gpu_mem`.

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
    /// A SEND test with a message of at most 64 bytes (or `-a`): libmlx5's
    /// scatter-to-CQE must be off, or the receive's payload arrives in the
    /// CQE and libmlx5 copies it to the GPU address with the CPU. The tool
    /// sets `MLX5_SCATTER_TO_CQE=0` before creating any QP, as perftest does
    /// (the direct path's QPs have `MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE`).
    pub no_scatter_to_cqe: bool,
}

/// perftest's line (after a result line) when it sets `MLX5_SCATTER_TO_CQE=0`.
pub const SCATTER_TO_CQE_OFF: &str = "Scatter2CQE (size <= 64) is not supported with device \
memory send tests: setting MLX5_SCATTER_TO_CQE=0";

/// perftest's `force_dependecies`: device memory, the SEND verb, and a
/// message of at most 64 bytes (the largest payload a 128-byte CQE holds),
/// or `-a` (whose sizes start at 2).
fn scatter_to_cqe_off(tool: Tool, min_size: u64, all_sizes: bool) -> bool {
    tool.verb == Verb::Send && (min_size <= 64 || all_sizes)
}

const NEEDS_GPU: &str = "needs --use_cuda=<idx> or --use_cuda_bus_id=<BDF> (it describes how \
GPU memory is used); add one of them or drop it";

/// The options alone (no other parameter needed); `notices` gets the line
/// saying which GPU flag was ignored.
pub fn gpu_opts(g: &GpuArgs, notices: &mut Vec<String>) -> Result<Option<GpuOpts>, String> {
    let select = match (g.use_cuda, &g.use_cuda_bus_id) {
        // perftest keeps both and its cuda_memory_init looks the device up
        // by the bus id when one is given: the bus id wins.
        (Some(i), Some(b)) => {
            notices.push(format!(
                "--use_cuda_bus_id={b} picks the GPU; --use_cuda={i} is ignored (as in perftest)"
            ));
            Some(GpuSelect::BusId(b.clone()))
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
            "--use_cuda_pcie_mapping needs --use_cuda_dmabuf (perftest master: \"CUDA PCIe \
             mapping requires DMA-BUF\"): it picks how the dma-buf is mapped; add \
             --use_cuda_dmabuf"
                .into(),
        );
    }
    Ok(Some(GpuOpts {
        select,
        dmabuf: g.use_cuda_dmabuf,
        pcie_mapping: g.use_cuda_pcie_mapping,
        no_scatter_to_cqe: false,
    }))
}

/// Why this tool and these memory options cannot run on GPU memory
/// (`inline`: an explicit -I would inline a message).
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
            "-I: a message no larger than the inline size is copied out of the buffer by the \
             CPU, which GPU memory forbids (perftest refuses it too); drop -I, or give a size \
             (-s, not -a) above it",
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

/// The sizes of a run: the smallest message and whether `-a` sweeps them.
#[derive(Clone, Copy, Debug)]
pub struct RunSizes {
    pub min: u64,
    pub all: bool,
}

/// The GPU options of a resolved run (`inline_size`, `notices` and `mem`
/// are the resolved parameters'): the rules above, the default inline size
/// forced to 0 with perftest's notice (an explicit `-I` below every size
/// stays, as in perftest: nothing is inlined), and scatter-to-CQE.
pub fn apply(
    g: &GpuArgs,
    tool: Tool,
    (inline_given, inline_size): (bool, &mut u32),
    sizes: RunSizes,
    mem: &MemOpts,
    notices: &mut Vec<String>,
) -> Result<Option<GpuOpts>, String> {
    let Some(mut opts) = gpu_opts(g, notices)? else {
        return Ok(None);
    };
    let inlines = *inline_size > 0 && (sizes.all || sizes.min <= u64::from(*inline_size));
    if let Some(why) = refusal(tool, inline_given && inlines, mem) {
        return Err(format!("--use_cuda: {why}"));
    }
    // perftest checks scatter-to-CQE before it resolves the inline size.
    if scatter_to_cqe_off(tool, sizes.min, sizes.all) {
        opts.no_scatter_to_cqe = true;
        notices.push(SCATTER_TO_CQE_OFF.into());
    }
    if *inline_size > 0 && !inline_given {
        *inline_size = 0;
        notices.push(
            "Device memory tests run without inline messages (as perftest): inline size set to 0"
                .into(),
        );
    }
    Ok(Some(opts))
}
