//! Walks perftest master's flag list (tests/data/perftest_master_flags.txt,
//! written from its --help and long options) and asserts that every flag,
//! in every spelling, is either implemented by rdmaperf (it parses and passes
//! the parameter rules) or refused with a sentence naming why - never clap's
//! generic error or a misleading "did you mean".

use rdmaperf::cli::{self, flags, params, Parsed};

struct Case {
    tool: String,
    short: Option<char>,
    long: String,
    value: Option<String>,
    extra: Vec<String>,
}

fn cases() -> Vec<Case> {
    let text = include_str!("data/perftest_master_flags.txt");
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            assert!(w.len() >= 4, "malformed line: {l}");
            Case {
                tool: w[0].to_string(),
                short: (w[1] != "-").then(|| w[1].trim_start_matches('-').chars().next().unwrap()),
                long: w[2].to_string(),
                value: (w[3] != "-").then(|| w[3].to_string()),
                extra: w[4..].iter().map(|s| s.to_string()).collect(),
            }
        })
        .collect()
}

/// What rdmaperf does with one command line: Ok(true) runs, Ok(false) prints
/// help/version and exits 0, Err(message) refuses.
fn outcome(argv: Vec<String>) -> Result<bool, String> {
    match cli::parse(argv) {
        Parsed::Tool(t, a) => params::resolve(t, &a).map(|_| true),
        Parsed::Print {
            text, status: 0, ..
        } => {
            assert!(text.starts_with("Version: "), "{text}");
            Ok(false)
        }
        Parsed::Print { text, .. } => Err(text),
        Parsed::Clap(e) if e.kind() == clap::error::ErrorKind::DisplayHelp => Ok(false),
        Parsed::Clap(e) => Err(format!("clap: {e}")),
        Parsed::Other(o) => panic!("unexpected command {o:?}"),
    }
}

fn spellings(c: &Case) -> Vec<Vec<String>> {
    let mut v = Vec::new();
    if let Some(s) = c.short {
        let mut a = vec![format!("-{s}")];
        a.extend(c.value.clone());
        v.push(a);
    }
    v.push(vec![match &c.value {
        Some(x) => format!("--{}={x}", c.long),
        None => format!("--{}", c.long),
    }]);
    if let Some(x) = &c.value {
        v.push(vec![format!("--{}", c.long), x.clone()]);
    }
    v
}

const REASONS: &[&str] = &[
    "needs ",
    "not implemented yet in rdmaperf",
    "belongs to perftest's raw_ethernet",
    "is refused: ",
    "was removed from perftest master",
];

#[test]
fn every_perftest_master_flag_is_implemented_or_refused_with_a_reason() {
    let cases = cases();
    assert!(
        cases.len() > 150,
        "the flag list has {} entries",
        cases.len()
    );
    let mut implemented = Vec::new();
    let mut refused = Vec::new();
    for c in &cases {
        for sp in spellings(c) {
            let mut argv = vec!["rdmaperf".to_string(), c.tool.clone()];
            argv.extend(sp.iter().cloned());
            argv.extend(c.extra.iter().cloned());
            let shown = argv[1..].join(" ");
            match outcome(argv) {
                Ok(_) => implemented.push(shown),
                Err(e) => {
                    for junk in [
                        "unexpected argument",
                        "tip:",
                        "did you mean",
                        "similar",
                        "Usage:",
                    ] {
                        assert!(!e.contains(junk), "`{shown}`: parser's generic error: {e}");
                    }
                    assert!(
                        e.contains(&format!("--{}", c.long))
                            || c.short.is_some_and(|s| e.contains(&format!("-{s}"))),
                        "`{shown}`: the refusal does not name the flag: {e}"
                    );
                    assert!(
                        REASONS.iter().any(|r| e.contains(r)),
                        "`{shown}`: the refusal gives no reason: {e}"
                    );
                    refused.push(shown);
                }
            }
        }
        // The code's table knows it, and agrees with what the parser did.
        let f = flags::by_long(&c.long)
            .unwrap_or_else(|| panic!("--{} is missing from cli::flags", c.long));
        assert_eq!(f.short, c.short, "--{}: short letter", c.long);
        assert_eq!(f.arg, c.value.is_some(), "--{}: takes a value", c.long);
    }
    // Nothing in the code's table that perftest does not have.
    for f in flags::PERFTEST_FLAGS {
        assert!(
            cases.iter().any(|c| c.long == f.long),
            "cli::flags lists --{}, which is not in the perftest flag list",
            f.long
        );
    }
    eprintln!(
        "{} spellings implemented, {} refused with a reason",
        implemented.len(),
        refused.len()
    );
}

fn refusal(args: &[&str]) -> String {
    let mut argv = vec!["rdmaperf".to_string()];
    argv.extend(args.iter().map(|s| s.to_string()));
    outcome(argv).expect_err("expected a refusal")
}

/// The misleading hints the issue found are gone.
#[test]
fn no_misleading_hints() {
    for (args, not) in [
        (&["write-lat", "--cpu_util"][..], "--cpus"),
        (&["write-lat", "--reversed"][..], "--events"),
    ] {
        let e = refusal(args);
        assert!(!e.contains(not), "{args:?}: {e}");
        assert!(e.contains(args[1]), "{e}");
    }
    assert!(outcome(vec!["rdmaperf".into(), "write-lat".into(), "-U".into()]).unwrap());
    // Once "--reversed: did you mean --events"; now implemented for bw tests.
    assert!(outcome(vec![
        "rdmaperf".into(),
        "write-bw".into(),
        "--reversed".into()
    ])
    .unwrap());
    // Once "--odp: did you mean --use_old_post_send"; now implemented.
    assert!(outcome(vec!["rdmaperf".into(), "write-bw".into(), "--odp".into()]).unwrap());
}

#[test]
fn refusal_texts() {
    // --use_cuda is implemented (tests/cli_gpu.rs); the other runtimes are not.
    // The last row: a refused flag inside a cluster of short flags.
    let cases: [(&[&str], &str); 7] = [
        (
            &["write-bw", "--use_rocm", "0"],
            "needs accelerator memory of a runtime",
        ),
        (&["write-bw", "--log_dci_streams=2"], "needs DC"),
        (&["write-bw", "--aes_xts"], "crypto"),
        (
            &["send-bw", "--connectionless"],
            "not implemented yet in rdmaperf",
        ),
        (&["write-bw", "-O"], "needs a second port"),
        (&["write-bw", "--report-per-port"], "needs a second port"),
        (&["write-bw", "-FO"], "dualport"),
    ];
    for (args, want) in cases {
        let e = refusal(args);
        assert!(e.contains(want), "{args:?}: {e}");
    }
}

#[test]
fn values_that_look_like_flags_are_values() {
    // "-O" is the device name here (-d-O), not the dual-port flag.
    let argv: Vec<String> = ["rdmaperf", "write-bw", "-d-O"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert!(matches!(cli::parse(argv), Parsed::Tool(..)));
}
