//! A minimal pcap writer (the classic format, microsecond stamps, linktype 1:
//! Ethernet), so the frames a test or the model puts on a wire can be read
//! with tcpdump or Wireshark. The records hold frames without their CRC, as
//! a capture on a Linux interface does.

use std::io::{self, Write};

/// The pcap magic for microsecond stamps, written in this host's order.
pub const MAGIC: u32 = 0xa1b2_c3d4;
/// LINKTYPE_ETHERNET.
pub const LINKTYPE_ETHERNET: u32 = 1;
/// The largest frame a record keeps whole (jumbo frames included).
pub const SNAPLEN: u32 = 65_535;

/// Writes a pcap stream into `out`, one [`PcapWriter::record`] per frame.
pub struct PcapWriter<W: Write> {
    out: W,
}

impl<W: Write> PcapWriter<W> {
    /// Writes the global header.
    pub fn new(mut out: W) -> io::Result<Self> {
        let mut h = Vec::with_capacity(24);
        h.extend_from_slice(&MAGIC.to_le_bytes());
        h.extend_from_slice(&2u16.to_le_bytes());
        h.extend_from_slice(&4u16.to_le_bytes());
        h.extend_from_slice(&0i32.to_le_bytes());
        h.extend_from_slice(&0u32.to_le_bytes());
        h.extend_from_slice(&SNAPLEN.to_le_bytes());
        h.extend_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
        out.write_all(&h)?;
        Ok(Self { out })
    }

    /// One frame, stamped `usec` microseconds after the epoch.
    pub fn record(&mut self, usec: u64, frame: &[u8]) -> io::Result<()> {
        let kept = frame.len().min(SNAPLEN as usize);
        let mut h = [0u8; 16];
        h[0..4].copy_from_slice(&((usec / 1_000_000) as u32).to_le_bytes());
        h[4..8].copy_from_slice(&((usec % 1_000_000) as u32).to_le_bytes());
        h[8..12].copy_from_slice(&(kept as u32).to_le_bytes());
        h[12..16].copy_from_slice(&(frame.len() as u32).to_le_bytes());
        self.out.write_all(&h)?;
        self.out.write_all(&frame[..kept])
    }

    /// The writer back, flushed.
    pub fn finish(mut self) -> io::Result<W> {
        self.out.flush()?;
        Ok(self.out)
    }
}

/// One record read back: stamp in µs, original length, the bytes kept.
pub type Record = (u64, u32, Vec<u8>);

/// Reads back what [`PcapWriter`] wrote: the linktype and each record. An
/// error names what is malformed.
pub fn read(b: &[u8]) -> Result<(u32, Vec<Record>), String> {
    let word = |at: usize| -> Result<u32, String> {
        b.get(at..at + 4)
            .map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]]))
            .ok_or_else(|| format!("pcap cut short at byte {at}"))
    };
    if word(0)? != MAGIC {
        return Err("not a little-endian microsecond pcap (magic)".into());
    }
    let link = word(20)?;
    let mut at = 24;
    let mut recs = Vec::new();
    while at < b.len() {
        let (sec, us, incl, orig) = (word(at)?, word(at + 4)?, word(at + 8)?, word(at + 12)?);
        let data = b
            .get(at + 16..at + 16 + incl as usize)
            .ok_or_else(|| format!("pcap record at byte {at} cut short"))?;
        recs.push((
            u64::from(sec) * 1_000_000 + u64::from(us),
            orig,
            data.to_vec(),
        ));
        at += 16 + incl as usize;
    }
    Ok((link, recs))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_and_records_read_back() {
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        w.record(1_500_000, &[1, 2, 3]).unwrap();
        w.record(2_000_001, &[9; 60]).unwrap();
        let b = w.finish().unwrap();
        assert_eq!(b.len(), 24 + 16 + 3 + 16 + 60);
        assert_eq!(&b[0..4], &[0xd4, 0xc3, 0xb2, 0xa1]);
        let (link, recs) = read(&b).unwrap();
        assert_eq!(link, LINKTYPE_ETHERNET);
        assert_eq!(recs[0], (1_500_000, 3, vec![1, 2, 3]));
        assert_eq!(recs[1].0, 2_000_001);
        assert_eq!(recs[1].2.len(), 60);
    }

    #[test]
    fn a_cut_file_is_refused() {
        let mut w = PcapWriter::new(Vec::new()).unwrap();
        w.record(0, &[1, 2, 3, 4]).unwrap();
        let b = w.finish().unwrap();
        let e = read(&b[..b.len() - 1]).unwrap_err();
        assert!(e.contains("cut short"), "{e}");
    }
}
