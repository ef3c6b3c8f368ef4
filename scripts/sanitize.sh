#!/usr/bin/env bash
# Memory-error check of the unsafe-heavy pure code under valgrind memcheck: our substitute for
# miri and -Zsanitizer, which need a nightly toolchain (with the miri/rust-src components) that
# CI and the dev machines cannot install (rustup's dist server is unreachable here).
#
#   scripts/sanitize.sh            # called by scripts/test.sh; needs valgrind (apt-get install valgrind)
#
# Runs, each under `valgrind --error-exitcode=99`, the existing debug test binaries of
# `cargo test --all-features`:
#   - the lib unit tests of the pure modules: PRM encoder (mlx5::seg, mlx5::wqe, mlx5::prm, ...),
#     ctrl codecs (ctrl::), report stats/text (report::), run loops and ring/geometry arithmetic
#     (run::), post paths on mock queues (post::), AlignedBuf (verbs::mr), PSNs (verbs::psn);
#   - the integration tests that drive raw memory: mlx5_seg (byte-exact vs rdma-core's C helpers),
#     mlx5_model and direct_bw_model (the direct SQ/CQ against the PRM queue model, i.e. the
#     SQ/CQ ring arithmetic), ctrl_captures, ctrl_errors, report_stats. (The fuzz test is left out: the decoders
# are safe Rust and valgrind would slow it 50x.)
# --fair-sched=yes: valgrind runs one thread at a time; without fair scheduling a test whose
# threads spin on each other (the model's NIC thread, a receiving peer) can starve for minutes.
# Any invalid read/write, use of uninitialised memory or bad free fails the step (exit 1).
# Leaks are not checked (tests leak on purpose: static state, threads). PROPTEST_CASES is
# lowered to 64 by default (valgrind is ~20x slower); set it to override.
set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO" || exit 1

if ! command -v valgrind >/dev/null; then
    echo "sanitize.sh: error: valgrind is not installed; run 'apt-get install valgrind'" >&2
    exit 1
fi
export PROPTEST_CASES=${PROPTEST_CASES:-64}

LIB_FILTERS=(mlx5:: ctrl:: report:: run:: post:: verbs::mr verbs::psn)
TESTS=(mlx5_seg mlx5_model direct_bw_model ctrl_captures ctrl_errors report_stats)

# Build (a no-op after `cargo test --all-features`) and map each test target to its binary.
declare -A BIN
while IFS=' ' read -r name path; do
    BIN[$name]=$path
done < <(cargo test --all-features --no-run --message-format=json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    m = json.loads(line)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["target"]["kind"] != ["bin"]:
        print(m["target"]["name"], m["executable"])
')
if [ -z "${BIN[rdmaperf]:-}" ]; then
    echo "sanitize.sh: error: 'cargo test --all-features --no-run' built no lib test binary; run it to see why" >&2
    exit 1
fi

failed=()
run_vg() { # LABEL BINARY [TEST ARGS...]
    local label=$1 rc=0
    shift
    echo "---- valgrind: $label"
    valgrind -q --error-exitcode=99 --leak-check=no --fair-sched=yes "$@" 2>&1 | grep -Ev '^(test .* \.\.\. ok|)$'
    rc=${PIPESTATUS[0]}
    if [ "$rc" = 99 ]; then
        failed+=("$label (memory errors, see above)")
    elif [ "$rc" != 0 ]; then
        failed+=("$label (tests failed under valgrind, exit $rc)")
    fi
}

run_vg "lib: ${LIB_FILTERS[*]}" "${BIN[rdmaperf]}" "${LIB_FILTERS[@]}"
for t in "${TESTS[@]}"; do
    if [ -z "${BIN[$t]:-}" ]; then
        failed+=("$t (no such test binary)")
        continue
    fi
    run_vg "$t" "${BIN[$t]}"
done

if [ ${#failed[@]} = 0 ]; then
    echo "sanitize.sh: valgrind memcheck clean: lib (${LIB_FILTERS[*]}) + ${TESTS[*]}"
    exit 0
fi
printf 'sanitize.sh: FAILED: %s\n' "${failed[@]}" >&2
exit 1
