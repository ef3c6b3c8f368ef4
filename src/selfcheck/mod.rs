//! `rdmaperf selfcheck [-d DEV] [--json F]`: the first command to run on new
//! hardware, and what a bug report attaches. In loopback on one device, for
//! every post method the device supports, every op on every transport that
//! allows it ([`cases`]) is posted and checked ([`exec`]): bytes where they
//! landed, completions, the bad rkey's error and the QP after recovery.
//! Prints a method × case table and the device facts; the exit status is 1
//! if any case failed.
//!
//! Methods: `post-send` and `wr-api` on the device ([`verbs_rig`]); `direct`
//! is set up on the device to report its facts (or why it is unavailable),
//! and its cases run on the queue model ([`model_rig`], feature `model`, in
//! the tests). The raw packet methods (`direct`, `direct-mpw`,
//! `direct-mpw-inline`: [`raw_cases`], [`raw_exec`]) run on the queue
//! model's Ethernet port ([`raw_model_rig`], in the tests); on a device they
//! are listed SKIPPED with the reason.

pub mod cases;
pub mod direct_rig;
pub mod exec;
#[cfg(feature = "model")]
pub mod model_flow;
#[cfg(feature = "model")]
pub mod model_port;
#[cfg(feature = "model")]
pub mod model_rig;
pub mod raw_cases;
pub mod raw_exec;
#[cfg(feature = "model")]
pub mod raw_model_rig;
#[cfg(feature = "model")]
pub mod raw_pair_model;
mod rig_parts;
pub mod verbs_rig;

use std::fmt::Write as _;

use cases::{Case, Tr};
use exec::{run_case, Rig};

/// What became of one case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Ok,
    Failed(String),
    /// Not run (e.g. the transport is not offered), with the reason.
    NotRun(String),
}

/// One post method's results.
#[derive(Clone, Debug)]
pub struct MethodRun {
    pub method: &'static str,
    /// Why the method did not run at all.
    pub unavailable: Option<String>,
    pub cases: Vec<(Case, Outcome)>,
}

impl MethodRun {
    pub fn unavailable(method: &'static str, why: String) -> Self {
        Self {
            method,
            unavailable: Some(why),
            cases: Vec::new(),
        }
    }

    pub fn failures(&self) -> usize {
        self.cases
            .iter()
            .filter(|(_, o)| matches!(o, Outcome::Failed(_)))
            .count()
    }
}

impl Outcome {
    /// One case's JSON row; `not_run` is the status word for [`Outcome::NotRun`] (the methods
    /// say "n/a", the raw cases "skipped").
    pub fn json(&self, case: &impl std::fmt::Display, not_run: &str) -> serde_json::Value {
        let (status, reason) = match self {
            Outcome::Ok => ("ok", None),
            Outcome::Failed(e) => ("failed", Some(e.clone())),
            Outcome::NotRun(e) => (not_run, Some(e.clone())),
        };
        serde_json::json!({"case": case.to_string(), "status": status, "reason": reason})
    }
}

/// Runs every case of every transport for one method; `rig(tr)` builds the
/// rig (an `Err` marks that transport's cases not run); `before(i, rig)` is
/// called before case `i` (fault injection in tests).
pub fn run_method<'r>(
    method: &'static str,
    mut rig: impl FnMut(Tr) -> Result<Box<dyn Rig + 'r>, String>,
    mut before: impl FnMut(usize, &Case, &mut dyn Rig),
) -> MethodRun {
    let mut out = Vec::new();
    let mut index = 0;
    for tr in Tr::ALL {
        let mut r = match rig(tr) {
            Ok(r) => r,
            Err(why) => {
                for c in cases::cases(tr, 0) {
                    out.push((c, Outcome::NotRun(why.clone())));
                }
                continue;
            }
        };
        for c in cases::cases(tr, r.max_inline()) {
            before(index, &c, r.as_mut());
            index += 1;
            let o = match run_case(r.as_mut(), &c) {
                Ok(()) => Outcome::Ok,
                Err(e) => {
                    // Leave the QP usable for the next case.
                    let e = match r.recover() {
                        Ok(()) => e,
                        Err(r2) => format!("{e}; recovery failed: {r2}"),
                    };
                    Outcome::Failed(e)
                }
            };
            out.push((c, o));
        }
    }
    MethodRun {
        method,
        unavailable: None,
        cases: out,
    }
}

/// The method × case table, then one line per failed case with its reason.
pub fn table(runs: &[MethodRun]) -> String {
    let mut rows: Vec<Case> = Vec::new();
    for r in runs {
        for (c, _) in &r.cases {
            if !rows.contains(c) {
                rows.push(*c);
            }
        }
    }
    let mut s = String::new();
    let _ = write!(s, " {:<32}", "case");
    for r in runs {
        let _ = write!(s, " {:>10}", r.method);
    }
    s.push('\n');
    for c in &rows {
        let _ = write!(s, " {:<32}", c.to_string());
        for r in runs {
            let cell = match (&r.unavailable, r.cases.iter().find(|(x, _)| x == c)) {
                (Some(_), _) => "-",
                (_, Some((_, Outcome::Ok))) => "ok",
                (_, Some((_, Outcome::Failed(_)))) => "FAILED",
                (_, Some((_, Outcome::NotRun(_)))) => "n/a",
                (_, None) => "-",
            };
            let _ = write!(s, " {cell:>10}");
        }
        s.push('\n');
    }
    for r in runs {
        if let Some(why) = &r.unavailable {
            let _ = writeln!(s, " {}: unavailable: {why}", r.method);
            continue;
        }
        let mut notrun: Vec<&str> = Vec::new();
        for (c, o) in &r.cases {
            match o {
                Outcome::Failed(e) => {
                    let _ = writeln!(s, " FAILED {} / {c}: {e}", r.method);
                }
                Outcome::NotRun(why) if !notrun.contains(&why.as_str()) => {
                    notrun.push(why);
                    let _ = writeln!(s, " {}: {} cases n/a: {why}", r.method, c.tr.name());
                }
                _ => {}
            }
        }
    }
    s
}

/// `selfcheck: N cases ok` or `selfcheck: K of N cases FAILED`.
pub fn summary(runs: &[MethodRun]) -> (String, bool) {
    let ran: usize = runs
        .iter()
        .map(|r| {
            r.cases
                .iter()
                .filter(|(_, o)| !matches!(o, Outcome::NotRun(_)))
                .count()
        })
        .sum();
    let failed: usize = runs.iter().map(MethodRun::failures).sum();
    if failed == 0 {
        (format!(" selfcheck: all {ran} cases ok\n"), true)
    } else {
        (
            format!(" selfcheck: {failed} of {ran} cases FAILED (see the lines above)\n"),
            false,
        )
    }
}

/// The runs as JSON (for `--json F` and bug reports).
pub fn json(facts: &[(String, String)], runs: &[MethodRun]) -> serde_json::Value {
    use serde_json::{json, Map, Value};
    let mut f = Map::new();
    for (k, v) in facts {
        f.insert(k.clone(), Value::from(v.as_str()));
    }
    let methods: Vec<Value> = runs
        .iter()
        .map(|r| {
            let cases: Vec<Value> = r.cases.iter().map(|(c, o)| o.json(c, "n/a")).collect();
            json!({
                "method": r.method,
                "unavailable": r.unavailable,
                "failed": r.failures(),
                "cases": cases,
            })
        })
        .collect();
    let failed: usize = runs.iter().map(MethodRun::failures).sum();
    json!({"device": Value::Object(f), "methods": methods, "failed": failed})
}

pub mod cli;
