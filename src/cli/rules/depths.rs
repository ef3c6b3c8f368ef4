//! Threads, QPs and the queue depths: post list, TX depth, CQ moderation,
//! inline size and MTU.

use super::rule::{parsed, refuse, refuse_with, Rule};
use crate::cli::defaults::{MAX_CQ_MOD, MAX_QP_NUM, MAX_TX};

pub const RULES: &[Rule] = &[
    Rule {
        name: "threads_positive",
        mirrors: "rdmaperf --threads: at least one thread",
        check: |c| refuse(c.threads == 0, "--threads 0: at least one thread is needed"),
    },
    Rule {
        name: "threads_bw_only",
        mirrors: "rdmaperf --threads: the bw engine runs the threads",
        check: |c| {
            refuse(
                c.threads > 1 && !c.bw,
                "--threads applies to bw tests only; drop --threads",
            )
        },
    },
    Rule {
        name: "cpu_list",
        mirrors: "rdmaperf --cpus: a CPU list as taskset reads it",
        check: |c| parsed(&c.cpus),
    },
    Rule {
        name: "qps_range",
        mirrors: "parser -q: 1..MAX_QP_NUM",
        check: |c| {
            let n = c.num_qps;
            refuse_with(n == 0 || n > MAX_QP_NUM, || {
                format!("-q {n}: the number of QPs must be 1..{MAX_QP_NUM}")
            })
        },
    },
    Rule {
        name: "qp_per_thread",
        mirrors: "rdmaperf --threads: each thread owns its QPs",
        check: |c| {
            let (t, n) = (c.threads, c.num_qps);
            refuse_with(n < t, || {
                format!("--threads {t} -q {n}: every thread needs its own QP; use -q {t} or more")
            })
        },
    },
    Rule {
        name: "post_list_positive",
        mirrors: "parser -l: at least one WR",
        check: |c| {
            refuse(
                c.post_list == 0,
                "-l 0: the post list must hold at least one WR",
            )
        },
    },
    Rule {
        name: "iters_whole_post_lists",
        mirrors: "force_dependecies: iterations must be a multiple of the post list",
        check: |c| {
            let (iters, l) = (c.iters, c.post_list as u64);
            refuse_with(!c.is_dur && iters % l != 0, || {
                format!(
                    "-n {iters} -l {l}: the iteration count must be a multiple of the post list; \
                     use -n {}",
                    (iters / l + 1) * l
                )
            })
        },
    },
    Rule {
        name: "tx_depth_range",
        mirrors: "parser -t: 1..MAX_TX",
        check: |c| {
            let t = c.tx_given;
            refuse_with(t == 0 || t > MAX_TX, || {
                format!("-t {t}: TX depth must be 1..{MAX_TX}")
            })
        },
    },
    Rule {
        name: "tx_depth_holds_post_list",
        mirrors: "force_dependecies: the TX depth must hold a post list",
        check: |c| {
            let (t, l) = (c.tx_depth, c.post_list);
            refuse_with(t < l, || {
                format!("-t {t} -l {l}: the TX depth must hold a whole post list; raise -t")
            })
        },
    },
    Rule {
        name: "cq_mod_range",
        mirrors: "parser -Q: MIN_CQ_MOD..MAX_CQ_MOD",
        check: |c| match c.a.cq_mod {
            Some(q) if q == 0 || q > MAX_CQ_MOD => {
                Err(format!("-Q {q}: CQ moderation must be 1..{MAX_CQ_MOD}"))
            }
            _ => Ok(()),
        },
    },
    Rule {
        name: "post_list_whole_cq_mods",
        mirrors: "force_dependecies: the post list must be a multiple of the CQ moderation",
        check: |c| {
            let (l, q) = (c.post_list, c.cq_mod);
            refuse_with(l > 1 && l % q != 0, || {
                format!(
                    "-l {l} -Q {q}: the post list must be a multiple of the CQ moderation; \
                     use -Q {l} or a divisor of it"
                )
            })
        },
    },
    Rule {
        name: "inline_max",
        mirrors: "parser -I: at most MAX_INLINE (master 1024)",
        check: |c| {
            let i = c.inline_size;
            refuse_with(i > 1024, || {
                format!("-I {i}: inline size must be at most 1024")
            })
        },
    },
    Rule {
        name: "mtu",
        mirrors: "parser -m: 256..4096",
        check: |c| parsed(&c.mtu),
    },
];
