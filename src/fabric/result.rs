//! What one pair measured, read back from the pair tool's own perftest JSON
//! record (`--out_json_file`, written by `report::json`), so the fabric mode
//! uses the tools' statistics as they are; and the metric the matrix shows.

use super::pattern::Pair;
use super::summary::Better;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Latency statistics of one pair (µs), as the tool computed them.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Lat {
    pub t_min: f64,
    pub t_typical: f64,
    pub t_avg: f64,
    pub t_max: f64,
    pub p99: f64,
}

/// One pair's measurement (the last size's record when several ran).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Measure {
    pub size: u64,
    /// BW average in the tool's units (`bw_units`).
    pub bw: f64,
    /// Mpps.
    pub msg_rate: f64,
    pub lat: Option<Lat>,
    /// `--explain`: the client side's top finding (or the first fact that
    /// caps the pair); `None` without `--explain` or with nothing found.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub finding: Option<TopFinding>,
    /// `--explain` ran on the pair (so no finding means a clean pair).
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub explained: bool,
}

/// The first line of a pair's explanation: the rule's (or fact's) code and
/// its evidence.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TopFinding {
    pub code: String,
    pub evidence: String,
}

/// The top finding of the client's JSON `explain` object: its first
/// finding (they are ranked), else the server's (its `peer`, exchanged
/// after the run, marked "server"), else the first fact of either.
fn top_finding(explain: &Value) -> Option<TopFinding> {
    let peer = &explain["peer"];
    let finding = |e: &Value, who: &str| {
        let f = &e["findings"][0];
        f.is_object().then(|| TopFinding {
            code: format!("{}{who}", f["code"].as_str().unwrap_or("finding")),
            evidence: f["evidence"].as_str().unwrap_or("").to_owned(),
        })
    };
    let fact = |e: &Value, who: &str| {
        let c = &e["facts"][0];
        c.is_object().then(|| TopFinding {
            code: format!("{}{who}", c["code"].as_str().unwrap_or("fact")),
            evidence: c["what"].as_str().unwrap_or("").to_owned(),
        })
    };
    finding(explain, "")
        .or_else(|| finding(peer, "@server"))
        .or_else(|| fact(explain, ""))
        .or_else(|| fact(peer, "@server"))
}

/// One pair's outcome in one step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PairResult {
    pub step: usize,
    pub client: usize,
    pub server: usize,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub ok: Option<Measure>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub error: Option<String>,
}

impl PairResult {
    pub fn pair(&self) -> Pair {
        Pair::new(self.client, self.server)
    }
    pub fn failed(step: usize, pair: Pair, why: impl Into<String>) -> PairResult {
        PairResult {
            step,
            client: pair.client,
            server: pair.server,
            ok: None,
            error: Some(why.into()),
        }
    }
}

/// What the matrix and a threshold look at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    Bw,
    MsgRate,
    /// t_typical (the median) of a latency test.
    Lat,
}

impl Metric {
    pub fn name(self) -> &'static str {
        match self {
            Metric::Bw => "bw",
            Metric::MsgRate => "msg_rate",
            Metric::Lat => "lat",
        }
    }
    pub fn better(self) -> Better {
        match self {
            Metric::Lat => Better::Lower,
            _ => Better::Higher,
        }
    }
    pub fn of(self, m: &Measure) -> Option<f64> {
        match self {
            Metric::Bw => Some(m.bw),
            Metric::MsgRate => Some(m.msg_rate),
            Metric::Lat => m.lat.as_ref().map(|l| l.t_typical),
        }
    }
}

fn num(v: &Value, key: &str) -> Option<f64> {
    v.get(key)?.as_f64()
}

/// The tool's JSON file (`test_info` + `results`, one record or an array);
/// returns the last record's values and the BW units.
pub fn parse_tool_json(text: &str) -> Result<(Measure, String), String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("the pair tool's JSON: {e}"))?;
    let units = v["test_info"]["BW_units"]
        .as_str()
        .unwrap_or("MB/sec")
        .to_owned();
    let rec = match &v["results"] {
        Value::Array(a) => a.last().cloned().unwrap_or(Value::Null),
        r => r.clone(),
    };
    if !rec.is_object() {
        return Err("the pair tool wrote no result record".into());
    }
    let mut m = Measure {
        size: rec.get("MsgSize").and_then(Value::as_u64).unwrap_or(0),
        bw: num(&rec, "BW_average")
            .or(num(&rec, "bw_avg"))
            .unwrap_or(0.0),
        msg_rate: num(&rec, "MsgRate")
            .or(num(&rec, "msgRate_avg"))
            .unwrap_or(0.0),
        lat: None,
        finding: top_finding(&v["explain"]),
        explained: v["explain"].is_object(),
    };
    let t_avg = num(&rec, "t_avg").or(num(&rec, "avg_lat"));
    if let Some(t_avg) = t_avg {
        let typ = num(&rec, "t_typical").unwrap_or(t_avg);
        m.lat = Some(Lat {
            t_min: num(&rec, "t_min").unwrap_or(typ),
            t_typical: typ,
            t_avg,
            t_max: num(&rec, "t_max").unwrap_or(typ),
            p99: num(&rec, "percentile_99").unwrap_or(typ),
        });
        // Latency tests report transactions, not a message rate: 1/t.
        if m.msg_rate == 0.0 && typ > 0.0 {
            m.msg_rate = 1.0 / typ;
        }
    }
    Ok((m, units))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bw_record_and_array() {
        let one = r#"{"test_info":{"BW_units":"MiB/sec"},"results":{"MsgSize":65536,"n_iterations":5000,"BW_peak":10.5,"BW_average":9.25,"MsgRate":0.000148}}"#;
        let (m, u) = parse_tool_json(one).unwrap();
        assert_eq!(
            (m.size, m.bw, m.msg_rate, u.as_str()),
            (65536, 9.25, 0.000148, "MiB/sec")
        );
        assert_eq!(Metric::Bw.of(&m), Some(9.25));
        assert_eq!(Metric::Lat.of(&m), None);
        let many = r#"{"test_info":{},"results":[{"MsgSize":2,"BW_average":1.0,"MsgRate":0.5},{"MsgSize":4,"BW_average":2.0,"MsgRate":0.5}]}"#;
        assert_eq!(parse_tool_json(many).unwrap().0.size, 4);
    }

    #[test]
    fn lat_record() {
        let t = r#"{"test_info":{},"results":{"MsgSize":2,"n_iterations":1000,"t_min":1.5,"t_max":9.0,"t_typical":2.0,"t_avg":2.5,"t_stdev":0.3,"percentile_99":4.0,"percentile_99.9":8.0}}"#;
        let (m, _) = parse_tool_json(t).unwrap();
        let l = m.lat.clone().unwrap();
        assert_eq!(
            (l.t_min, l.t_typical, l.t_avg, l.t_max, l.p99),
            (1.5, 2.0, 2.5, 9.0, 4.0)
        );
        assert_eq!(Metric::Lat.of(&m), Some(2.0));
        assert_eq!(m.msg_rate, 0.5);
    }

    /// `--explain` on the pair: the ranked first finding, else the first
    /// fact; explained but clean; not explained.
    #[test]
    fn the_explanation_top_line() {
        let rec = r#""results":{"MsgSize":65536,"BW_average":9.0,"MsgRate":0.1}"#;
        let with = |explain: &str| format!(r#"{{"test_info":{{}},{rec},"explain":{explain}}}"#);
        let (m, _) = parse_tool_json(&with(
            r#"{"findings":[{"code":"loss","evidence":"rcvd_seq_err +138 = 13800 per million"},{"code":"rnr","evidence":"x"}],"facts":[{"code":"numa_far","what":"w"}]}"#,
        ))
        .unwrap();
        let f = m.finding.unwrap();
        assert_eq!((f.code.as_str(), m.explained), ("loss", true));
        assert!(f.evidence.contains("13800"));
        let (m, _) = parse_tool_json(&with(
            r#"{"findings":[],"facts":[{"code":"pcie_below_max","what":"8.0 GT/s x8"}]}"#,
        ))
        .unwrap();
        assert_eq!(m.finding.unwrap().code, "pcie_below_max");
        let (m, _) = parse_tool_json(&with(r#"{"findings":[],"facts":[]}"#)).unwrap();
        assert_eq!((m.finding, m.explained), (None, true));
        // A clean client, the server's counters (its explanation, exchanged
        // after the run) found something: the server's, marked.
        let (m, _) = parse_tool_json(&with(
            r#"{"findings":[],"facts":[],"peer":{"findings":[{"code":"out_of_sequence","evidence":"e"}],"facts":[]}}"#,
        ))
        .unwrap();
        assert_eq!(m.finding.unwrap().code, "out_of_sequence@server");
        let (m, _) = parse_tool_json(&format!(r#"{{"test_info":{{}},{rec}}}"#)).unwrap();
        assert_eq!((m.finding, m.explained), (None, false));
    }

    #[test]
    fn bad_json() {
        assert!(parse_tool_json("{").is_err());
        assert!(parse_tool_json(r#"{"results":[]}"#)
            .unwrap_err()
            .contains("no result"));
    }
}
