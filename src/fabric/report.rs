//! Rank 0's output: the per-pair rows and a progress line as each step ends
//! (streamed, like the JSON file), then the summary (min / median / max,
//! worst pairs, outliers named host:device), threshold failures, per-rank
//! shares, and the CSV and heatmap files. MPI-free.

use super::json_out::{JsonStream, RankInfo};
use super::matrix::Matrix;
use super::opts::FabricOpts;
use super::pattern::Pair;
use super::result::{Measure, Metric, PairResult, TopFinding};
use super::summary::{self, Value};
use serde_json::{json, Value as Json};
use std::fmt::Write;
use std::time::Instant;

pub struct Report {
    labels: Vec<String>,
    lat_test: bool,
    units: String,
    matrix: Matrix,
    /// (pair, value) per metric: bw, msg_rate, lat.
    bw: Vec<Value>,
    rate: Vec<Value>,
    lat: Vec<Value>,
    failed: Vec<PairResult>,
    /// `--explain`: each explained pair's top finding (`None`: clean).
    findings: Vec<(Pair, Option<TopFinding>)>,
    /// Message rate (Mpps) per client rank: its share of the fabric's rate.
    share: Vec<f64>,
    json: Option<JsonStream>,
    start: Instant,
    steps: usize,
    done: usize,
}

/// What the run ended with.
pub struct Ending {
    pub text: String,
    /// 0: every pair measured and within the thresholds.
    pub status: i32,
}

impl Report {
    /// `bw_units`: the bandwidth unit the tool reports in (until its JSON says).
    pub fn new(
        ranks: &[RankInfo],
        lat_test: bool,
        bw_units: &str,
        steps: usize,
        json: Option<JsonStream>,
    ) -> Report {
        let n = ranks.len();
        Report {
            labels: ranks.iter().map(RankInfo::label).collect(),
            lat_test,
            units: if lat_test {
                "usec".into()
            } else {
                bw_units.into()
            },
            matrix: Matrix::new(n),
            bw: Vec::new(),
            rate: Vec::new(),
            lat: Vec::new(),
            failed: Vec::new(),
            findings: Vec::new(),
            share: vec![0.0; n],
            json,
            start: Instant::now(),
            steps,
            done: 0,
        }
    }

    pub fn metric(&self) -> Metric {
        if self.lat_test {
            Metric::Lat
        } else {
            Metric::Bw
        }
    }

    fn name(&self, p: Pair) -> String {
        format!(
            "{} ({}) -> {} ({})",
            self.labels[p.client], p.client, self.labels[p.server], p.server
        )
    }

    /// `--explain`: what the worst-pairs line adds for `p` — its top
    /// finding with the evidence, or that its counters were clean.
    fn why(&self, p: Pair) -> String {
        match self.findings.iter().find(|(q, _)| *q == p) {
            Some((_, Some(f))) => format!("  {}: {}", f.code, f.evidence),
            Some((_, None)) => "  (counters clean)".into(),
            None => String::new(),
        }
    }

    /// The table's header line.
    pub fn header(&self) -> String {
        if self.lat_test {
            format!(
                " {:>5}  {:<44} {:>8} {:>9} {:>11} {:>9} {:>9} {:>9}\n",
                "step",
                "client -> server",
                "bytes",
                "t_min",
                "t_typical",
                "t_avg",
                "t_max",
                "p99[usec]"
            )
        } else {
            format!(
                " {:>5}  {:<44} {:>8} {:>20} {:>15}\n",
                "step",
                "client -> server",
                "bytes",
                format!("BW average[{}]", self.units),
                "MsgRate[Mpps]"
            )
        }
    }

    /// Takes one finished step: rows, the matrix, the JSON; returns the rows
    /// and the progress line.
    pub fn step(
        &mut self,
        step: usize,
        mut results: Vec<PairResult>,
        units: Option<&str>,
    ) -> String {
        if let Some(u) = units.filter(|_| !self.lat_test) {
            self.units = u.to_owned();
        }
        results.sort_by_key(|r| (r.client, r.server));
        // Steps count from 1 in every output.
        results.iter_mut().for_each(|r| r.step = step + 1);
        let mut out = String::new();
        let mut failed = 0;
        for r in &results {
            let name = self.name(r.pair());
            match (&r.ok, &r.error) {
                (Some(m), _) => self.measured(&mut out, step + 1, &name, r.pair(), m),
                (None, e) => {
                    failed += 1;
                    let why = e.as_deref().unwrap_or("no result");
                    let _ = writeln!(out, " {:>5}  {name:<44} FAILED: {why}", step + 1);
                    self.failed.push(r.clone());
                }
            }
        }
        self.progress(&mut out, step + 1, failed, &results);
        out
    }

    /// One measured pair: its row (latency or bandwidth columns, then its
    /// top finding under `--explain`), and its values for the summary.
    fn measured(&mut self, out: &mut String, step: usize, name: &str, pair: Pair, m: &Measure) {
        self.bw.push((pair, m.bw));
        self.rate.push((pair, m.msg_rate));
        if let Some(l) = &m.lat {
            self.lat.push((pair, l.t_typical));
            let _ = writeln!(
                out,
                " {:>5}  {name:<44} {:>8} {:>9.2} {:>11.2} {:>9.2} {:>9.2} {:>9.2}",
                step, m.size, l.t_min, l.t_typical, l.t_avg, l.t_max, l.p99
            );
        } else {
            let _ = writeln!(
                out,
                " {:>5}  {name:<44} {:>8} {:>20.2} {:>15.6}",
                step, m.size, m.bw, m.msg_rate
            );
        }
        if m.explained {
            // The row ends with the pair's top finding (the
            // JSON has its evidence).
            out.pop();
            let code = m.finding.as_ref().map_or("clean", |f| f.code.as_str());
            let _ = writeln!(out, "  {code}");
            self.findings.push((pair, m.finding.clone()));
        }
        if let Some(v) = self.metric().of(m) {
            self.matrix.set(pair, v);
        }
        self.share[pair.client] += m.msg_rate;
    }

    /// The progress line after a step (`step` counts from 1), and the step's
    /// part of the JSON stream (dropped if writing it fails).
    fn progress(&mut self, out: &mut String, step: usize, failed: usize, results: &[PairResult]) {
        self.done += 1;
        let el = self.start.elapsed().as_secs_f64();
        let left = el / self.done as f64 * (self.steps - self.done) as f64;
        let _ = writeln!(
            out,
            "fabric: step {}/{}: {} pairs, {failed} failed, elapsed {el:.1} s, ~{left:.1} s left",
            self.done,
            self.steps,
            results.len()
        );
        if let Some(j) = &mut self.json {
            if let Err(e) = j.step(step, el, results) {
                let _ = writeln!(out, "fabric: writing {}: {e}", j.path().display());
                self.json = None;
            }
        }
    }

    fn values(&self, m: Metric) -> &[Value] {
        match m {
            Metric::Bw => &self.bw,
            Metric::MsgRate => &self.rate,
            Metric::Lat => &self.lat,
        }
    }

    fn unit_of(&self, m: Metric) -> &str {
        match m {
            Metric::Bw => &self.units,
            Metric::MsgRate => "Mpps",
            Metric::Lat => "usec",
        }
    }

    /// The summary, thresholds and files; `stopped` says why the run ended
    /// early (a signal, a rank gone).
    pub fn finish(mut self, o: &FabricOpts, stopped: Option<String>, per_rank: bool) -> Ending {
        let mut out = String::new();
        let metric = self.metric();
        let units = self.unit_of(metric).to_owned();
        let sum = summary::summarize(
            self.values(metric),
            metric.better(),
            o.tolerance_pct,
            o.worst,
        );
        let sum_json = match &sum {
            None => {
                let _ = writeln!(out, "fabric: no pair was measured");
                Json::Null
            }
            Some(s) => self.summary_text(&mut out, s, o, &units),
        };
        if per_rank {
            self.per_rank_text(&mut out);
        }
        let failed = self.failures_text(&mut out);
        let (thr, missed) = self.thresholds(&mut out, o);
        if let Some(s) = &stopped {
            let _ = writeln!(out, "fabric: stopped early: {s}");
        }
        let json_bad = self.write_json(&mut out, stopped.as_deref(), &sum_json, thr, &units);
        let files_bad = self.write_files(&mut out, o, &units);
        let bad = sum.is_none() || failed || missed || stopped.is_some() || json_bad || files_bad;
        Ending {
            text: out,
            status: i32::from(bad),
        }
    }

    /// The summary lines (min, median, max, worst pairs, outliers) and their JSON.
    fn summary_text(
        &self,
        out: &mut String,
        s: &summary::Summary,
        o: &FabricOpts,
        units: &str,
    ) -> Json {
        let metric = self.metric();
        let better = metric.better();
        let _ = writeln!(
            out,
            "fabric summary ({}, {} pairs): min {:.3} [{}], median {:.3}, max {:.3} [{}] {units}",
            metric.name(),
            s.count,
            s.min.1,
            self.name(s.min.0),
            s.median,
            s.max.1,
            self.name(s.max.0)
        );
        let _ = writeln!(out, " worst pairs:");
        for w in &s.worst {
            let _ = writeln!(
                out,
                "   {:<44} {:.3} {units}{}",
                self.name(w.0),
                w.1,
                self.why(w.0)
            );
        }
        let side = if better == summary::Better::Higher {
            "below"
        } else {
            "beyond"
        };
        let _ = writeln!(
            out,
            " outliers ({side} {}% of the median): {}",
            o.tolerance_pct,
            s.outliers.len()
        );
        for w in &s.outliers {
            let _ = writeln!(out, "   {:<44} {:.3} {units}", self.name(w.0), w.1);
        }
        self.summary_json(s, units)
    }

    /// The summary's JSON: the worst pairs carry their `--explain` finding.
    fn summary_json(&self, s: &summary::Summary, units: &str) -> Json {
        let pj = |v: &Value| json!({"client": v.0.client, "server": v.0.server, "value": v.1});
        let worst: Vec<Json> = s
            .worst
            .iter()
            .map(|v| {
                let mut j = pj(v);
                if let Some((_, f)) = self.findings.iter().find(|(p, _)| *p == v.0) {
                    j["finding"] = json!(f);
                }
                j
            })
            .collect();
        json!({
            "metric": self.metric().name(), "units": units, "count": s.count,
            "min": pj(&s.min), "median": s.median, "max": pj(&s.max),
            "worst": worst,
            "outliers": s.outliers.iter().map(pj).collect::<Vec<_>>(),
            "tolerance_pct": s.tolerance_pct,
        })
    }

    /// `all-to-all` and `incast`: each rank's message rate as a client.
    fn per_rank_text(&self, out: &mut String) {
        let _ = writeln!(
            out,
            " message rate per rank (as client, sum of its pairs at once) [Mpps]:"
        );
        let total: f64 = self.share.iter().sum();
        for (r, s) in self.share.iter().enumerate() {
            let _ = writeln!(out, "   {:<32} {s:.6}", format!("{} ({r})", self.labels[r]));
        }
        let _ = writeln!(out, "   {:<32} {total:.6}", "fabric total");
    }

    /// The pairs that failed; whether any did.
    fn failures_text(&self, out: &mut String) -> bool {
        if self.failed.is_empty() {
            return false;
        }
        let _ = writeln!(out, "fabric: {} pair(s) failed:", self.failed.len());
        for f in &self.failed {
            let _ = writeln!(
                out,
                "   step {}: {}: {}",
                f.step,
                self.name(f.pair()),
                f.error.as_deref().unwrap_or("no result")
            );
        }
        true
    }

    /// `--expect-*`: the pairs that miss each threshold, their JSON, and
    /// whether any missed.
    fn thresholds(&self, out: &mut String, o: &FabricOpts) -> (Vec<Json>, bool) {
        let mut bad = false;
        let mut thr = Vec::new();
        for (m, want) in [
            (Metric::Bw, o.expect.bw),
            (Metric::MsgRate, o.expect.msgrate),
            (Metric::Lat, o.expect.lat),
        ] {
            let Some(want) = want else { continue };
            let miss = summary::failures(self.values(m), want, m.better());
            let u = self.unit_of(m).to_owned();
            if miss.is_empty() {
                let _ = writeln!(
                    out,
                    "fabric: --expect-{} {want} {u}: every pair passes",
                    flag(m)
                );
            } else {
                bad = true;
                let _ = writeln!(
                    out,
                    "fabric: --expect-{} {want} {u}: {} pair(s) miss it:",
                    flag(m),
                    miss.len()
                );
                for v in &miss {
                    let _ = writeln!(out, "   {:<44} {:.3} {u}", self.name(v.0), v.1);
                }
            }
            thr.push(json!({"metric": m.name(), "expect": want, "units": u,
                "pairs": miss.iter().map(|v| json!({"client": v.0.client, "server": v.0.server, "value": v.1})).collect::<Vec<_>>()}));
        }
        (thr, bad)
    }

    /// `--out_json_file`'s closing part; whether writing it failed.
    fn write_json(
        &mut self,
        out: &mut String,
        stopped: Option<&str>,
        sum_json: &Json,
        thr: Vec<Json>,
        units: &str,
    ) -> bool {
        let mut bad = false;
        let metric = self.metric();
        if let Some(j) = self.json.take() {
            let path = j.path().display().to_string();
            match j.finish(
                stopped,
                sum_json,
                &Json::Array(thr),
                &self.matrix,
                (metric.name(), units),
                &self.labels,
            ) {
                Ok(()) => {
                    let _ = writeln!(out, "fabric: JSON written to {path}");
                }
                Err(e) => {
                    bad = true;
                    let _ = writeln!(
                        out,
                        "fabric: writing {path}: {e}; check the path given to --out_json_file"
                    );
                }
            }
        }
        bad
    }

    /// `--csv` and `--heatmap`; whether writing either failed.
    fn write_files(&self, out: &mut String, o: &FabricOpts, units: &str) -> bool {
        let csv = o.csv.as_ref().map(|f| {
            let done = std::fs::write(f, self.matrix.to_csv(&self.labels))
                .map_err(|e| format!("fabric: writing {f}: {e}; check the path given to --csv"));
            said(out, done, format!("fabric: CSV matrix written to {f}"))
        });
        let map = o.heatmap.as_ref().map(|f| {
            let done = self
                .heatmap(f, o, units)
                .map_err(|e| format!("fabric: heatmap {f}: {e}"));
            said(out, done, format!("fabric: heatmap written to {f}"))
        });
        csv == Some(false) || map == Some(false)
    }

    #[cfg(feature = "heatmap")]
    fn heatmap(&self, f: &str, o: &FabricOpts, units: &str) -> Result<(), String> {
        let title = format!(
            "rdmaperf fabric {} --pattern {} ({})",
            o.tool,
            o.pattern.name(),
            self.metric().name()
        );
        let svg = super::heatmap::render_svg(
            &self.matrix,
            &self.labels,
            self.metric().better(),
            &title,
            units,
        )?;
        std::fs::write(f, svg).map_err(|e| format!("{e}; check the path given to --heatmap"))
    }

    #[cfg(not(feature = "heatmap"))]
    fn heatmap(&self, _f: &str, _o: &FabricOpts, _units: &str) -> Result<(), String> {
        Err("this build has no heatmap support; rebuild with --features heatmap (or mpi)".into())
    }
}

fn flag(m: Metric) -> &'static str {
    match m {
        Metric::Bw => "bw",
        Metric::MsgRate => "msgrate",
        Metric::Lat => "lat",
    }
}

/// Writes `ok` or the error's line; whether it went well.
fn said(out: &mut String, done: Result<(), String>, ok: String) -> bool {
    let _ = writeln!(out, "{}", done.as_ref().map_or_else(Clone::clone, |()| ok));
    done.is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::opts;
    use crate::fabric::result::Measure;

    fn ok(step: usize, c: usize, s: usize, bw: f64) -> PairResult {
        PairResult {
            step,
            client: c,
            server: s,
            ok: Some(Measure {
                size: 64,
                bw,
                msg_rate: bw / 100.0,
                ..Measure::default()
            }),
            error: None,
        }
    }

    /// Ranks h0..h2, each on rxe0.
    fn three_ranks() -> Vec<RankInfo> {
        (0..3)
            .map(|r| RankInfo {
                rank: r,
                host: format!("h{r}"),
                device: "rxe0".into(),
                gpu: None,
            })
            .collect()
    }

    #[test]
    fn rows_summary_thresholds_files() {
        let ranks = three_ranks();
        let dir =
            std::env::temp_dir().join(format!("rdmaperf-fabric-report-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let csv = dir.join("m.csv");
        let args: Vec<String> = [
            "write-bw",
            "--expect-bw",
            "9",
            "--csv",
            csv.to_str().unwrap(),
        ]
        .map(String::from)
        .into();
        let o = opts::parse(&args, |_| Err("x".into())).unwrap();
        let mut r = Report::new(&ranks, false, "MB/sec", 2, None);
        let t = r.step(
            0,
            vec![
                ok(0, 0, 1, 10.0),
                PairResult::failed(0, Pair::new(2, 0), "peer gone"),
            ],
            Some("MiB/sec"),
        );
        assert!(
            t.contains("h2:rxe0 (2) -> h0:rxe0 (0)") && t.contains("FAILED: peer gone"),
            "{t}"
        );
        assert!(t.contains("step 1/2: 2 pairs, 1 failed"), "{t}");
        r.step(1, vec![ok(1, 1, 2, 5.0)], Some("MiB/sec"));
        let e = r.finish(&o, None, true);
        assert_eq!(e.status, 1);
        let t = &e.text;
        assert!(t.contains("min 5.000 [h1:rxe0 (1) -> h2:rxe0 (2)]"), "{t}");
        assert!(
            t.contains("--expect-bw 9 MiB/sec: 1 pair(s) miss it"),
            "{t}"
        );
        assert!(t.contains("1 pair(s) failed"), "{t}");
        let m = std::fs::read_to_string(&csv).unwrap();
        assert_eq!(m.lines().nth(1), Some("h0:rxe0,,10,"));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// `--use_cuda`: the GPU is part of a rank's name in rows, summary and matrix.
    #[test]
    fn gpu_ranks_carry_their_gpu() {
        let mut ranks = three_ranks();
        ranks[1].gpu = Some("cuda1".into());
        ranks[2].gpu = Some("0000:82:00.0".into());
        let o = opts::parse(&["write-bw".to_string()], |_| Err("x".into())).unwrap();
        let mut r = Report::new(&ranks, false, "MB/sec", 1, None);
        let t = r.step(0, vec![ok(0, 1, 2, 5.0)], Some("MiB/sec"));
        assert!(
            t.contains("h1:rxe0+cuda1 (1) -> h2:rxe0+0000:82:00.0 (2)"),
            "{t}"
        );
        let e = r.finish(&o, None, true);
        assert!(e.text.contains("h1:rxe0+cuda1"), "{}", e.text);
    }

    /// `--explain`: each row ends with its pair's top finding ("clean"
    /// when there is none), and the worst pairs say why, with evidence.
    #[test]
    fn explained_pairs_carry_their_finding() {
        let ranks = three_ranks();
        let explained = |c, s, bw, f: Option<(&str, &str)>| {
            let mut r = ok(0, c, s, bw);
            if let Some(m) = r.ok.as_mut() {
                m.explained = true;
                m.finding = f.map(|(code, evidence)| TopFinding {
                    code: code.into(),
                    evidence: evidence.into(),
                });
            }
            r
        };
        let o = opts::parse(&["write-bw".to_string()], |_| Err("x".into())).unwrap();
        let mut r = Report::new(&ranks, false, "MB/sec", 1, None);
        let t = r.step(
            0,
            vec![
                explained(0, 1, 10.0, None),
                explained(
                    1,
                    2,
                    2.0,
                    Some(("loss", "rcvd_seq_err +138 = 13800 per million")),
                ),
            ],
            Some("MiB/sec"),
        );
        let rows: Vec<&str> = t.lines().collect();
        assert!(rows[0].ends_with("  clean"), "{t}");
        assert!(rows[1].ends_with("  loss"), "{t}");
        let e = r.finish(&o, None, false);
        assert!(
            e.text
                .contains("2.000 MiB/sec  loss: rcvd_seq_err +138 = 13800 per million"),
            "{}",
            e.text
        );
        assert!(
            e.text.contains("10.000 MiB/sec  (counters clean)"),
            "{}",
            e.text
        );
    }
}
