//! The connection type and the tool's verb.

use super::rule::{parsed, refuse, Rule};
use crate::cli::kinds::{Conn, Verb};

pub const RULES: &[Rule] = &[
    Rule {
        name: "connection_type",
        mirrors: "parser -c: RC, UC, UD (perftest's XRC, DC and SRD are not implemented here)",
        check: |c| parsed(&c.conn_given),
    },
    Rule {
        name: "multicast",
        mirrors: "parser/force_dependecies -g/-M (mcast_rules.rs)",
        check: |c| parsed(&c.mcast),
    },
    Rule {
        name: "uc_read_atomic",
        mirrors: "force_dependecies: UC connection not possible in READ/ATOMIC verbs",
        check: |c| {
            refuse(
                c.conn == Conn::Uc && matches!(c.verb, Verb::Read | Verb::Atomic),
                "-c UC: UC connection not possible in READ/ATOMIC verbs; use -c RC",
            )
        },
    },
    Rule {
        name: "ud_send_only",
        mirrors: "force_dependecies: UD connection only possible in SEND verb",
        check: |c| {
            refuse(
                c.conn == Conn::Ud && c.verb != Verb::Send,
                "-c UD: UD connection only possible in SEND verb; use send-bw/send-lat or -c RC",
            )
        },
    },
];
