//! `--output`, the post method, `-R`'s reach, `--loopback` and the rate
//! limiter.

use super::rule::{parsed, refuse, refuse_with, Rule};
use crate::cli::kinds::{Conn, PostChoice};
use crate::cli::values::OutputKind;

pub const RULES: &[Rule] = &[
    Rule {
        name: "output",
        mirrors: "parser --output: bandwidth, message_rate or latency",
        check: |c| parsed(&c.output),
    },
    Rule {
        name: "output_latency_lat_only",
        mirrors: "force_dependecies: --output=latency is for latency tests",
        check: |c| {
            refuse(
                matches!(c.output, Ok(Some(OutputKind::Latency))) && c.bw,
                "--output=latency applies to latency tests; use bandwidth or message_rate",
            )
        },
    },
    Rule {
        name: "output_rate_bw_only",
        mirrors: "force_dependecies: --output=bandwidth/message_rate are for bw tests",
        check: |c| {
            refuse(
                matches!(
                    c.output,
                    Ok(Some(OutputKind::Bandwidth | OutputKind::MessageRate))
                ) && !c.bw,
                "--output=bandwidth/message_rate apply to bw tests; use --output=latency",
            )
        },
    },
    Rule {
        name: "post_method",
        mirrors: "rdmaperf --post: post-send, wr-api, direct or auto",
        check: |c| parsed(&c.post_given),
    },
    Rule {
        name: "old_post_send_alone",
        mirrors: "parser --use_old_post_send: ibv_post_send instead of the WR API",
        check: |c| {
            let given = c.post_given.as_ref().map_or(PostChoice::Auto, |p| *p);
            refuse_with(
                c.a.use_old_post_send && !matches!(given, PostChoice::Auto | PostChoice::PostSend),
                || {
                    format!(
                        "--use_old_post_send contradicts --post {}; give one of them",
                        given.name()
                    )
                },
            )
        },
    },
    Rule {
        name: "cm_not_uc",
        mirrors: "force_dependecies: UC is not supported in librdmacm",
        check: |c| {
            refuse(
                c.a.rdma_cm && c.conn == Conn::Uc,
                "-R: UC is not supported in librdmacm; use -c RC with -R, or drop -R for UC",
            )
        },
    },
    Rule {
        name: "cm_not_direct",
        mirrors: "rdmaperf: the direct path's mlx5dv QPs are connected by key messages",
        check: |c| {
            refuse(
                c.a.rdma_cm && c.post == PostChoice::Direct,
                "-R with --post direct: the direct path's mlx5dv QPs are connected by key messages \
                 only; use --post wr-api or post-send with -R",
            )
        },
    },
    Rule {
        name: "loopback_no_server",
        mirrors: "rdmaperf --loopback: both ends in one process",
        check: |c| {
            refuse(
                c.a.loopback && c.a.server.is_some(),
                "--loopback runs both ends itself; drop the server name",
            )
        },
    },
    Rule {
        name: "rate_limit",
        mirrors: "parser/force_dependecies --rate_limit and its flags (rate.rs)",
        check: |c| parsed(&c.rate),
    },
];
