//! Per-tool flow: open the device, run perftest's control choreography, build
//! the resources, run the measurement loop with the chosen post method, report,
//! tear down. (The design card's map has no home for this glue; it sits between
//! `ctrl` (protocol), `run` (loops) and `report` (output), so it gets its own.)
//!
//! The modules are layered, each importing only from layers below it (the
//! README's Architecture section has the map; `tests/module_layers.rs` fails
//! on a circle): common pieces (`fail`, `out`, `scenario`, `peer_exit`, ...)
//! → set-up (`direct_qp`, `method`, `setup`) → shared measurement and
//! control (`control`, `bw_measure`, `bw_result`, `direct`, `info`, ...) →
//! per-tool run modules (`bw_session`, `threads_*`, `rdma_bw`, `send_bw`,
//! `duplex`, `lat`) → `side` (one side of a pair) → this file (`run`) and
//! `compare`.

pub mod bw_measure;
pub mod bw_result;
pub mod bw_session;
pub mod cm_data;
pub mod compare;
pub mod compare_table;
pub mod control;
pub mod counters;
pub mod cpu_util;
pub mod cpus;
pub mod device_rules;
pub mod devices;
pub mod direct;
pub mod direct_qp;
pub mod duplex;
pub mod fail;
pub mod infinite;
pub mod info;
pub mod landing;
pub mod lat;
pub mod mcast;
pub mod mem_setup;
pub mod method;
pub mod out;
pub mod peer_check;
pub mod peer_exit;
pub mod progress;
pub mod rdma_bw;
pub mod scenario;
pub mod send_bw;
pub mod setup;
pub mod side;
pub mod threads_bw;
pub mod threads_stock;
pub mod validate;

pub use fail::Fail;
pub use out::Out;
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
