//! The flags each kind of tool takes: bw-only flags, events, duration
//! against a sweep or a count, inline and immediate data by verb, and the
//! latency sample reports.

use super::rule::{refuse, refuse_with, Rule};
use crate::cli::args::PerfArgs;
use crate::cli::kinds::Verb;

pub const RULES: &[Rule] = &[
    Rule {
        name: "outs_read_atomic_only",
        mirrors: "parser: -o, Setting Outstanding reads only available on READ verb",
        check: |c| {
            refuse(
                c.a.outs.is_some() && !matches!(c.verb, Verb::Read | Verb::Atomic),
                "-o: setting outstanding reads is only available on the READ and atomic verbs \
                 (as in perftest); drop -o, or use read-bw, read-lat or atomic-bw",
            )
        },
    },
    Rule {
        name: "qps_bw_only",
        mirrors: "force_dependecies: multiple QPs only available on bw tests (master 2026-01)",
        check: |c| {
            refuse(
                !c.bw && c.a.qps.is_some_and(|q| q > 1),
                "-q: multiple QPs only available on bw tests; drop -q or use a *-bw tool",
            )
        },
    },
    Rule {
        name: "post_list_bw_only",
        mirrors: "force_dependecies: post list is supported in BW tests only",
        check: |c| {
            refuse(
                !c.bw && c.a.post_list.is_some_and(|l| l > 1),
                "-l: post list is supported in BW tests only; drop -l",
            )
        },
    },
    Rule {
        name: "bidirectional_bw_only",
        mirrors: "force_dependecies: bidirectional is only available in BW tests",
        check: |c| {
            refuse(
                !c.bw && c.a.bidirectional,
                "-b: bidirectional is only available in BW tests; drop -b",
            )
        },
    },
    Rule {
        name: "run_infinitely_bw_only",
        mirrors: "force_dependecies: run_infinitely is only available in BW tests",
        check: |c| {
            refuse(
                !c.bw && c.a.run_infinitely,
                "--run_infinitely is only available in BW tests; use -D for latency",
            )
        },
    },
    Rule {
        name: "events_not_write",
        mirrors: "force_dependecies: events feature not available on WRITE verb",
        check: |c| {
            refuse(
                c.a.events && c.verb == Verb::Write,
                "-e: events feature not available on WRITE verb; drop -e",
            )
        },
    },
    Rule {
        name: "events_not_duration",
        mirrors: "force_dependecies: duration mode doesn't work with events",
        check: |c| {
            refuse(
                c.a.events && (c.a.duration.is_some() || c.a.run_infinitely),
                "-e: duration mode doesn't work with events; use -n instead of -D",
            )
        },
    },
    Rule {
        name: "duration_not_all",
        mirrors: "force_dependecies: duration and -a are incompatible",
        check: |c| {
            refuse(
                c.a.duration.is_some() && c.a.all,
                "-D and -a can't be combined: a size sweep runs a fixed number of iterations; use -n with -a",
            )
        },
    },
    Rule {
        name: "duration_not_iters",
        mirrors: "parser: -D sets the test type to duration, which ignores -n (rdmaperf refuses the pair)",
        check: |c| {
            refuse(
                c.a.duration.is_some() && c.a.iters.is_some(),
                "-D and -n can't be combined: choose a duration or an iteration count",
            )
        },
    },
    Rule {
        name: "inline_not_read_atomic",
        mirrors: "force_dependecies: inline feature not available on READ/Atomic verbs",
        check: |c| {
            refuse(
                c.a.inline_size.is_some() && matches!(c.verb, Verb::Read | Verb::Atomic),
                "-I: inline feature not available on READ/Atomic verbs; drop -I",
            )
        },
    },
    Rule {
        name: "write_imm_write_only",
        mirrors: "parser --write_with_imm (master): the WRITE_IMM verb of the write tests",
        check: |c| {
            refuse(
                c.a.write_with_imm && c.verb != Verb::Write,
                "--write_with_imm applies to write tests only",
            )
        },
    },
    Rule {
        name: "send_imm_send_only",
        mirrors: "parser --send_with_imm (master): the SEND_IMM verb of the send tests",
        check: |c| {
            refuse(
                c.a.send_with_imm && c.verb != Verb::Send,
                "--send_with_imm applies to send tests only",
            )
        },
    },
    Rule {
        name: "samples_latency_only",
        mirrors: "usage: -U, -H, -C are latency-test options",
        check: |c| {
            let flag = sample_flag(c.a);
            refuse_with(c.bw && flag.is_some(), || {
                format!(
                    "{}: available only on latency tests; use write-lat, read-lat, send-lat or atomic-lat",
                    flag.unwrap_or_default()
                )
            })
        },
    },
    Rule {
        name: "samples_not_duration",
        mirrors: "rdmaperf: duration-mode latency keeps no per-sample record",
        check: |c| {
            let flag = sample_flag(c.a);
            refuse_with(c.a.duration.is_some() && flag.is_some(), || {
                format!(
                    "{} with -D: duration-mode latency counts round trips without keeping each sample; \
                     use -n for per-sample reports",
                    flag.unwrap_or_default()
                )
            })
        },
    },
];

/// The first of `-U`, `-H`, `-C`, `--samples-file` given.
fn sample_flag(a: &PerfArgs) -> Option<&'static str> {
    [
        (a.report_unsorted, "-U"),
        (a.report_histogram, "-H"),
        (a.report_cycles, "-C"),
        (a.samples_file.is_some(), "--samples-file"),
    ]
    .into_iter()
    .find(|f| f.0)
    .map(|f| f.1)
}
