//! The receive side: `--recv_post_list` (perftest's rules, then rdmaperf's
//! reach) and `--use-srq`'s rules that need the resolved depths and post
//! method.

use super::ctx::Ctx;
use super::rule::{refuse, refuse_with, Rule};
use crate::cli::kinds::{PostChoice, Verb};

/// `--recv_post_list N` with N > 1 (0 is refused, 1 is the default).
fn recv_list(c: &Ctx) -> Option<u32> {
    c.a.recv_post_list.filter(|&n| n > 1)
}

pub const RULES: &[Rule] = &[
    Rule {
        name: "recv_list_positive",
        mirrors: "parser --recv_post_list: at least one WR",
        check: |c| {
            refuse(
                c.a.recv_post_list == Some(0),
                "--recv_post_list=0: the receive post list must hold at least one WR",
            )
        },
    },
    Rule {
        name: "recv_list_bw_only",
        mirrors: "force_dependecies: receive post list is supported in BW tests only",
        check: |c| {
            refuse(
                recv_list(c).is_some() && !c.bw,
                "--recv_post_list: receive post list is supported in BW tests only (perftest's \
                 rule); drop it",
            )
        },
    },
    Rule {
        name: "iters_whole_recv_lists",
        mirrors: "force_dependecies: iterations must be a multiple of the receive post list",
        check: |c| match recv_list(c).map(u64::from) {
            Some(n) if !c.is_dur && c.iters % n != 0 => Err(format!(
                "-n {} --recv_post_list={n}: the number of iterations must be a multiple of \
                 the receive post list size (perftest's rule); use -n {}",
                c.iters,
                (c.iters / n + 1) * n
            )),
            _ => Ok(()),
        },
    },
    Rule {
        name: "recv_list_send_bw",
        mirrors: "rdmaperf: receive lists implemented for unidirectional send-bw",
        check: |c| {
            refuse(
                recv_list(c).is_some() && (c.verb != Verb::Send || c.a.bidirectional),
                "--recv_post_list: not implemented yet in rdmaperf beyond unidirectional send-bw \
                 (write/read/atomic-bw post no receives; -b and --write_with_imm not yet); drop it",
            )
        },
    },
    Rule {
        name: "rx_depth_holds_recv_list",
        mirrors: "perftest posts rx_depth / recv_post_list lists",
        check: |c| match recv_list(c) {
            Some(n) if c.rx_depth < n => Err(format!(
                "-r {} --recv_post_list={n}: the receive queue must hold one whole list \
                 (perftest posts rx_depth / recv_post_list lists); raise -r or lower the list",
                c.rx_depth
            )),
            _ => Ok(()),
        },
    },
    Rule {
        name: "srq_depth_over_qps",
        mirrors: "force_dependecies: Using SRQ depth should be greater than number of QPs",
        check: |c| {
            let (q, r) = (c.num_qps, c.rx_depth);
            refuse_with(c.a.use_srq && q > r, || {
                format!(
                    "--use-srq -q {q} -r {r}: the SRQ depth must be at least the number of QPs (perftest: \
                     \"Using SRQ depth should be greater than number of QPs\"); raise -r to {q} or more"
                )
            })
        },
    },
    Rule {
        name: "srq_not_direct",
        mirrors: "rdmaperf: the direct path's mlx5dv QPs have no SRQ",
        check: |c| {
            refuse(
                c.a.use_srq && c.post == PostChoice::Direct,
                "--use-srq with --post direct: the direct path's QPs are created through mlx5dv \
                 without an SRQ; use --post wr-api or post-send",
            )
        },
    },
    Rule {
        name: "srq_not_recv_list",
        mirrors: "rdmaperf: an SRQ's per-QP share need not hold whole receive lists",
        check: |c| {
            refuse(
                c.a.use_srq && c.a.recv_post_list.is_some_and(|n| n > 1),
                "--use-srq with --recv_post_list: not implemented yet in rdmaperf (the SRQ's per-QP \
                 share need not hold whole receive lists); drop one of them",
            )
        },
    },
    Rule {
        name: "srq_not_cm",
        mirrors: "rdmaperf: the CM-created data QPs get no SRQ",
        check: |c| {
            refuse(
                c.a.use_srq && c.a.rdma_cm,
                "--use-srq with -R: not implemented yet in rdmaperf (the CM-created data QPs get no \
                 SRQ); drop -R or --use-srq",
            )
        },
    },
];
