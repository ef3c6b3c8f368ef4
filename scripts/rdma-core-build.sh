#!/bin/bash
# Builds rdma-core at a tag into a prefix, then builds rdmaperf against it and runs it there:
# the check that rdmaperf builds and starts on an older (or newer) rdma-core than the host's.
#
#   scripts/rdma-core-build.sh TAG PREFIX        # e.g. v28.0 /work/rc-build/v28
#
# Steps: (1) the build tools, from Debian's packages if missing (root); (2) rdma-core's source
# at TAG (a git clone of RDMA_CORE_GIT, or an existing clone); (3) cmake + ninja into PREFIX,
# without man pages or pyverbs; (4) rdmaperf with PKG_CONFIG_PATH at PREFIX, so build.rs's
# pkg-config hands bindgen and the linker PREFIX's headers and libraries, into its own target
# dir; (5) with LD_LIBRARY_PATH at PREFIX: `rdmaperf --version`, `rdmaperf doctor` and a run on
# a device that does not exist (it must say so in its own words, not the loader's), then, where the soft-RoCE VM is ready
# (RDMAPERF_VM_DIR, scripts/setup.sh), a write-bw loopback run on rxe0 inside it.
#
# Environment:
#   RDMA_CORE_GIT   where to clone from (default https://github.com/linux-rdma/rdma-core.git)
#   RC_WORK         work dir for the source, the cmake build and cargo's target dir
#                   (default /tmp/rdma-core-build; keep it outside the repo)
#   RC_TARGET       cargo's target dir (default $RC_WORK/target-TAG); several tags may share
#                   one, one tag at a time: build.rs reruns when PKG_CONFIG_PATH changes, so
#                   only rdmaperf itself is rebuilt
#   RC_SKIP_VM=1    no VM run
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
die() { echo "rdma-core-build.sh: error: $*" >&2; exit 2; }
[ $# -eq 2 ] || die "usage: scripts/rdma-core-build.sh TAG PREFIX (e.g. v28.0 /tmp/rc/v28)"
TAG=$1
PREFIX=$(mkdir -p "$2" && cd "$2" && pwd) || die "cannot create prefix $2"
GIT=${RDMA_CORE_GIT:-https://github.com/linux-rdma/rdma-core.git}
WORK=${RC_WORK:-/tmp/rdma-core-build}
case "$WORK/" in "$REPO"/*) die "RC_WORK=$WORK is inside the repo; pick a directory outside it" ;; esac
mkdir -p "$WORK"

# (1) Build tools. libnl is optional to rdma-core (without it, no netlink neighbour
# resolution), but Debian's build uses it, so do we.
need=()
for p in cmake ninja-build pkg-config python3 gcc libnl-3-dev libnl-route-3-dev git; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'ok installed' || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
    [ "$(id -u)" = 0 ] || die "missing packages: ${need[*]} (install them, or rerun as root)"
    echo "== installing ${need[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}"
fi

# (2) Source at TAG: one clone, one worktree-free checkout per tag.
SRC=$WORK/src-$TAG
if [ ! -d "$SRC" ]; then
    CLONE=$WORK/rdma-core.git
    [ -d "$CLONE" ] || git clone --bare --quiet "$GIT" "$CLONE"
    git -C "$CLONE" rev-parse --verify --quiet "$TAG^{commit}" >/dev/null \
        || die "tag $TAG not found in $GIT"
    mkdir -p "$SRC.tmp"
    git -C "$CLONE" archive "$TAG" | tar -x -C "$SRC.tmp"
    # Tags before NO_MAN_PAGES (v28 has none) install man pages from pandoc output that only
    # release tarballs carry, so `install` fails on a git checkout without pandoc. Redefine
    # the two man-page functions as no-ops in this copy of the source.
    if ! grep -q NO_MAN_PAGES "$SRC.tmp/CMakeLists.txt"; then
        printf '%s\n' 'function(rdma_man_pages)' 'endfunction()' \
            'function(rdma_alias_man_pages)' 'endfunction()' >>"$SRC.tmp/buildlib/rdma_man.cmake"
    fi
    mv "$SRC.tmp" "$SRC"
fi

# (3) rdma-core. Old tags trip newer gcc warnings; rdma-core only makes them errors with
# -DENABLE_WERROR=1, which we leave off, and -Wno-error covers a distro default of -Werror.
BUILD=$WORK/build-$TAG
if [ ! -f "$PREFIX/.built-$TAG" ]; then
    echo "== rdma-core $TAG -> $PREFIX"
    cmake -S "$SRC" -B "$BUILD" -G Ninja -DCMAKE_INSTALL_PREFIX="$PREFIX" \
        -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNO_MAN_PAGES=1 -DNO_PYVERBS=1 \
        -DENABLE_STATIC=0 -DCMAKE_C_FLAGS="-Wno-error" >"$WORK/cmake-$TAG.log" 2>&1 \
        || { tail -30 "$WORK/cmake-$TAG.log"; die "cmake failed for $TAG (log: $WORK/cmake-$TAG.log)"; }
    ninja -C "$BUILD" install >"$WORK/ninja-$TAG.log" 2>&1 \
        || { tail -40 "$WORK/ninja-$TAG.log"; die "build failed for $TAG (log: $WORK/ninja-$TAG.log)"; }
    touch "$PREFIX/.built-$TAG"
fi
PCDIR=$(dirname "$(find "$PREFIX" -name libibverbs.pc | head -1)")
[ -f "$PCDIR/libibverbs.pc" ] || die "no libibverbs.pc under $PREFIX"
LIBDIR=$(dirname "$(find "$PREFIX" -name 'libibverbs.so.1' | head -1)")
echo "== rdma-core $TAG: libibverbs $(PKG_CONFIG_PATH=$PCDIR pkg-config --modversion libibverbs), libs in $LIBDIR"

# (4) rdmaperf against it. PKG_CONFIG_PATH comes before the system's .pc files, so build.rs
# binds PREFIX's headers; its own target dir keeps the repo's target/ on the host's rdma-core.
TARGET=${RC_TARGET:-$WORK/target-$TAG}
echo "== rdmaperf against $TAG (target dir $TARGET)"
(cd "$REPO" && PKG_CONFIG_PATH=$PCDIR CARGO_TARGET_DIR=$TARGET cargo build --quiet --bin rdmaperf)
BIN=$TARGET/debug/rdmaperf
export LD_LIBRARY_PATH=$LIBDIR
ldd "$BIN" | grep -E 'ibverbs|mlx5|rdmacm'
ldd "$BIN" | grep -q "$LIBDIR/libibverbs.so.1" || die "the binary does not load $LIBDIR's libibverbs"

# (5) Runs. Every one must start: a missing versioned symbol would stop the loader here.
echo "== rdmaperf --version"
"$BIN" --version
echo "== rdmaperf doctor (exit status is doctor's verdict, not a failure of this script)"
"$BIN" doctor || echo "(doctor exit $?)"
echo "== rdmaperf write-bw -d no_such_dev (must fail with its own sentence, not the loader's)"
set +e
msg=$("$BIN" write-bw --loopback -d no_such_dev -n 10 2>&1)
rc=$?
set -e
echo "$msg" | tail -3
echo "(exit $rc)"
case $rc in 0|126|127) die "write-bw -d no_such_dev exited $rc" ;; esac
echo "$msg" | grep -qE 'no_such_dev|no RDMA devices' || die "write-bw -d no_such_dev did not say why"

if [ "${RC_SKIP_VM:-0}" != 1 ]; then
    if bash "$REPO/scripts/setup.sh" --check --vm >/dev/null 2>&1; then
        echo "== write-bw --loopback on rxe0 in the VM, against $TAG"
        RDMAPERF_VM_TIMEOUT=${RDMAPERF_VM_TIMEOUT:-900} bash "$REPO/scripts/rxe-vm.sh" \
            "LD_LIBRARY_PATH=$LIBDIR $BIN --version | grep 'rdma-core runs on'; \
             LD_LIBRARY_PATH=$LIBDIR $BIN write-bw --loopback -d rxe0 -x 1 -s 64 -n 1000"
    else
        echo "SKIPPED: VM run (soft-RoCE VM not ready: scripts/setup.sh --check --vm)"
    fi
fi
echo "== rdma-core $TAG: ok"
