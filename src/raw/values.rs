//! Flag text to values for the raw tools, with perftest's ranges. Each error
//! names the flag, what it wants and how to write it.

use std::net::{Ipv4Addr, Ipv6Addr};

/// `-B`/`-E`/`--local_mac`/`--remote_mac`: six hex bytes with colons.
pub fn mac(flag: &str, s: &str) -> Result<[u8; 6], String> {
    let bad = || format!("{flag} '{s}': a MAC address is six hex bytes: XX:XX:XX:XX:XX:XX");
    let mut m = [0u8; 6];
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 6 {
        return Err(bad());
    }
    for (b, p) in m.iter_mut().zip(parts) {
        if p.is_empty() || p.len() > 2 {
            return Err(bad());
        }
        *b = u8::from_str_radix(p, 16).map_err(|_| bad())?;
    }
    Ok(m)
}

/// `-Y`: hexadecimal with or without 0x (perftest's `strtoul(.., 16)`), not 0.
pub fn ethertype(s: &str) -> Result<u16, String> {
    let t = s.trim_start_matches("0x").trim_start_matches("0X");
    match u16::from_str_radix(t, 16) {
        Ok(v) if v != 0 => Ok(v),
        _ => Err(format!(
            "-Y '{s}': Invalid ethertype value: give a non-zero 16-bit hex value such as 0x88b5"
        )),
    }
}

/// An IP address of the family `--raw_ipv6` picks, as 4 or 16 bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Addr {
    V4([u8; 4]),
    V6([u8; 16]),
}

pub fn addr(flag: &str, s: &str, v6: bool) -> Result<Addr, String> {
    if v6 {
        s.parse::<Ipv6Addr>()
            .map(|a| Addr::V6(a.octets()))
            .map_err(|_| {
                format!("{flag} '{s}': not an IPv6 address (--raw_ipv6 is on): write it as fe80::1")
            })
    } else {
        s.parse::<Ipv4Addr>().map(|a| Addr::V4(a.octets())).map_err(|_| {
            format!("{flag} '{s}': not an IPv4 address: write it as X.X.X.X, or add --raw_ipv6 for IPv6")
        })
    }
}

/// A number in `lo..=hi`, named as perftest names it.
pub fn num(flag: &str, what: &str, s: &str, lo: u64, hi: u64) -> Result<u64, String> {
    match s.parse::<u64>() {
        Ok(v) if (lo..=hi).contains(&v) => Ok(v),
        _ => Err(format!(
            "{flag} '{s}': {what} must be a whole number from {lo} to {hi}"
        )),
    }
}

/// `-s`: bytes, with perftest's K and M suffixes.
pub fn size(s: &str) -> Result<u64, String> {
    let (n, f) = match s.strip_suffix('K') {
        Some(n) => (n, 1024),
        None => match s.strip_suffix('M') {
            Some(n) => (n, 1024 * 1024),
            None => (s, 1),
        },
    };
    n.parse::<u64>()
        .ok()
        .and_then(|v| v.checked_mul(f))
        .filter(|v| *v > 0)
        .ok_or_else(|| format!("-s '{s}': a size is a positive number of bytes (K and M allowed)"))
}

/// `--flow_label`: one label or a comma list, each 0..=0xfffff (decimal or 0x).
pub fn flow_labels(s: &str) -> Result<Vec<u32>, String> {
    s.split(',')
        .map(|p| {
            let v = match p.strip_prefix("0x") {
                Some(h) => u32::from_str_radix(h, 16).ok(),
                None => p.parse::<u32>().ok(),
            };
            v.filter(|v| *v <= 0xf_ffff).ok_or_else(|| {
                format!(
                    "--flow_label '{s}': each label is a number from 0 to 0xfffff, comma-separated"
                )
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn macs() {
        assert_eq!(
            mac("-B", "0:1:a2:B3:c4:ff").unwrap(),
            [0, 1, 0xa2, 0xb3, 0xc4, 0xff]
        );
        for bad in [
            "00:11:22:33:44",
            "00:11:22:33:44:55:66",
            "0g:11:22:33:44:55",
            "001:1:2:3:4:5",
        ] {
            assert!(
                mac("-B", bad).unwrap_err().contains("six hex bytes"),
                "{bad}"
            );
        }
    }

    #[test]
    fn ethertypes_sizes_labels() {
        assert_eq!(ethertype("0x88b5").unwrap(), 0x88b5);
        assert_eq!(ethertype("800").unwrap(), 0x800);
        assert!(ethertype("0").is_err());
        assert!(ethertype("0x10000").is_err());
        assert_eq!(size("1K").unwrap(), 1024);
        assert_eq!(size("64").unwrap(), 64);
        assert!(size("0").is_err());
        assert_eq!(flow_labels("1,0x10").unwrap(), [1, 16]);
        assert!(flow_labels("0x100000").is_err());
    }

    #[test]
    fn addresses_follow_raw_ipv6() {
        assert_eq!(
            addr("-J", "10.0.0.1", false).unwrap(),
            Addr::V4([10, 0, 0, 1])
        );
        assert!(addr("-J", "fe80::1", false)
            .unwrap_err()
            .contains("--raw_ipv6"));
        assert!(matches!(addr("-J", "fe80::1", true).unwrap(), Addr::V6(_)));
        assert!(num("-n", "Iteration num", "4", 5, 10)
            .unwrap_err()
            .contains("from 5 to 10"));
    }
}
