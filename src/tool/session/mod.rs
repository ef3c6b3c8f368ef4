//! Layer 3: what several tools share once resources exist: the control session (`control`: TCP,
//! `-R` or the caller's link), `-R` data QPs (`cm_data`), counters, the info block, a size's bw row
//! and its measurement (`bw_result`, `bw_measure`), opening the direct queues (`direct`),
//! multicast, data validation, the verbs send queues (`queues`), and the raw Ethernet sender's
//! run and report (`raw_measure`). Imports `common` and `setup`.

pub mod bw_measure;
pub mod bw_result;
pub mod cm_data;
pub mod control;
pub mod counters;
pub mod direct;
pub mod info;
pub mod mcast;
pub mod queues;
pub mod raw_burst_lat_measure;
pub mod raw_lat_measure;
pub mod raw_lat_session;
pub mod raw_measure;
pub mod raw_recv_measure;
pub mod raw_recv_qps_measure;
pub mod validate;
