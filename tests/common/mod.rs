//! Helpers shared by the integration tests (`mod common;` in each test file).
// Each test binary uses a different subset of these helpers.
#![allow(dead_code)]

pub mod cli;
pub mod ctrl;
pub mod fabric_steps;
pub mod fake_cuda;
pub mod mlx5;
#[cfg(feature = "model")]
pub mod model_env;
#[cfg(feature = "model")]
pub mod raw_duplex_session;
pub mod raw_eth;
#[cfg(feature = "model")]
pub mod raw_host;
#[cfg(feature = "model")]
pub mod raw_loop;
#[cfg(feature = "model")]
pub mod raw_steer_model;
#[cfg(feature = "model")]
pub mod raw_tap;
pub mod source;
pub mod tap;
pub mod vm;
pub mod vm_cases;
pub mod vm_script;
