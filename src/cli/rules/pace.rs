//! Pacing and polling: `--latency_gap`, `--perform_warm_up`, `--cqe_poll`,
//! `--report-both`.

use super::rule::{refuse, threaded, Rule};
use crate::cli::kinds::Verb;

pub const RULES: &[Rule] = &[
    Rule {
        name: "latency_gap_lat_only",
        mirrors: "force_dependecies: the latency gap is only for latency tests",
        check: |c| {
            refuse(
                c.a.latency_gap.is_some_and(|g| g > 0) && c.bw,
                "--latency_gap: the latency gap is only for latency tests (perftest's rule); use --rate_limit to pace a bw test",
            )
        },
    },
    Rule {
        name: "warm_up_rdma_bw_only",
        mirrors: "perform_warm_up runs in the write, read and atomic bw tests",
        check: |c| {
            refuse(
                c.a.perform_warm_up && (!c.bw || c.verb == Verb::Send),
                "--perform_warm_up: perftest warms up the write, read and atomic bw tests only; drop it (or use write-bw, read-bw, atomic-bw)",
            )
        },
    },
    Rule {
        name: "warm_up_not_write_imm",
        mirrors: "perform_warm_up skips the WRITE_IMM verb",
        check: |c| {
            refuse(
                c.a.perform_warm_up && c.a.write_with_imm,
                "--perform_warm_up: warm up is not supported for the WRITE_IMM verb (perftest skips it); drop --write_with_imm or --perform_warm_up",
            )
        },
    },
    Rule {
        name: "warm_up_not_yet",
        mirrors: "rdmaperf: warm-up not implemented yet with -b, --threads, --run_infinitely",
        check: |c| {
            refuse(
                c.a.perform_warm_up && (c.a.bidirectional || threaded(c) || c.a.run_infinitely),
                "--perform_warm_up with -b, --threads or --run_infinitely is not implemented yet in rdmaperf; drop one of them",
            )
        },
    },
    Rule {
        name: "cqe_poll_range",
        mirrors: "parser --cqe_poll: 1..65535",
        check: |c| match c.a.cqe_poll {
            Some(n) if !(1..=65535).contains(&n) => Err(format!(
                "--cqe_poll={n}: the CQE poll batch must be 1..65535 (perftest's range)"
            )),
            _ => Ok(()),
        },
    },
    Rule {
        name: "cqe_poll_bw_only",
        mirrors: "perftest's latency loops poll one completion at a time",
        check: |c| {
            refuse(
                c.a.cqe_poll.is_some() && !c.bw,
                "--cqe_poll: latency tests poll one completion at a time (perftest's loops too); drop it",
            )
        },
    },
    Rule {
        name: "report_both_bw_only",
        mirrors: "usage: --report-both is a bw-test option",
        check: |c| {
            refuse(
                c.a.report_both && !c.bw,
                "--report-both applies to bidirectional bw tests; use a *-bw tool with -b",
            )
        },
    },
    Rule {
        name: "report_both_needs_b",
        mirrors: "--report-both splits a bidirectional test's RX and TX",
        check: |c| {
            refuse(
                c.a.report_both && !c.a.bidirectional,
                "--report-both reports RX and TX separately on bidirectional tests; add -b",
            )
        },
    },
    Rule {
        name: "report_both_one_size",
        mirrors: "perftest reports each side separately for a single size only",
        check: |c| {
            refuse(
                c.a.report_both && c.a.all,
                "--report-both with -a: perftest reports each side separately for a single \
                 size only; drop -a (give -s)",
            )
        },
    },
];
