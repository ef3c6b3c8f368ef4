#!/usr/bin/env bash
# GPU check: on a host with an NVIDIA GPU, prints the GPUs with their PCI bus ids and
# each GPU's PCIe topology class (PIX/PXB/PHB/NODE/SYS) against every RDMA device, with what the host
# offers for GPUDirect (peer memory, dma-buf MRs, IOMMU mode) — `rdmaperf doctor --probe-dmabuf`,
# read from sysfs, no CUDA needed — and nvidia-smi's own `topo -m` beside it when present.
# Elsewhere it prints `SKIPPED: <reason>` and exits 0.
#
#   scripts/gpu-check.sh            # uses $RDMAPERF_BIN, else target/{release,debug}/rdmaperf, else builds
#
# Environment: RDMAPERF_BIN (the binary), RDMAPERF_SYSFS_ROOT (a copied sysfs tree to read instead
# of /, e.g. tests/data/sysfs/gpu-near; the tests use it).
# Exit status: 0 when it printed its report or skipped (doctor's findings are printed, not fatal);
# 1 when no rdmaperf binary could be found or built, or it refused the doctor command.
# Then, where libcuda.so.1 loads, `rdmaperf doctor --cuda`: CUDA init, each GPU's name and bus id,
# an allocation, a dma-buf export where the GPU can, and the frees. Last, on each RDMA device, GPU
# 0's memory registered and a short loopback write-bw and send-bw at 2 and 64 bytes (2 bytes is
# where a receive can land in the CQE, the scatter-to-CQE case); it ends with what it checked.
# Exit status 1 also when one of those runs failed. Under RDMAPERF_SYSFS_ROOT (a copied tree, no
# real device) the runs print SKIPPED with that reason.
#
#   RDMAPERF_GPU_CHECK_ITERS   iterations per run (default 2000)
set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
ROOT=${RDMAPERF_SYSFS_ROOT:-/}
say() { echo "gpu-check: $*"; }

# NVIDIA display/3D PCI functions in sysfs (vendor 0x10de, class 0x03xxxx).
sysfs_gpus() {
    local d
    for d in "$ROOT"/sys/bus/pci/devices/*; do
        [ -r "$d/vendor" ] && [ -r "$d/class" ] || continue
        if [ "$(cat "$d/vendor")" = 0x10de ] && case "$(cat "$d/class")" in 0x03*) true ;; *) false ;; esac; then
            basename "$d"
        fi
    done
}

evidence=()
command -v nvidia-smi > /dev/null 2>&1 && nvidia-smi -L > /dev/null 2>&1 && evidence+=("nvidia-smi -L")
compgen -G "/proc/driver/nvidia/gpus/*" > /dev/null && evidence+=("/proc/driver/nvidia/gpus")
ldconfig -p 2> /dev/null | grep -q 'libcuda\.so\.1 ' && evidence+=("libcuda.so.1")
GPUS=$(sysfs_gpus)
[ -n "$GPUS" ] && evidence+=("NVIDIA PCI display/3D function in ${ROOT%/}/sys")
if [ ${#evidence[@]} -eq 0 ]; then
    echo "SKIPPED: no NVIDIA GPU on this host (no nvidia-smi GPU, no /proc/driver/nvidia/gpus, no libcuda.so.1, no NVIDIA display/3D PCI function in sysfs)"
    exit 0
fi
if [ -z "$GPUS" ]; then
    echo "SKIPPED: ${evidence[*]} present, but no NVIDIA display/3D PCI function in ${ROOT%/}/sys/bus/pci/devices (a container without the GPU's PCI function?)"
    exit 0
fi

BIN=${RDMAPERF_BIN:-}
if [ -z "$BIN" ]; then
    # The newer of the release and debug builds.
    for b in "$REPO/target/release/rdmaperf" "$REPO/target/debug/rdmaperf"; do
        [ -x "$b" ] && { [ -z "$BIN" ] || [ "$b" -nt "$BIN" ]; } && BIN=$b
    done
fi
if [ -z "$BIN" ]; then
    say "building rdmaperf (cargo build --release)"
    (cd "$REPO" && cargo build --release) || { say "error: no rdmaperf binary and the build failed"; exit 1; }
    BIN=$REPO/target/release/rdmaperf
fi

say "found: ${evidence[*]}"
echo "== GPUs (PCI bus ids from sysfs)"
echo "$GPUS"
if command -v nvidia-smi > /dev/null 2>&1; then
    echo "== nvidia-smi: index, name, bus id"
    nvidia-smi --query-gpu=index,name,pci.bus_id --format=csv,noheader 2>&1
fi
echo "== topology against every RDMA device (rdmaperf doctor --probe-dmabuf)"
args=(doctor --probe-dmabuf)
[ "$ROOT" != / ] && args+=(--sysfs-root "$ROOT")
"$BIN" "${args[@]}"
rc=$?
if [ "$rc" = 2 ]; then
    say "error: $BIN refused the doctor command above (an rdmaperf without the GPU topology? rebuild it)"
    exit 1
fi
echo "(doctor exit status $rc: 1 = findings above)"
echo "== CUDA: init, allocate, export (dma-buf), free (rdmaperf doctor --cuda)"
"$BIN" "${args[@]}" --cuda | sed -n '/^CUDA/,$p'
echo "(the CUDA part reads libcuda.so.1 at run time; a WARN cuda_* line says what failed)"
if command -v nvidia-smi > /dev/null 2>&1; then
    echo "== nvidia-smi topo -m (for comparison)"
    nvidia-smi topo -m 2>&1
fi

# GPU memory on each RDMA device: registered by a loopback run (both ends in one process).
checked=()
failed=0
run_on() {
    local dev=$1 tool=$2 size=$3 log rc
    log=$(mktemp)
    timeout 120 "$BIN" "$tool" --loopback -d "$dev" --use_cuda=0 -s "$size" \
        -n "${RDMAPERF_GPU_CHECK_ITERS:-2000}" > "$log" 2>&1
    rc=$?
    cat "$log"
    if [ "$rc" = 0 ]; then
        checked+=("$tool -s $size on $dev, GPU 0 memory: ok")
    else
        checked+=("$tool -s $size on $dev, GPU 0 memory: FAILED (exit $rc: $(grep -m1 -i 'error\|refus\|fail' "$log" || tail -n1 "$log"))")
        failed=1
    fi
    rm -f "$log"
}
echo "== GPU memory on each RDMA device: loopback write-bw and send-bw, 2 and 64 bytes"
DEVS=$(ls "$ROOT/sys/class/infiniband" 2> /dev/null)
if [ "$ROOT" != / ]; then
    echo "SKIPPED: the runs: $ROOT is a copied sysfs tree (RDMAPERF_SYSFS_ROOT), with no device to run on"
elif [ -z "$DEVS" ]; then
    echo "SKIPPED: the runs: no RDMA device (/sys/class/infiniband is empty or absent)"
elif ! "$BIN" doctor --cuda 2> /dev/null | grep -q '^  GPU 0: '; then
    echo "SKIPPED: the runs: CUDA could not open GPU 0 (see the doctor --cuda lines above)"
else
    for dev in $DEVS; do
        for tool in write-bw send-bw; do
            for size in 2 64; do
                echo "-- $BIN $tool --loopback -d $dev --use_cuda=0 -s $size"
                run_on "$dev" "$tool" "$size"
            done
        done
    done
fi
echo "== checked"
say "GPUs in sysfs: $(echo $GPUS); topology, peer memory, dma-buf and IOMMU (doctor --probe-dmabuf, exit $rc)"
say "CUDA init, allocation, dma-buf export, free on each GPU: doctor --cuda above (a WARN cuda_* line is a failure)"
if [ ${#checked[@]} -eq 0 ]; then
    say "GPU memory registration and traffic: not run (the SKIPPED line above says why)"
fi
for c in "${checked[@]}"; do say "$c"; done
exit "$failed"
