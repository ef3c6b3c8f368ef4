//! `rdmaperf --version`: what a bug report needs besides the version number — the commit,
//! the cargo features, the rdma-core release the build bound and the one this host runs,
//! and the CPU target (x86-64-v2 decides whether the direct path's segments are built with
//! byte shuffles). `-V` stays clap's one line.

use std::sync::OnceLock;

use crate::verbs::rdma_core;

/// The long version text clap prints after "rdmaperf " (made once: it dates the loaded
/// libibverbs).
pub fn long() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(text)
}

fn text() -> String {
    let rt = rdma_core::runs_on();
    let file = rt.file.as_deref().unwrap_or("file not known");
    format!(
        "{}\ncommit: {}\nfeatures: {}\nrdma-core built against: {}\nrdma-core runs on: rdma-core {} ({file})\ncpu target: {}",
        env!("CARGO_PKG_VERSION"),
        env!("RDMAPERF_GIT_COMMIT"),
        features(),
        rdma_core::built_against(),
        rt.release,
        cpu_target(),
    )
}

/// The cargo features this binary was built with, or "none".
fn features() -> String {
    let on: Vec<&str> = [
        ("heatmap", cfg!(feature = "heatmap")),
        ("model", cfg!(feature = "model")),
        ("mpi", cfg!(feature = "mpi")),
    ]
    .iter()
    .filter(|f| f.1)
    .map(|f| f.0)
    .collect();
    if on.is_empty() {
        "none".to_string()
    } else {
        on.join(", ")
    }
}

/// What the build assumed (the target features it was compiled with) and whether this CPU
/// has them.
#[cfg(target_arch = "x86_64")]
fn cpu_target() -> String {
    let built = cfg!(all(
        target_feature = "ssse3",
        target_feature = "sse4.1",
        target_feature = "sse4.2",
        target_feature = "popcnt"
    ));
    let here = is_x86_feature_detected!("ssse3")
        && is_x86_feature_detected!("sse4.1")
        && is_x86_feature_detected!("sse4.2")
        && is_x86_feature_detected!("popcnt");
    let build = if built {
        "x86-64-v2 (SSSE3 byte shuffles on the direct path)"
    } else {
        "x86-64 baseline, not x86-64-v2 (scalar byte swaps on the direct path)"
    };
    let cpu = if here { "has" } else { "lacks" };
    format!("{build}; this CPU {cpu} x86-64-v2")
}

#[cfg(not(target_arch = "x86_64"))]
fn cpu_target() -> String {
    format!("{} (x86-64-v2 does not apply)", std::env::consts::ARCH)
}
