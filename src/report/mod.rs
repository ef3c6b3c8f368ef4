//! Measurement math and perftest-compatible output.
//!
//! - [`stats`]: bandwidth (perftest's `print_report_bw` math) and latency statistics
//!   (exact, and a `perftest_compat` mode reproducing perftest's numbers).
//! - [`text`]: perftest master's text output, byte for byte.
//! - [`json`]: `--out_json` files with perftest's key names, written atomically.
//! - [`histogram`]: the `-H` latency histogram.
//! - [`cfmt`]: the C `printf` emulation the text output is built on.

pub mod cfmt;
pub mod fs_rate;
pub mod histogram;
pub mod info;
pub mod json;
pub mod stats;
pub mod text;
