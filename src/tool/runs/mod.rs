//! Layer 4: the tools' runs, each using only the layers below and the runs listed before it:
//! threads over one connection (`threads_bw`), write/read/atomic-bw on an open session
//! (`bw_session`), thread i against a stock server on port p+i (`threads_stock`), `rdma_bw` (opens
//! the session, picks one of those), `send_bw`, `duplex` (uses send-bw's receiver), `lat`, and
//! `raw_send` (raw-eth-bw's sender run), `raw_duplex` (`-b`), `raw_bw` (the raw Ethernet tools'
//! entry), `raw_fs_rate` and `raw_compare` (`compare raw-eth-bw`).

pub mod bw_session;
pub mod duplex;
pub mod lat;
pub mod raw_bw;
pub mod raw_compare;
pub mod raw_duplex;
pub mod raw_fs_rate;
pub mod raw_fw;
pub mod raw_lat;
pub mod raw_send;
pub mod raw_server;
pub mod rdma_bw;
pub mod send_bw;
pub mod threads_bw;
pub mod threads_stock;
