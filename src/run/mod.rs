//! The measurement loops (bandwidth, latency, duplex, raw Ethernet receive), generic over the post
//! method, plus perftest's buffer geometry and the stop flag.

pub mod bw;
pub mod duplex;
pub mod fs_rate;
pub mod geometry;
pub mod lat;
pub mod pace;
pub mod peer;
pub mod period;
pub mod raw_burst_lat;
pub mod raw_bw;
pub mod raw_duplex;
pub mod raw_duplex_qps;
pub mod raw_fw;
pub mod raw_lat;
pub mod raw_qpn;
pub mod raw_recv;
pub mod raw_recv_qps;
pub mod raw_recv_report;
pub mod recv;
pub mod stop;
pub mod threads;
pub mod watchdog;

#[cfg(test)]
mod bw_tests;
#[cfg(test)]
mod raw_burst_lat_tests;
#[cfg(test)]
mod raw_fw_tests;
#[cfg(test)]
mod raw_lat_fakes;
#[cfg(test)]
mod raw_lat_tests;
#[cfg(test)]
mod raw_recv_tests;
