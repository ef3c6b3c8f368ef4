//! Entry point: multicall (`ib_write_bw` → `rdmaperf write-bw`), flag parsing,
//! and dispatch to the tools.

pub mod args;
pub mod conn_rules;
pub mod defaults;
pub mod flags;
pub mod gpu_args;
pub mod gpu_opts;
pub mod help;
pub mod kinds;
pub mod lists;
pub mod mcast_rules;
pub mod mem_opts;
pub mod names;
pub mod near_miss;
pub mod params;
pub mod rate;
pub mod rules;
#[cfg(test)]
pub(crate) mod test_args;
pub mod values;
pub mod version;

use crate::raw::tools::RawTool;
use args::{Cli, Command};
use clap::FromArgMatches;
use params::{Kind, Tool, Verb};

/// If invoked through a link named after a perftest tool, rewrite argv so that
/// `ib_write_bw -s 64 host` parses as `rdmaperf write-bw -s 64 host`
/// (`names::command_line`, whose refusal of a name rdmaperf lacks is dropped here).
pub fn multicall_argv(argv: Vec<String>) -> Vec<String> {
    names::command_line(argv.clone()).unwrap_or(argv)
}

/// What a command line asks for, after the perftest flag table and clap.
#[derive(Debug)]
pub enum Parsed {
    /// Run one of the eight tools.
    Tool(Tool, args::PerfArgs),
    /// Anything else clap parsed (compare, devices).
    Other(Command),
    /// clap's own answer (help, a malformed value, an unknown flag).
    Clap(clap::Error),
    /// Print this and exit with `status` (version, a refused perftest flag).
    Print {
        text: String,
        status: i32,
        stderr: bool,
    },
}

/// Parses a command line (multicall names already rewritten): refuses
/// perftest flags rdmaperf lacks with their reason, then lets clap parse.
pub fn parse(argv: Vec<String>) -> Parsed {
    let cmd = help::command();
    let sub_name = argv.get(1).cloned().unwrap_or_default();
    let sub = sub_name.as_str();
    let tool = Tool::ALL.iter().find(|t| t.0 == sub).map(|t| t.2);
    if sub == "compare" {
        if let Some(t) = argv.get(2).and_then(|s| crate::raw::cli::tool_of(s)) {
            return Parsed::Print {
                text: format!("{}\n", crate::raw::cli::no_compare(t)),
                status: 2,
                stderr: true,
            };
        }
    }
    if tool.is_some() || sub == "compare" {
        let sc = cmd.find_subcommand(sub);
        let takes_value = |long: &str| {
            sc.and_then(|c| c.get_arguments().find(|a| a.get_long() == Some(long)))
                .is_some_and(|a| a.get_action().takes_values())
        };
        if let Err(e) = flags::check(&argv[2..], takes_value) {
            return Parsed::Print {
                text: format!("rdmaperf {sub}: {e}\n"),
                status: 2,
                stderr: true,
            };
        }
    }
    let own: Vec<String> = cmd
        .find_subcommand(sub)
        .unwrap_or(&cmd)
        .get_arguments()
        .filter_map(|a| a.get_long().map(String::from))
        .collect();
    let cli = match cmd
        .try_get_matches_from(argv)
        .and_then(|m| Cli::from_arg_matches(&m))
    {
        Ok(c) => c,
        Err(e) => return clap_error(e, sub, &own),
    };
    let (tool, a) = match tool_args(cli.cmd) {
        Ok(t) => t,
        Err(other) => return Parsed::Other(*other),
    };
    if a.version {
        return Parsed::Print {
            text: help::version_text(tool),
            status: 0,
            stderr: false,
        };
    }
    Parsed::Tool(tool, a)
}

/// clap's error, except an unknown flag: one sentence naming the flag meant
/// (`near_miss`) instead of clap's tip and a usage line that is not the command's.
fn clap_error(e: clap::Error, sub: &str, own: &[String]) -> Parsed {
    use clap::error::{ContextKind, ContextValue, ErrorKind};
    let given = match (e.kind(), e.get(ContextKind::InvalidArg)) {
        (ErrorKind::UnknownArgument, Some(ContextValue::String(s))) => s.clone(),
        _ => return Parsed::Clap(e),
    };
    let sub = if help::command().find_subcommand(sub).is_some() {
        sub
    } else {
        ""
    };
    Parsed::Print {
        text: near_miss::sentence(sub, &given, own),
        status: 2,
        stderr: true,
    }
}

/// A tool's subcommand as its tool and flags (another command as it is).
fn tool_args(cmd: Command) -> Result<(Tool, args::PerfArgs), Box<Command>> {
    let (verb, kind, a) = match cmd {
        Command::WriteBw(a) => (Verb::Write, Kind::Bw, a),
        Command::ReadBw(a) => (Verb::Read, Kind::Bw, a),
        Command::SendBw(a) => (Verb::Send, Kind::Bw, a),
        Command::AtomicBw(a) => (Verb::Atomic, Kind::Bw, a),
        Command::WriteLat(a) => (Verb::Write, Kind::Lat, a),
        Command::ReadLat(a) => (Verb::Read, Kind::Lat, a),
        Command::SendLat(a) => (Verb::Send, Kind::Lat, a),
        Command::AtomicLat(a) => (Verb::Atomic, Kind::Lat, a),
        other => return Err(Box::new(other)),
    };
    Ok((Tool { verb, kind }, a))
}

/// Runs the command line (`names::command_line` already applied: `src/main.rs`
/// needs it before dispatching `fabric`); returns the process exit status.
pub fn main(argv: Vec<String>) -> i32 {
    // `selfcheck` has its own flags too (crate::selfcheck::cli).
    if argv.get(1).map(String::as_str) == Some("selfcheck") {
        return crate::selfcheck::cli::main(&argv[2..]);
    }
    // `doctor` too (crate::explain::doctor).
    if argv.get(1).map(String::as_str) == Some("doctor") {
        return crate::explain::doctor::main(&argv[2..]);
    }
    // The raw Ethernet tools have their own flag table (crate::raw::cli).
    if argv.get(1).map(String::as_str) == Some("compare")
        && argv.get(2).and_then(|s| crate::raw::cli::tool_of(s)) == Some(RawTool::Bw)
    {
        return crate::tool::runs::raw_compare::main(&argv[3..]);
    }
    if let Some(t) = argv.get(1).and_then(|s| crate::raw::cli::tool_of(s)) {
        return crate::tool::runs::raw_bw::main(t, &argv[2..]);
    }
    match parse(argv) {
        Parsed::Print {
            text,
            status,
            stderr,
        } => {
            if stderr {
                eprint!("{text}");
            } else {
                print!("{text}");
            }
            status
        }
        Parsed::Clap(e) => {
            let _ = e.print();
            if e.use_stderr() {
                2
            } else {
                0
            }
        }
        Parsed::Tool(tool, a) => match params::resolve(tool, &a) {
            Ok(p) => crate::tool::run(p),
            Err(e) => {
                eprintln!("rdmaperf {}: {e}", tool.name());
                2
            }
        },
        Parsed::Other(Command::Compare(c)) => compare(c),
        Parsed::Other(Command::Devices) => crate::tool::common::devices::list(),
        Parsed::Other(_) => {
            // doctor, selfcheck and fabric are dispatched before clap (their own parsers);
            // clap lists them only for --help, so this is reached only by a caller of `main`
            // that skipped `src/main.rs`.
            eprintln!("rdmaperf: run doctor, selfcheck and fabric through the rdmaperf binary");
            2
        }
    }
}

fn compare(c: args::CompareArgs) -> i32 {
    let Some(t) = Tool::ALL
        .iter()
        .find(|t| t.0 == c.test || t.1 == c.test)
        .map(|t| t.2)
    else {
        eprintln!(
            "rdmaperf compare: unknown test '{}': use write-bw, read-bw, atomic-bw or send-bw",
            c.test
        );
        return 2;
    };
    if t.kind != Kind::Bw {
        eprintln!(
            "rdmaperf compare: '{}' is not supported: use write-bw, read-bw, atomic-bw or send-bw",
            c.test
        );
        return 2;
    }
    let methods = match compare_methods(&c.methods) {
        Ok(m) => m,
        Err(e) => {
            eprintln!("rdmaperf compare {}: {e}", t.name());
            return 2;
        }
    };
    match params::resolve(t, &c.perf) {
        Ok(p) => crate::tool::compare::run(p, c.reps, &methods),
        Err(e) => {
            eprintln!("rdmaperf compare {}: {e}", t.name());
            2
        }
    }
}

/// `--methods`: the post methods named, in order (empty: every one).
fn compare_methods(names: &[String]) -> Result<Vec<params::PostChoice>, String> {
    let mut out = Vec::new();
    for n in names {
        match params::PostChoice::parse(n) {
            Ok(params::PostChoice::Auto) | Err(_) => {
                return Err(format!(
                    "--methods {n}: not a post method; name some of direct, wr-api, post-send \
                     (comma separated)"
                ))
            }
            Ok(m) if out.contains(&m) => {
                return Err(format!(
                    "--methods: {n} is named twice; name each method once"
                ))
            }
            Ok(m) => out.push(m),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::test_args::v;
    /// `--methods`: the order kept; auto, unknown and repeated names refused.
    #[test]
    fn compare_methods_are_named_once_each() {
        use params::PostChoice::*;
        assert_eq!(compare_methods(&[]), Ok(vec![]));
        assert_eq!(
            compare_methods(&v(&["post-send", "direct", "wr_api"])),
            Ok(vec![PostSend, Direct, WrApi])
        );
        for bad in [&["auto"][..], &["verbs"], &["wr-api", "wr_api"]] {
            let e = compare_methods(&v(bad)).unwrap_err();
            assert!(e.starts_with("--methods"), "{e}");
        }
    }

    #[test]
    fn multicall_names() {
        assert_eq!(
            multicall_argv(v(&["/usr/local/bin/ib_write_bw", "-s", "64", "host"])),
            v(&["rdmaperf", "write-bw", "-s", "64", "host"])
        );
        assert_eq!(
            multicall_argv(v(&["ib_atomic_lat"])),
            v(&["rdmaperf", "atomic-lat"])
        );
        assert_eq!(
            multicall_argv(v(&["rdmaperf", "read-bw"])),
            v(&["rdmaperf", "read-bw"])
        );
    }
    #[test]
    fn perftest_flags_parse() {
        let argv = multicall_argv(v(&[
            "ib_write_bw",
            "-d",
            "rxe0",
            "-x",
            "0",
            "-F",
            "--report_gbits",
            "-s",
            "4K",
            "-D",
            "4",
            "-q",
            "2",
            "--out_json_file=/tmp/x.json",
            "127.0.0.1",
        ]));
        let cli = <Cli as clap::Parser>::try_parse_from(argv).unwrap();
        let Command::WriteBw(a) = cli.cmd else {
            panic!("wrong subcommand")
        };
        assert_eq!(a.size, Some(4096));
        assert_eq!(a.gid_index, Some(0));
        assert!(a.report_gbits && a.cpu_freq);
        assert_eq!(a.server.as_deref(), Some("127.0.0.1"));
        assert_eq!(
            a.out_json_file.as_deref(),
            Some(std::path::Path::new("/tmp/x.json"))
        );
    }
}
