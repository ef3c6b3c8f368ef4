//! Layer 1: pieces every tool uses, importing nothing from the layers above: the error every tool
//! returns (`fail`), where a side prints (`out`), the control protocol's view of the invocation
//! (`scenario`), the wording for a vanished peer (`peer_exit`), landing checks, progress, CPU
//! pinning and utilisation, the device list, the compare table, peer checks, device rules and the
//! `--run_infinitely` printer.

pub mod compare_table;
pub mod cpu_util;
pub mod cpus;
pub mod device_rules;
pub mod devices;
pub mod fail;
pub mod infinite;
pub mod landing;
pub mod out;
pub mod peer_check;
pub mod peer_exit;
pub mod progress;
pub mod scenario;
