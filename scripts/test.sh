#!/usr/bin/env bash
# Runs the whole test suite, as CI does (.ci/run calls this):
#   setup (packages + VM kernel/initramfs) -> toolchain -> build -> fmt -> benches (test mode)
#   -> main job (scripts/main.sh, the README's first command) -> cargo test (unit tests + soft-RoCE
#   VM integration tests; beside it, at idle priority: check-default, clippy, the scalar-fallback
#   and aarch64 builds)
#   -> scalar fallback and aarch64 tests (disassembly, qemu-user) -> fuzz (60 s) -> sanitize (valgrind).
#
#   scripts/test.sh                 # as root on Debian 12 the first time (setup installs packages)
#   scripts/test.sh -- vm_write_bw  # extra args go to `cargo test` (e.g. a test name filter)
#
# VM tests must RUN here, not skip: RDMAPERF_REQUIRE_VM=1 turns "VM not available" into a
# failure. Every step runs even after another failed (except when setup or the toolchain is
# missing); the summary at the end lists each step and ends with cargo test's result lines.
# Exit status: 0 iff every step passed.
set -uo pipefail

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$REPO" || exit 1
[ "${1:-}" = -- ] && shift
TEST_ARGS=("$@")

export RDMAPERF_REQUIRE_VM=1
export CARGO_TERM_COLOR=${CARGO_TERM_COLOR:-never}

LOG_DIR=$(mktemp -d "${TMPDIR:-/tmp}/rdmaperf-test.XXXXXX")
trap 'rm -rf "$LOG_DIR"' EXIT

names=()
results=()
failed=0
banner() { printf '\n==== %s ====\n' "$*"; }
record() { # NAME STATUS-TEXT FAILED(0/1) [SECONDS]
    names+=("$1")
    results+=("$2${4:+ (${4} s)}")
    [ "$3" = 0 ] || failed=1
}
# step NAME CMD... : runs CMD, records ok / FAILED (exit N)
step() {
    local name=$1 rc=0 t0=$SECONDS
    shift
    banner "$name: $*"
    "$@" || rc=$?
    if [ $rc = 0 ]; then record "$name" ok 0 $((SECONDS - t0)); else record "$name" "FAILED (exit $rc)" 1 $((SECONDS - t0)); fi
    return $rc
}

summary() {
    banner summary
    local i
    for i in "${!names[@]}"; do
        printf '  %-8s %s\n' "${names[$i]}" "${results[$i]}"
    done
    if [ -f "$LOG_DIR/test.log" ]; then
        local failing
        failing=$(grep -E '^test .* \.\.\. FAILED$' "$LOG_DIR/test.log" | sed 's/^test /  /; s/ \.\.\. FAILED$//')
        if [ -n "$failing" ]; then
            echo "failing tests:"
            echo "$failing"
        fi
        if [ $failed = 0 ]; then echo "all steps passed"; else echo "SOME STEPS FAILED"; fi
        awk '/^test result: /{for(i=1;i<=NF;i++){if($i~/^(passed|failed|ignored);?$/){k=$i;sub(/;/,"",k);n[k]+=$(i-1)}}}
             END{printf "tests: %d passed, %d failed, %d ignored\n", n["passed"], n["failed"], n["ignored"]}' "$LOG_DIR/test.log"
        echo "time per test file (slowest first; a VM file's time includes its boot):"
        time_table "$LOG_DIR/test.log"
        echo "cargo test results:"
        grep -E '^test result: ' "$LOG_DIR/test.log" \
            || echo "test result: none (cargo test ran no test binary; see the errors above)"
    else
        if [ $failed = 0 ]; then echo "all steps passed"; else echo "SOME STEPS FAILED"; fi
    fi
}

# time_table LOG: each test binary's own "finished in S s", slowest first, and the total.
time_table() {
    awk '/^ *Running /{f=($2=="unittests") ? $2 " " $3 : $2} /^ *Doc-tests /{f="doc-tests " $2}
         /^test result: /{for(i=1;i<=NF;i++) if($i=="in"){t=$(i+1); sub(/s$/,"",t); print t, f}}' "$1" \
        | sort -rn | awk '{printf "  %8.1f s  %s\n", $1, $2 " " $3; s+=$1} END{printf "  %8.1f s  all test files\n", s}'
}

# One soft-RoCE VM serves every VM test file's batches (scripts/rxe-vm.sh --serve): a batch
# then costs ~1.5 s of set-up instead of a ~15 s boot, and still starts from the boot state
# (scripts/vm-serve.sh, vm-reset.sh). It boots while cargo test links. RDMAPERF_VM_NO_SERVE=1
# boots a VM per batch as before. Where that VM is down, each batch boots its own.
serve_start() {
    [ -z "${RDMAPERF_VM_NO_SERVE:-}" ] || return 0
    SERVE_DIR=$LOG_DIR/vm-serve
    mkdir -p "$SERVE_DIR"
    bash scripts/rxe-vm.sh --serve "$SERVE_DIR" > "$SERVE_DIR/console.log" 2>&1 &
    SERVE_PID=$!
    export RDMAPERF_VM_SERVE=$SERVE_DIR
}
serve_stop() {
    [ -n "${SERVE_PID:-}" ] || return 0
    touch "$SERVE_DIR/.vm/stop"
    local i
    for i in $(seq 60); do kill -0 "$SERVE_PID" 2>/dev/null || break; sleep 1; done
    kill "$SERVE_PID" 2>/dev/null
    if [ -f "$SERVE_DIR/.vm/broken" ]; then
        echo "test.sh: the serving VM stopped serving (later batches booted their own):"
        cat "$SERVE_DIR/.vm/broken"
    fi
    echo "test.sh: the serving VM's console ends:"
    tail -n 3 "$SERVE_DIR/console.log"
    unset RDMAPERF_VM_SERVE SERVE_PID
}

fatal() { # the remaining steps cannot run
    echo "test.sh: error: $*" >&2
    summary
    exit 1
}

# ---- setup: packages + VM cache (a no-op when ready; only root can install) ---------------
banner "setup: scripts/setup.sh"
if bash scripts/setup.sh --check 2>"$LOG_DIR/check"; then
    echo "already set up"
    record setup ok 0
elif [ "$(id -u)" = 0 ]; then
    cat "$LOG_DIR/check"
    step setup bash scripts/setup.sh || fatal "scripts/setup.sh failed (see above); nothing else can run"
else
    cat "$LOG_DIR/check" >&2
    record setup "FAILED (not root)" 1
    fatal "setup is incomplete and installing needs root: run 'sudo scripts/setup.sh' once, then rerun"
fi

# ---- toolchain: rustup only when cargo is missing ------------------------------------------
# shellcheck disable=SC1091
[ -f "$HOME/.cargo/env" ] && ! command -v cargo >/dev/null && . "$HOME/.cargo/env"
if command -v cargo >/dev/null; then
    :
else
    banner "toolchain: installing rustup's stable toolchain"
    install_rustup() {
        if ! command -v curl >/dev/null; then
            apt-get install -y -qq --no-install-recommends curl ca-certificates || return 1
        fi
        curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs \
            | sh -s -- -y --profile minimal --component rustfmt,clippy || return 1
        # shellcheck disable=SC1091
        . "$HOME/.cargo/env"
    }
    step toolchain install_rustup || fatal "installing Rust with rustup failed; install it by hand (https://rustup.rs)"
fi
# cargo without fmt/clippy (e.g. a distro cargo): add them where rustup manages the toolchain.
if ! { cargo fmt --version && cargo clippy --version; } >/dev/null 2>&1 && command -v rustup >/dev/null; then
    step components rustup component add rustfmt clippy
fi

# ---- build, lint, test ----------------------------------------------------------------------
# One debug build for everything after it: the test step, the fuzz step and the disasm test all
# take --all-features, so building with it here leaves them nothing to compile but the test
# step's own link.
step build cargo build --all-targets --all-features
step fmt cargo fmt --check
# check-default and clippy (below) check, lint and build nothing the tests use: they run beside
# the test step (bg_builds).
if [ -d benches ] || grep -q '^\[\[bench\]\]' Cargo.toml; then
    # Run each bench once in criterion's test mode, from the debug build the build step made
    # (`--all-targets` builds the benches): an optimised build of every dependency would cost
    # ~3 minutes on a fresh machine and check nothing more, since test mode times nothing.
    # The timed runs are `cargo bench --all-features` (docs/benchmarks.md). `--bench '*'` takes the
    # bench targets alone: `--benches` also ran the library's unit tests, which the test step runs.
    step bench cargo test --all-features --bench '*'
fi

# The direct path's segment stores have an SSSE3 form (the default x86-64-v2 build,
# .cargo/config.toml) and a scalar one (any other target, or RUSTFLAGS replacing the config).
# Both forms are compiled in every x86-64 build and the unit tests check each against the
# encoders (mlx5::segwr's tests); the aarch64 step runs mlx5_seg, mlx5_model and
# direct_bw_model on the scalar form. What is left to check here is that an x86-64 build
# without SSSE3 compiles and its unit tests pass: the library alone, which needs no
# dev-dependency (a full scalar build of those cost ~2.5 min and ran the same cases again).
scalar() { env RUSTFLAGS="-C target-cpu=x86-64" CARGO_TARGET_DIR=target/scalar cargo test --all-features --lib "$@"; }

# The checks and builds no test step needs (check-default, clippy, the scalar library; aarch64's
# clippy, release binary and test binaries: 9 min 43 s in order on a fresh machine at 3540cdf,
# aarch64's runs included) compile beside the VM test step, whose TCG guest leaves the host's
# CPUs idle a share of the time (17 % over vm_fabric_kill: timeouts, netem delays, waiting
# peers). They run under SCHED_IDLE, so the guest's threads always come first and no VM timing
# competes with a compiler; nothing they build runs until the test step has ended
# (scalar-fallback and aarch64's `run` half, at normal priority, after it). They start once
# cargo test has begun running tests: its build lock is then free (a compile holding it would
# hold the test step up) and its links are done.
# RDMAPERF_NO_OVERLAP=1 runs them here instead, before the test step.
bg_step() { # NAME CMD... (in bg_builds): runs CMD, appends "NAME rc seconds" to bg.rec
    local name=$1 t0=$SECONDS rc=0
    shift
    printf '\n==== %s: %s ====\n' "$name" "$*"
    "$@" || rc=$?
    echo "$name $rc $((SECONDS - t0))" >> "$LOG_DIR/bg.rec"
}
# The default-feature build is checked (not linked): the release binary of the main step is
# default-feature too. The two unsafe lints are denied in src/lib.rs; naming them in clippy
# extends them to the other crate roots (main.rs, tests, benches, build.rs).
bg_builds() {
    bg_step check-default cargo check --all-targets
    bg_step clippy cargo clippy --all-targets --all-features -- -D warnings \
        -D clippy::undocumented_unsafe_blocks -D unsafe_op_in_unsafe_fn
    bg_step scalar-build scalar --no-run
    [ -n "${RDMAPERF_NO_AARCH64:-}" ] || bg_step aarch64-build bash scripts/aarch64.sh build
}
bg_start() { # before cargo test: waits for it to begin running tests (or to end)
    [ -z "${RDMAPERF_NO_OVERLAP:-}" ] || return 0
    : > "$LOG_DIR/bg.rec"
    (
        while ! grep -q '^ *Running ' "$LOG_DIR/test.log" 2>/dev/null && [ ! -f "$LOG_DIR/test.done" ]; do
            sleep 2
        done
        exec chrt -i 0 bash -c "$(declare -f scalar bg_step bg_builds); LOG_DIR='$LOG_DIR'; bg_builds"
    ) > "$LOG_DIR/bg.log" 2>&1 &
    BG_PID=$!
}
bg_finish() { # waits for the builds, shows their output, records each as a step
    [ -n "${BG_PID:-}" ] || return 0
    local t0=$SECONDS
    wait "$BG_PID"
    banner "builds beside the test step (SCHED_IDLE; $((SECONDS - t0)) s left after it)"
    cat "$LOG_DIR/bg.log"
    bg_record "ok (beside test)"
    unset BG_PID
}
bg_record() { # OK-TEXT: records each line of bg.rec as a step
    local name rc secs
    while read -r name rc secs; do
        if [ "$rc" = 0 ]; then record "$name" "$1" 0 "$secs"; else record "$name" "FAILED (exit $rc)" 1 "$secs"; fi
    done < "$LOG_DIR/bg.rec"
}
if [ -n "${RDMAPERF_NO_OVERLAP:-}" ]; then
    : > "$LOG_DIR/bg.rec"
    bg_builds
    bg_record ok
fi

# The README's first command, as a user runs it: the release build and write-bw in the VM.
step main bash scripts/main.sh

banner "test: cargo test --all-features ${TEST_ARGS[*]}"
rc=0 t0=$SECONDS
serve_start
bg_start
cargo test --all-features --no-fail-fast "${TEST_ARGS[@]}" 2>&1 | tee "$LOG_DIR/test.log" || rc=$?
touch "$LOG_DIR/test.done"
serve_stop
if [ $rc = 0 ]; then record test ok 0 $((SECONDS - t0)); else record test "FAILED (exit $rc)" 1 $((SECONDS - t0)); fi
bg_finish

# What the builds beside the test step made, run at normal priority (nothing left to compile).
step scalar-fallback scalar
# aarch64 (Grace, BlueField): the BlueFlame copy read back from both release binaries, and the
# unit/model/selfcheck tests and benches (--test) under qemu-aarch64.
if [ -z "${RDMAPERF_NO_AARCH64:-}" ]; then
    step aarch64 bash scripts/aarch64.sh run
fi

# ---- robustness: 60 s of fuzzing the ctrl decoders (a new seed each run; the test prints it),
# then the pure/unsafe-heavy tests under valgrind memcheck (fuzz/README.md, scripts/sanitize.sh)
step fuzz env RDMAPERF_FUZZ_SECS=${RDMAPERF_FUZZ_SECS:-60} RDMAPERF_FUZZ_SEED="${RDMAPERF_FUZZ_SEED:-$(date +%s)}" \
    cargo test --all-features --test robust_fuzz ctrl_decoders_survive_fuzzing -- --nocapture
step sanitize bash scripts/sanitize.sh

summary
exit $failed
