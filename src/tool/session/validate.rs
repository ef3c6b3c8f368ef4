//! `--data_validation` between rdmaperf ends (write-bw, read-bw over RC):
//! after the run, the side the data went to compares every byte of every
//! message position of each QP's region with the pattern the sender put
//! there (`landing::pattern_byte`, per QP region), and the gaps between
//! positions must still be zero. It sees what the last message at each
//! position left (perftest master's validator checks each chunk during the
//! run, over a protocol of its own, which rdmaperf does not speak).
//! Output follows master's `VALIDATION:` lines, so scripts grep one thing.
//! `--check-landing`, the looser check a write server can run against any
//! client, reads the same regions.

use crate::cli::params::{Params, Verb};
use crate::run::geometry::Geometry;
use crate::tool::common::fail::Fail;
use crate::tool::common::landing::{self, pattern_byte, spans};
use crate::tool::setup::resources::Resources;
use std::borrow::Cow;

/// The verdict on one or more regions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Message positions compared.
    pub positions: u64,
    /// Payload bytes compared.
    pub bytes: u64,
    /// Bytes that differ (payload) or are non-zero (gaps).
    pub errors: u64,
    /// The first difference: (QP, offset in its region, expected, actual).
    pub first: Option<(u32, u64, u8, u8)>,
}

impl Verdict {
    /// Compare QP `qp`'s `region` after `messages` messages of geometry `g`.
    pub fn check(&mut self, qp: u32, region: &[u8], g: &Geometry, messages: u64) {
        for (data, gap) in spans(region.len(), g, messages) {
            let payload = data.clone().map(|i| (i, pattern_byte(i as u64)));
            for (i, want) in payload.chain(gap.map(|i| (i, 0))) {
                let b = region[i];
                if b != want {
                    self.errors += 1;
                    self.first.get_or_insert((qp, i as u64, want, b));
                }
            }
            self.positions += 1;
            self.bytes += data.len() as u64;
        }
    }

    pub fn passed(&self) -> bool {
        self.errors == 0 && self.positions > 0
    }

    /// perftest master's `VALIDATION:` line for this verdict.
    pub fn line(&self, role: &str) -> String {
        match self.first {
            Some((qp, off, want, got)) => format!(
                "VALIDATION: FAILED ({role}) - {} error(s), first at QP {qp}, Offset {off} \
                 (expected 0x{want:02x}, got 0x{got:02x})\n",
                self.errors
            ),
            None => format!(
                "VALIDATION: PASSED ({role}) - {} message positions, {} bytes\n",
                self.positions, self.bytes
            ),
        }
    }
}

/// QP `q`'s advertised (receive) region, where a write lands, or (`send`)
/// its local send region, where a read lands. GPU memory is copied out
/// (`cuMemcpyDtoH`): the CPU never reads it in place.
fn region(res: &Resources, q: usize, send: bool) -> Result<Cow<'_, [u8]>, Fail> {
    let (mr, gi) = res.qp_mem(q);
    let g = &res.geometry;
    let off = if send {
        g.send_offset(gi)
    } else {
        g.recv_offset(gi)
    } as usize;
    if let Some((dev, _)) = mr.device_mem() {
        let mut v = vec![0u8; (g.slot as usize).min(mr.len().saturating_sub(off))];
        dev.copy_to_host(off, &mut v).map_err(Fail::new)?;
        return Ok(Cow::Owned(v));
    }
    let buf = mr.buf().map(|b| b.as_slice()).unwrap_or(&[]);
    Ok(Cow::Borrowed(
        buf.get(off..off + g.slot as usize).unwrap_or(&[]),
    ))
}

/// Messages each QP moved, from a run's total `iters` (every position with `-D`).
pub fn messages_per_qp(p: &Params, iters: u64) -> u64 {
    if p.is_duration() {
        u64::MAX
    } else {
        iters / u64::from(p.num_qps.max(1))
    }
}

/// Check every QP's region after `messages` messages per QP; prints the
/// verdict and fails the run when it did not pass.
pub fn report(p: &Params, res: &Resources, messages: u64, role: &str) -> Result<(), Fail> {
    let mut v = Verdict::default();
    for q in 0..res.num_qps() {
        let read = p.tool.verb == Verb::Read;
        v.check(q as u32, &region(res, q, read)?, &res.geometry, messages);
    }
    print!("{}", v.line(role));
    if v.passed() {
        Ok(())
    } else {
        Err(Fail::new(format!(
            "data validation failed: {} byte(s) differ from what the {} sent (first: QP {}, offset {})",
            v.errors,
            if role == "server" { "client" } else { "server" },
            v.first.map_or(0, |f| f.0),
            v.first.map_or(0, |f| f.1)
        )))
    }
}

/// Server side of `--check-landing` after `client_iters` writes: did they land
/// where perftest's geometry says?
pub fn check_landing(p: &Params, res: &Resources, client_iters: u64) -> Result<(), Fail> {
    let msgs = messages_per_qp(p, client_iters);
    let mut all_ok = true;
    for q in 0..res.num_qps() {
        let l = landing::check(&region(res, q, false)?, &res.geometry, msgs);
        let ok = l.ok();
        all_ok &= ok;
        println!(
            "landing check: {} qp={q} slots={} written={} pattern={} stray={}",
            if ok { "ok" } else { "FAILED" },
            l.slots,
            l.written,
            l.pattern,
            l.stray_bytes
        );
    }
    if all_ok {
        Ok(())
    } else {
        Err(Fail::new("landing check failed: the client's data is not where perftest's buffer geometry puts it"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tool::common::landing::fill_regions;

    fn written(g: &Geometry, n: u64) -> Vec<u8> {
        let mut src = vec![0u8; g.slot as usize];
        fill_regions(&mut src, g.slot as usize);
        let mut region = vec![0u8; g.slot as usize];
        for k in 0..n {
            let off = g.post_offset(k) as usize;
            region[off..off + g.size as usize].copy_from_slice(&src[off..off + g.size as usize]);
        }
        region
    }

    #[test]
    fn every_position_compared_and_a_flipped_byte_named() {
        let g = Geometry::new(64, 4096, 64, 1);
        let mut region = written(&g, 1000);
        let mut v = Verdict::default();
        v.check(0, &region, &g, 1000);
        assert!(v.passed(), "{v:?}");
        assert_eq!((v.positions, v.bytes), (64, 64 * 64));
        assert!(v
            .line("server")
            .starts_with("VALIDATION: PASSED (server) - 64"));
        region[130] ^= 0x40;
        let mut v = Verdict::default();
        v.check(1, &region, &g, 1000);
        assert!(!v.passed());
        assert_eq!(v.errors, 1);
        assert_eq!(
            v.first,
            Some((1, 130, pattern_byte(130), pattern_byte(130) ^ 0x40))
        );
        assert!(
            v.line("client").contains("first at QP 1, Offset 130"),
            "{}",
            v.line("client")
        );
    }

    #[test]
    fn a_stray_byte_and_missing_messages_fail() {
        let g = Geometry::new(100, 4096, 64, 1);
        let mut region = written(&g, 1000);
        // Between positions (100 B messages at a 128 B step) nothing may land.
        region[110] = 1;
        let mut v = Verdict::default();
        v.check(0, &region, &g, 1000);
        assert_eq!(v.first.map(|f| f.1), Some(110));
        // Fewer messages than positions: only those are compared.
        let region = written(&g, 5);
        let mut v = Verdict::default();
        v.check(0, &region, &g, 5);
        assert!(v.passed() && v.positions == 5, "{v:?}");
        // A region nobody wrote fails.
        let mut v = Verdict::default();
        v.check(0, &vec![0u8; 4096], &g, 5);
        assert!(!v.passed());
    }

    #[test]
    fn a_large_message_is_one_position() {
        let g = Geometry::new(65536, 4096, 64, 1);
        let region = written(&g, 10);
        let mut v = Verdict::default();
        v.check(0, &region, &g, 10);
        assert!(v.passed());
        assert_eq!((v.positions, v.bytes), (1, 65536));
    }
}
