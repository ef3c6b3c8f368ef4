//! Where a side prints, and the line that closes its table: shared by every
//! tool's report, so it sits below them.

use crate::cli::params::Params;

/// Where a side prints. The loopback server is quiet so one table shows.
#[derive(Clone, Copy)]
pub struct Out {
    pub quiet: bool,
}

impl Out {
    pub fn print(&self, s: &str) {
        if !self.quiet && !s.is_empty() {
            use std::io::Write;
            let mut o = std::io::stdout().lock();
            let _ = o.write_all(s.as_bytes());
            let _ = o.flush();
        }
    }
}

/// The dashed line that closes perftest's table; with `--output=...` perftest
/// prints only the number, so scripts can take `BW=$(ib_write_bw ... --output=bandwidth)`.
pub(crate) fn result_line(p: &Params) -> &'static str {
    if p.output.is_none() {
        crate::report::text::RESULT_LINE
    } else {
        ""
    }
}
