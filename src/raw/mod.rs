//! perftest's raw Ethernet tools (`raw_ethernet_bw`, `_lat`, `_burst_lat`,
//! `_fs_rate`): perftest's frames byte for byte (`frame`), a pcap writer for
//! recording them (`pcap`), and the port's packet-rate ceiling
//! (`line_rate`). These files import nothing from the crate.

pub mod frame;
pub mod line_rate;
pub mod pcap;
