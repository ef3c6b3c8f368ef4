//! perftest's parameter rules as a table, the way `explain::rules::RULES`
//! holds the counter signatures: one named row per rule, each saying which
//! perftest rule it mirrors (`perftest_parameters.c`: range checks in
//! `parser`, cross-option rules in `force_dependecies`) or why rdmaperf adds
//! it, and refusing with a message that names the problem and the fix.
//! [`check`] runs the rows in order over the parsed arguments ([`Ctx`]);
//! the first refusal is the answer. `params::resolve` runs it, then only
//! builds `Params`.
//!
//! The topics, in the order they run: the connection and the tool's verb
//! (`conn`), the flags each tool takes (`tool`), connection and report
//! features (`features`), size, buffers and mode (`sizes`), threads and queue
//! depths (`depths`), output and post method (`post`), pacing (`pace`),
//! traffic direction and data validation (`traffic`), receive lists and SRQ
//! (`recv`). The flag groups with their own files (`mcast_rules`,
//! `conn_rules`, `mem_opts`, `rate`) are one row each, at perftest's place.

mod conn;
pub mod ctx;
mod depths;
mod features;
mod pace;
mod parse;
mod post;
mod recv;
mod rule;
mod sizes;
mod tool;
mod traffic;

pub use ctx::Ctx;
pub use rule::Rule;

/// The topic tables in the order they run.
pub const RULES: &[&[Rule]] = &[
    conn::RULES,
    tool::RULES,
    features::RULES,
    sizes::RULES,
    depths::RULES,
    post::RULES,
    pace::RULES,
    traffic::RULES,
    recv::RULES,
];

/// Runs every row in order; the first refusal stops.
pub fn check(c: &Ctx) -> Result<(), String> {
    RULES
        .iter()
        .flat_map(|t| t.iter())
        .try_for_each(|r| (r.check)(c))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn every_row_is_named_once_and_says_what_it_mirrors() {
        let mut names = BTreeSet::new();
        for r in RULES.iter().flat_map(|t| t.iter()) {
            assert!(names.insert(r.name), "two rows named {}", r.name);
            assert!(!r.mirrors.trim().is_empty(), "{} mirrors nothing", r.name);
        }
        assert!(names.len() > 60, "{} rows", names.len());
    }
}
