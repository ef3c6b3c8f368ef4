//! Entry point: multicall (`ib_write_bw` → `rdmaperf write-bw`), flag parsing,
//! and dispatch to the tools.

pub mod args;
pub mod params;

use args::{Cli, Command};
use clap::Parser;
use params::{Kind, Tool, Verb};

/// If invoked through a link named after a perftest tool, rewrite argv so that
/// `ib_write_bw -s 64 host` parses as `rdmaperf write-bw -s 64 host`.
pub fn multicall_argv(argv: Vec<String>) -> Vec<String> {
    let Some(first) = argv.first() else {
        return argv;
    };
    let base = std::path::Path::new(first)
        .file_name()
        .and_then(|s| s.to_str())
        .unwrap_or("");
    match Tool::ALL.iter().find(|t| t.1 == base) {
        Some(t) => {
            let mut v = Vec::with_capacity(argv.len() + 1);
            v.push("rdmaperf".to_string());
            v.push(t.0.to_string());
            v.extend(argv.into_iter().skip(1));
            v
        }
        None => argv,
    }
}

/// Runs the command line; returns the process exit status.
pub fn main() -> i32 {
    let argv = multicall_argv(std::env::args().collect());
    let cli = match Cli::try_parse_from(argv) {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    let (tool, a) = match cli.cmd {
        Command::WriteBw(a) => (
            Tool {
                verb: Verb::Write,
                kind: Kind::Bw,
            },
            a,
        ),
        Command::ReadBw(a) => (
            Tool {
                verb: Verb::Read,
                kind: Kind::Bw,
            },
            a,
        ),
        Command::SendBw(a) => (
            Tool {
                verb: Verb::Send,
                kind: Kind::Bw,
            },
            a,
        ),
        Command::AtomicBw(a) => (
            Tool {
                verb: Verb::Atomic,
                kind: Kind::Bw,
            },
            a,
        ),
        Command::WriteLat(a) => (
            Tool {
                verb: Verb::Write,
                kind: Kind::Lat,
            },
            a,
        ),
        Command::ReadLat(a) => (
            Tool {
                verb: Verb::Read,
                kind: Kind::Lat,
            },
            a,
        ),
        Command::SendLat(a) => (
            Tool {
                verb: Verb::Send,
                kind: Kind::Lat,
            },
            a,
        ),
        Command::AtomicLat(a) => (
            Tool {
                verb: Verb::Atomic,
                kind: Kind::Lat,
            },
            a,
        ),
        Command::Devices => return crate::tool::devices::list(),
        Command::Compare(c) => {
            let Some(t) = Tool::ALL
                .iter()
                .find(|t| t.0 == c.test || t.1 == c.test)
                .map(|t| t.2)
            else {
                eprintln!(
                    "rdmaperf compare: unknown test '{}': use write-bw, read-bw or atomic-bw",
                    c.test
                );
                return 2;
            };
            if t.kind != Kind::Bw || t.verb == Verb::Send {
                eprintln!(
                    "rdmaperf compare: '{}' is not supported: use write-bw, read-bw or atomic-bw",
                    c.test
                );
                return 2;
            }
            return match params::resolve(t, &c.perf) {
                Ok(p) => crate::tool::compare::run(p, c.reps),
                Err(e) => {
                    eprintln!("rdmaperf compare {}: {e}", t.name());
                    2
                }
            };
        }
    };
    let p = match params::resolve(tool, &a) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("rdmaperf {}: {e}", tool.name());
            return 2;
        }
    };
    crate::tool::run(p)
}

#[cfg(test)]
mod tests {
    use super::*;
    fn v(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
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
        let cli = Cli::try_parse_from(argv).unwrap();
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
