//! Rank 0's N x N matrix of the chosen metric (row = client, column =
//! server; empty where a pair was not measured or failed) and its CSV form.

use super::pattern::Pair;
use std::fmt::Write;

#[derive(Clone, Debug)]
pub struct Matrix {
    pub n: usize,
    /// Row-major; NaN = no value.
    cells: Vec<f64>,
}

impl Matrix {
    pub fn new(n: usize) -> Matrix {
        Matrix {
            n,
            cells: vec![f64::NAN; n * n],
        }
    }

    /// Sets a pair's value; a pair measured twice (alltoall and pairs both
    /// name it, or a file repeats it) keeps the later value.
    pub fn set(&mut self, p: Pair, v: f64) {
        self.cells[p.client * self.n + p.server] = v;
    }

    pub fn get(&self, client: usize, server: usize) -> Option<f64> {
        let v = self.cells[client * self.n + server];
        (!v.is_nan()).then_some(v)
    }

    /// Smallest and largest value, if any.
    pub fn range(&self) -> Option<(f64, f64)> {
        let mut it = self.cells.iter().copied().filter(|v| !v.is_nan());
        let first = it.next()?;
        Some(it.fold((first, first), |(lo, hi), v| (lo.min(v), hi.max(v))))
    }

    /// One row as JSON values (null where empty).
    pub fn row_json(&self, r: usize) -> Vec<serde_json::Value> {
        (0..self.n)
            .map(|c| match self.get(r, c) {
                Some(v) => serde_json::json!(v),
                None => serde_json::Value::Null,
            })
            .collect()
    }

    /// The CSV matrix: a header of server labels, then one row per client
    /// (label first); empty cells where no value. Labels are quoted when
    /// they hold a comma or quote.
    pub fn to_csv(&self, labels: &[String]) -> String {
        let q = |s: &str| {
            if s.contains([',', '"', '\n']) {
                format!("\"{}\"", s.replace('"', "\"\""))
            } else {
                s.to_owned()
            }
        };
        let mut out = String::from("client\\server");
        for l in labels {
            out.push(',');
            out.push_str(&q(l));
        }
        out.push('\n');
        for (r, label) in labels.iter().enumerate().take(self.n) {
            out.push_str(&q(label));
            for c in 0..self.n {
                out.push(',');
                if let Some(v) = self.get(r, c) {
                    let _ = write!(out, "{v}");
                }
            }
            out.push('\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn csv_round_trip() {
        let mut m = Matrix::new(3);
        m.set(Pair::new(0, 1), 12.5);
        m.set(Pair::new(2, 0), 3.0);
        let labels: Vec<String> = ["h0:rxe0", "h1:rxe0", "h,2:rxe0"].map(String::from).into();
        let csv = m.to_csv(&labels);
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 4);
        assert_eq!(lines[0], "client\\server,h0:rxe0,h1:rxe0,\"h,2:rxe0\"");
        assert_eq!(lines[1], "h0:rxe0,,12.5,");
        assert_eq!(lines[3], "\"h,2:rxe0\",3,,");
        assert_eq!(m.range(), Some((3.0, 12.5)));
        assert_eq!(m.get(1, 1), None);
        assert_eq!(m.row_json(0)[1], serde_json::json!(12.5));
        assert!(m.row_json(0)[0].is_null());
    }
}
