//! `selfcheck`'s raw packet cases: every raw post method the mlx5 direct
//! path has (`direct`: one SEND per frame; `direct-mpw`: eMPW sessions by
//! pointer; `direct-mpw-inline`: the frames inline), perftest's IPv4/UDP
//! frames at the `-s` sizes around the inline, WQEBB and eMPW limits, and
//! the eMPW session limits (32/33 frames by pointer, 14/15 inline 60-byte
//! frames). What a case checks is in [`raw_exec`](super::raw_exec); the
//! method × case table, the summary and the JSON are here.

use std::fmt;
use std::fmt::Write as _;

use super::Outcome;

/// A raw post method of the mlx5 direct path (`mlx5::raw_sq`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RawMethod {
    Direct,
    Mpw,
    MpwInline,
}

impl RawMethod {
    pub const ALL: [RawMethod; 3] = [RawMethod::Direct, RawMethod::Mpw, RawMethod::MpwInline];
    pub fn name(self) -> &'static str {
        match self {
            RawMethod::Direct => "direct",
            RawMethod::Mpw => "direct-mpw",
            RawMethod::MpwInline => "direct-mpw-inline",
        }
    }
}

/// What one raw case posts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RawShape {
    /// Frames of `-s` bytes (CRC counted): one alone, then lists of 16.
    Size(u32),
    /// One list of `n` frames of `-s 64` (60 bytes to the NIC), which must
    /// take `wqes` WQEs: an eMPW session limit.
    Session { n: u32, wqes: u32 },
    /// Two sides, one QP each, running a raw-eth-bw pair (`raw_pair_model`).
    Pair(PairKind),
}

/// The raw-eth-bw pairs selfcheck runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PairKind {
    /// `-b`: client and server each send `-n` and count the peer's.
    Duplex,
    /// `--server -v`: a `-b` client, the server forwarding its frames back
    /// with the MACs swapped.
    Forward,
}

/// `-s` values (the NIC gets 4 bytes less): 64, whose 60 bytes inline fill
/// one WQEBB (4-byte header + 60 = 4 units), and 65, one unit more; 82,
/// IPv6+TCP+VLAN's minimum; 128 and 129, two WQEBBs and one unit more;
/// perftest's 236-byte inline and one over; 256; eMPW's 256-byte inline
/// limit (-s 260) and one over, which goes by pointer; the 1518-byte MTU.
pub const RAW_SIZES: [u32; 11] = [64, 65, 82, 128, 129, 236, 237, 256, 260, 261, 1518];

impl fmt::Display for RawShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RawShape::Size(s) => write!(f, "-s {s}"),
            RawShape::Session { n, wqes } => write!(f, "{n} x -s 64 in {wqes} WQE(s)"),
            RawShape::Pair(PairKind::Duplex) => write!(f, "-b pair, 200 x -s 128 each way"),
            RawShape::Pair(PairKind::Forward) => write!(f, "-v pair, 200 x -s 128 forwarded"),
        }
    }
}

/// One raw case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RawCase {
    pub method: RawMethod,
    pub shape: RawShape,
}

impl fmt::Display for RawCase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "raw {} {}", self.method.name(), self.shape)
    }
}

/// Every raw case, in the order they run: the post methods' cases, then
/// the pairs (on `direct`, the one method both sides of a pair share).
pub fn raw_cases() -> Vec<RawCase> {
    let mut v = post_cases();
    for kind in [PairKind::Duplex, PairKind::Forward] {
        v.push(RawCase {
            method: RawMethod::Direct,
            shape: RawShape::Pair(kind),
        });
    }
    v
}

/// The post methods' cases: every size, and the eMPW session limits.
fn post_cases() -> Vec<RawCase> {
    let mut v = Vec::new();
    for method in RawMethod::ALL {
        v.extend(RAW_SIZES.map(|s| RawCase {
            method,
            shape: RawShape::Size(s),
        }));
        // 32 pointers fill a session; 14 inline 60-byte frames (4 units
        // each after ctrl + Ethernet segment) fill its 60 units.
        let full = match method {
            RawMethod::Direct => continue,
            RawMethod::Mpw => 32,
            RawMethod::MpwInline => 14,
        };
        for (n, wqes) in [(full, 1), (full + 1, 2)] {
            v.push(RawCase {
                method,
                shape: RawShape::Session { n, wqes },
            });
        }
    }
    v
}

/// The raw cases' results, or why none ran.
#[derive(Clone, Debug)]
pub struct RawRun {
    pub cases: Vec<(RawCase, Outcome)>,
}

impl RawRun {
    pub fn failures(&self) -> usize {
        self.count(|o| matches!(o, Outcome::Failed(_)))
    }
    pub fn passed(&self) -> usize {
        self.count(|o| *o == Outcome::Ok)
    }
    fn count(&self, f: impl Fn(&Outcome) -> bool) -> usize {
        self.cases.iter().filter(|(_, o)| f(o)).count()
    }
}

/// The shape × method table; a case not run reads SKIPPED, and each
/// reason, and each failure, gets a line of its own.
pub fn raw_table(run: &RawRun) -> String {
    let mut rows: Vec<RawShape> = Vec::new();
    for (c, _) in &run.cases {
        if !rows.contains(&c.shape) {
            rows.push(c.shape);
        }
    }
    let mut s = format!(" {:<32}", "raw case");
    for m in RawMethod::ALL {
        let _ = write!(s, " {:>17}", m.name());
    }
    s.push('\n');
    for shape in &rows {
        let _ = write!(s, " {:<32}", shape.to_string());
        for m in RawMethod::ALL {
            let cell = match run
                .cases
                .iter()
                .find(|(c, _)| c.method == m && c.shape == *shape)
            {
                Some((_, Outcome::Ok)) => "ok",
                Some((_, Outcome::Failed(_))) => "FAILED",
                Some((_, Outcome::NotRun(_))) => "SKIPPED",
                None => "-",
            };
            let _ = write!(s, " {cell:>17}");
        }
        s.push('\n');
    }
    let mut reasons: Vec<&str> = Vec::new();
    for (c, o) in &run.cases {
        match o {
            Outcome::Failed(e) => {
                let _ = writeln!(s, " FAILED {c}: {e}");
            }
            Outcome::NotRun(why) if !reasons.contains(&why.as_str()) => {
                reasons.push(why);
                let _ = writeln!(s, " raw cases SKIPPED: {why}");
            }
            _ => {}
        }
    }
    s
}

/// ` selfcheck raw: all N cases ok`, `K of N cases FAILED`, or `N cases
/// SKIPPED`; true when nothing failed (skipped cases never count as passed).
pub fn raw_summary(run: &RawRun) -> (String, bool) {
    let (ok, failed) = (run.passed(), run.failures());
    let skipped = run.cases.len() - ok - failed;
    let line = match (failed, skipped) {
        (0, 0) => format!(" selfcheck raw: all {ok} cases ok\n"),
        (0, _) => format!(" selfcheck raw: {ok} cases ok, {skipped} SKIPPED (see above)\n"),
        _ => format!(
            " selfcheck raw: {failed} of {} cases FAILED (see the lines above)\n",
            ok + failed
        ),
    };
    (line, failed == 0)
}

/// The raw cases as JSON (beside the methods in `--json`).
pub fn raw_json(run: &RawRun) -> serde_json::Value {
    use serde_json::json;
    let cases: Vec<serde_json::Value> = run
        .cases
        .iter()
        .map(|(c, o)| o.json(c, "skipped"))
        .collect();
    json!({"failed": run.failures(), "cases": cases})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_method_every_size_and_the_session_limits() {
        let v = raw_cases();
        assert_eq!(v.len(), 3 * RAW_SIZES.len() + 2 * 2 + 2);
        let pairs: Vec<String> = v[v.len() - 2..].iter().map(|c| c.to_string()).collect();
        assert_eq!(
            pairs,
            [
                "raw direct -b pair, 200 x -s 128 each way",
                "raw direct -v pair, 200 x -s 128 forwarded"
            ]
        );
        let session = |m, n, wqes| RawCase {
            method: m,
            shape: RawShape::Session { n, wqes },
        };
        for c in [
            session(RawMethod::Mpw, 32, 1),
            session(RawMethod::Mpw, 33, 2),
            session(RawMethod::MpwInline, 14, 1),
            session(RawMethod::MpwInline, 15, 2),
        ] {
            assert!(v.contains(&c), "{c}");
        }
        assert!(!v
            .iter()
            .any(|c| c.method == RawMethod::Direct && matches!(c.shape, RawShape::Session { .. })));
        assert_eq!(v[0].to_string(), "raw direct -s 64");
    }

    #[test]
    fn skipped_cases_never_pass() {
        let run = RawRun {
            cases: raw_cases()
                .into_iter()
                .map(|c| (c, Outcome::NotRun("no ConnectX".into())))
                .collect(),
        };
        let t = raw_table(&run);
        assert!(t.contains("SKIPPED") && !t.contains(" ok"), "{t}");
        assert_eq!(
            t.matches("raw cases SKIPPED: no ConnectX").count(),
            1,
            "{t}"
        );
        let (line, ok) = raw_summary(&run);
        assert!(
            ok && line.contains("0 cases ok") && line.contains("SKIPPED"),
            "{line}"
        );
    }
}
