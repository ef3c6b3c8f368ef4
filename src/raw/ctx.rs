//! The invocation as perftest's raw rules read it: the tool, the side, the
//! addresses under perftest's server/client names, and the numbers the
//! rules compare. `params` builds it, `rules` judges it; it sits below both.

use super::tools::RawTool;
use super::values::Addr;

/// `--server` (`-Z`) or `--client` (`-P`): raw tools have no positional peer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Server,
    Client,
}

/// Everything the rules read, parsed but not yet judged.
#[derive(Clone, Debug)]
pub struct Raw {
    pub tool: RawTool,
    pub side: Option<Side>,
    pub old_names: bool,
    pub new_names: bool,
    pub src_mac: Option<[u8; 6]>,
    pub dst_mac: Option<[u8; 6]>,
    pub server_ip: Option<Addr>,
    pub client_ip: Option<Addr>,
    pub server_port: Option<u16>,
    pub client_port: Option<u16>,
    pub tcp: bool,
    pub raw_ipv6: bool,
    pub duplex: bool,
    pub mac_fwd: bool,
    pub raw_mcast: bool,
    pub flows: u16,
    pub flows_burst: u16,
    pub iters: u64,
    pub duration: Option<u64>,
    pub qps: u64,
    pub tx_depth: u64,
    pub rx_depth: u64,
    pub cq_mod: u64,
}
