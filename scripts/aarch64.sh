#!/usr/bin/env bash
# aarch64 (Grace hosts, BlueField DPUs): cross-build and test under qemu-user, as CI does
# (scripts/test.sh runs it as its "aarch64" step).
#
#   scripts/aarch64.sh          # after scripts/setup.sh (cross gcc, qemu-user, arm64 rdma-core)
#   scripts/aarch64.sh build    # only what compiles (0, 1's builds, 3's test binaries)
#   scripts/aarch64.sh run      # only what runs (1's -V, 2, 3), building whatever is missing
#
# scripts/test.sh runs `build` beside the VM test step (at idle priority: the VM's TCG threads
# come first) and `run` after it, at normal priority, so that no test's timing competes with it.
#
# 0. clippy for the target;
# 1. the release binary for aarch64-unknown-linux-gnu, linked against the arm64 rdma-core,
#    and run once under qemu-aarch64 (`-V`);
# 2. the BlueFlame copy read back from both release binaries (tests/disasm_bf.rs);
# 3. under qemu-aarch64: the library's unit tests, the model tests (every direct test the x86
#    suite runs on the queue model), selfcheck on the model, and the benches in test mode (one run each, debug build).
# The `mpi` feature is left out: Open MPI is installed for the host architecture only.
set -uo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO" || exit 1
TARGET=aarch64-unknown-linux-gnu
FEATURES=model,heatmap
# Every test file that drives the direct path on the queue model (no device, no VM).
MODEL_TESTS=(mlx5_seg mlx5_model direct_bw_model direct_env_model direct_lat_model
             direct_setup_model direct_tool_model direct_ud_model selfcheck_model threads_model
             no_alloc direct_recv_model direct_rdma_lat_model)

die() { echo "aarch64.sh: error: $*" >&2; exit 1; }

if ! rustc --print target-libdir --target "$TARGET" >/dev/null 2>&1 \
    || [ ! -d "$(rustc --print target-libdir --target "$TARGET")" ]; then
    command -v rustup >/dev/null \
        || die "Rust's std for $TARGET is missing and there is no rustup to add it: install rustup (https://rustup.rs) or the target's std by hand"
    rustup target add "$TARGET" \
        || die "rustup target add $TARGET failed (the target's std cannot be had here): the aarch64 build and its tests cannot run"
fi
for t in aarch64-linux-gnu-gcc qemu-aarch64 aarch64-linux-gnu-objdump objdump; do
    command -v "$t" >/dev/null || die "$t is missing: run scripts/setup.sh as root (it installs the cross toolchain)"
done
[ -f /usr/lib/aarch64-linux-gnu/pkgconfig/libibverbs.pc ] \
    || die "arm64 rdma-core is missing: run scripts/setup.sh as root (dpkg --add-architecture arm64; libibverbs-dev:arm64 …)"

phase=${1:-all}
case $phase in all|build|run) ;; *) die "unknown phase '$phase' (all, build or run)";; esac
rc=0
run() { echo "+ $*"; "$@" || { echo "aarch64.sh: FAILED: $*" >&2; rc=1; }; }
tests=()
for t in "${MODEL_TESTS[@]}"; do tests+=(--test "$t"); done

if [ "$phase" != run ]; then
    # Lints that differ per target (c_char is u8 on aarch64, cfg'd code).
    run cargo clippy --target "$TARGET" --all-targets --features "$FEATURES" -- -D warnings \
        -D clippy::undocumented_unsafe_blocks -D unsafe_op_in_unsafe_fn
    run cargo build --release --bin rdmaperf
    run cargo build --release --bin rdmaperf --target "$TARGET"
    run cargo test --no-run --target "$TARGET" --features "$FEATURES" --lib "${tests[@]}" --benches
fi
[ "$phase" = build ] && exit $rc

bin=target/$TARGET/release/rdmaperf
if [ -x "$bin" ]; then
    readelf -h "$bin" 2>/dev/null | grep -q 'Machine:.*AArch64' || { echo "aarch64.sh: $bin is not an aarch64 ELF" >&2; rc=1; }
    run qemu-aarch64 "$bin" -V
fi
# --all-features: the debug build test.sh's build step left (nothing to compile but this file).
run env RDMAPERF_REQUIRE_DISASM=1 cargo test --all-features --test disasm_bf -- --nocapture

# The benches run once each as tests (criterion's test mode under `cargo test --benches`), in
# the same debug build as the tests: an optimised aarch64 build of the crate and criterion
# would cost minutes and check nothing more (test mode times nothing), as on x86-64.
run cargo test --target "$TARGET" --features "$FEATURES" --lib "${tests[@]}" --benches
exit $rc
