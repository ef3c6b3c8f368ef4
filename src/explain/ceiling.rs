//! The ceilings a bandwidth is set against (arithmetic from
//! bw-diagnosis §3): the RoCE/IB payload rate a link carries at a given
//! MTU, and the payload rate a PCIe link carries.

/// Header bytes per RoCEv2/IPv4 packet on Ethernet, preamble and
/// inter-frame gap included: 8 + Eth 14 + IPv4 20 + UDP 8 + BTH 12 +
/// ICRC 4 + FCS 4 + IFG 12.
pub const ROCE_V2_OVERHEAD: u32 = 82;
/// Native IB: LRH 8 + BTH 12 + ICRC 4 + VCRC 2.
pub const IB_OVERHEAD: u32 = 26;

/// The fraction of a link's rate that is payload for full packets of `mtu`
/// bytes (RETH on the first packet of a large message is ignored: < 0.1 %).
pub fn payload_fraction(mtu: u32, overhead: u32) -> f64 {
    mtu as f64 / (mtu + overhead) as f64
}

/// RoCE active MTU for a netdev MTU: the largest IB MTU (256..4096) that
/// fits in `netdev_mtu - 96` (the kernel's `iboe_get_mtu`: GRH 40, UDP 8,
/// BTH 12, XRC 4, AtomicETH 28, ICRC 4).
pub fn roce_mtu(netdev_mtu: u32) -> u32 {
    let room = netdev_mtu.saturating_sub(96);
    [4096, 2048, 1024, 512, 256]
        .into_iter()
        .find(|&m| m <= room)
        .unwrap_or(256)
}

/// PCIe payload Gb/s of `lanes` at `gts` GT/s: 128b/130b from Gen3 on
/// (8b/10b below), TLP/DLLP efficiency 0.895 at MaxPayloadSize 256 (UCX's
/// model; 0.81 at 128 B).
pub fn pcie_gbps(gts: f64, lanes: u32) -> f64 {
    let coding = if gts >= 8.0 { 128.0 / 130.0 } else { 0.8 };
    gts * lanes as f64 * coding * 0.895
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ceilings_match_the_notes_figures() {
        // bw-diagnosis §3: MTU 4096 → 98.0 %, 1024 → 92.6 % on RoCEv2.
        assert!((payload_fraction(4096, ROCE_V2_OVERHEAD) - 0.980).abs() < 0.001);
        assert!((payload_fraction(1024, ROCE_V2_OVERHEAD) - 0.926).abs() < 0.001);
        // Gen3 x8 56.4, Gen4 x16 225.6 Gb/s.
        assert!((pcie_gbps(8.0, 8) - 56.4).abs() < 0.1);
        assert!((pcie_gbps(16.0, 16) - 225.6).abs() < 0.1);
        assert_eq!(
            (roce_mtu(1500), roce_mtu(4200), roce_mtu(9000)),
            (1024, 4096, 4096)
        );
    }
}
