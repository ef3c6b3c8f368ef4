//! perftest's four raw Ethernet tools, with rdmaperf's names and perftest's.

/// Which raw tool; perftest's `tst` for each is in [`RawTool::test`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum RawTool {
    /// `raw_ethernet_bw`: packets one way (or both with `-b`/`-v`).
    Bw,
    /// `raw_ethernet_lat`: ping-pong.
    Lat,
    /// `raw_ethernet_burst_lat`: latency of packets sent in bursts.
    BurstLat,
    /// `raw_ethernet_fs_rate`: the flow-rule insertion rate.
    FsRate,
}

/// perftest's test type for a tool (`user_param.tst`), which its rules read.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Test {
    Bw,
    Lat,
    LatByBw,
    FsRate,
}

impl RawTool {
    /// (rdmaperf subcommand, perftest binary, tool).
    pub const ALL: [(&'static str, &'static str, RawTool); 4] = [
        ("raw-eth-bw", "raw_ethernet_bw", RawTool::Bw),
        ("raw-eth-lat", "raw_ethernet_lat", RawTool::Lat),
        (
            "raw-eth-burst-lat",
            "raw_ethernet_burst_lat",
            RawTool::BurstLat,
        ),
        ("raw-eth-fs-rate", "raw_ethernet_fs_rate", RawTool::FsRate),
    ];

    /// The tool a subcommand or binary name stands for (either spelling).
    pub fn from_name(name: &str) -> Option<RawTool> {
        Self::ALL
            .iter()
            .find(|t| t.0 == name || t.1 == name)
            .map(|t| t.2)
    }

    pub fn name(self) -> &'static str {
        Self::ALL.iter().find(|t| t.2 == self).map_or("?", |t| t.0)
    }

    pub fn perftest_name(self) -> &'static str {
        Self::ALL.iter().find(|t| t.2 == self).map_or("?", |t| t.1)
    }

    pub fn test(self) -> Test {
        match self {
            RawTool::Bw => Test::Bw,
            RawTool::Lat => Test::Lat,
            RawTool::BurstLat => Test::LatByBw,
            RawTool::FsRate => Test::FsRate,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_spellings_name_each_tool() {
        for (ours, theirs, t) in RawTool::ALL {
            assert_eq!(RawTool::from_name(ours), Some(t));
            assert_eq!(RawTool::from_name(theirs), Some(t));
            assert_eq!(t.name(), ours);
            assert_eq!(t.perftest_name(), theirs);
        }
        assert_eq!(RawTool::from_name("raw_ethernet_send_bw"), None);
    }
}
