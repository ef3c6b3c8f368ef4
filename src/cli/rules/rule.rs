//! A row of the rules table and the small helpers the rows share.

use super::ctx::Ctx;

/// One rule.
pub struct Rule {
    /// What it refuses, as a short name.
    pub name: &'static str,
    /// The perftest rule it mirrors, or why rdmaperf adds it.
    pub mirrors: &'static str,
    /// Ok, or the refusal with its fix.
    pub check: fn(&Ctx) -> Result<(), String>,
}

/// Refuses with `msg` when `bad`.
pub fn refuse(bad: bool, msg: &str) -> Result<(), String> {
    if bad {
        Err(msg.to_string())
    } else {
        Ok(())
    }
}

/// Refuses with the message `msg` builds when `bad`.
pub fn refuse_with(bad: bool, msg: impl FnOnce() -> String) -> Result<(), String> {
    if bad {
        Err(msg())
    } else {
        Ok(())
    }
}

/// The refusal a parsed value holds (its row stands where perftest parses it).
pub fn parsed<T>(r: &Result<T, String>) -> Result<(), String> {
    r.as_ref().map(|_| ()).map_err(Clone::clone)
}

/// `--threads N` with N > 1.
pub fn threaded(c: &Ctx) -> bool {
    c.a.threads.is_some_and(|t| t > 1)
}
