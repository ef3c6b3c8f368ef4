//! The values a run's parameters hold besides the flags' own text: the
//! mode, `--output`'s choice, the GRH options and the latency sample
//! reports.

use std::path::PathBuf;

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum OutputKind {
    Bandwidth,
    MessageRate,
    Latency,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Mode {
    Iterations,
    Duration { secs: u32, margin: u32 },
}

/// `--tclass`, `--flow_label`, `--pkey_index`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Qos {
    pub traffic_class: u8,
    /// Flow label of QP i is `flow_labels[i % len]` (empty: 0).
    pub flow_labels: Vec<u32>,
    pub pkey_index: u16,
}

impl Qos {
    /// The flow label of QP `i`.
    pub fn flow_label(&self, i: usize) -> u32 {
        if self.flow_labels.is_empty() {
            0
        } else {
            self.flow_labels[i % self.flow_labels.len()]
        }
    }
    /// Whether `--tclass` or `--flow_label` asks for a non-default GRH.
    pub fn grh_set(&self) -> bool {
        self.traffic_class != 0 || self.flow_labels.iter().any(|&f| f != 0)
    }
}

/// `-w`/`--limit_bw` and `-y`/`--limit_msgrate`: the least average bandwidth
/// (in the row's units) and message rate (Mpps) a bw test must reach, or it
/// fails after its result; `None`: not checked.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Limits {
    pub bw: Option<f64>,
    pub msgrate: Option<f64>,
}

/// What the latency tools print or write besides the result row.
#[derive(Clone, Debug, Default)]
pub struct SampleReport {
    /// `-U`: every sample in the order measured.
    pub unsorted: bool,
    /// `-H`: a bucketed histogram.
    pub histogram: bool,
    /// `-C`: TSC cycles instead of microseconds.
    pub cycles: bool,
    /// `--samples-file`: the raw samples as CSV.
    pub file: Option<PathBuf>,
}
