//! Counter snapshots of a port (`hw_counters/*` and, where the driver has
//! a PMA, `counters/*`) and their deltas over a run. Q counters on mlx5 are
//! 32 bits wide and wrap (bw-diagnosis §1.2), narrow PMA fields saturate,
//! and a counter can vanish between two reads (a driver reload, a port
//! going away): a delta says which of these happened instead of inventing
//! a number.

use std::collections::BTreeMap;

use super::sysfs::SysRoot;

/// Counter name → value, as read at one instant.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot(pub BTreeMap<String, u64>);

impl Snapshot {
    /// Reads port `port` of `dev`: `hw_counters/<name>` as is, and
    /// `counters/<name>` (the PMA) under `pma.<name>`; `lifespan` and
    /// unreadable files (`N/A (no PMA)`) are left out.
    pub fn read(root: &SysRoot, dev: &str, port: u32) -> Snapshot {
        let base = format!("sys/class/infiniband/{dev}/ports/{port}");
        let mut m = BTreeMap::new();
        for (dir, prefix) in [("hw_counters", ""), ("counters", "pma.")] {
            for name in root.list(&format!("{base}/{dir}")) {
                if name == "lifespan" {
                    continue;
                }
                if let Some(v) = root
                    .read(&format!("{base}/{dir}/{name}"))
                    .and_then(|s| s.parse().ok())
                {
                    m.insert(format!("{prefix}{name}"), v);
                }
            }
        }
        Snapshot(m)
    }

    /// Adds netdev `ifname`'s driver statistics under `eth.<name>`
    /// (`super::ethtool`); `Err` says why there are none (the snapshot is
    /// left as it was).
    pub fn add_netdev(&mut self, root: &SysRoot, ifname: &str) -> Result<(), String> {
        for (k, v) in super::ethtool::read(root, ifname)? {
            self.0.insert(format!("eth.{k}"), v);
        }
        Ok(())
    }

    /// The port's counters and, when it has a netdev, that netdev's
    /// statistics; the second value says why the netdev gave none.
    pub fn read_port(
        root: &SysRoot,
        dev: &str,
        port: u32,
        netdev: Option<&str>,
    ) -> (Snapshot, Option<String>) {
        let mut s = Snapshot::read(root, dev, port);
        let why = netdev.and_then(|n| s.add_netdev(root, n).err());
        (s, why)
    }
}

/// How one counter moved between two snapshots.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delta {
    /// Counted up by this much (across one 32-bit wrap where that explains
    /// a smaller second value).
    Moved(u64),
    /// Present before, gone after (or the reverse): no delta to give.
    Vanished,
    /// Smaller after, and no 32-bit wrap explains it (a reset).
    Reset,
}

impl Delta {
    /// The amount, if there is one.
    pub fn value(self) -> Option<u64> {
        match self {
            Delta::Moved(v) => Some(v),
            _ => None,
        }
    }
}

/// Every counter of either snapshot and how it moved.
pub fn deltas(before: &Snapshot, after: &Snapshot) -> BTreeMap<String, Delta> {
    let mut out = BTreeMap::new();
    for (k, &b) in &before.0 {
        let d = match after.0.get(k) {
            None => Delta::Vanished,
            Some(&a) if a >= b => Delta::Moved(a - b),
            // Both fit 32 bits: a 32-bit counter wrapped once.
            Some(&a) if b <= u32::MAX as u64 => Delta::Moved(a + (1u64 << 32) - b),
            Some(_) => Delta::Reset,
        };
        out.insert(k.clone(), d);
    }
    for k in after.0.keys().filter(|k| !before.0.contains_key(*k)) {
        out.insert(k.clone(), Delta::Vanished);
    }
    out
}

/// Test deltas: every counter moved by its value (shared by the rule tests).
#[cfg(test)]
pub(crate) fn moved_by(v: &[(&str, u64)]) -> BTreeMap<String, Delta> {
    v.iter()
        .map(|(k, v)| (k.to_string(), Delta::Moved(*v)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn snap(v: &[(&str, u64)]) -> Snapshot {
        Snapshot(v.iter().map(|(k, v)| (k.to_string(), *v)).collect())
    }

    #[test]
    fn deltas_wrap_vanish_and_reset() {
        let b = snap(&[
            ("a", 10),
            ("wrap", u32::MAX as u64 - 5),
            ("gone", 3),
            ("big", 1 << 40),
        ]);
        let a = snap(&[("a", 15), ("wrap", 4), ("new", 1), ("big", 7)]);
        let d = deltas(&b, &a);
        assert_eq!(d["a"], Delta::Moved(5));
        assert_eq!(d["wrap"], Delta::Moved(10));
        assert_eq!(d["gone"], Delta::Vanished);
        assert_eq!(d["new"], Delta::Vanished);
        assert_eq!(d["big"], Delta::Reset);
        assert_eq!(d["a"].value(), Some(5));
        assert_eq!(d["gone"].value(), None);
    }
}
