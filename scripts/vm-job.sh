#!/bin/bash
# Hands one batch to the serving VM in $RDMAPERF_VM_SERVE (scripts/rxe-vm.sh --serve) and
# waits for it; scripts/rxe-vm.sh calls this instead of booting when that VM is up.
#
#   vm-job.sh --alive    exit 0 iff the serving VM is up and taking batches
#   vm-job.sh SHARE      SHARE/.vm/{main.sh,case.sh} as rxe-vm.sh wrote them: runs the batch,
#                        prints its output, leaves its result files (and .vm/times, .vm/rc) in
#                        SHARE, and exits with the batch's status (124: past
#                        RDMAPERF_VM_TIMEOUT; 125: the serving VM went away)
set -uo pipefail

S=${RDMAPERF_VM_SERVE:?vm-job.sh: RDMAPERF_VM_SERVE is not set}

alive() {
    [ -f "$S/.vm/ready" ] && [ ! -f "$S/.vm/rc" ] && [ ! -f "$S/.vm/stop" ] &&
        [ ! -f "$S/.vm/broken" ] && kill -0 "$(cat "$S/.vm/host.pid" 2>/dev/null)" 2>/dev/null
}
if [ "${1:-}" = --alive ]; then
    alive
    exit
fi

share=$1
TIMEOUT=${RDMAPERF_VM_TIMEOUT:-1800}
tag=$(date +%s%N)-$$
job=$S/jobs/$tag
run=$S/run/$tag
mkdir -p "$job.new" || exit 125
cp -a "$share/.vm" "$job.new/" || exit 125
echo "$TIMEOUT" > "$job.new/.vm/timeout"
mv "$job.new" "$job" || exit 125

t0=$(date +%s.%N)
# The guest enforces the batch's limit; this one only catches a VM that stopped answering.
deadline=$(($(date +%s) + TIMEOUT + 120))
while [ ! -f "$run/.vm/rc" ]; do
    if ! alive || [ "$(date +%s)" -gt "$deadline" ]; then
        cat "$run/.vm/console" 2>/dev/null
        why=$(cat "$S/.vm/broken" 2>/dev/null || echo "its qemu is gone or stopped answering")
        echo "rxe-vm.sh: error: the serving VM in $S ended during this batch ($why); its console is $S/console.log" >&2
        exit 125
    fi
    sleep 0.2
done
total=$(awk "BEGIN{printf \"%.1f\", $(date +%s.%N) - $t0}")
cat "$run/.vm/console"
rc=$(cat "$run/.vm/rc")
cp -a "$run/." "$share/"
rm -rf "$run"
if [ "$rc" = 124 ]; then
    echo "rxe-vm.sh: error: the batch ran past ${TIMEOUT}s and was killed; raise RDMAPERF_VM_TIMEOUT for long batches" >&2
fi
echo "rxe-vm.sh: exit $rc; $(cat "$share/.vm/times" 2>/dev/null) total_s=$total (served by the VM in $S)" >&2
exit "$rc"
