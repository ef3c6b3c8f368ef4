#!/bin/bash
# Installs what rdmaperf's build, tests and soft-RoCE VM need, and prepares the VM's
# kernel + initramfs in a cache dir. Idempotent: a rerun with everything in place only
# checks and exits (no apt, no network).
#
#   scripts/setup.sh            # as root on Debian 12: everything (main job, tests, aarch64)
#   scripts/setup.sh --main     # only what the main job (scripts/main.sh) needs: build + VM
#   RDMAPERF_VM_DIR=/some/dir scripts/setup.sh
#   RDMAPERF_VM_REFRESH=1 scripts/setup.sh   # re-download the kernel and rebuild the initramfs
#   scripts/setup.sh --check [--main|--vm]   # changes nothing: exit 0 iff that scope is ready,
#                                            # else say what is missing
#   scripts/setup.sh --list [--main|--vm]    # the scope's packages, one a line (tests)
#   scripts/setup.sh --recipe-sum            # the VM cache's recipe checksum (tests)
#
# Scopes: --vm is what scripts/rxe-vm.sh needs to boot the VM and run the main job in it (qemu,
# busybox, the guest's tools, perftest, the kernel cache); --main adds the build (rdma-core dev
# packages, libclang); the default adds the test suite's tools and, unless
# RDMAPERF_NO_AARCH64=1, the aarch64 cross build. A script the main job runs must ask for no
# more than --main (tests/main_preflight.rs holds it to that).
#
# The guest kernel is Debian's own (the versioned package linux-image-amd64 depends on),
# downloaded and unpacked into the cache, never installed: the host kernel has no RDMA.
set -euo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VM_DIR=${RDMAPERF_VM_DIR:-$REPO/.vm}
# The VM: qemu boots Debian's kernel with a busybox initramfs (cpio, kmod's depmod/modprobe
# build it); the guest runs the host's root, so its tools (ip/rdma, perftest) are host packages.
VM_PACKAGES=(qemu-system-x86 busybox-static cpio kmod xz-utils iproute2 perftest)
# The build: bindgen over rdma-core's headers.
BUILD_PACKAGES=(libibverbs-dev librdmacm-dev rdma-core ibverbs-providers libclang-dev clang pkg-config)
# The test suite's tools.
TEST_PACKAGES=(ibverbs-utils rdmacm-utils strace python3 valgrind
          # Open MPI: builds the `mpi` feature (rdmaperf fabric) and runs its VM tests (mpirun).
          openmpi-bin libopenmpi-dev binutils
          # tcpdump: reads back the raw Ethernet frames' pcap (tests/raw_frames.rs).
          tcpdump)
# aarch64 (Grace, BlueField): the cross compiler, qemu-user to run the tests, the aarch64
# objdump for the BlueFlame disassembly check, and arm64 rdma-core through Debian multiarch
# (scripts/aarch64.sh). RDMAPERF_NO_AARCH64=1 leaves them out.
CROSS_PACKAGES=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross binutils-aarch64-linux-gnu qemu-user
                libibverbs-dev:arm64 librdmacm-dev:arm64 ibverbs-providers:arm64)
# Top-level guest modules; modprobe --show-depends adds their dependencies in load order.
# crc32_generic: rdma_rxe fails "failed to init crc32 algorithm err:-2" without it.
# overlay: makes the read-only host root writable inside the guest (changes stay in RAM).
# rdma_ucm & co: for perftest -R (rdma_cm).
# tun: the raw Ethernet TAP test puts the queue model's wire on a TAP device (tests/vm_raw.rs).
GUEST_MODULES=(virtio_pci 9pnet_virtio 9p overlay crc32_generic ib_uverbs configfs iw_cm
               ib_cm rdma_cm rdma_ucm rdma_rxe dummy tun)

say() { echo "setup.sh: $*" >&2; }
die() { echo "setup.sh: error: $*" >&2; exit 1; }

STAMP=$VM_DIR/ready
# The cache is rebuilt when the recipe changes: the guest modules, the guest init, or this
# file's kernel/initramfs part (from its "guest kernel" marker on). The host package list is
# left out, so adding a package does not make every VM cache stale.
recipe_sum() {
    { declare -p GUEST_MODULES; cat "$REPO/scripts/vm-init.sh"
      sed -n '/^# ---- guest kernel/,$p' "$REPO/scripts/setup.sh"; } | sha256sum | cut -c1-16
}
cache_ready() {
    [ -f "$STAMP" ] || return 1
    . "$STAMP"
    [ -f "$VM_DIR/$KERNEL" ] && [ -f "$VM_DIR/$INITRD" ] && [ "$INIT_SUM" = "$(recipe_sum)" ]
}

# With a package installed for two architectures (arm64 rdma-core for the cross build),
# `dpkg-query -W -f='${db:Status-Status}' PKG` prints one status per instance
# ("installedinstalled"): ask per instance and accept the native one or an "all" one.
# A name given as PKG:ARCH (the cross packages) is asked for that architecture only.
NATIVE_ARCH=$(dpkg --print-architecture)
pkg_installed() {
    local want=$NATIVE_ARCH name=$1
    case $1 in *:*) name=${1%%:*}; want=${1##*:} ;; esac
    dpkg-query -W -f='${db:Status-Status} ${Architecture}\n' "$name" 2>/dev/null \
        | grep -Eq "^installed ($want|all)\$"
}
check=0 list=0 scope=all
for arg in "$@"; do
    case $arg in
        --check) check=1 ;;
        --main) scope=main ;;
        --vm) scope=vm ;;
        --recipe-sum) recipe_sum; exit 0 ;;
        --list) list=1 ;;
        *) die "unknown argument '$arg'; use --check, --main, --vm, --list or --recipe-sum" ;;
    esac
done
PACKAGES=("${VM_PACKAGES[@]}")
case $scope in
    main) PACKAGES+=("${BUILD_PACKAGES[@]}") ;;
    all) PACKAGES+=("${BUILD_PACKAGES[@]}" "${TEST_PACKAGES[@]}")
         [ -n "${RDMAPERF_NO_AARCH64:-}" ] || PACKAGES+=("${CROSS_PACKAGES[@]}") ;;
esac
if [ $list = 1 ]; then printf '%s\n' "${PACKAGES[@]}"; exit 0; fi
missing=()
for p in "${PACKAGES[@]}"; do
    pkg_installed "$p" || missing+=("$p")
done

if [ $check = 1 ]; then
    ok=0
    [ ${#missing[@]} = 0 ] || { echo "missing Debian packages: ${missing[*]}" >&2; ok=1; }
    if ! cache_ready; then
        if [ -f "$STAMP" ]; then echo "VM cache in $VM_DIR is stale (the recipe changed)" >&2
        else echo "no VM kernel/initramfs in $VM_DIR" >&2; fi
        ok=1
    fi
    if [ $ok != 0 ]; then
        case $scope in
            all) echo "fix: run scripts/setup.sh as root" >&2 ;;
            *) echo "fix: run scripts/setup.sh --main as root (or scripts/main.sh as root, which runs it)" >&2 ;;
        esac
    fi
    exit $ok
fi

[ "$(id -u)" = 0 ] || die "must run as root (it installs Debian packages and builds the VM cache); rerun with sudo${missing[*]:+ (missing: ${missing[*]})}"

# ---- Debian packages -------------------------------------------------------------------
apt_updated=0
apt_update() {
    [ $apt_updated = 1 ] && return
    say "apt-get update"
    apt-get update -qq || die "apt-get update failed; check the Debian mirror in /etc/apt/sources.list*"
    apt_updated=1
}
if [ ${#missing[@]} -gt 0 ]; then
    if printf '%s\n' "${missing[@]}" | grep -q ':arm64$' \
        && ! dpkg --print-foreign-architectures | grep -qx arm64; then
        say "dpkg --add-architecture arm64 (arm64 rdma-core for the aarch64 cross build)"
        dpkg --add-architecture arm64 || die "dpkg --add-architecture arm64 failed"
        apt_updated=0
    fi
    apt_update
    say "installing: ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" \
        || die "apt-get install failed for: ${missing[*]}"
fi

# ---- guest kernel + initramfs (cached) ---------------------------------------------------
mkdir -p "$VM_DIR"
exec 9>"$VM_DIR/setup.lock"
flock 9 # two concurrent setups (e.g. parallel test binaries under CI) must not interleave

if [ -z "${RDMAPERF_VM_REFRESH:-}" ] && cache_ready; then
    say "ready ($KVER in $VM_DIR)"
    exit 0
fi

kpkg=""
find_kpkg() {
    # linux-image-amd64 depends on exactly one versioned image, e.g. linux-image-6.1.0-57-amd64.
    kpkg=$(apt-cache depends linux-image-amd64 2>/dev/null \
           | awk '$1 == "Depends:" && $2 ~ /^linux-image-[0-9]/ { print $2; exit }')
}
find_kpkg
if [ -z "$kpkg" ]; then apt_update; find_kpkg; fi
[ -n "$kpkg" ] || die "apt-cache has no linux-image-amd64 dependency; is this Debian 12 with main enabled?"
KVER=${kpkg#linux-image-}
KROOT=$VM_DIR/kernel-$KVER

if [ ! -f "$KROOT/boot/vmlinuz-$KVER" ] || [ ! -d "$KROOT/lib/modules/$KVER" ] || [ -n "${RDMAPERF_VM_REFRESH:-}" ]; then
    say "downloading $kpkg (~70 MB)"
    dl=$VM_DIR/download
    rm -rf "$dl" "$KROOT"; mkdir -p "$dl"
    (cd "$dl" && apt-get -o APT::Sandbox::User=root download "$kpkg" >/dev/null) || { apt_update; (cd "$dl" && apt-get -o APT::Sandbox::User=root download "$kpkg" >/dev/null); } \
        || die "apt-get download $kpkg failed"
    deb=$(ls "$dl"/*.deb)
    dpkg -x "$deb" "$KROOT.tmp" || die "dpkg -x $deb failed"
    mv "$KROOT.tmp" "$KROOT"
    rm -rf "$dl"
fi
[ -f "$KROOT/boot/vmlinuz-$KVER" ] || die "$KROOT has no boot/vmlinuz-$KVER"
depmod -b "$KROOT" "$KVER" || die "depmod failed on $KROOT"

# ---- initramfs: busybox + the modules in load order + our init ---------------------------
say "building initramfs"
ird=$VM_DIR/initramfs.d
rm -rf "$ird"; mkdir -p "$ird"/{bin,dev,proc,sys,newroot,lower,upper,mods}
cp /bin/busybox "$ird/bin/busybox"
cp "$REPO/scripts/vm-init.sh" "$ird/init"
chmod 755 "$ird/init"
: > "$ird/mods/order"
declare -A seen=()
for m in "${GUEST_MODULES[@]}"; do
    deps=$(modprobe -d "$KROOT" -S "$KVER" --show-depends "$m") || die "module $m not found in $KVER"
    while read -r kind path _; do
        [ "$kind" = insmod ] || continue          # "builtin X" needs nothing
        name=$(basename "$path"); name=${name%%.ko*}
        [ -n "${seen[$name]:-}" ] && continue
        seen[$name]=1
        case "$path" in
            *.ko.xz)  xz -dc "$path" > "$ird/mods/$name.ko" ;;
            *.ko.zst) zstd -qdc "$path" > "$ird/mods/$name.ko" ;;
            *.ko)     cp "$path" "$ird/mods/$name.ko" ;;
            *) die "unexpected module file $path" ;;
        esac
        echo "$name" >> "$ird/mods/order"
    done <<< "$deps"
done
(cd "$ird" && find . | cpio -o -H newc --quiet | gzip -1) > "$VM_DIR/initrd.gz.tmp"
mv "$VM_DIR/initrd.gz.tmp" "$VM_DIR/initrd.gz"
rm -rf "$ird"

cat > "$STAMP" <<EOS
KVER=$KVER
KERNEL=kernel-$KVER/boot/vmlinuz-$KVER
INITRD=initrd.gz
INIT_SUM=$(recipe_sum)
EOS
say "ready ($KVER in $VM_DIR)"
