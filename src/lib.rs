//! rdmaperf: perftest-compatible RDMA micro-benchmarks with a driver-bypass
//! mlx5 post path. See docs/architecture.md for the architecture.
#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

pub mod sys;

mod newtype;

pub mod cli;
pub mod clock;
pub mod ctrl;
pub mod explain;
pub mod fabric;
pub mod gpu;
pub mod mlx5;
#[cfg(feature = "model")]
pub mod model;
pub mod post;
pub mod raw;
pub mod report;
pub mod run;
pub mod selfcheck;
pub mod tool;
pub mod verbs;
