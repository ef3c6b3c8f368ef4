//! The packet rate a port can carry: each frame occupies its bytes (CRC
//! included: `-s` counts it) plus 8 bytes of preamble and start delimiter and
//! 12 bytes of inter-frame gap on the wire.

/// Preamble (7) and start-of-frame delimiter (1).
pub const PREAMBLE: u64 = 8;
/// The minimum inter-frame gap.
pub const IFG: u64 = 12;

/// Bits one frame of `size` bytes (CRC included) occupies on the wire.
pub fn wire_bits(size: u64) -> u64 {
    (size + PREAMBLE + IFG) * 8
}

/// Frames per second a port of `gbps` Gb/s carries at `size` bytes each.
pub fn ceiling_pps(size: u64, gbps: f64) -> f64 {
    gbps * 1e9 / wire_bits(size) as f64
}

/// The packet-rate line printed under perftest's table: the run's rate, the
/// frame's ceiling at the port's speed and the run's share of it.
pub fn rate_line(size: u64, gbps: f64, mpps: f64) -> String {
    let ceiling = ceiling_pps(size, gbps) / 1e6;
    let share = if ceiling > 0.0 {
        mpps / ceiling * 100.0
    } else {
        0.0
    };
    format!(
        " Packet rate: {mpps:.2} Mpps of {ceiling:.2} Mpps line rate for {size}-byte frames at \
         {gbps} Gb/s ({share:.1} %; preamble, IFG and CRC counted)\n"
    )
}

/// The port's speed in Gb/s from sysfs `ports/<n>/rate` ("100 Gb/sec (4X
/// EDR)"): the leading number.
pub fn sysfs_gbps(rate: &str) -> Option<f64> {
    let g: f64 = rate.split_whitespace().next()?.parse().ok()?;
    (g > 0.0).then_some(g)
}

/// The port's speed from `ibv_port_attr`'s `active_speed` × `active_width`
/// (the lane rates an Ethernet port reports: EDR 25, HDR 50, NDR 100, XDR
/// 200 Gb/s per lane), where sysfs says nothing.
pub fn attr_gbps(active_speed: u8, active_width: u8) -> Option<f64> {
    let lane = match active_speed {
        1 => 2.5,
        2 => 5.0,
        4 | 8 => 10.0,
        16 => 14.0,
        32 => 25.0,
        64 => 50.0,
        128 => 100.0,
        _ => return None,
    };
    let lanes = match active_width {
        1 => 1.0,
        2 => 4.0,
        4 => 8.0,
        8 => 12.0,
        16 => 2.0,
        _ => return None,
    };
    Some(lane * lanes)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mpps(size: u64, gbps: f64) -> String {
        format!("{:.2}", ceiling_pps(size, gbps) / 1e6)
    }

    #[test]
    fn sixty_four_byte_frames_at_100_200_400_gbe() {
        assert_eq!(mpps(64, 100.0), "148.81");
        assert_eq!(mpps(64, 200.0), "297.62");
        assert_eq!(mpps(64, 400.0), "595.24");
    }

    #[test]
    fn larger_frames_and_slower_ports() {
        // 1518-byte frames at 10 GbE: 812,743.8 frames/s.
        assert_eq!(format!("{:.1}", ceiling_pps(1518, 10.0)), "812743.8");
        assert_eq!(mpps(64, 25.0), "37.20");
        assert_eq!(wire_bits(64), 672);
    }

    #[test]
    fn the_line_names_rate_ceiling_and_share() {
        let l = rate_line(64, 100.0, 74.405);
        assert!(l.contains("74.41 Mpps of 148.81 Mpps"), "{l}");
        assert!(l.contains("(50.0 %;"), "{l}");
        assert!(l.contains("at 100 Gb/s"), "{l}");
    }

    #[test]
    fn port_speeds() {
        assert_eq!(sysfs_gbps("100 Gb/sec (4X EDR)"), Some(100.0));
        assert_eq!(sysfs_gbps("25 Gb/sec (1X EDR)\n"), Some(25.0));
        assert_eq!(sysfs_gbps("garbage"), None);
        assert_eq!(attr_gbps(32, 2), Some(100.0));
        assert_eq!(attr_gbps(64, 2), Some(200.0));
        assert_eq!(attr_gbps(128, 2), Some(400.0));
        assert_eq!(attr_gbps(32, 1), Some(25.0));
        assert_eq!(attr_gbps(3, 1), None);
    }
}
