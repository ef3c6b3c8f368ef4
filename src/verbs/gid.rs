//! GID tables: reading them (`ibv_query_gid_ex`, falling back to
//! `ibv_query_gid` + sysfs for the type), perftest's automatic GID choice,
//! and a clear error for a `-x` index that does not exist.
//!
//! Auto-selection, as perftest does it on an Ethernet (RoCE) link when no
//! `-x` is given:
//! - perftest 4.5 (Debian's, and what [`GidTable::auto_select`] follows):
//!   walk the table keeping a "best" index; a rival replaces it if it is
//!   IPv4-mapped and the best is not (IPv6 and the reverse with `--ipv6`);
//!   otherwise if both types are known and the rival's RoCE version ranks
//!   higher (v2 > v1; IB ranks nowhere). Note the quirk: a non-preferred
//!   family rival still wins on RoCE version. perftest queries every index;
//!   we skip empty (all-zero) entries, which perftest could only pick when
//!   index 0 is empty and nothing is IPv4.
//! - perftest master (2026-05, [`GidTable::auto_select_scored`]): score each
//!   non-empty entry +100 for the preferred family, +10 for non-link-local
//!   scope (not fe80::/10, not 169.254/16), + RoCE rank (v2 2, v1 1); the
//!   first highest score wins.
//!
//! On an InfiniBand link perftest uses no GRH unless `-x` is given; that
//! policy belongs to the caller.

use std::fmt;
use std::net::Ipv6Addr;

use super::context::Context;
use super::error::{Result, VerbsError};
use super::port::LinkLayer;
pub use super::values::GidType;
use crate::sys;

/// A raw 16-byte GID in wire order.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Gid(pub [u8; 16]);

impl Gid {
    pub fn is_zero(&self) -> bool {
        self.0 == [0; 16]
    }

    /// `::ffff:a.b.c.d` (perftest's `ipv6_addr_v4mapped`).
    pub fn is_ipv4_mapped(&self) -> bool {
        self.0[..10] == [0; 10] && self.0[10] == 0xff && self.0[11] == 0xff
    }

    /// fe80::/10, or 169.254.0.0/16 when IPv4-mapped.
    pub fn is_link_local(&self) -> bool {
        if self.is_ipv4_mapped() {
            self.0[12] == 169 && self.0[13] == 254
        } else {
            self.0[0] == 0xfe && (self.0[1] & 0xc0) == 0x80
        }
    }

    pub fn to_ipv6(&self) -> Ipv6Addr {
        Ipv6Addr::from(self.0)
    }
}

impl fmt::Display for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.to_ipv6(), f)
    }
}

impl fmt::Debug for Gid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Gid({self})")
    }
}

/// Decodes sysfs `gid_attrs/types/<i>`: "IB/RoCE v1" (IB on an IB link,
/// RoCE v1 on Ethernet) or "RoCE v2".
pub fn parse_sysfs_gid_type(text: &str, link: LinkLayer) -> Option<GidType> {
    match text.trim() {
        "IB/RoCE v1" if link.is_ethernet() => Some(GidType::ROCE_V1),
        "IB/RoCE v1" => Some(GidType::IB),
        "RoCE v2" => Some(GidType::ROCE_V2),
        _ => None,
    }
}

/// One GID table slot. Empty slots have a zero GID and no type.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct GidEntry {
    pub index: u32,
    pub gid: Gid,
    /// None when empty or when the type could not be read.
    pub gid_type: Option<GidType>,
    /// Net device index (RoCE), 0 if none/unknown.
    pub ndev_ifindex: u32,
}

impl GidEntry {
    pub fn is_empty(&self) -> bool {
        self.gid.is_zero()
    }
}

/// The GID table of one port.
#[derive(Clone, Debug)]
pub struct GidTable {
    pub device: String,
    pub port: u8,
    pub link_layer: LinkLayer,
    /// Every slot 0..gid_tbl_len, empty ones included.
    pub entries: Vec<GidEntry>,
}

impl GidTable {
    fn valid(&self) -> impl Iterator<Item = &GidEntry> {
        self.entries.iter().filter(|e| !e.is_empty())
    }

    /// perftest 4.5's choice (see module docs). None if the table is empty.
    pub fn auto_select(&self, prefer_ipv6: bool) -> Option<u32> {
        let mut it = self.valid();
        let mut best = it.next()?;
        for rival in it {
            let b4 = best.gid.is_ipv4_mapped();
            let r4 = rival.gid.is_ipv4_mapped();
            if (r4 && !b4 && !prefer_ipv6) || (!r4 && b4 && prefer_ipv6) {
                best = rival;
            } else if let (Some(bt), Some(rt)) = (best.gid_type, rival.gid_type) {
                // perftest ranks unknown types (IB) as -1.
                let rank = |t: GidType| t.roce_rank().map_or(-1, |r| r as i32);
                if rank(bt) < rank(rt) {
                    best = rival;
                }
            }
        }
        Some(best.index)
    }

    /// perftest master's scoring (see module docs). None if the table is empty.
    pub fn auto_select_scored(&self, prefer_ipv6: bool) -> Option<u32> {
        let mut best: Option<(u32, u32)> = None;
        for e in self.valid() {
            let v4 = e.gid.is_ipv4_mapped();
            let mut score = 0;
            if prefer_ipv6 != v4 {
                score += 100;
            }
            if !e.gid.is_link_local() {
                score += 10;
            }
            score += e.gid_type.and_then(GidType::roce_rank).unwrap_or(0);
            if best.map_or(true, |(_, s)| score > s) {
                best = Some((e.index, score));
            }
        }
        best.map(|(i, _)| i)
    }

    /// The entry for a user-given `-x` index, or an error listing the table.
    pub fn get(&self, index: u32) -> Result<&GidEntry> {
        match self.entries.get(index as usize) {
            Some(e) if !e.is_empty() => Ok(e),
            Some(_) => Err(self.bad_index(index, "is empty")),
            None => Err(self.bad_index(
                index,
                &format!(
                    "is out of range (the table has {} slots)",
                    self.entries.len()
                ),
            )),
        }
    }

    fn bad_index(&self, index: u32, why: &str) -> VerbsError {
        VerbsError::new(
            "ibv_query_gid",
            0,
            format!(
                "GID index {index} on {} port {} {why}; pass one of these with -x/--gid-index:\n{}",
                self.device,
                self.port,
                self.describe()
            ),
        )
    }

    /// One line per non-empty entry: "  3: ::ffff:192.0.2.1  RoCE v2".
    pub fn describe(&self) -> String {
        let lines: Vec<String> = self
            .valid()
            .map(|e| {
                format!(
                    "  {:>3}: {:<40} {}",
                    e.index,
                    e.gid.to_string(),
                    e.gid_type.map_or("type unknown", GidType::name)
                )
            })
            .collect();
        if lines.is_empty() {
            "  (no valid GIDs: on RoCE, give the net device an IP address)".to_string()
        } else {
            lines.join("\n")
        }
    }
}

impl Context {
    /// Reads the whole GID table of `port`.
    pub fn gid_table(&self, port: u8) -> Result<GidTable> {
        let pa = self.query_port(port)?;
        let len = u32::try_from(pa.gid_tbl_len).unwrap_or(0);
        let entries = (0..len)
            .map(|i| self.gid_entry(port, i, pa.link_layer))
            .collect();
        Ok(GidTable {
            device: self.name().to_string(),
            port,
            link_layer: pa.link_layer,
            entries,
        })
    }

    fn gid_entry(&self, port: u8, index: u32, link: LinkLayer) -> GidEntry {
        let empty = GidEntry {
            index,
            gid: Gid::default(),
            gid_type: None,
            ndev_ifindex: 0,
        };
        match self.gid_entry_ex(port, index) {
            Some(Ok(e)) => e,
            // Empty slot (kernel says ENODATA; some report ENOENT/EINVAL).
            Some(Err(libc::ENODATA | libc::ENOENT | libc::EINVAL)) => empty,
            // Another error, or a libibverbs (or headers) older than rdma-core 32.
            _ => self.gid_entry_fallback(port, index, link).unwrap_or(empty),
        }
    }

    /// `ibv_query_gid_ex` where this build's headers and the host's libibverbs have it
    /// (rdma-core 32): the entry, or the errno; None where either lacks it.
    #[cfg(rdmaperf_gid_ex)]
    fn gid_entry_ex(&self, port: u8, index: u32) -> Option<std::result::Result<GidEntry, i32>> {
        let query = super::rdma_core::query_gid_ex()?;
        let mut e = sys::ibv_gid_entry::default();
        let size = std::mem::size_of::<sys::ibv_gid_entry>();
        // SAFETY: the context is open; `e` is a valid out-struct of `size` bytes, the size
        // the header's inline ibv_query_gid_ex passes.
        let ret = unsafe { query(self.raw(), u32::from(port), index, &mut e, 0, size) };
        if ret != 0 {
            return Some(Err(ret));
        }
        // SAFETY: every bit pattern of the GID union is a valid [u8; 16].
        let raw = unsafe { e.gid.raw };
        Some(Ok(GidEntry {
            index,
            gid: Gid(raw),
            gid_type: Some(GidType(e.gid_type)),
            ndev_ifindex: e.ndev_ifindex,
        }))
    }

    /// Headers older than rdma-core 32 declare no `ibv_query_gid_ex`.
    #[cfg(not(rdmaperf_gid_ex))]
    fn gid_entry_ex(&self, _port: u8, _index: u32) -> Option<std::result::Result<GidEntry, i32>> {
        None
    }

    /// Old kernels/providers: GID via `ibv_query_gid`, type via sysfs.
    fn gid_entry_fallback(&self, port: u8, index: u32, link: LinkLayer) -> Option<GidEntry> {
        let mut g = sys::ibv_gid::default();
        // SAFETY: the context is open; `g` is a valid out-union.
        let ret = unsafe { sys::ibv_query_gid(self.raw(), port, index as i32, &mut g) };
        if ret != 0 {
            return None;
        }
        // SAFETY: every bit pattern of the GID union is a valid [u8; 16].
        let gid = Gid(unsafe { g.raw });
        let path = format!(
            "/sys/class/infiniband/{}/ports/{port}/gid_attrs/types/{index}",
            self.name()
        );
        let gid_type = std::fs::read_to_string(path)
            .ok()
            .and_then(|t| parse_sysfs_gid_type(&t, link));
        Some(GidEntry {
            index,
            gid,
            gid_type,
            ndev_ifindex: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v6(s: &str) -> Gid {
        Gid(s.parse::<Ipv6Addr>().unwrap().octets())
    }

    fn entry(index: u32, gid: &str, t: Option<GidType>) -> GidEntry {
        GidEntry {
            index,
            gid: v6(gid),
            gid_type: t,
            ndev_ifindex: 0,
        }
    }

    /// An unused slot: the all-zero GID, no type.
    fn empty_slot(index: u32) -> GidEntry {
        GidEntry {
            index,
            gid: Gid::default(),
            gid_type: None,
            ndev_ifindex: 0,
        }
    }

    fn table(entries: Vec<GidEntry>) -> GidTable {
        GidTable {
            device: "mlx5_0".into(),
            port: 1,
            link_layer: LinkLayer::ETHERNET,
            entries,
        }
    }

    /// The index perftest 4.5 picks and the one master picks.
    fn picks(t: &GidTable, ipv6: bool) -> (Option<u32>, Option<u32>) {
        (t.auto_select(ipv6), t.auto_select_scored(ipv6))
    }

    const V1: Option<GidType> = Some(GidType::ROCE_V1);
    const V2: Option<GidType> = Some(GidType::ROCE_V2);

    /// The usual mlx5 RoCE table: link-local v1/v2, then IPv4 v1/v2.
    fn mlx5_table() -> GidTable {
        table(vec![
            entry(0, "fe80::1", V1),
            entry(1, "fe80::1", V2),
            entry(2, "::ffff:192.0.2.7", V1),
            entry(3, "::ffff:192.0.2.7", V2),
        ])
    }

    #[test]
    fn gid_predicates() {
        assert!(v6("::ffff:10.0.0.1").is_ipv4_mapped());
        assert!(!v6("fe80::1").is_ipv4_mapped());
        assert!(v6("fe80::1").is_link_local());
        assert!(v6("febf::1").is_link_local());
        assert!(!v6("fec0::1").is_link_local());
        assert!(v6("::ffff:169.254.7.1").is_link_local());
        assert!(!v6("::ffff:192.0.2.1").is_link_local());
        assert!(Gid::default().is_zero());
        assert_eq!(v6("::ffff:192.0.2.7").to_string(), "::ffff:192.0.2.7");
    }

    #[test]
    fn gid_type_decode() {
        assert_eq!(GidType(0), GidType::IB);
        assert_eq!(GidType(2).name(), "RoCE v2");
        assert_eq!(GidType(7).name(), "unknown");
        assert_eq!(GidType::IB.roce_rank(), None);
        let eth = LinkLayer::ETHERNET;
        let ib = LinkLayer::INFINIBAND;
        assert_eq!(parse_sysfs_gid_type("IB/RoCE v1\n", eth), V1);
        assert_eq!(parse_sysfs_gid_type("IB/RoCE v1\n", ib), Some(GidType::IB));
        assert_eq!(parse_sysfs_gid_type("RoCE v2\n", eth), V2);
        assert_eq!(parse_sysfs_gid_type("garbage", eth), None);
    }

    #[test]
    fn auto_select_prefers_ipv4_then_v2() {
        let t = mlx5_table();
        assert_eq!(picks(&t, false), (Some(3), Some(3)));
        // --ipv6: link-local v2.
        assert_eq!(picks(&t, true), (Some(1), Some(1)));
    }

    #[test]
    fn auto_select_rxe_single_link_local() {
        let t = table(vec![entry(0, "fe80::200:ff:fe00:1", V2), empty_slot(1)]);
        assert_eq!(picks(&t, false), (Some(0), Some(0)));
    }

    #[test]
    fn auto_select_skips_empty_and_handles_empty_table() {
        let mut t = mlx5_table();
        t.entries[3].gid = Gid::default();
        t.entries[3].gid_type = None;
        assert_eq!(t.auto_select(false), Some(2));
        let empty = table(vec![empty_slot(0)]);
        assert_eq!(picks(&empty, false), (None, None));
    }

    #[test]
    fn v45_quirk_and_master_scoring_differ() {
        // IPv4 v1 first, then an IPv6 global v2: 4.5 falls to the RoCE
        // comparison for the non-preferred rival and takes it; master keeps
        // the IPv4 address (family outweighs version).
        let t = table(vec![
            entry(0, "::ffff:192.0.2.7", V1),
            entry(1, "2001:db8::7", V2),
        ]);
        assert_eq!(picks(&t, false), (Some(1), Some(0)));
    }

    #[test]
    fn master_prefers_global_scope_over_version() {
        let t = table(vec![
            entry(0, "::ffff:169.254.7.1", V2),
            entry(1, "::ffff:192.0.2.7", V1),
        ]);
        assert_eq!(t.auto_select_scored(false), Some(1));
        // 4.5 ignores scope: both IPv4, v2 wins.
        assert_eq!(t.auto_select(false), Some(0));
    }

    #[test]
    fn unknown_types_never_win_on_version() {
        let t = table(vec![entry(0, "fe80::1", None), entry(1, "fe80::2", V2)]);
        assert_eq!(picks(&t, false), (Some(0), Some(1)));
    }

    #[test]
    fn user_index_errors_list_the_table() {
        let mut t = mlx5_table();
        t.entries.push(empty_slot(4));
        assert_eq!(t.get(2).unwrap().gid_type, V1);
        let e = t.get(9).unwrap_err().to_string();
        assert!(
            e.contains("GID index 9 on mlx5_0 port 1 is out of range (the table has 5 slots)"),
            "{e}"
        );
        assert!(e.contains("-x/--gid-index"), "{e}");
        assert!(e.contains("3: ::ffff:192.0.2.7"), "{e}");
        assert!(e.contains("RoCE v2"), "{e}");
        let e = t.get(4).unwrap_err().to_string();
        assert!(e.contains("GID index 4 on mlx5_0 port 1 is empty"), "{e}");
    }

    #[test]
    fn describe_empty_table_says_what_to_do() {
        let t = table(vec![]);
        assert!(t.describe().contains("give the net device an IP address"));
    }
}
