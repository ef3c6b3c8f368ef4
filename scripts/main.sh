#!/usr/bin/env bash
# The main job: build rdmaperf (release) and run an RDMA WRITE bandwidth test on this host.
#
#   scripts/main.sh                   # as root the first time on Debian 12 (installs packages)
#   scripts/main.sh -- -D 5 --report_gbits   # extra args after -- go to every rdmaperf run
#
# With an RDMA device (/sys/class/infiniband/*): `rdmaperf write-bw --loopback -d <first
# device>` on it (the GID index is auto-selected). Without one: boots the soft-RoCE VM
# (scripts/rxe-vm.sh) and runs the same loopback test on rxe0 at 64 B (1000 iterations) and
# at the default 64 KiB. Prints perftest's result tables. Exit status: rdmaperf's (non-zero
# if any run failed).
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO"
say() { echo "main.sh: $*" >&2; }
die() { echo "main.sh: error: $*" >&2; exit 1; }

[ "${1:-}" = -- ] && shift
EXTRA=("$@")

first_device() {
    local d
    for d in /sys/class/infiniband/*; do
        [ -e "$d" ] && { basename "$d"; return 0; }
    done
    return 1
}
DEV=$(first_device || true)

# ---- setup ----------------------------------------------------------------------------
# On hardware only the build needs packages; the VM path also needs qemu, perftest and the
# guest kernel: scripts/setup.sh does all of it (and is a no-op once done).
BUILD_PACKAGES=(libibverbs-dev librdmacm-dev rdma-core ibverbs-providers libclang-dev clang pkg-config)
if [ -n "$DEV" ]; then
    missing=()
    for p in "${BUILD_PACKAGES[@]}"; do
        # Per architecture instance: with arm64 rdma-core installed too (the cross build),
        # a plain db:Status-Status query prints "installedinstalled".
        dpkg-query -W -f='${db:Status-Status} ${Architecture}\n' "$p" 2>/dev/null \
            | grep -Eq "^installed ($(dpkg --print-architecture)|all)\$" || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        [ "$(id -u)" = 0 ] || die "missing Debian packages: ${missing[*]}; rerun as root or install them with apt-get"
        say "installing: ${missing[*]}"
        apt-get update -qq || die "apt-get update failed; check the Debian mirror in /etc/apt/sources.list*"
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" \
            || die "apt-get install failed for: ${missing[*]}"
    fi
# Without a device the job runs in the soft-RoCE VM: setup.sh's --main scope (the build and
# the VM, no test tools, no aarch64 cross toolchain) is all it installs or asks for.
elif ! why=$(bash scripts/setup.sh --check --main 2>&1); then
    [ "$(id -u)" = 0 ] || die "no RDMA device here, and the soft-RoCE VM this job then runs in is not set up ($(echo "$why" | grep -v '^fix:' | paste -sd ';' | sed 's/;/; /g')); run 'sudo scripts/main.sh' once: it installs only what this job needs"
    bash scripts/setup.sh --main || die "scripts/setup.sh --main failed (see above)"
fi

# shellcheck disable=SC1091
if ! command -v cargo >/dev/null && [ -f "$HOME/.cargo/env" ]; then . "$HOME/.cargo/env"; fi
command -v cargo >/dev/null || die "cargo not found; install Rust (https://rustup.rs) or run scripts/test.sh, which installs it"

# RDMAPERF_PREFLIGHT=1 (tests/main_preflight.rs): every check above and rxe-vm.sh's, no
# build, no VM boot.
if [ "${RDMAPERF_PREFLIGHT:-}" = 1 ]; then
    [ -z "$DEV" ] || { say "pre-flight done (RDMA device $DEV)"; exit 0; }
    RDMAPERF_VM_DRY_RUN=1 exec bash scripts/rxe-vm.sh true
fi

say "cargo build --release"
cargo build --release
BIN=$REPO/target/release/rdmaperf

# ---- run ------------------------------------------------------------------------------------
if [ -n "$DEV" ]; then
    say "RDMA device $DEV: rdmaperf write-bw --loopback -d $DEV ${EXTRA[*]}"
    exec "$BIN" write-bw --loopback -d "$DEV" "${EXTRA[@]}"
fi

say "no RDMA device in /sys/class/infiniband: running on soft-RoCE (rxe0) in a VM; its numbers show the software path, not hardware speed"
case_file=$(mktemp "${TMPDIR:-/tmp}/rdmaperf-main.XXXXXX")
trap 'rm -f "$case_file"' EXIT
{
    echo 'rc=0'
    for size_args in "-s 64 -n 1000" ""; do
        label="rdmaperf write-bw --loopback -d rxe0 -x 0${size_args:+ $size_args}${EXTRA[*]:+ ${EXTRA[*]}}"
        printf 'echo; echo %q\n' "== $label"
        # size_args splits into words on purpose
        printf '%q write-bw --loopback -d rxe0 -x 0 %s' "$BIN" "$size_args"
        [ ${#EXTRA[@]} = 0 ] || printf ' %q' "${EXTRA[@]}"
        printf ' || rc=$?\n'
    done
    echo 'exit $rc'
} > "$case_file"
rc=0
RDMAPERF_VM_TIMEOUT=${RDMAPERF_VM_TIMEOUT:-900} bash scripts/rxe-vm.sh "$case_file" || rc=$?
exit $rc
