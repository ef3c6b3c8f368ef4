//! Which way the traffic flows (`--reversed`) and what is checked on
//! arrival (`--data_validation`).

use super::rule::{refuse, threaded, Rule};
use crate::cli::kinds::Verb;

pub const RULES: &[Rule] = &[
    Rule {
        name: "reversed_bw_only",
        mirrors: "usage: --reversed is listed for the bw tests",
        check: |c| {
            refuse(
                c.a.reversed && !c.bw,
                "--reversed: perftest reverses the bandwidth tests only (its help lists it there); \
                 a latency test's two sides play the same ping-pong - drop it",
            )
        },
    },
    Rule {
        name: "reversed_not_cm",
        mirrors: "perftest's rdma_cm connect follows the traffic under --reversed",
        check: |c| {
            refuse(
                c.a.reversed && (c.a.rdma_cm || c.a.comm_rdma_cm),
                "--reversed with -R/-z: the rdma_cm connect would follow the traffic, and the \
                 sending side then has no address to resolve (perftest's too); drop -R/-z or --reversed",
            )
        },
    },
    Rule {
        name: "reversed_not_threads",
        mirrors: "rdmaperf: the threaded sender is the side that connects",
        check: |c| {
            refuse(
                c.a.reversed && threaded(c),
                "--reversed with --threads: not implemented yet in rdmaperf (the threaded sender \
                 is the side that connects); swap which host runs the server instead",
            )
        },
    },
    Rule {
        name: "validation_bw_only",
        mirrors: "force_dependecies (master): data validation in bandwidth tests only",
        check: |c| {
            refuse(
                c.a.data_validation && !c.bw,
                "--data_validation is only supported in bandwidth tests (perftest's rule)",
            )
        },
    },
    Rule {
        name: "validation_write_read",
        mirrors: "force_dependecies (master): data validation with WRITE or READ only",
        check: |c| {
            refuse(
                c.a.data_validation
                    && (!matches!(c.verb, Verb::Write | Verb::Read) || c.a.write_with_imm),
                "--data_validation is only supported with WRITE or READ verb (perftest's rule); use write-bw or read-bw",
            )
        },
    },
    Rule {
        name: "validation_rc",
        mirrors: "force_dependecies (master): data validation requires RC",
        check: |c| {
            let not_rc =
                c.a.connection
                    .as_deref()
                    .is_some_and(|t| !t.eq_ignore_ascii_case("RC"));
            refuse(
                c.a.data_validation && not_rc,
                "--data_validation requires RC connection type (perftest's rule); drop -c",
            )
        },
    },
    Rule {
        name: "validation_one_size",
        mirrors: "force_dependecies (master): data validation is incompatible with -a",
        check: |c| {
            refuse(
                c.a.data_validation && c.a.all,
                "--data_validation is incompatible with -a (run all sizes), as in perftest; give -s",
            )
        },
    },
    Rule {
        name: "validation_not_infinite",
        mirrors: "force_dependecies (master): data validation is incompatible with run_infinitely",
        check: |c| {
            refuse(
                c.a.data_validation && c.a.run_infinitely,
                "--data_validation is incompatible with --run_infinitely, as in perftest; use -D",
            )
        },
    },
    Rule {
        name: "validation_own_pattern",
        mirrors: "force_dependecies (master): data validation refuses a payload file and a null MR",
        check: |c| {
            refuse(
                c.a.data_validation && (c.a.payload_file_path.is_some() || c.a.use_null_mr),
                "--data_validation checks rdmaperf's own pattern: drop --payload_file_path/--use-null-mr (perftest refuses them too)",
            )
        },
    },
    Rule {
        name: "validation_not_mr_per_qp",
        mirrors: "force_dependecies (master): data validation is incompatible with mr_per_qp",
        check: |c| {
            refuse(
                c.a.data_validation && c.a.mr_per_qp,
                "--data_validation is incompatible with --mr_per_qp, as in perftest; drop --mr_per_qp",
            )
        },
    },
    Rule {
        name: "validation_not_yet",
        mirrors: "rdmaperf: data validation not implemented yet with -b or --threads",
        check: |c| {
            refuse(
                c.a.data_validation && (c.a.bidirectional || threaded(c)),
                "--data_validation with -b or --threads: not implemented yet in rdmaperf; drop -b/--threads",
            )
        },
    },
];
