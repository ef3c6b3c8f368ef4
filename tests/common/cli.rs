//! Parameters from a command line, through the CLI's own path.

use rdmaperf::cli::params::{self, Params};
use rdmaperf::cli::{self, Parsed};

/// `rdmaperf <cmdline> 127.0.0.1`, split as a shell would: a client's argv.
pub fn client_argv(cmdline: &str) -> Vec<String> {
    let mut argv = vec!["rdmaperf".to_string()];
    argv.extend(cmdline.split_whitespace().map(String::from));
    argv.push("127.0.0.1".into());
    argv
}

/// `rdmaperf <cmdline> 127.0.0.1` (a client) as the binary resolves it:
/// `cli::parse` (flag table, clap) then perftest's rules. Panics naming the
/// command line when it is not one of the eight tools or is refused.
pub fn params(cmdline: &str) -> Params {
    match cli::parse(client_argv(cmdline)) {
        Parsed::Tool(tool, a) => {
            params::resolve(tool, &a).unwrap_or_else(|e| panic!("{cmdline}: {e}"))
        }
        _ => panic!("{cmdline}: not a tool command line, or refused"),
    }
}

/// perftest master's notice where device memory turns scatter-to-CQE off (a SEND of at
/// most 64 bytes), word for word.
pub const SCATTER_OFF_NOTICE: &str = "Scatter2CQE (size <= 64) is not supported with device \
                                      memory send tests: setting MLX5_SCATTER_TO_CQE=0";

/// A finished process as the tests read it: exit code (-1 when killed),
/// stdout, stderr.
pub fn outcome(o: std::process::Output) -> (i32, String, String) {
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The `rdmaperf` binary run with `args`, as [`outcome`] reads it.
pub fn run_rdmaperf(args: &[&str]) -> (i32, String, String) {
    outcome(
        std::process::Command::new(env!("CARGO_BIN_EXE_rdmaperf"))
            .args(args)
            .output()
            .expect("run rdmaperf"),
    )
}

/// `rdmaperf <args>` refused before any run: exit status 2, the message naming `want`.
pub fn refused_before_run(args: &[&str], want: &str) {
    let (rc, _, err) = run_rdmaperf(args);
    assert_eq!(rc, 2, "{args:?}: {err}");
    assert!(err.contains(want), "{args:?}: {err}");
}

/// `rdmaperf doctor <args>` on this host (or the `--sysfs-root` given).
pub fn doctor(args: &[&str]) -> (i32, String, String) {
    run_rdmaperf(&[&["doctor"], args].concat())
}
