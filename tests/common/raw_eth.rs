//! What the raw Ethernet model tests share: their UDP/IPv4 test frame between two
//! locally administered MACs, the bad-checksum finding's check, and the model's
//! own verdict on a run.

use rdmaperf::raw::frame::FrameSpec;
use rdmaperf::run::raw_recv::RawRecvCounts;

pub const SRC_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 1];
pub const DST_MAC: [u8; 6] = [0x02, 0, 0, 0, 0, 2];

/// A `size`-byte UDP/IPv4 frame from `SRC_MAC`, 10.0.0.1:5000 to `DST_MAC`, 10.0.0.2:6000.
pub fn udp4(size: usize) -> FrameSpec {
    FrameSpec::sample_udp4(size)
}

/// The model found no rule broken and its Ethernet port turned no frame away.
#[cfg(feature = "model")]
pub fn assert_model_clean(model: &rdmaperf::model::Model) {
    assert!(model.violations().is_empty(), "{:?}", model.violations());
    let rejected = model.eth_rejected();
    assert!(rejected.is_empty(), "{rejected:?}");
}

/// `n` frames counted, one with a bad IPv4 checksum, and that the one finding naming it
/// (for 64-byte frames).
pub fn assert_one_bad_checksum(c: &RawRecvCounts, n: u64) {
    assert_eq!((c.packets, c.csum_ok, c.csum_bad), (n, n - 1, 1), "{c:?}");
    let f = c.findings(64);
    assert_eq!(f.len(), 1, "{f:?}");
    let want = format!("1 of {n} IPv4 TCP/UDP frames arrived with a bad checksum");
    assert!(f[0].starts_with(&want), "{f:?}");
}
