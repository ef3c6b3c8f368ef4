//! Per-tool flow: open the device, run perftest's control choreography, build
//! the resources, run the measurement loop with the chosen post method, report,
//! tear down. (The design card's map has no home for this glue; it sits between
//! `ctrl` (protocol), `run` (loops) and `report` (output), so it gets its own.)
//!
//! The folders are the layers, each importing only from the ones below it
//! (`tests/module_layers.rs` fails otherwise, and on any import circle):
//! `common` (the error type, output, scenario, ...) → `setup` (method,
//! mlx5dv QPs, memory, resources) → `session` (control session, shared
//! measurement, direct queues, ...) → `runs` (one module per tool run) →
//! `side` (one side of a pair), then this file (`run`) and `compare`. Where
//! a tool's set-up, exchange, loop and report live: `setup::resources`,
//! `session::control`, `runs::<tool>` (loops in `crate::run`), `crate::report`.

pub mod common;
pub mod compare;
pub mod runs;
pub mod session;
pub mod setup;
pub mod side;

pub use common::fail::Fail;
pub use common::out::Out;
pub use side::loopback_with;
pub(crate) use side::run_side;

use crate::cli::params::Params;
use crate::run::stop;
use side::loopback;

/// Run the tool; returns the exit status.
pub fn run(p: Params) -> i32 {
    stop::install();
    let res = if p.loopback {
        loopback(&p)
    } else {
        run_side(&p, Out { quiet: false })
    };
    match res {
        Ok(()) => stop::exit_status().unwrap_or(0),
        Err(f) => match stop::exit_status() {
            // A signal stopped us: say so first, the step's own error after.
            Some(st) if !f.msg.starts_with("interrupted") => {
                eprintln!(
                    "rdmaperf {}: interrupted by signal {}: {}",
                    p.tool.name(),
                    st - 128,
                    f.msg
                );
                st
            }
            st => {
                eprintln!("rdmaperf {}: {}", p.tool.name(), f.msg);
                st.unwrap_or(f.status)
            }
        },
    }
}
