//! perftest's raw Ethernet tools (`raw_ethernet_bw`, `_lat`, `_burst_lat`,
//! `_fs_rate`): their command line and rules (`tools`, `args`, `values`,
//! `params`, `rules`), perftest's frames byte for byte (`frame`), a pcap
//! writer for recording them (`pcap`), the port's packet-rate ceiling
//! (`line_rate`), the checks made before anything is opened (`preflight`,
//! `cli`), and the NIC's count of frames dropped for want of a receive
//! (`rx_drops`). The pure files (`frame`, `pcap`, `line_rate`) import nothing
//! from the crate; `tests/module_layers.rs` keeps them so.

pub mod args;
pub mod cli;
pub mod ctx;
pub mod frame;
pub mod line_rate;
pub mod params;
pub mod pcap;
pub mod preflight;
pub mod rate;
pub mod rules;
pub mod rx_drops;
pub mod slots;
pub mod steer;
pub mod tools;
pub mod values;
