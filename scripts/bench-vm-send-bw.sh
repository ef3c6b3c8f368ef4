#!/usr/bin/env bash
# send-bw message rate of rdmaperf against stock perftest 4.5 on soft-RoCE, in ONE VM boot,
# the configurations interleaved (A B C ... A B C ...) so that host load hits them alike.
#
#   scripts/bench-vm-send-bw.sh [REPS] [-- EXTRA FLAGS]   # default 7 reps of -s 64 -n 20000
#   ITERS=100000 PIN=0 scripts/bench-vm-send-bw.sh ...    # -n per run; PIN=0: no taskset
#
# PIN=1 (default) runs every server on vCPU 0 and every client on vCPU 1 (taskset), stock and
# rdmaperf alike: unpinned, where the scheduler puts the two processes next to rxe's kernel
# work swings a run by +-30% on this 2-vCPU guest, more than any difference being measured.
# Configurations (server <-> client): rr = rdmaperf <-> rdmaperf (default post method, the WR
# API on rxe), rr_ps = the same with the client on --post post-send, ss = ib_send_bw <-> ib_send_bw,
# sr = ib_send_bw server <-> rdmaperf client, rs = rdmaperf server <-> ib_send_bw client.
# Prints every run's client MsgRate, then per configuration the median and the median and
# geometric mean of its per-rep ratio to ss (each rep's runs are adjacent in time). Runs of a rep where any side
# printed no rate (stock perftest's clock check fails under heavy host load: "Correlation
# coefficient r^2 < 0.9", rate 0) are left out of the ratios and counted.
# Needs target/release/rdmaperf (cargo build --release) and the VM (scripts/setup.sh).
# Under QEMU TCG only the ratios mean anything; keep the host otherwise idle.
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REPS=7
if [ $# -gt 0 ] && [ "$1" != -- ]; then REPS=$1; shift; fi
[ "${1:-}" = -- ] && shift
[[ "$REPS" =~ ^[1-9][0-9]*$ ]] || { echo "bench-vm-send-bw.sh: REPS must be a positive number, not '$REPS'" >&2; exit 2; }
BIN=${RDMAPERF_BIN:-$REPO/target/release/rdmaperf}
ITERS=${ITERS:-20000}
[[ "$ITERS" =~ ^[1-9][0-9]*$ ]] || { echo "bench-vm-send-bw.sh: ITERS must be a positive number, not '$ITERS'" >&2; exit 2; }
if [ "${PIN:-1}" = 1 ]; then S="taskset -c 0 "; C="taskset -c 1 "; else S=""; C=""; fi
[ -x "$BIN" ] || { echo "bench-vm-send-bw.sh: $BIN missing; run cargo build --release first" >&2; exit 2; }
out=$(mktemp -d "${TMPDIR:-/tmp}/bench-send-bw.XXXXXX")
script=$out.sh
cat > "$script" <<EOF
. "\$VM_LIB"
O="-d rxe0 -x 0 -F -s 64 -n $ITERS $*"
R="$BIN send-bw"
RS="${S}\$R"; RC="${C}\$R"; SS="${S}ib_send_bw"; SC="${C}ib_send_bw"
for rep in \$(seq $REPS); do
  pair rr\$rep    "\$RS \$O -p \\\$PORT" "\$RC \$O -p \\\$PORT 127.0.0.1"
  pair ss\$rep    "\$SS \$O -p \\\$PORT" "\$SC \$O -p \\\$PORT 127.0.0.1"
  pair rr_ps\$rep "\$RS \$O -p \\\$PORT" "\$RC \$O --post post-send -p \\\$PORT 127.0.0.1"
  pair sr\$rep    "\$SS \$O -p \\\$PORT" "\$RC \$O -p \\\$PORT 127.0.0.1"
  pair rs\$rep    "\$RS \$O -p \\\$PORT" "\$SC \$O -p \\\$PORT 127.0.0.1"
done
EOF
RDMAPERF_VM_RESULTS=$out RDMAPERF_VM_TIMEOUT=$((120 + REPS * 60 * (ITERS + 19999) / 20000)) \
    bash "$REPO/scripts/rxe-vm.sh" "$script" > "$out/vm.log" 2>&1 || {
    tail -20 "$out/vm.log"; echo "bench-vm-send-bw.sh: the VM run failed (log: $out/vm.log)" >&2; exit 1; }
# The last data row's last column (MsgRate[Mpps]) of each side's output.
rate() { awk 'NF >= 5 && $1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ {r = $NF} END {print r + 0}' "$1"; }
for rep in $(seq "$REPS"); do
    for c in rr ss rr_ps sr rs; do
        echo "$c $rep $(rate "$out/$c$rep.client.out") $(rate "$out/$c$rep.server.out")"
    done
done > "$out/rates"
echo "client MsgRate [Mpps] per run (config rep client server):"
cat "$out/rates"
awk '
function median(a, n,   i, j, t) {
    for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
{ r[$1, $2] = $3; if (!($2 in reps)) { reps[$2] = 1; ok[$2] = 1; nrep++ } if (!($3 > 0 && $4 > 0)) ok[$2] = 0 }
END {
    split("rr ss rr_ps sr rs", cs, " ")
    bad = 0; for (k in reps) if (!ok[k]) bad++
    printf "reps used: %d of %d (left out: %d with a zero rate)\n", nrep - bad, nrep, bad
    printf "%-6s %12s %16s %17s\n", "config", "median Mpps", "median ratio/ss", "geomean ratio/ss"
    for (i = 1; i <= 5; i++) {
        c = cs[i]; n = 0; m = 0; lg = 0
        for (k in reps) if (ok[k]) { v[++n] = r[c, k]; q[++m] = r[c, k] / r["ss", k]; lg += log(q[m]) }
        if (n == 0) { printf "%-6s %12s %16s %17s\n", c, "-", "-", "-"; continue }
        printf "%-6s %12.6f %16.3f %17.3f\n", c, median(v, n), median(q, m), exp(lg / m)
    }
}' "$out/rates"
echo "outputs: $out"
