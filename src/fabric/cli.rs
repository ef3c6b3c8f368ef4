//! `rdmaperf fabric ...`: the fabric flags, then the tool's own parser and
//! rules; the run itself needs the `mpi` feature.

use super::opts::{self, FabricOpts};
use crate::cli::params::{self, Params, Tool};
use crate::cli::Parsed;

/// How to get a build that runs `fabric`.
pub const NO_MPI: &str = "rdmaperf fabric: this rdmaperf was built without MPI. Build it with the `mpi` feature: \
install an MPI library (Debian: apt-get install openmpi-bin libopenmpi-dev, or run scripts/setup.sh), then \
`cargo build --release --features mpi`, and start it under your launcher, one rank per NIC: \
`mpirun -np N target/release/rdmaperf fabric write-bw -d auto ...` or `srun -n N ...`";

/// What `--help` adds to the usage line: each fabric flag's meaning and unit.
const FLAGS_HELP: &str =
    "  --pattern P       pairs (default: every pair once), bisection, incast K, alltoall
  --pairs-file F    explicit steps, one line per step of CLIENT:SERVER rank pairs
  --serial          a step's pairs one at a time (default: all at once)
  --direction D     uni (default), bi (both ways at once), both (A->B, then B->A)
  --tolerance P     outliers: pairs below P % of the median (latency: above); default 90
  --expect-bw X     fail (exit 1) the pairs below X, in the report's bandwidth unit: MB/sec
                    (perftest's, 2^20 bytes/s) by default, Gb/sec with --report_gbits; a
                    400 Gb/s line rate is ~47684 MB/sec; 90 % of it: --report_gbits --expect-bw 360
  --expect-msgrate X  fail the pairs below X million messages/s (Mpps)
  --expect-lat X    fail the pairs whose typical latency (t_typical) is above X microseconds
  --worst N         the worst N pairs in the summary (default 5)
  --out_json_file=F, --csv F, --heatmap F.svg   the reports
  --timeout S       bounds every wait, in seconds (default 30)
  --netns NAME      enter network namespace NAME after MPI start-up
  --use_cuda auto|I,J,...   each rank's GPU
The tool's perftest flags (-d auto, -s, -n/-D, -q, --post, ...) go through its own parser.
More: docs/fabric.md in the source tree.";

/// `rdmaperf fabric --help`: the usage, the flags with their units, and
/// whether this build can run it.
pub fn help() -> String {
    let build = if cfg!(feature = "mpi") {
        String::new()
    } else {
        format!("\n\n{NO_MPI}")
    };
    format!("{}\n\n{FLAGS_HELP}{build}", opts::USAGE)
}

/// The fabric options and the tool's parameters from `args` (after `fabric`).
pub fn parse(args: &[String]) -> Result<(FabricOpts, Params), String> {
    let o = opts::parse(args, |f| {
        std::fs::read_to_string(f).map_err(|e| e.to_string())
    })?;
    let Some(tool) = Tool::ALL
        .iter()
        .find(|t| t.0 == o.tool || t.1 == o.tool)
        .map(|t| t.2)
    else {
        return Err(format!("unknown test {:?}\n{}", o.tool, opts::USAGE));
    };
    let mut argv = vec!["rdmaperf".to_string(), tool.name().to_string()];
    argv.extend(o.tool_args.iter().cloned());
    if o.gpu.is_some() {
        // Each rank picks its GPU at set-up (`gpu_pick`); GPU 0 stands in meanwhile, so the
        // tool's GPU memory rules (inline 0, -I refused, write-lat) apply as to a pair.
        argv.push("--use_cuda=0".into());
    }
    // The tool's own parser: perftest's flags, refusals and help as for the pair tool.
    let a = match crate::cli::parse(argv) {
        Parsed::Tool(_, a) => a,
        Parsed::Clap(e) => return Err(format!("fabric {}: {e}", tool.name())),
        Parsed::Print { text, .. } => return Err(text.trim_end().to_owned()),
        Parsed::Other(_) => return Err(format!("{:?} is not a test", o.tool)),
    };
    let p = params::resolve(tool, &a)?;
    refuse(&p, &o)?;
    Ok((o, p))
}

/// Options that have no meaning when MPI pairs the ranks.
fn refuse(p: &Params, o: &FabricOpts) -> Result<(), String> {
    if p.server.is_some() {
        return Err(
            "no server name: the ranks find each other through MPI (drop the host name)".into(),
        );
    }
    if p.loopback {
        return Err(
            "--loopback: every pair has two ranks; start 2 ranks on one host instead".into(),
        );
    }
    if p.rdma_cm {
        return Err("-R: the MPI link carries the control messages in fabric mode; drop -R".into());
    }
    if p.reversed {
        return Err(
            "--reversed: fabric mode picks each pair's direction; use --direction bi|both".into(),
        );
    }
    if p.run_infinitely {
        return Err("--run_infinitely: every step must end; use -D SECS".into());
    }
    if p.check_landing {
        return Err("--check-landing is for a server you start by hand; drop it".into());
    }
    let lat = p.tool.kind == crate::cli::params::Kind::Lat;
    if lat && o.expect.bw.is_some() {
        return Err("--expect-bw needs a bandwidth test (write-bw, ...); use --expect-lat".into());
    }
    if lat && o.expect.msgrate.is_some() {
        return Err("--expect-msgrate needs a bandwidth test; use --expect-lat".into());
    }
    if !lat && o.expect.lat.is_some() {
        return Err("--expect-lat needs a latency test (write-lat, ...); use --expect-bw".into());
    }
    Ok(())
}

/// Entry from `rdmaperf fabric ...`; returns the exit status.
pub fn main(args: &[String]) -> i32 {
    if args.is_empty() {
        eprintln!("{}", help());
        return 2;
    }
    if matches!(args[0].as_str(), "--help" | "-h") {
        println!("{}", help());
        return 0;
    }
    if !cfg!(feature = "mpi") {
        eprintln!("{NO_MPI}");
        return 2;
    }
    let (o, p) = match parse(args) {
        Ok(x) => x,
        Err(e) => {
            eprintln!("rdmaperf fabric: {e}");
            return 2;
        }
    };
    run(o, p)
}

#[cfg(feature = "mpi")]
fn run(o: FabricOpts, p: Params) -> i32 {
    super::rank::run(o, p)
}

#[cfg(not(feature = "mpi"))]
fn run(_o: FabricOpts, _p: Params) -> i32 {
    eprintln!("{NO_MPI}");
    2
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::test_args::v;

    #[test]
    fn tool_flags_go_through_the_tools_parser() {
        let (o, p) = parse(&v(&[
            "write-bw",
            "-d",
            "rxe0",
            "-s",
            "64",
            "-n",
            "50",
            "--pattern",
            "bisection",
        ]))
        .unwrap();
        assert_eq!(o.pattern, super::super::pattern::Pattern::Bisection);
        assert_eq!(p.sizes, vec![64]);
        assert_eq!(p.iters, 50);
        assert!(parse(&v(&["write-bw", "host1"]))
            .unwrap_err()
            .contains("no server name"));
        assert!(parse(&v(&["write-bw", "-R"])).unwrap_err().contains("-R"));
        assert!(parse(&v(&["write-lat", "--expect-bw", "1"]))
            .unwrap_err()
            .contains("--expect-lat"));
        assert!(parse(&v(&["frob-bw"]))
            .unwrap_err()
            .contains("unknown test"));
        assert!(parse(&v(&["ib_write_lat", "-s", "2"])).is_ok());
        // --use_cuda auto: the tool's GPU rules apply to every rank.
        let (o, p) = parse(&v(&["write-bw", "--use_cuda", "auto"])).unwrap();
        assert!(o.gpu.is_some() && p.gpu.is_some());
        assert_eq!(p.inline_size, 0);
        assert!(parse(&v(&["write-lat", "--use_cuda", "auto"])).is_err());
    }
}
