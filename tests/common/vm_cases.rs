//! The cases of a VM batch that times its own runs: the guest script (after [`PRELUDE`])
//! appends a line `NAME rc=N dt=S` to `$RESULTS/rc.txt` for each case (its exit status
//! and seconds, see [`vm::outcomes`]), and [`Cases::boot`] adds `finished` at its end. A
//! test reads each case's status and output and collects every failed expectation, so one
//! run reports them all at once.

use super::vm::{self, BatchResult};
use std::cell::RefCell;
use std::collections::BTreeMap;

/// Bash helpers for the cases, run before the test's script: `$B` is rdmaperf, `$T` the script's
/// `timeout` prefix; `$QCASE_GUARD` (default 20) the seconds after which `qcase` kills
/// both sides.
pub const PRELUDE: &str = r#"
B=$RDMAPERF_BIN
now() { cut -d' ' -f1 /proc/uptime; }
since() { awk "BEGIN{printf \"%.1f\", $(now) - $1}"; }
done_case() { # NAME PID T0: PID's exit status and the seconds since T0, as NAME
    local rc=0; wait "$2" || rc=$?
    echo "$1 rc=$rc dt=$(since "$3")" >> $RESULTS/rc.txt
}
reap() { kill "$@" 2>/dev/null; wait "$@" 2>/dev/null; }
# NAME SERVER-CMD CLIENT-CMD PORT: both sides' output in NAME.srv/.cli, their status and
# seconds since the client started as NAME.cli and NAME.srv.
# With QCASE_UNDER=srv (or cli) only that side is under test: once it has ended, the other
# (a stock peer left hanging by the mismatch) gets 2 s, then is killed, rather than the guard.
qcase() {
    $T $2 -p $4 > $RESULTS/$1.srv 2>&1 & S=$!
    wait_port $4 $S; t0=$(now)
    $T $3 -p $4 127.0.0.1 > $RESULTS/$1.cli 2>&1 & C=$!
    ( sleep ${QCASE_GUARD:-20}; kill $S $C 2>/dev/null ) & W=$!
    case ${QCASE_UNDER:-} in
    srv) done_case $1.srv $S $t0; (sleep 2; kill $C 2>/dev/null) & done_case $1.cli $C $t0 ;;
    cli) done_case $1.cli $C $t0; (sleep 2; kill $S 2>/dev/null) & done_case $1.srv $S $t0 ;;
    *) done_case $1.cli $C $t0; done_case $1.srv $S $t0 ;;
    esac
    reap $W
}
"#;

pub struct Cases {
    r: BatchResult,
    outcomes: BTreeMap<String, (i32, f64)>,
    failures: RefCell<Vec<String>>,
}

impl Cases {
    /// Runs [`PRELUDE`], `script` and `echo finished` in one VM boot with rdmaperf as
    /// `$RDMAPERF_BIN` (`None` when the VM cannot run here, see [`vm::Batch::run_or_skip`]),
    /// prints every result file (shown when the test fails) and panics unless the script
    /// got to its end.
    pub fn boot(timeout_s: u64, script: &str) -> Option<Self> {
        let script = format!("{PRELUDE}{script}\necho finished >> $RESULTS/rc.txt\n");
        let r = vm::Batch::rdmaperf()
            .timeout_s(timeout_s)
            .run_or_skip(&script)?;
        for (name, body) in &r.files {
            println!("--- {name}\n{body}");
        }
        let rc_txt = r.file("rc.txt").unwrap_or("");
        assert!(
            rc_txt.contains("finished"),
            "the batch did not finish:\n{rc_txt}"
        );
        Some(Self {
            outcomes: vm::outcomes(rc_txt),
            r,
            failures: RefCell::default(),
        })
    }

    /// Case `name`'s exit status and seconds, `None` when it left no line.
    pub fn try_case(&self, name: &str) -> Option<(i32, f64)> {
        self.outcomes.get(name).copied()
    }

    /// Case `name`'s exit status and seconds; panics (with rc.txt) when it left no line.
    pub fn case(&self, name: &str) -> (i32, f64) {
        self.try_case(name)
            .unwrap_or_else(|| panic!("case {name} left no status:\n{}", self.rc_txt()))
    }

    /// rc.txt as the batch left it.
    pub fn rc_txt(&self) -> &str {
        self.get("rc.txt")
    }

    /// The result file `name`, empty when the batch did not write it.
    pub fn get(&self, name: &str) -> &str {
        self.r.file(name).unwrap_or("")
    }

    /// Notes `what` as a failure unless `ok`.
    pub fn expect(&self, ok: bool, what: String) {
        if !ok {
            self.failures.borrow_mut().push(what);
        }
    }

    /// Notes a failure unless case `name` exited `want_rc` with every one of `wants` in its
    /// output `file`. Its seconds, when it left a status.
    pub fn expect_exit(&self, name: &str, file: &str, want_rc: i32, wants: &[&str]) -> Option<f64> {
        let out = self.get(file);
        let Some((rc, dt)) = self.try_case(name) else {
            self.expect(false, format!("{name}: no status:\n{}", self.rc_txt()));
            return None;
        };
        self.expect(
            rc == want_rc,
            format!("{name}: rc {rc}, want {want_rc}:\n{out}"),
        );
        for want in wants {
            self.expect(
                out.contains(want),
                format!("{name}: must say {want:?}:\n{out}"),
            );
        }
        Some(dt)
    }

    /// Notes a failure for each of `unwanted` that case `name`'s output `file` holds.
    pub fn expect_absent(&self, name: &str, file: &str, unwanted: &[&str]) {
        let out = self.get(file);
        for text in unwanted {
            self.expect(
                !out.contains(text),
                format!("{name}: must not say {text:?}:\n{out}"),
            );
        }
    }

    /// [`Cases::expect_exit`] 1 (refused), in under `max_s` seconds.
    pub fn expect_refused(&self, name: &str, file: &str, wants: &[&str], max_s: f64) {
        if let Some(dt) = self.expect_exit(name, file, 1, wants) {
            self.expect(dt < max_s, format!("{name}: took {dt} s (under {max_s} s)"));
        }
    }

    /// Panics with every failure noted, if any.
    pub fn finish(self) {
        let failures = self.failures.into_inner();
        assert!(failures.is_empty(), "{}", failures.join("\n\n"));
    }
}
