//! perftest's UD multicast flags `-g/--mcg` and `-M/--MGID` (facts from
//! perftest master's `perftest_parameters.c` and `multicast_resources.c`):
//! SEND tests only; `-g` runs on UD (perftest switches the connection type,
//! `params` says so in a notice);
//! one QP; not with `-b` or `-R`; without `-x` the GID index is 0. `-M`
//! names the group as 16 colon-separated bytes (`strtoll` base 0 each);
//! without it perftest's default group is ff01:0:2:c985:: for the server
//! and the same with the last byte + 1 for a latency client.

use super::args::PerfArgs;
use super::kinds::Verb;
use std::net::Ipv6Addr;

/// perftest's `MCG_GID`.
pub const DEFAULT_MGID: [u8; 16] = [255, 1, 0, 0, 0, 2, 201, 133, 0, 0, 0, 0, 0, 0, 0, 0];

/// `-g` with its group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Mcast {
    /// `-M`, or None for perftest's default group.
    pub mgid: Option<[u8; 16]>,
}

impl Mcast {
    /// The group this side attaches to (perftest `set_multicast_gid`: the
    /// default group's last byte + 1 on a latency client, so the two ends of
    /// a latency test listen on different groups).
    pub fn own_group(&self, lat_client: bool) -> [u8; 16] {
        match self.mgid {
            Some(g) => g,
            None => {
                let mut g = DEFAULT_MGID;
                if lat_client {
                    g[15] += 1;
                }
                g
            }
        }
    }
}

/// One byte of perftest's `-M` form (`strtoll` base 0: decimal, 0x hex, 0 octal).
fn byte(w: &str) -> Option<u8> {
    let w = w.trim();
    let v = if let Some(h) = w.strip_prefix("0x").or_else(|| w.strip_prefix("0X")) {
        u32::from_str_radix(h, 16).ok()?
    } else if w.len() > 1 && w.starts_with('0') {
        u32::from_str_radix(&w[1..], 8).ok()?
    } else {
        w.parse().ok()?
    };
    u8::try_from(v).ok()
}

/// `-M`: perftest's 16 colon-separated bytes, or an IPv6 address.
pub fn parse_mgid(s: &str) -> Result<[u8; 16], String> {
    let words: Vec<&str> = s.split(':').collect();
    let g = if words.len() == 16 {
        let mut g = [0u8; 16];
        words
            .iter()
            .zip(g.iter_mut())
            .try_for_each(|(w, b)| byte(w).map(|v| *b = v).ok_or(()))
            .map(|_| g)
    } else {
        s.trim()
            .parse::<Ipv6Addr>()
            .map(|a| a.octets())
            .map_err(|_| ())
    };
    let g = g.map_err(|_| {
        format!(
            "-M/--MGID {s}: not a GID; give 16 bytes separated by colons as perftest reads them \
             (255:14:0:0:0:0:0:0:0:0:0:0:0:0:19:1) or an IPv6 address (ff0e::1301)"
        )
    })?;
    if g[0] != 0xff {
        return Err(format!(
            "-M/--MGID {s}: not a multicast GID (those start with 0xff, e.g. ff0e::1301)"
        ));
    }
    Ok(g)
}

/// Checks `-g`/`-M` against the test and the rest of the line.
pub fn mcast(a: &PerfArgs, verb: Verb) -> Result<Option<Mcast>, String> {
    if !a.mcg {
        if a.mgid.is_some() {
            return Err("-M/--MGID names the multicast group of -g; add -g (or drop -M)".into());
        }
        return Ok(None);
    }
    if verb != Verb::Send {
        return Err(
            "-g/--mcg: MultiCast feature only available on SEND verb (as in perftest); use \
             send-bw or send-lat"
                .into(),
        );
    }
    if a.bidirectional {
        return Err(
            "-g/--mcg: Bidirectional mode not supported in multicast (as in perftest); drop -b"
                .into(),
        );
    }
    if a.qps.is_some_and(|q| q > 1) {
        return Err("-g/--mcg: Only 1 QP supported in multicast (as in perftest); drop -q".into());
    }
    if a.rdma_cm {
        return Err(
            "-g/--mcg with -R: perftest does not support multicast with rdma_cm, nor does \
             rdmaperf; drop -R (-z keeps the control channel on rdma_cm)"
                .into(),
        );
    }
    if a.threads.is_some_and(|t| t > 1) {
        return Err("-g/--mcg with --threads: multicast runs one QP; drop --threads".into());
    }
    if a.post == "direct" {
        return Err(
            "-g/--mcg with --post direct: the direct path's UD sends are not checked against \
             multicast address vectors; use --post wr-api or post-send"
                .into(),
        );
    }
    let mgid = a.mgid.as_deref().map(parse_mgid).transpose()?;
    Ok(Some(Mcast { mgid }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(verb: Verb, f: impl FnOnce(&mut PerfArgs)) -> Result<Option<Mcast>, String> {
        let mut a = PerfArgs {
            post: "auto".into(),
            ..PerfArgs::default()
        };
        f(&mut a);
        mcast(&a, verb)
    }

    #[test]
    fn mgid_forms() {
        let want = [255, 14, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 19, 1];
        assert_eq!(parse_mgid("255:14:0:0:0:0:0:0:0:0:0:0:0:0:19:1"), Ok(want));
        assert_eq!(
            parse_mgid("0xff:0x0e:0:0:0:0:0:0:0:0:0:0:0:0:0x13:1"),
            Ok(want)
        );
        assert_eq!(parse_mgid("ff0e::1301"), Ok(want));
        let e = parse_mgid("fe80::1").unwrap_err();
        assert!(e.contains("not a multicast GID"), "{e}");
        for bad in ["x", "256:1:0:0:0:0:0:0:0:0:0:0:0:0:0:0", "1:2:3"] {
            let e = parse_mgid(bad).unwrap_err();
            assert!(e.contains("not a GID"), "{bad}: {e}");
        }
    }

    #[test]
    fn default_groups_differ_per_latency_side() {
        let d = Mcast { mgid: None };
        assert_eq!(d.own_group(false), DEFAULT_MGID);
        assert_eq!(d.own_group(true)[15], 1);
        let u = Mcast {
            mgid: Some([0xff; 16]),
        };
        assert_eq!(u.own_group(true), [0xff; 16]);
    }

    #[test]
    fn rules() {
        assert_eq!(
            m(Verb::Send, |a| a.mcg = true),
            Ok(Some(Mcast { mgid: None }))
        );
        assert_eq!(m(Verb::Send, |_| {}), Ok(None));
        type Case = (Verb, fn(&mut PerfArgs), &'static str);
        let cases: [Case; 2] = [
            (Verb::Write, |a| a.mcg = true, "only available on SEND"),
            (Verb::Send, |a| a.mgid = Some("ff0e::1".into()), "add -g"),
        ];
        for (verb, f, want) in cases {
            let e = m(verb, f).unwrap_err();
            assert!(e.contains(want), "{want}: {e}");
        }
        // SEND with -g and one of these: refused, naming the option.
        type Extra = (fn(&mut PerfArgs), &'static str);
        let with_mcg: [Extra; 5] = [
            (|a| a.bidirectional = true, "Bidirectional"),
            (|a| a.qps = Some(2), "Only 1 QP"),
            (|a| a.rdma_cm = true, "with -R"),
            (|a| a.threads = Some(2), "--threads"),
            (|a| a.post = "direct".into(), "--post direct"),
        ];
        for (f, want) in with_mcg {
            let e = m(Verb::Send, |a| {
                a.mcg = true;
                f(a)
            })
            .unwrap_err();
            assert!(e.contains(want), "{want}: {e}");
        }
    }
}
