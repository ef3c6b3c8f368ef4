//! The fabric JSON file, written as the run goes (each step appended and
//! flushed when it ends, so an interrupted run keeps what it measured and
//! nothing but rank 0's matrix is held whole). Schema (version 1):
//!
//! ```text
//! { "rdmaperf_fabric": 1,
//!   "parameters": { "tool", "pattern", "direction", "serial", "ranks",
//!                   "tolerance_pct", "expect": {...}, "timeout_s", "tool_args": [..] },
//!   "ranks": [ { "rank", "host", "device", "label", "gpu" (with --use_cuda) }, ... ],
//!   "steps": [ { "step", "elapsed_s", "pairs": [
//!       { "step" (from 1, as the outer one), "client", "server",
//!         "ok": { "size", "bw", "msg_rate", "lat": {t_min,t_typical,t_avg,t_max,p99} | null,
//!                 with --explain "explained": true and "finding": {code, evidence} }
//!         | "error": "reason" } ] }, ... ],
//!   "complete": bool, "stopped": "reason" | null,
//!   "summary": { "metric", "units", "count", "min", "median", "max",
//!                "worst": [ {client, server, value, with --explain "finding"} ],
//!                "outliers": [..], "tolerance_pct" } | null,
//!   "failed_thresholds": [ { "metric", "expect", "pairs": [ {client,server,value} ] } ],
//!   "matrix": { "metric", "units", "labels": [..], "values": [[v|null, ..], ..] } }
//! ```

use super::matrix::Matrix;
use super::result::PairResult;
use serde::Serialize;
use serde_json::{json, Value};
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};

/// A rank as the endpoint exchange named it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RankInfo {
    pub rank: usize,
    pub host: String,
    pub device: String,
    /// The GPU its buffers live on (`--use_cuda`): a CUDA ordinal (`cuda1`) or a PCI bus id.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu: Option<String>,
}

impl RankInfo {
    /// `host:device` (`host:device+gpu` with GPU memory), the name reports use.
    pub fn label(&self) -> String {
        match &self.gpu {
            Some(g) => format!("{}:{}+{g}", self.host, self.device),
            None => format!("{}:{}", self.host, self.device),
        }
    }
}

pub struct JsonStream {
    w: BufWriter<File>,
    path: PathBuf,
    steps: usize,
}

fn ser(v: &impl Serialize) -> io::Result<String> {
    serde_json::to_string(v).map_err(io::Error::other)
}

impl JsonStream {
    /// Creates the file and writes everything before the steps.
    pub fn create(path: &Path, params: &Value, ranks: &[RankInfo]) -> io::Result<JsonStream> {
        let mut w = BufWriter::new(File::create(path)?);
        write!(
            w,
            "{{\n\"rdmaperf_fabric\": 1,\n\"parameters\": {},\n\"ranks\": [",
            ser(params)?
        )?;
        for (i, r) in ranks.iter().enumerate() {
            let mut v =
                json!({"rank": r.rank, "host": r.host, "device": r.device, "label": r.label()});
            if let Some(g) = &r.gpu {
                v["gpu"] = json!(g);
            }
            write!(w, "{}\n{}", if i == 0 { "" } else { "," }, ser(&v)?)?;
        }
        write!(w, "],\n\"steps\": [")?;
        w.flush()?;
        Ok(JsonStream {
            w,
            path: path.to_owned(),
            steps: 0,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one finished step and flushes it to the file.
    pub fn step(&mut self, step: usize, elapsed_s: f64, pairs: &[PairResult]) -> io::Result<()> {
        let sep = if self.steps == 0 { "" } else { "," };
        self.steps += 1;
        write!(
            self.w,
            "{sep}\n{{\"step\": {step}, \"elapsed_s\": {}, \"pairs\": {}}}",
            ser(&elapsed_s)?,
            ser(&pairs)?
        )?;
        self.w.flush()
    }

    /// Closes the steps and writes the summary, threshold failures and matrix.
    pub fn finish(
        mut self,
        stopped: Option<&str>,
        summary: &Value,
        failed_thresholds: &Value,
        matrix: &Matrix,
        metric: (&str, &str),
        labels: &[String],
    ) -> io::Result<()> {
        write!(
            self.w,
            "\n],\n\"complete\": {},\n\"stopped\": {},\n\"summary\": {},\n\"failed_thresholds\": {},\n",
            stopped.is_none(),
            ser(&stopped)?,
            ser(summary)?,
            ser(failed_thresholds)?
        )?;
        write!(
            self.w,
            "\"matrix\": {{\"metric\": {}, \"units\": {}, \"labels\": {}, \"values\": [",
            ser(&metric.0)?,
            ser(&metric.1)?,
            ser(&labels)?
        )?;
        for r in 0..matrix.n {
            let sep = if r == 0 { "" } else { "," };
            write!(self.w, "{sep}\n{}", ser(&matrix.row_json(r))?)?;
        }
        write!(self.w, "\n]}}\n}}\n")?;
        self.w.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::pattern::Pair;
    use crate::fabric::result::Measure;

    #[test]
    fn schema_round_trip() {
        let dir = std::env::temp_dir().join(format!("rdmaperf-fabric-json-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f.json");
        let ranks: Vec<RankInfo> = (0..3)
            .map(|r| RankInfo {
                rank: r,
                host: format!("h{r}"),
                device: "rxe0".into(),
                gpu: None,
            })
            .collect();
        let labels: Vec<String> = ranks.iter().map(RankInfo::label).collect();
        let mut s =
            JsonStream::create(&path, &json!({"tool": "write-bw", "ranks": 3}), &ranks).unwrap();
        let ok = PairResult {
            step: 1,
            client: 0,
            server: 1,
            ok: Some(Measure {
                size: 64,
                bw: 5.5,
                msg_rate: 0.1,
                ..Measure::default()
            }),
            error: None,
        };
        let bad = PairResult::failed(1, Pair::new(2, 0), "peer gone");
        s.step(1, 0.5, &[ok, bad]).unwrap();
        // Streamed: the step is on disk before the end.
        let partial = std::fs::read_to_string(&path).unwrap();
        assert!(partial.contains("\"peer gone\""));
        s.step(2, 1.0, &[]).unwrap();
        let mut m = Matrix::new(3);
        m.set(Pair::new(0, 1), 5.5);
        s.finish(
            None,
            &json!({"count": 1}),
            &json!([]),
            &m,
            ("bw", "MB/sec"),
            &labels,
        )
        .unwrap();
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(v["rdmaperf_fabric"], 1);
        assert_eq!(v["ranks"][2]["label"], "h2:rxe0");
        assert_eq!(v["steps"].as_array().unwrap().len(), 2);
        assert_eq!(v["steps"][0]["pairs"][0]["ok"]["bw"], 5.5);
        assert_eq!(v["steps"][0]["pairs"][1]["error"], "peer gone");
        assert!(v["steps"][0]["pairs"][1].get("ok").is_none());
        assert_eq!(v["complete"], true);
        assert!(v["stopped"].is_null());
        let rows = v["matrix"]["values"].as_array().unwrap();
        assert_eq!(rows.len(), 3);
        assert!(rows.iter().all(|r| r.as_array().unwrap().len() == 3));
        assert_eq!(rows[0][1], 5.5);
        assert!(rows[1][0].is_null());
        assert_eq!(v["matrix"]["labels"][1], "h1:rxe0");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
