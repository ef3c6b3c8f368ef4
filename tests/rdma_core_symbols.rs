//! The binary starts on rdma-core 28 (Ubuntu 20.04, early RHEL 8): every libibverbs,
//! libmlx5 and librdmacm symbol it links carries a symbol version rdma-core 28 exports.
//! Newer verbs are looked up at run time (`verbs::rdma_core`), never linked; a link-time
//! reference to one would make the loader refuse to start rdmaperf on such a host.

use std::process::Command;

/// The newest symbol version of each library in rdma-core 28 (libibverbs.map.in,
/// providers/mlx5/libmlx5.map, librdmacm/librdmacm.map at tag v28.0).
const V28: &[(&str, u32)] = &[("IBVERBS_1.", 8), ("MLX5_1.", 12), ("RDMACM_1.", 2)];

#[test]
fn every_linked_rdma_symbol_is_in_rdma_core_28() {
    let bin = env!("CARGO_BIN_EXE_rdmaperf");
    let out = match Command::new("nm")
        .args(["-D", "--with-symbol-versions", bin])
        .output()
    {
        Ok(o) if o.status.success() => o,
        other => {
            println!("SKIPPED: nm -D --with-symbol-versions failed ({other:?}; binutils needed)");
            return;
        }
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let mut seen = 0;
    let mut newer = Vec::new();
    for sym in text.split_whitespace() {
        let Some((name, ver)) = sym.split_once('@') else {
            continue;
        };
        let ver = ver.trim_start_matches('@');
        for (prefix, max) in V28 {
            let Some(minor) = ver.strip_prefix(prefix) else {
                continue;
            };
            seen += 1;
            let minor: u32 = minor.parse().unwrap_or(u32::MAX);
            if minor > *max {
                newer.push(format!("{name}@{ver}"));
            }
        }
    }
    assert!(
        seen > 20,
        "too few versioned rdma-core symbols found:\n{text}"
    );
    assert!(
        newer.is_empty(),
        "linked symbols newer than rdma-core 28 (look them up in verbs::rdma_core instead): {newer:?}"
    );
}
