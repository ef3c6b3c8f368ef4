//! The names a command line may start with: multicall links (`ib_write_bw`
//! → `rdmaperf write-bw`), perftest's names as subcommands
//! (`rdmaperf ib_write_bw`), `rdmaperf help SUB`, and perftest tool names
//! rdmaperf does not provide, refused with the list of those it does.

use super::kinds::Tool;

/// perftest's tool names rdmaperf answers to, each with the subcommand it
/// runs. A new tool is a row here (and its subcommand in `args`); the raw
/// Ethernet tools come from `raw::tools::RawTool::ALL`.
pub fn multicall_names() -> impl Iterator<Item = (&'static str, &'static str)> {
    let raw = crate::raw::tools::RawTool::ALL.iter().map(|t| (t.1, t.0));
    Tool::ALL.iter().map(|t| (t.1, t.0)).chain(raw)
}

/// How perftest's tool names begin: a name with one of these prefixes that
/// is not in `multicall_names` is a perftest tool rdmaperf does not provide.
const PERFTEST_PREFIXES: &[&str] = &["ib_", "raw_ethernet_"];

/// The subcommand a perftest tool name runs; `Err` with the sentence to print
/// for a perftest-like name rdmaperf does not provide; `Ok(None)` for any
/// other name.
fn perftest_name(name: &str) -> Result<Option<&'static str>, String> {
    if let Some((_, sub)) = multicall_names().find(|(n, _)| *n == name) {
        return Ok(Some(sub));
    }
    if !PERFTEST_PREFIXES.iter().any(|p| name.starts_with(p)) {
        return Ok(None);
    }
    let provided: Vec<&str> = multicall_names().map(|(n, _)| n).collect();
    Err(format!(
        "rdmaperf: {name} is not a tool rdmaperf provides; it provides {} (as links of those \
         names, or as `rdmaperf write-bw`, `rdmaperf ib_write_bw`, ...); `rdmaperf --help` lists \
         every subcommand",
        provided.join(", ")
    ))
}

/// The command line as the subcommands read it: a multicall link's name
/// becomes `rdmaperf SUB`, a perftest name given as the subcommand becomes
/// rdmaperf's, and `help SUB [...]` becomes `SUB --help` (so it works for
/// the subcommands with their own parsers too). `Err`: the sentence for a
/// perftest tool name rdmaperf does not provide (exit status 2).
pub fn command_line(mut argv: Vec<String>) -> Result<Vec<String>, String> {
    let Some(first) = argv.first() else {
        return Ok(argv);
    };
    let base = std::path::Path::new(first)
        .file_name()
        .and_then(|s| s.to_str())
        .unwrap_or("");
    if let Some(sub) = perftest_name(base)? {
        argv.splice(0..1, ["rdmaperf".to_string(), sub.to_string()]);
        return Ok(argv);
    }
    if argv.get(1).map(String::as_str) == Some("help") && argv.len() > 2 {
        argv.remove(1);
        argv.truncate(2);
        argv.push("--help".into());
    }
    if let Some(sub) = argv.get(1).map(|s| perftest_name(s)).transpose()?.flatten() {
        argv[1] = sub.to_string();
    }
    Ok(argv)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::test_args::v;
    fn cl(a: &[&str]) -> Result<Vec<String>, String> {
        command_line(v(a))
    }

    #[test]
    fn perftest_names_as_links_and_as_subcommands() {
        assert_eq!(
            cl(&["/usr/local/bin/ib_write_bw", "-s", "64", "host"]).unwrap(),
            v(&["rdmaperf", "write-bw", "-s", "64", "host"])
        );
        assert_eq!(
            cl(&["ib_atomic_lat"]).unwrap(),
            v(&["rdmaperf", "atomic-lat"])
        );
        assert_eq!(
            cl(&["rdmaperf", "ib_send_lat", "-s", "2"]).unwrap(),
            v(&["rdmaperf", "send-lat", "-s", "2"])
        );
        assert_eq!(
            cl(&["rdmaperf", "read-bw"]).unwrap(),
            v(&["rdmaperf", "read-bw"])
        );
        // Another binary name (cargo's test copies, a renamed build) is left alone.
        assert_eq!(
            cl(&["rdmaperf-dev", "doctor"]).unwrap(),
            v(&["rdmaperf-dev", "doctor"])
        );
    }

    #[test]
    fn names_not_provided_are_named() {
        for argv in [
            &["/opt/ib_write_bw_postlist", "-s", "64"][..],
            &["raw_ethernet_send_bw"],
            &["rdmaperf", "ib_write_bw_postlist"],
        ] {
            let e = cl(argv).unwrap_err();
            assert!(
                e.contains("is not a tool rdmaperf provides") && e.contains("ib_send_lat"),
                "{e}"
            );
        }
    }

    #[test]
    fn help_sub_is_sub_help() {
        assert_eq!(
            cl(&["rdmaperf", "help", "doctor"]).unwrap(),
            v(&["rdmaperf", "doctor", "--help"])
        );
        assert_eq!(
            cl(&["rdmaperf", "help", "ib_write_bw"]).unwrap(),
            v(&["rdmaperf", "write-bw", "--help"])
        );
        assert_eq!(cl(&["rdmaperf", "help"]).unwrap(), v(&["rdmaperf", "help"]));
    }
}
