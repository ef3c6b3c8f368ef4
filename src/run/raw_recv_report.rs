//! The raw receive loop's report: the counts as lines, and what they show
//! as findings (a bad checksum, a receive queue that ran dry, frames
//! longer than the buffers, failed receives), each naming its count.

use super::raw_recv::RawRecvCounts;

impl RawRecvCounts {
    /// The report lines: frames and bytes, packet types, checksums, drops.
    pub fn lines(&self) -> Vec<String> {
        let mut v = vec![
            format!("received {} frames, {} bytes", self.packets, self.bytes),
            format!(
                "L3: IPv4 {}, IPv6 {}, other {}; L4: UDP {}, TCP {}, other {}",
                self.ipv4, self.ipv6, self.l3_other, self.udp, self.tcp, self.l4_other
            ),
            format!(
                "checksums as the NIC checked them (IPv4 with TCP/UDP): {} good, {} bad; \
                 {} frames not checked",
                self.csum_ok, self.csum_bad, self.csum_unchecked
            ),
        ];
        if let Some(n) = self.rq_dry {
            v.push(format!("dropped with no receive posted: {n}"));
        }
        v
    }

    /// What the counts show at frame size `size` (`-s`, bytes), one
    /// sentence each; none when all is well.
    pub fn findings(&self, size: u32) -> Vec<String> {
        let mut v = Vec::new();
        if self.csum_bad > 0 {
            let checked = self.csum_ok + self.csum_bad;
            v.push(format!(
                "{} of {checked} IPv4 TCP/UDP frames arrived with a bad checksum (the NIC's \
                 IP header or TCP/UDP check failed): frames were corrupted on the way, or the \
                 sender left a checksum to the NIC without asking it to compute one \
                 (IBV_SEND_IP_CSUM)",
                self.csum_bad
            ));
        }
        if let Some(n) = self.rq_dry.filter(|&n| n > 0) {
            v.push(format!(
                "one RQ did not keep up at this frame size ({size} B): {n} frames were \
                 dropped because no receive was posted; post more receives (a deeper RQ) or \
                 spread the flows over more QPs"
            ));
        }
        if self.too_long > 0 {
            v.push(format!(
                "{} frames were longer than the receive buffers (local length errors); post \
                 receives of at least the frame size",
                self.too_long
            ));
        }
        if self.errors > 0 {
            v.push(format!(
                "{} receives completed with an error (the last {})",
                self.errors,
                self.last_error.name()
            ));
        }
        v
    }
}
