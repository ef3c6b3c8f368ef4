//! `rdmaperf fabric <tool> [perftest flags] [fabric flags]`: the fabric flags
//! are taken out here; everything else goes to the tool's own parser, so a
//! pair runs with exactly the options the pair tool accepts.

use super::gpu_pick::GpuPick;
use super::pattern::{parse_pairs_file, Direction, Pattern};

/// The fabric mode's own options.
#[derive(Clone, Debug)]
pub struct FabricOpts {
    pub tool: String,
    /// The tool's arguments (perftest flags), for its parser.
    pub tool_args: Vec<String>,
    pub pattern: Pattern,
    pub direction: Direction,
    pub serial: bool,
    pub tolerance_pct: f64,
    pub expect: Expect,
    pub csv: Option<String>,
    pub heatmap: Option<String>,
    /// Worst pairs listed in the summary.
    pub worst: usize,
    /// A network namespace this rank enters (setns) after MPI start-up.
    pub netns: Option<String>,
    /// `--use_cuda auto` or `--use_cuda I,J,…`: each rank's GPU (`gpu_pick`); a single
    /// ordinal stays in `tool_args`.
    pub gpu: Option<GpuPick>,
}

/// `--expect-bw`, `--expect-msgrate`, `--expect-lat`: the least bandwidth and
/// message rate, and the most latency, every pair must reach (in the tool's
/// units); `None`: not checked. The run's JSON carries them as `"expect"`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Expect {
    pub bw: Option<f64>,
    pub msgrate: Option<f64>,
    pub lat: Option<f64>,
}

/// Flags that take a value.
const WITH_VALUE: &[&str] = &[
    "--pattern",
    "--direction",
    "--pairs-file",
    "--tolerance",
    "--expect-bw",
    "--expect-msgrate",
    "--expect-lat",
    "--csv",
    "--heatmap",
    "--worst",
    "--netns",
    "--use_cuda",
];

fn number(flag: &str, v: &str, min: f64) -> Result<f64, String> {
    match v.parse::<f64>() {
        Ok(x) if x.is_finite() && x >= min => Ok(x),
        _ => Err(format!("{flag} {v:?}: give a number >= {min}")),
    }
}

pub const USAGE: &str = "usage: mpirun -np N rdmaperf fabric <write-bw|read-bw|send-bw|atomic-bw|write-lat|read-lat|send-lat|atomic-lat> [perftest flags] [--pattern pairs|bisection|incast K|alltoall] [--pairs-file F] [--serial] [--direction uni|bi|both] [--tolerance P] [--expect-bw X] [--expect-msgrate X] [--expect-lat X] [--worst N] [--out_json_file=F] [--csv F] [--heatmap F.svg] [--timeout S] [--netns NAME] [--use_cuda auto|I,J,...]";

/// Splits `args` (after `fabric`) into the fabric options and the tool's flags.
/// `read` loads a `--pairs-file`.
pub fn parse(
    args: &[String],
    read: impl Fn(&str) -> Result<String, String>,
) -> Result<FabricOpts, String> {
    let Some(tool) = args.first().filter(|t| !t.starts_with('-')) else {
        return Err(format!("name the test first\n{USAGE}"));
    };
    let mut p = Parsing {
        o: FabricOpts::defaults(tool),
        pairs_file: None,
        pattern_given: false,
    };
    let mut i = 1;
    while i < args.len() {
        let a = &args[i];
        let (flag, inline) = match a.split_once('=') {
            Some((f, v)) if WITH_VALUE.contains(&f) => (f, Some(v.to_owned())),
            _ => (a.as_str(), None),
        };
        if flag == "--serial" {
            p.o.serial = true;
            i += 1;
            continue;
        }
        if !WITH_VALUE.contains(&flag) {
            p.o.tool_args.push(a.clone());
            i += 1;
            continue;
        }
        let v = match inline {
            Some(v) => v,
            None => {
                i += 1;
                args.get(i)
                    .cloned()
                    .ok_or_else(|| format!("{flag} needs a value\n{USAGE}"))?
            }
        };
        i += 1;
        if p.set(flag, v, a, args.get(i))? {
            i += 1;
        }
    }
    p.finish(read)
}

impl FabricOpts {
    /// The options when no fabric flag is given.
    fn defaults(tool: &str) -> FabricOpts {
        FabricOpts {
            tool: tool.to_owned(),
            tool_args: Vec::new(),
            pattern: Pattern::Pairs,
            direction: Direction::Uni,
            serial: false,
            tolerance_pct: 90.0,
            expect: Expect::default(),
            csv: None,
            heatmap: None,
            worst: 5,
            netns: None,
            gpu: None,
        }
    }
}

/// `parse`'s state while it walks the arguments.
struct Parsing {
    o: FabricOpts,
    pairs_file: Option<String>,
    pattern_given: bool,
}

impl Parsing {
    /// Applies one fabric flag with its value `v` (`a` is the argument as given;
    /// `next` the argument after the value). True when `next` was taken too
    /// (`--pattern incast K`).
    fn set(
        &mut self,
        flag: &str,
        v: String,
        a: &str,
        next: Option<&String>,
    ) -> Result<bool, String> {
        let o = &mut self.o;
        match flag {
            "--pattern" => {
                // `--pattern incast K`: K is the next argument.
                let (v, took_next) = match (v.as_str(), next) {
                    ("incast", Some(k)) if k.parse::<usize>().is_ok() => {
                        (format!("incast {k}"), true)
                    }
                    _ => (v, false),
                };
                o.pattern = Pattern::parse(&v)?;
                self.pattern_given = true;
                return Ok(took_next);
            }
            "--direction" => o.direction = Direction::parse(&v)?,
            "--pairs-file" => self.pairs_file = Some(v),
            "--tolerance" => {
                o.tolerance_pct = number(flag, &v, 0.0)?;
                if o.tolerance_pct > 100.0 {
                    return Err(format!(
                        "--tolerance {v}: a percentage of the median, 0..100 (90 flags pairs below 90% of the median)"
                    ));
                }
            }
            "--expect-bw" => o.expect.bw = Some(number(flag, &v, 0.0)?),
            "--expect-msgrate" => o.expect.msgrate = Some(number(flag, &v, 0.0)?),
            "--expect-lat" => o.expect.lat = Some(number(flag, &v, 0.0)?),
            "--csv" => o.csv = Some(v),
            "--heatmap" => o.heatmap = Some(v),
            "--worst" => o.worst = number(flag, &v, 0.0)? as usize,
            "--netns" => o.netns = Some(v),
            "--use_cuda" => match GpuPick::parse(&v)? {
                Some(pick) => o.gpu = Some(pick),
                None => o.tool_args.push(format!("--use_cuda={v}")),
            },
            _ => o.tool_args.push(a.to_owned()),
        }
        Ok(false)
    }

    /// A `--pairs-file` becomes the pattern (it may not come with `--pattern`).
    fn finish(self, read: impl Fn(&str) -> Result<String, String>) -> Result<FabricOpts, String> {
        let mut o = self.o;
        if let Some(f) = self.pairs_file {
            if self.pattern_given {
                return Err(
                    "--pairs-file and --pattern: give one of them (the file is the pattern)".into(),
                );
            }
            let text = read(&f).map_err(|e| format!("--pairs-file {f}: {e}"))?;
            o.pattern = Pattern::File(parse_pairs_file(&text)?);
        }
        Ok(o)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::test_args::v;

    fn no_file(_: &str) -> Result<String, String> {
        Err("no such file".into())
    }

    #[test]
    fn splits_fabric_and_tool_flags() {
        let o = parse(
            &v(&[
                "write-bw",
                "-d",
                "rxe0",
                "--pattern",
                "incast",
                "2",
                "-s",
                "64",
                "--serial",
                "--tolerance=80",
                "--expect-bw",
                "5",
                "--csv",
                "m.csv",
                "-n",
                "100",
            ]),
            no_file,
        )
        .unwrap();
        assert_eq!(o.tool, "write-bw");
        assert_eq!(o.pattern, Pattern::Incast(2));
        assert!(o.serial);
        assert_eq!(o.tolerance_pct, 80.0);
        assert_eq!(o.expect.bw, Some(5.0));
        assert_eq!(o.csv.as_deref(), Some("m.csv"));
        assert_eq!(o.tool_args, v(&["-d", "rxe0", "-s", "64", "-n", "100"]));
    }

    #[test]
    fn use_cuda_auto_or_a_list_is_the_fabrics_one_ordinal_the_tools() {
        let o = parse(&v(&["write-bw", "--use_cuda", "auto"]), no_file).unwrap();
        assert_eq!(o.gpu, Some(GpuPick::Auto));
        assert!(o.tool_args.is_empty());
        let o = parse(&v(&["write-bw", "--use_cuda=1,0"]), no_file).unwrap();
        assert_eq!(o.gpu, Some(GpuPick::PerLocalRank(vec![1, 0])));
        let o = parse(&v(&["write-bw", "--use_cuda", "2"]), no_file).unwrap();
        assert_eq!(o.gpu, None);
        assert_eq!(o.tool_args, v(&["--use_cuda=2"]));
    }

    #[test]
    fn errors_name_the_fix() {
        let cases: [(&[&str], &str); 6] = [
            (&["-s", "64"], "name the test"),
            (&["write-bw", "--pattern"], "needs a value"),
            (&["write-bw", "--direction", "up"], "uni, bi or both"),
            (&["write-bw", "--tolerance", "150"], "0..100"),
            (&["write-bw", "--expect-bw", "x"], "number"),
            (&["write-bw", "--pairs-file", "f"], "no such file"),
        ];
        for (args, want) in cases {
            let e = parse(&v(args), no_file).unwrap_err();
            assert!(e.contains(want), "{args:?}: {want:?} missing: {e}");
        }
        let both = parse(
            &v(&["write-bw", "--pairs-file", "f", "--pattern", "pairs"]),
            |_| Ok("0:1".into()),
        );
        assert!(both.unwrap_err().contains("one of them"));
        let f = parse(&v(&["write-lat", "--pairs-file=f"]), |_| {
            Ok("0:1\n1:0".into())
        })
        .unwrap();
        assert!(matches!(f.pattern, Pattern::File(ref s) if s.len() == 2));
    }
}
