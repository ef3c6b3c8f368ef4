//! Connection and report features: the GRH and connection flags, `-R`'s
//! retry count, `--wait_destroy`, `-W`, `--cpu_util` and the atomic flags.

use super::rule::{parsed, refuse, threaded, Rule};
use crate::cli::kinds::Verb;

pub const RULES: &[Rule] = &[
    Rule {
        name: "flow_label",
        mirrors: "parser --flow_label (a comma list, strtol base 0 each)",
        check: |c| parsed(&c.flow_labels),
    },
    Rule {
        name: "grh_with_cm",
        mirrors: "perftest ignores --tclass/--flow_label under rdma_cm (rdmaperf refuses)",
        check: |c| {
            refuse(
                c.a.rdma_cm && (c.a.tclass.is_some() || c.a.flow_label.is_some()),
                "--tclass/--flow_label with -R: the RDMA CM builds the data QPs' GRH itself \
                 (perftest ignores them there); drop -R, or drop --tclass/--flow_label",
            )
        },
    },
    Rule {
        name: "connection_flags",
        mirrors:
            "parser/force_dependecies -T, -z, --ipv6, --ipv6-addr, --bind_source_ip (conn_rules.rs)",
        check: |c| parsed(&c.conn_opts),
    },
    Rule {
        name: "retry_count_needs_cm",
        mirrors: "parser --retry_count: rdma_cm's connect retry count",
        check: |c| {
            refuse(
                c.a.retry_count.is_some() && !c.a.rdma_cm,
                "--retry_count sets rdma_cm's connect retry count; add -R (without it the QPs' retry \
                 count is perftest's 7)",
            )
        },
    },
    Rule {
        name: "retry_count_3_bits",
        mirrors: "rdma_conn_param.retry_count is a 3-bit field",
        check: |c| {
            refuse(
                c.a.retry_count.is_some_and(|r| r > 7),
                "--retry_count: the retry count is a 3-bit field; give 0..7",
            )
        },
    },
    Rule {
        name: "wait_destroy_bw_only",
        mirrors: "usage: --wait_destroy is listed for the bw tests",
        check: |c| {
            refuse(
                c.a.wait_destroy.is_some() && !c.bw,
                "--wait_destroy applies to bw tests (as in perftest); drop it",
            )
        },
    },
    Rule {
        name: "counter_names",
        mirrors: "parser -W: a comma list of sysfs counter names",
        check: |c| parsed(&c.counters),
    },
    Rule {
        name: "counters_not_yet",
        mirrors: "rdmaperf: -W not implemented yet for -b, --threads and send-bw",
        check: |c| {
            let named = c.counters.as_ref().is_ok_and(|l| !l.is_empty());
            refuse(
                named && (c.a.bidirectional || (c.verb == Verb::Send && c.bw) || threaded(c)),
                "-W: not implemented yet in rdmaperf for -b, --threads and send-bw; it runs with \
                 write-bw, read-bw, atomic-bw and the latency tools",
            )
        },
    },
    Rule {
        name: "cpu_util_duration",
        mirrors: "force_dependecies: CPU utilisation is measured in duration mode only",
        check: |c| {
            refuse(
                c.a.cpu_util && c.a.duration.is_none(),
                "--cpu_util: CPU utilisation is measured in duration mode only (as in perftest); add -D",
            )
        },
    },
    Rule {
        name: "cpu_util_not_yet",
        mirrors: "rdmaperf: --cpu_util not implemented yet for --run_infinitely, -b, send-bw",
        check: |c| {
            refuse(
                c.a.cpu_util
                    && (c.a.run_infinitely || c.a.bidirectional || (c.verb == Verb::Send && c.bw)),
                "--cpu_util: not implemented yet in rdmaperf for --run_infinitely, -b or send-bw; \
                 it runs with write-bw, read-bw, atomic-bw and the latency tools under -D",
            )
        },
    },
    Rule {
        name: "atomic_type_atomic_only",
        mirrors: "parser -A: the atomic tests' option",
        check: |c| {
            refuse(
                c.a.atomic_type.is_some() && c.verb != Verb::Atomic,
                "-A applies to atomic tests only",
            )
        },
    },
    Rule {
        name: "atomic_size",
        mirrors: "force_dependecies: message size cannot be changed for atomic tests",
        check: |c| {
            refuse(
                c.verb == Verb::Atomic && (c.a.size.is_some_and(|s| s != 8) || c.a.all),
                "message size cannot be changed for atomic tests (always 8 bytes); drop -s/-a",
            )
        },
    },
    Rule {
        name: "atomic_type",
        mirrors: "parser -A: CMP_AND_SWAP or FETCH_AND_ADD",
        check: |c| parsed(&c.atomic_type),
    },
];
