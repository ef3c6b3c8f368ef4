//! perftest's rules for the flags that say how the two ends meet: `-T/--tos`,
//! `-z/--comm_rdma_cm`, `--ipv6`, `--ipv6-addr`, `--bind_source_ip` (4.5:
//! `--source_ip`). Facts from perftest master's `perftest_parameters.c` and
//! `perftest_communication.c`:
//! - `-T` is 0..255 and valid only with `-R` ("TOS only valid for rdma_cm
//!   based QP and RawEth QP"); the client sets it on each data QP's CM id
//!   after address resolution (the control link keeps the default ToS).
//! - `-z` runs the control messages over an rdma_cm RC QP; the data QPs are
//!   still connected from the key messages.
//! - `--ipv6` makes the GID auto-selection prefer IPv6 GIDs; `--ipv6-addr`
//!   makes the control connection AF_INET6.
//! - `--bind_source_ip` binds the client's control socket before connect;
//!   an IPv6 source needs `--ipv6-addr`; the server does not use it.

use super::args::PerfArgs;
use super::defaults::DEF_RETRY_COUNT;
use super::kinds::{Conn, ConnOpts};
use std::net::{IpAddr, SocketAddr, SocketAddrV6};

/// `-T`'s value as perftest reads it (`strtol` base 0: decimal, or 0x hex).
fn tos_value(v: &str) -> Result<u8, String> {
    let w = v.trim();
    let n = match w.strip_prefix("0x").or_else(|| w.strip_prefix("0X")) {
        Some(h) => u32::from_str_radix(h, 16),
        None => w.parse(),
    };
    n.ok().and_then(|n| u8::try_from(n).ok()).ok_or_else(|| {
        format!(
            "-T/--tos {v}: not a ToS value; give 0..255 (the IP header's DSCP<<2 | ECN byte, \
             e.g. 96 for DSCP 24)"
        )
    })
}

/// An interface's index, from sysfs (what if_nametoindex answers).
fn if_index(name: &str) -> Option<u32> {
    if name.is_empty() || name.contains('/') {
        return None;
    }
    std::fs::read_to_string(format!("/sys/class/net/{name}/ifindex"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// `--bind_source_ip`'s address: numeric, as perftest's inet_addr/inet_pton
/// read it, plus `%<interface>` on an IPv6 link-local address (its scope).
fn source_addr(s: &str) -> Result<SocketAddr, String> {
    let bad = || {
        format!(
            "--bind_source_ip {s}: not an IP address; give this host's address on the interface \
             the control connection should leave from (e.g. 169.254.7.2, or fe80::1%dummy0 with \
             --ipv6-addr)"
        )
    };
    let (addr, scope) = match s.trim().split_once('%') {
        Some((a, sc)) => (a, Some(sc)),
        None => (s.trim(), None),
    };
    let ip: IpAddr = addr.parse().map_err(|_| bad())?;
    match (ip, scope) {
        (IpAddr::V4(_), Some(_)) => Err(bad()),
        (ip, None) => Ok(SocketAddr::new(ip, 0)),
        (IpAddr::V6(v6), Some(sc)) => {
            let id = match sc.parse::<u32>() {
                Ok(n) => n,
                Err(_) => if_index(sc).ok_or_else(|| {
                    format!(
                        "--bind_source_ip {s}: no interface named '{sc}' on this host; give the \
                         name `ip link` shows"
                    )
                })?,
            };
            Ok(SocketAddr::V6(SocketAddrV6::new(v6, 0, 0, id)))
        }
    }
}

/// Checks the connection flags against each other and the rest of the line.
pub fn conn_opts(a: &PerfArgs, _conn: Conn) -> Result<ConnOpts, String> {
    let tos = a.tos.as_deref().map(tos_value).transpose()?;
    if tos.is_some() && !a.rdma_cm {
        return Err(
            "-T/--tos: the ToS is set through the RDMA CM, so it needs -R (perftest: \"TOS only \
             valid for rdma_cm based QP\"); add -R, or use --tclass to set the GRH traffic class \
             of QPs connected without the CM"
                .into(),
        );
    }
    let cm_ctrl = a.rdma_cm || a.comm_rdma_cm;
    if a.ipv6_addr && cm_ctrl {
        return Err(format!(
            "--ipv6-addr with {}: not implemented yet in rdmaperf: its rdma_cm link resolves \
             IPv4 addresses only (as perftest 4.5's); drop --ipv6-addr and give the server's \
             IPv4 address on the RDMA netdev",
            if a.rdma_cm { "-R" } else { "-z" }
        ));
    }
    if a.ipv6_addr && a.loopback {
        return Err(
            "--ipv6-addr with --loopback: --loopback connects its two halves over 127.0.0.1; \
             drop --ipv6-addr, or run a server and a client (e.g. on ::1)"
                .into(),
        );
    }
    if a.comm_rdma_cm && a.loopback {
        return Err(
            "-z with --loopback: rdma_cm cannot route 127.0.0.1, which --loopback uses; run a \
             server and a client on the RDMA netdev's address instead"
                .into(),
        );
    }
    let source_ip = match a.bind_source_ip.as_deref() {
        None => None,
        Some(s) => {
            let ip = source_addr(s)?;
            if ip.is_ipv6() && !a.ipv6_addr {
                return Err(format!(
                    "--bind_source_ip {s}: an IPv6 source address needs --ipv6-addr (as in \
                     perftest); add --ipv6-addr and give the server's IPv6 address"
                ));
            }
            if ip.is_ipv4() && a.ipv6_addr {
                return Err(format!(
                    "--bind_source_ip {s}: --ipv6-addr makes the control connection IPv6, so the \
                     source must be an IPv6 address; give one, or drop --ipv6-addr"
                ));
            }
            Some(ip)
        }
    };
    Ok(ConnOpts {
        tos,
        retry_count: a.retry_count.unwrap_or(DEF_RETRY_COUNT),
        comm_rdma_cm: a.comm_rdma_cm,
        prefer_ipv6_gid: a.ipv6,
        ipv6_ctrl: a.ipv6_addr,
        source_ip,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(f: impl FnOnce(&mut PerfArgs)) -> Result<ConnOpts, String> {
        let mut a = PerfArgs::default();
        f(&mut a);
        conn_opts(&a, Conn::Rc)
    }

    /// `--retry_count` as given, else perftest's 7 (its rules are in `rules::features`).
    #[test]
    fn retry_count_defaults_to_perftest_s() {
        assert_eq!(opts(|_| {}).unwrap().retry_count, DEF_RETRY_COUNT);
        let o = opts(|a| {
            a.retry_count = Some(3);
            a.rdma_cm = true;
        })
        .unwrap();
        assert_eq!(o.retry_count, 3);
    }

    #[test]
    fn tos_needs_rdma_cm_and_a_byte() {
        let e = opts(|a| a.tos = Some("96".into())).unwrap_err();
        assert!(e.contains("needs -R") && e.contains("--tclass"), "{e}");
        let o = opts(|a| {
            a.tos = Some("96".into());
            a.rdma_cm = true;
        })
        .unwrap();
        assert_eq!(o.tos, Some(96));
        let o = opts(|a| {
            a.tos = Some("0x60".into());
            a.rdma_cm = true;
        })
        .unwrap();
        assert_eq!(o.tos, Some(96));
        for bad in ["256", "-1", "x"] {
            let e = opts(|a| {
                a.tos = Some(bad.into());
                a.rdma_cm = true;
            })
            .unwrap_err();
            assert!(e.contains("give 0..255"), "{bad}: {e}");
        }
    }

    #[test]
    fn comm_rdma_cm() {
        assert!(opts(|a| a.comm_rdma_cm = true).unwrap().comm_rdma_cm);
        let e = opts(|a| {
            a.comm_rdma_cm = true;
            a.loopback = true;
        })
        .unwrap_err();
        assert!(e.contains("-z with --loopback"), "{e}");
        let e = opts(|a| {
            a.ipv6_addr = true;
            a.loopback = true;
        })
        .unwrap_err();
        assert!(e.contains("--ipv6-addr with --loopback"), "{e}");
        let e = opts(|a| {
            a.comm_rdma_cm = true;
            a.ipv6_addr = true;
        })
        .unwrap_err();
        assert!(
            e.contains("--ipv6-addr with -z") && e.contains("IPv4"),
            "{e}"
        );
    }

    #[test]
    fn source_ip_family_follows_ipv6_addr() {
        // --bind_source_ip alone, and with --ipv6-addr.
        let v4 = |ip: &str| opts(|a| a.bind_source_ip = Some(ip.into()));
        let v6 = |ip: &str| {
            opts(|a| {
                a.bind_source_ip = Some(ip.into());
                a.ipv6_addr = true;
            })
        };
        let o = v4("169.254.7.2").unwrap();
        assert_eq!(o.source_ip, Some("169.254.7.2:0".parse().unwrap()));
        let e = v4("fe80::1").unwrap_err();
        assert!(e.contains("needs --ipv6-addr"), "{e}");
        let e = v6("169.254.7.2").unwrap_err();
        assert!(e.contains("must be an IPv6 address"), "{e}");
        let o = v6("::1").unwrap();
        assert!(o.ipv6_ctrl && o.source_ip.unwrap().is_ipv6());
        let e = v4("eth0").unwrap_err();
        assert!(e.contains("not an IP address"), "{e}");
        let e = v6("fe80::1%no-such-if0").unwrap_err();
        assert!(e.contains("no interface named 'no-such-if0'"), "{e}");
        let o = v6("fe80::1%lo").unwrap();
        match o.source_ip {
            Some(SocketAddr::V6(v6)) => assert!(v6.scope_id() > 0),
            x => panic!("{x:?}"),
        }
    }

    #[test]
    fn ipv6_gid_preference() {
        assert!(opts(|a| a.ipv6 = true).unwrap().prefer_ipv6_gid);
        assert!(!opts(|_| {}).unwrap().prefer_ipv6_gid);
    }
}
