#!/bin/bash
# Boots the soft-RoCE test VM once and runs one batch script in it.
#
#   scripts/rxe-vm.sh CASES.sh          # a script file (run with bash)
#   scripts/rxe-vm.sh 'ibv_devinfo -d rxe0'   # or a command line
#   scripts/rxe-vm.sh --serve DIR       # boot one VM that runs batches until DIR/.vm/stop
#
# In the guest: the host's root is the root (read-only 9p + in-RAM overlay, so host binaries
# and freshly built ones run unchanged), cwd is this repo, rxe0 is up on dummy0 (GID 0 =
# fe80::ff:fe00:701, GID 1 = ::ffff:169.254.7.1), and $RESULTS is a writable share that
# comes back to the host. scripts/vm-lib.sh has the helpers for server/client pairs.
#
# A VM that serves (scripts/test.sh starts one for the whole test step): with
# RDMAPERF_VM_SERVE=DIR set and that VM up, a batch is handed to it instead of booting one
# (scripts/vm-job.sh). Each batch gets what a fresh boot gives it: a new in-RAM root over the
# host's, no process left from the batch before, and the network put back as booted
# (scripts/vm-reset.sh: rxe0 alone on dummy0 with its addresses, no namespace, veth or
# qdisc). When that VM is down, a batch boots its own as before.
#
# Exit status: the script's, read from a marker in the share; 124 on VM timeout; 125 when
# the VM died without a marker (the console output above says why).
#
# Environment (host side):
#   RDMAPERF_VM_DIR      cache made by scripts/setup.sh (default <repo>/.vm)
#   RDMAPERF_VM_TIMEOUT  seconds before qemu is killed (default 1800; per batch when served)
#   RDMAPERF_VM_RESULTS  host dir used as $RESULTS (default: a temp dir, removed afterwards)
#   RDMAPERF_VM_MEM      guest MiB (default 2048)
#   RDMAPERF_VM_BIOS     firmware (default qboot, which starts the kernel in ~1 s under TCG
#                        where SeaBIOS takes ~7; SeaBIOS when qboot is missing or this is empty)
#   RDMAPERF_VM_SERVE    a serving VM's DIR (see above)
#   RDMAPERF_VM_ROOT_CACHE  the host root's 9p cache mode in the guest (default loose: a file
#                        the guest has read is not fetched again, which cut a batch of process
#                        starts and mpirun runs by ~25 %; none: every read goes to the host).
#                        Safe while the host does not rewrite, during a run, a file the guest
#                        already read: the tests' inputs are built before the test step, and
#                        each batch's own files have names of their own.
#   RDMAPERF_VM_DRY_RUN  1: every check, then exit 0 where qemu would start (tests of the
#                        main job's pre-flight)
#   RDMAPERF_VM_ENV      extra variable names to copy into the guest; every RDMAPERF_*
#                        variable is copied anyway (the guest has no other way to see them)
set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
VM_DIR=${RDMAPERF_VM_DIR:-$REPO/.vm}
TIMEOUT=${RDMAPERF_VM_TIMEOUT:-1800}
die() { echo "rxe-vm.sh: error: $*" >&2; exit 125; }

[ $# -ge 1 ] || die "usage: scripts/rxe-vm.sh SCRIPT-FILE | 'COMMAND ...' | --serve DIR"
serve=
if [ "$1" = --serve ]; then
    [ $# = 2 ] || die "usage: scripts/rxe-vm.sh --serve DIR"
    serve=$2
    # The serving VM lives as long as the batches it serves (the test step); each batch has
    # its own RDMAPERF_VM_TIMEOUT inside it.
    TIMEOUT=${RDMAPERF_VM_SERVE_TIMEOUT:-7200}
fi
# Only what the VM needs (setup.sh's --vm scope): the main job runs this script too, and has
# installed no more than that (tests/main_preflight.rs).
why=$(bash "$REPO/scripts/setup.sh" --check --vm 2>&1) || die "VM not ready: ${why//$'\n'/; }"
. "$VM_DIR/ready"
[[ "$TIMEOUT" =~ ^[0-9]+$ ]] || die "RDMAPERF_VM_TIMEOUT='$TIMEOUT' is not a number of seconds"
ROOT_CACHE=${RDMAPERF_VM_ROOT_CACHE-loose}
[[ "$ROOT_CACHE" =~ ^(|none|loose|mmap|fscache)$ ]] \
    || die "RDMAPERF_VM_ROOT_CACHE='$ROOT_CACHE' is not a 9p cache mode (none, loose, mmap or fscache)"

if [ -n "$serve" ]; then
    share=$(mkdir -p "$serve" && cd "$serve" && pwd) || die "cannot create $serve"
    keep=1
elif [ -n "${RDMAPERF_VM_RESULTS:-}" ]; then
    share=$(mkdir -p "$RDMAPERF_VM_RESULTS" && cd "$RDMAPERF_VM_RESULTS" && pwd) || die "cannot create $RDMAPERF_VM_RESULTS"
    keep=1
else
    share=$(mktemp -d "${TMPDIR:-/tmp}/rxe-vm.XXXXXX") || die "mktemp failed"
    keep=0
fi
rm -rf "$share/.vm"
mkdir -p "$share/.vm"
if [ -n "$serve" ]; then
    mkdir -p "$share/jobs" "$share/run"
    echo "$REPO" > "$share/.vm/serve"   # vm-init.sh: serve batches, resetting with this repo's vm-reset.sh
fi

# The guest is started from the kernel command line and sees no host environment:
# write what it needs into the script it runs.
{
    echo '#!/bin/bash'
    echo 'export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root'
    echo 'export RESULTS=/rdmaperf-results'
    printf 'export RDMAPERF_REPO=%q VM_LIB=%q\n' "$REPO" "$REPO/scripts/vm-lib.sh"
    for v in $(compgen -v | grep '^RDMAPERF_') ${RDMAPERF_VM_ENV:-}; do
        [ -n "${!v+x}" ] && printf 'export %s=%q\n' "$v" "${!v}"
    done
    printf 'cd %q || exit 125\n' "$REPO"
    if [ -n "$serve" ]; then
        echo 'exit 0'
    elif [ $# -eq 1 ] && [ -f "$1" ]; then
        [ -r "$1" ] || die "cannot read $1"
        cp "$1" "$share/.vm/case.sh"
        echo 'exec bash /rdmaperf-results/.vm/case.sh'
    else
        printf 'exec bash -c %q\n' "$*"
    fi
} > "$share/.vm/main.sh"

if [ "${RDMAPERF_VM_DRY_RUN:-}" = 1 ]; then
    echo "rxe-vm.sh: dry run: the VM is ready to boot ($KERNEL)" >&2
    rm -rf "$share/.vm"; [ $keep = 1 ] || rm -rf "$share"
    exit 0
fi

# A serving VM takes the batch when one is up (its own checks and lock are behind it).
if [ -z "$serve" ] && [ -n "${RDMAPERF_VM_SERVE:-}" ] && bash "$REPO/scripts/vm-job.sh" --alive; then
    bash "$REPO/scripts/vm-job.sh" "$share"
    rc=$?
    [ $keep = 1 ] || rm -rf "$share"
    exit $rc
fi

# One VM at a time on this host: two would share its 2 cores and skew every number.
exec 8>"$VM_DIR/vm.lock"
if ! flock -n 8; then
    echo "rxe-vm.sh: waiting for another VM run to finish" >&2
    flock 8
fi

t0=$(date +%s.%N)
# Console: strip \r and terminal escapes (SeaBIOS) so the output reads as plain text.
BIOS=${RDMAPERF_VM_BIOS-/usr/share/qemu/qboot.rom}
[ -f "$BIOS" ] || BIOS=
[ -n "$serve" ] && echo $$ > "$share/.vm/host.pid"
timeout -k 10 "$TIMEOUT" qemu-system-x86_64 \
    -accel tcg,thread=multi -cpu max -m "${RDMAPERF_VM_MEM:-2048}" -smp 2 \
    -nographic -no-reboot -nic none ${BIOS:+-bios "$BIOS"} \
    -kernel "$VM_DIR/$KERNEL" -initrd "$VM_DIR/$INITRD" \
    -append "console=ttyS0 quiet loglevel=3 panic=-1${ROOT_CACHE:+ rdmaperf.root_cache=$ROOT_CACHE}" \
    -virtfs local,path=/,mount_tag=host,security_model=none,readonly=on,multidevs=remap \
    -virtfs "local,path=$share,mount_tag=results,security_model=none" \
    < /dev/null 2>&1 | tr -d '\r' | sed -u 's/\x1b\[[0-9;?]*[A-Za-z]//g; s/\x1b[c()][0-9AB]\{0,1\}//g'
qrc=${PIPESTATUS[0]}
t1=$(date +%s.%N)
total=$(awk "BEGIN{printf \"%.1f\", $t1 - $t0}")
exec 8>&-

finish() { [ $keep = 1 ] || rm -rf "$share"; exit "$1"; }
if [ "$qrc" = 124 ] || [ "$qrc" = 137 ]; then
    echo "rxe-vm.sh: error: VM timed out after ${TIMEOUT}s and qemu was killed; raise RDMAPERF_VM_TIMEOUT for long batches (a perftest -a sweep takes 90-190 s)" >&2
    finish 124
fi
if [ ! -f "$share/.vm/rc" ]; then
    why=$(cat "$share/.vm/init-error" 2>/dev/null || echo "no exit marker; qemu exited with $qrc")
    echo "rxe-vm.sh: error: the VM ended before the script finished ($why); see the console output above" >&2
    finish 125
fi
rc=$(cat "$share/.vm/rc")
times=$(cat "$share/.vm/times" 2>/dev/null)
echo "rxe-vm.sh: exit $rc; $times total_s=$total (guest uptime at script start = boot_s)" >&2
finish "$rc"
