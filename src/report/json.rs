//! `--out_json` reports: perftest master's key names and one-key-per-line
//! layout, but always valid JSON and never losing records.
//!
//! Layout (keys in perftest's order, no indentation, one key per line, so
//! `awk -F'[:,]' '/BW_average/{print $2}'` keeps working):
//!
//! ```text
//! {
//! "test_info": {
//! "test": "RDMA_Write_BW_Test",
//! ...perftest's keys..., then ours (units, sizes, clock, extra lines)
//! },
//! "results": [
//! {
//! "MsgSize": 65536,
//! "n_iterations": 5000,
//! "BW_peak": 11716.84,
//! "BW_average": 11715.97,
//! "MsgRate": 0.187456
//! }
//! ]
//! }
//! ```
//!
//! Differences from perftest, on purpose:
//! - **`results` is always an array** of such objects, one per record, in the
//!   order they were produced: one shape for every tool, side and mode (one
//!   size, an `-a` sweep, `-D`, `-b`, `--threads`, `--run_infinitely`
//!   periods), where perftest writes one object (and, rewriting the file per
//!   size, keeps only an `-a` run's last size). `test_info` says which
//!   statistics were used (`"Statistics": "exact"` or `"perftest"`).
//! - Numbers carry perftest's rounding (`%.2f`, `%.6f`) but are JSON numbers, so
//!   trailing zeros are not printed (11716.80 is written 11716.8). Non-finite
//!   values become `null`.
//! - The file is rewritten atomically after every record (temporary file in the
//!   same directory + rename), so a reader never sees a torn file and a crash
//!   keeps every record produced so far.
//! - `--output=bandwidth|message_rate|latency` results hold the one key perftest
//!   writes then (`bw_avg`, `msgRate_avg`, `avg_lat`, `t_avg`).

use std::io::Write as _;
use std::path::{Path, PathBuf};

use serde::ser::{Serialize, SerializeMap, Serializer};
use serde_json::Value;
use thiserror::Error;

use super::cfmt::{sprintf, Arg};
use super::info::{on_off, CqePoll, OutputMode, Support, TestInfo, TestKind};
use super::stats::{BwResult, LatDuration, LatStats};
use super::text::bw_inc_accuracy;

/// perftest's default `--out_json_file`.
pub const DEFAULT_FILE: &str = "perftest_out.json";

/// A JSON object that keeps its keys in insertion order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Ordered(pub Vec<(String, Value)>);

impl Ordered {
    fn put(&mut self, k: &str, v: impl Into<Value>) {
        self.0.push((k.to_string(), v.into()));
    }

    /// The value of `key`, if present.
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }
}

impl Serialize for Ordered {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// `v` rounded the way perftest's `%.<decimals>f` prints it (null if not finite).
fn fixed(v: f64, decimals: usize) -> Value {
    let s = sprintf(&format!("%.{decimals}f"), &[Arg::F(v)]);
    s.parse::<f64>().map_or(Value::Null, Value::from)
}

/// The `test_info` object: perftest master's keys (`write_test_info_to_file`)
/// in its order, then our own: units, run parameters, master-only switches
/// perftest leaves out of its JSON, and [`TestInfo::extra`] (label spaces
/// become '_').
pub fn test_info(i: &TestInfo) -> Ordered {
    let mut o = Ordered::default();
    perftest_keys(&mut o, i);
    // ---- ours ----
    our_switches(&mut o, i);
    our_units(&mut o, i);
    for (k, v) in &i.extra {
        o.put(&k.replace(' ', "_"), v.as_str());
    }
    for (k, v) in &i.json_extra {
        o.put(k, v.as_str());
    }
    o
}

/// perftest master's keys, in `write_test_info_to_file`'s order.
fn perftest_keys(o: &mut Ordered, i: &TestInfo) {
    o.put("test", i.json_title());
    if let Some(eq) = i.events {
        o.put("Test with events", format!("Using_{}_comp{}", i.device, eq));
    }
    o.put("Dual_port", on_off(i.dualport));
    o.put("Device", i.device.as_str());
    o.put("Number_of_qps", i.num_qps);
    o.put("Transport_type", i.transport.perftest_name());
    o.put("Connection_type", i.connection.perftest_name());
    o.put("Using_SRQ", on_off(i.use_srq));
    o.put("PCIe_relax_order", i.pcie_relaxed.perftest_name());
    if i.pcie_relaxed == Support::On && i.pcie_ro_noncompliant_cpu {
        o.put("WARNING1", "CPU is not PCIe relaxed ordering compliant");
        o.put(
            "WARNING2",
            "You should disable PCIe RO with --disable_pcie_relaxed for both server and client",
        );
    }
    o.put("ibv_wr_API", on_off(i.wr_api));
    perftest_depths(o, i);
    o.put("rdma_cm_QPs", on_off(i.rdma_cm_qps));
    if let Some(d) = i.cuda_device {
        o.put("cuda_device", d);
    }
    o.put("Use_ROCm_memory", "OFF");
    o.put("Use_MUSA_memory", "OFF");
    o.put(
        "Data_ex_method",
        if i.rdma_cm_exchange {
            "rdma_cm"
        } else {
            "Ethernet"
        },
    );
    if let (true, Some(t)) = (i.rdma_cm_qps, i.tos) {
        o.put("TOS", t);
    }
}

/// perftest's depths, post lists, CQ moderation, MTU, link, GID indexes, reads or inline.
fn perftest_depths(o: &mut Ordered, i: &TestInfo) {
    if i.shows_tx_depth() {
        o.put("TX_depth", i.tx_depth);
    }
    if i.post_list > 1 {
        o.put("Post_List", i.post_list);
    }
    if i.recv_post_list > 1 {
        o.put("Recv_Post_List", i.recv_post_list);
    }
    if i.shows_rx_depth() {
        o.put("RX_depth", i.rx_depth);
    }
    if i.kind == TestKind::Bw {
        o.put("CQ_Moderation", i.cq_mod);
    }
    o.put("Mtu", i.mtu);
    o.put("Link_type", i.link.perftest_name());
    if let Some(g) = i.gid_index {
        o.put("GID_index", g);
    }
    if let (true, Some(g)) = (i.dualport, i.gid_index2) {
        o.put("GID_index2", g);
    }
    if i.shows_out_reads() {
        o.put("Outstand_reads", i.out_reads);
    } else {
        o.put("Max_inline_data", i.inline_size);
    }
}

/// Master-only switches perftest leaves out of its JSON, and the NUMA node.
fn our_switches(o: &mut Ordered, i: &TestInfo) {
    o.put("Lock_free", i.lock_free.perftest_name());
    o.put("Enhanced_reorder", on_off(i.enhanced_reorder));
    if i.kind == TestKind::Bw {
        match i.cqe_poll {
            CqePoll::Dynamic => o.put("CQE_Poll_Batch", "Dynamic"),
            CqePoll::Fixed(n) => o.put("CQE_Poll_Batch", n),
        }
    }
    if let Some(n) = i.numa_node {
        o.put("NUMA_node", n);
    }
}

/// Units and run parameters, and which statistics the results use.
fn our_units(o: &mut Ordered, i: &TestInfo) {
    o.put("Size_units", "bytes");
    o.put("Msg_size", i.size);
    o.put("All_sizes", i.all_sizes);
    match i.duration_s {
        Some(d) => {
            o.put("Duration_s", d);
            if let Some(m) = i.margin_s {
                o.put("Margin_s", m);
            }
        }
        None => o.put("Iterations", i.iters),
    }
    match i.kind {
        TestKind::Bw => {
            o.put("BW_units", i.bw_units.label());
            o.put("MsgRate_units", "Mpps");
        }
        TestKind::Lat => {
            o.put("Lat_units", i.lat_units.label());
            if i.duration_s.is_some() {
                o.put("tps_units", "transactions/sec");
            }
        }
    }
    if i.cpu_util {
        o.put("CPU_util_units", "%");
    }
    // Bandwidth always uses perftest's formulas; latency by default the exact
    // statistics (true maximum, floating-point stdev), or perftest's.
    o.put(
        "Statistics",
        if i.kind == TestKind::Bw || i.perftest_stats {
            "perftest"
        } else {
            "exact"
        },
    );
}

/// One `results` record. Add keys of our own with [`Record::with`].
#[derive(Clone, Debug, PartialEq)]
pub struct Record(pub Ordered);

impl Record {
    /// A BW record (`REPORT_FMT_JSON`, 6 decimals for Gb/s under 0.1;
    /// `CPU_util` when `i.cpu_util`).
    pub fn bw(r: &BwResult, i: &TestInfo, cpu_util: f32) -> Record {
        let mut o = Ordered::default();
        match i.output {
            OutputMode::Bandwidth => o.put("bw_avg", fixed(r.bw_avg, 6)),
            OutputMode::MessageRate => o.put("msgRate_avg", fixed(r.msg_rate, 6)),
            _ => {
                let d = if bw_inc_accuracy(r, i.bw_units) { 6 } else { 2 };
                o.put("MsgSize", r.size);
                o.put("n_iterations", r.iters);
                o.put("BW_peak", fixed(r.bw_peak, d));
                o.put("BW_average", fixed(r.bw_avg, d));
                o.put("MsgRate", fixed(r.msg_rate, 6));
                if i.cpu_util {
                    o.put("CPU_util", fixed(cpu_util as f64, 2));
                }
            }
        }
        Record(o)
    }

    /// A latency record (`REPORT_FMT_LAT_JSON`).
    pub fn lat(size: u64, iters: u64, s: &LatStats, i: &TestInfo, cpu_util: f32) -> Record {
        let at = |v: f64| fixed(v, 2);
        let keys = [
            ("t_min", at(s.t_min)),
            ("t_max", at(s.t_max)),
            ("t_typical", at(s.t_typical)),
            ("t_avg", at(s.t_avg)),
            ("t_stdev", at(s.t_stdev)),
            ("percentile_99", at(s.p99)),
            ("percentile_99.9", at(s.p99_9)),
        ];
        Self::lat_shaped(("avg_lat", s.t_avg), (size, iters), &keys, i, cpu_util)
    }

    /// A duration-mode latency record (`REPORT_FMT_LAT_DUR_JSON`).
    pub fn lat_duration(
        size: u64,
        iters: u64,
        r: &LatDuration,
        i: &TestInfo,
        cpu_util: f32,
    ) -> Record {
        let keys = [
            ("t_avg", fixed(r.t_avg, 2)),
            ("tps_average", fixed(r.tps, 2)),
        ];
        Self::lat_shaped(("t_avg", r.t_avg), (size, iters), &keys, i, cpu_util)
    }

    /// Both latency records: `--output latency` prints the average alone
    /// (6 decimals); otherwise size, iterations, `keys`, and the CPU column.
    fn lat_shaped(
        avg: (&str, f64),
        (size, iters): (u64, u64),
        keys: &[(&str, Value)],
        i: &TestInfo,
        cpu_util: f32,
    ) -> Record {
        let mut o = Ordered::default();
        if i.output == OutputMode::Latency {
            o.put(avg.0, fixed(avg.1, 6));
            return Record(o);
        }
        o.put("MsgSize", size);
        o.put("n_iterations", iters);
        for (k, v) in keys {
            o.put(k, v.clone());
        }
        if i.cpu_util {
            o.put("CPU_util", fixed(cpu_util as f64, 2));
        }
        Record(o)
    }

    /// Appends a key of our own, e.g. `.with("Side", "remote")` for
    /// `--report-both`, or `.with("BW_peak_exact", ...)`.
    pub fn with(mut self, key: &str, value: impl Into<Value>) -> Record {
        self.0.put(key, value);
        self
    }
}

impl Serialize for Record {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

/// The whole file, serialized in order (a `serde_json::Value` map would sort keys).
struct Doc<'a> {
    info: &'a Ordered,
    results: &'a [Record],
}

impl Serialize for Doc<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        // `results` even when empty (a passive side): one shape for scripts.
        let mut m = s.serialize_map(Some(2))?;
        m.serialize_entry("test_info", self.info)?;
        m.serialize_entry("results", self.results)?;
        m.end()
    }
}

/// Why the JSON report could not be written.
#[derive(Debug, Error)]
#[error("cannot write the JSON report {path}: {source}; check that the directory exists and is writable, or choose another file with --out_json_file=<path>")]
pub struct JsonError {
    pub path: PathBuf,
    #[source]
    pub source: std::io::Error,
}

/// The JSON report of one run: `test_info` plus every record pushed so far.
#[derive(Clone, Debug)]
pub struct JsonReport {
    path: PathBuf,
    info: Ordered,
    results: Vec<Record>,
}

impl JsonReport {
    /// A report for `info`, to be written to `path` (nothing is written yet).
    pub fn new(path: impl Into<PathBuf>, info: &TestInfo) -> JsonReport {
        JsonReport {
            path: path.into(),
            info: test_info(info),
            results: Vec::new(),
        }
    }

    /// Where the report goes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Records pushed so far.
    pub fn records(&self) -> &[Record] {
        &self.results
    }

    /// Adds a record and rewrites the file atomically with all records so far.
    /// The record is kept even if writing fails (a later push retries).
    pub fn push(&mut self, r: Record) -> Result<(), JsonError> {
        self.results.push(r);
        self.write()
    }

    /// The file's text.
    pub fn render(&self) -> String {
        let doc = Doc {
            info: &self.info,
            results: &self.results,
        };
        let mut buf = Vec::with_capacity(2048);
        let fmt = serde_json::ser::PrettyFormatter::with_indent(b"");
        let mut ser = serde_json::Serializer::with_formatter(&mut buf, fmt);
        // Serializing strings and numbers into a Vec cannot fail.
        if doc.serialize(&mut ser).is_err() {
            return String::from("{}\n");
        }
        buf.push(b'\n');
        String::from_utf8(buf).unwrap_or_default()
    }

    /// Writes the file atomically: a temporary file next to it, synced, then
    /// renamed over it.
    pub fn write(&self) -> Result<(), JsonError> {
        let err = |source| JsonError {
            path: self.path.clone(),
            source,
        };
        let name = self
            .path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| DEFAULT_FILE.to_string());
        let tmp = self
            .path
            .with_file_name(format!(".{name}.{}.tmp", std::process::id()));
        let result = (|| {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(self.render().as_bytes())?;
            f.sync_all()?;
            std::fs::rename(&tmp, &self.path)
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        result.map_err(err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::stats::BwUnits;

    fn bw(size: u64, avg: f64) -> BwResult {
        BwResult {
            size,
            iters: 5000,
            bw_peak: 11716.8412,
            bw_avg: avg,
            msg_rate: 0.18745612,
            bw_peak_exact: 0.0,
        }
    }

    #[test]
    fn a_report_without_records_still_has_a_results_array() {
        let rep = JsonReport::new("/nonexistent-dir/x.json", &TestInfo::default());
        let v: Value = serde_json::from_str(&rep.render()).unwrap();
        assert_eq!(v["results"], serde_json::json!([]));
        assert!(v["test_info"]["Statistics"].is_string());
    }

    #[test]
    fn single_record_matches_perftest_layout() {
        let info = TestInfo {
            device: "mlx5_0".into(),
            ..TestInfo::default()
        };
        let mut rep = JsonReport::new("/nonexistent-dir/x.json", &info);
        assert!(rep
            .push(Record::bw(&bw(65536, 11715.9749), &info, 0.0))
            .is_err());
        let s = rep.render();
        assert!(s.starts_with("{\n\"test_info\": {\n\"test\": \"RDMA_Write_BW_Test\",\n\"Dual_port\": \"OFF\",\n\"Device\": \"mlx5_0\",\n"));
        assert!(s.ends_with(
            "\"results\": [\n{\n\"MsgSize\": 65536,\n\"n_iterations\": 5000,\n\"BW_peak\": 11716.84,\n\"BW_average\": 11715.97,\n\"MsgRate\": 0.187456\n}\n]\n}\n"
        ));
        let v: Value = serde_json::from_str(&s).unwrap();
        assert_eq!(v["results"][0]["BW_average"], 11715.97);
        assert_eq!(v["test_info"]["Statistics"], "perftest");
        assert_eq!(v["test_info"]["BW_units"], "MiB/sec");
        // The awk scrapers use.
        let line = s.lines().find(|l| l.contains("BW_average")).unwrap();
        let field = line.split([':', ',']).nth(1).unwrap();
        assert_eq!(field.trim(), "11715.97");
    }

    #[test]
    fn sweep_keeps_every_size_and_writes_atomically() {
        let dir = std::env::temp_dir().join(format!("rdmaperf-json-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("out.json");
        let info = TestInfo {
            all_sizes: true,
            bw_units: BwUnits::Gbit,
            cpu_util: true,
            ..TestInfo::default()
        };
        let mut rep = JsonReport::new(&path, &info);
        rep.push(Record::bw(&bw(2, 0.0123456789), &info, 7.126))
            .unwrap();
        let one: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        // One record or many: always an array.
        assert_eq!(one["results"].as_array().map(Vec::len), Some(1));
        assert_eq!(one["results"][0]["BW_average"], 0.012346); // 6 decimals under 0.1 Gb/s
        assert_eq!(one["results"][0]["CPU_util"], 7.13);
        rep.push(Record::bw(&bw(4, 5.0), &info, 0.0).with("Side", "local"))
            .unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let two: Value = serde_json::from_str(&text).unwrap();
        let arr = two["results"].as_array().unwrap();
        assert_eq!(arr.len(), 2);
        assert_eq!(arr[0]["MsgSize"], 2);
        assert_eq!(arr[1]["MsgSize"], 4);
        assert_eq!(arr[1]["BW_average"], 5.0);
        assert_eq!(arr[1]["Side"], "local");
        assert_eq!(text.matches("\"BW_average\"").count(), 2);
        // No temporary file left behind.
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert_eq!(left.len(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn lat_and_output_modes() {
        let info = TestInfo {
            kind: TestKind::Lat,
            ..TestInfo::default()
        };
        let s = LatStats {
            t_min: 1.0,
            t_max: 2.0,
            t_typical: 1.5,
            t_avg: 1.555,
            t_stdev: f64::NAN,
            p99: 1.9,
            p99_9: 2.0,
            samples: 10,
        };
        let r = Record::lat(2, 1000, &s, &info, 0.0);
        let keys: Vec<&str> = r.0 .0.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(
            keys,
            [
                "MsgSize",
                "n_iterations",
                "t_min",
                "t_max",
                "t_typical",
                "t_avg",
                "t_stdev",
                "percentile_99",
                "percentile_99.9"
            ]
        );
        assert_eq!(r.0.get("t_stdev"), Some(&Value::Null));
        assert!(test_info(&info).get("CQ_Moderation").is_none());
        let lo = TestInfo {
            output: OutputMode::Latency,
            ..info.clone()
        };
        assert_eq!(Record::lat(2, 1000, &s, &lo, 0.0).0 .0.len(), 1);
        let d = LatDuration {
            t_avg: 1.0,
            tps: 2.0,
        };
        let r = Record::lat_duration(2, 9, &d, &info, 0.0);
        assert_eq!(r.0.get("tps_average"), Some(&Value::from(2.0)));
        let bo = TestInfo {
            output: OutputMode::Bandwidth,
            ..TestInfo::default()
        };
        let r = Record::bw(&bw(2, 1.23456789), &bo, 0.0);
        assert_eq!(r.0 .0, vec![("bw_avg".to_string(), Value::from(1.234568))]);
    }
}
