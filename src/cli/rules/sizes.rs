//! Message size, the test buffer and the mode (duration or iterations).

use super::rule::{parsed, refuse, refuse_with, Rule};
use crate::cli::defaults::{MAX_ITER, MIN_ITER};
use crate::cli::values::Mode;

pub const RULES: &[Rule] = &[
    Rule {
        name: "size_range",
        mirrors: "parser -s: 1..UINT_MAX/2",
        check: |c| {
            let size = c.size;
            refuse_with(size == 0 || size > u32::MAX as u64 / 2, || {
                format!("-s {size}: size must be between 1 and {}", u32::MAX / 2)
            })
        },
    },
    Rule {
        name: "buffer_memory",
        mirrors: "parser/force_dependecies --use_hugepages, --mmap, --payload_file_path, \
                  --use-null-mr, --odp, --use-srq (mem_opts.rs)",
        check: |c| parsed(&c.mem),
    },
    Rule {
        name: "duration_positive",
        mirrors: "parser -D: a duration of at least one second",
        check: |c| {
            refuse(
                matches!(c.mode, Mode::Duration { secs: 0, .. }),
                "-D 0: the duration must be at least 1 second",
            )
        },
    },
    Rule {
        name: "duration_over_margins",
        mirrors: "force_dependecies: the duration must exceed twice the margin",
        check: |c| match c.mode {
            Mode::Duration { secs: d, margin } if d <= 2 * margin => Err(format!(
                "-D {d} -f {margin}: the duration must exceed twice the margin (D > 2*f); \
                 lengthen -D or shorten -f"
            )),
            _ => Ok(()),
        },
    },
    Rule {
        name: "margin_needs_duration",
        mirrors: "parser -f: the margin of duration mode",
        check: |c| {
            refuse(
                !c.is_dur && c.a.margin.is_some(),
                "-f (margin) applies to duration mode only; add -D",
            )
        },
    },
    Rule {
        name: "iters_min",
        mirrors: "parser -n: at least MIN_ITER",
        check: |c| {
            let iters = c.iters;
            refuse_with(!c.is_dur && iters < MIN_ITER, || {
                format!("-n {iters}: at least {MIN_ITER} iterations are needed")
            })
        },
    },
    Rule {
        name: "iters_max",
        mirrors: "parser -n: at most MAX_ITER (master 2^32; 4.5: 10^8)",
        check: |c| {
            let iters = c.iters;
            refuse_with(iters > MAX_ITER, || {
                format!(
                    "-n {iters}: at most {MAX_ITER} iterations (perftest's limit); use -D for longer runs"
                )
            })
        },
    },
];
