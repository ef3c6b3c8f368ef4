//! Issue 12, part 6, against STOCK perftest 4.5 (rdmaperf against rdmaperf
//! refuses these at connect: tests/vm_peer_diag.rs). One VM boot, send-bw.
//!
//! A different `-c`: stock perftest's key message (LID:QPN:PSN:rkey:vaddr:GID)
//! is the same for RC, UC and UD and it sends no connection type, so nothing
//! at connect can tell; a SEND between QPs of different types is dropped by
//! the receiving QP without an error on either side. What shows:
//! - our server receives not one message while the stock sender finishes
//!   (it reported a rate): the server names -c (this side's) and fails,
//!   instead of "computing the result: ... run longer (-n or -D)";
//! - our UC/UD client "sends" everything and then the stock RC server never
//!   ends its run: the close handshake wait is bounded (--cq-timeout, plus
//!   -D) and the error says the rate counts messages that may never have
//!   arrived, naming -c, -n and -q (before: a hang at the close handshake).
//!
//! A different `-n` with a stock server: a larger server -n is the same wait
//! (named -n); a smaller one stalls our RC client on RNR once the server's
//! receives run out (stock's server reads first in its close handshake, so
//! no control message says it finished): the stall names -n and the count.

mod common;
use common::vm_cases::Cases;

const SCRIPT: &str = r#"
O="-d rxe0 -x 0 -F -s 64"
T="timeout -k 5 60"
# qcase (vm_cases::PRELUDE): both sides killed after 40 s.
QCASE_GUARD=40
# Only rdmaperf's side is under test: a stock peer left hanging is killed 2 s after it ends.
QCASE_UNDER=srv qcase rc_uc "$B send-bw $O -n 1000" "ib_send_bw $O -n 1000 -c UC" 18950
QCASE_UNDER=srv qcase rc_ud "$B send-bw $O -n 1000" "ib_send_bw $O -n 1000 -c UD" 18951
QCASE_UNDER=cli qcase uc_rc "ib_send_bw $O -n 1000" "$B send-bw $O -n 1000 -c UC --cq-timeout 3" 18952
QCASE_UNDER=cli qcase ud_rc "ib_send_bw $O -n 1000" "$B send-bw $O -n 1000 -c UD --cq-timeout 3" 18953
QCASE_UNDER=cli qcase n_more "ib_send_bw $O -n 2000" "$B send-bw $O -n 1000 --cq-timeout 3" 18954
QCASE_UNDER=cli qcase n_less "ib_send_bw $O -n 1000" "$B send-bw $O -n 2000 --cq-timeout 3" 18955
"#;

#[test]
fn mismatches_against_stock_perftest_are_named() {
    let Some(c) = Cases::boot(600, SCRIPT) else {
        return;
    };
    // (side under test, the texts its output must hold); each within 30 s. Exit 1:
    // refused with a reason; not killed (143) by the 40 s guard.
    for (name, wants) in [
        ("rc_uc.srv", ["not one message arrived", "-c RC", "same -c"]),
        ("rc_ud.srv", ["not one message arrived", "-c RC", "same -c"]),
        (
            "uc_rc.cli",
            ["has not ended its run", "with -c UC", "same flags"],
        ),
        (
            "ud_rc.cli",
            ["has not ended its run", "with -c UD", "same flags"],
        ),
        (
            "n_more.cli",
            ["has not ended its run", "-n 1000", "-n or -q differ"],
        ),
        ("n_less.cli", ["smaller -n", "perhaps 1000", "same -n"]),
    ] {
        c.expect_refused(name, name, &wants, 30.0);
        // No advice to run longer.
        c.expect_absent(name, name, &["run longer (-n or -D)"]);
    }
    c.finish();
}
