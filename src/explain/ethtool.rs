//! A netdev's driver statistics (what `ethtool -S` prints): pause frames,
//! port-buffer discards, FCS and symbol errors — the RoCE port's Ethernet
//! side, which the RDMA counters do not show. Read through the legacy
//! `SIOCETHTOOL` ioctl (bw-diagnosis §1.4): `ETHTOOL_GSSET_INFO` for the
//! number of `ETH_SS_STATS` strings, `ETHTOOL_GSTRINGS` for their 32-byte
//! names, `ETHTOOL_GSTATS` for the u64 values; none needs CAP_NET_ADMIN,
//! and netlink has no equivalent for driver statistics. The names are read
//! again every time (mlx5's per-priority names change with the PFC setup)
//! and matched by name, never by position.
//!
//! Under a fixture root ([`SysRoot`] other than `/`) the statistics come
//! from `<root>/ethtool/<ifname>` in `ethtool -S`'s own text format, so the
//! tests drive the same snapshot and rule code as a real host.

use std::ffi::c_void;

use super::sysfs::SysRoot;

const SIOCETHTOOL: u64 = 0x8946;
const ETHTOOL_GSTRINGS: u32 = 0x1b;
const ETHTOOL_GSTATS: u32 = 0x1d;
const ETHTOOL_GSSET_INFO: u32 = 0x37;
const ETH_SS_STATS: u32 = 1;
const ETH_GSTRING_LEN: usize = 32;
/// More than any driver has (mlx5 with every priority: a few thousand).
const MAX_STATS: u32 = 65_536;

/// Entries the buffers hold for a set counted `n`: the kernel writes as
/// many as the set has at the moment of GSTRINGS/GSTATS, whatever length
/// the caller passes (net/ethtool/ioctl.c), so a set that grew between the
/// count and the read (mlx5's per-priority names follow the PFC set-up)
/// must still fit.
fn room(n: u32) -> usize {
    2 * n as usize + 1024
}

/// After GSTRINGS/GSTATS: the kernel wrote `written` entries into a buffer
/// of `room`. More than fit means it wrote past the buffer already: there
/// is no safe way to go on.
fn check_written(written: usize, room: usize) {
    if written > room {
        eprintln!(
            "rdmaperf: the netdev's ethtool statistics grew from under {room} to {written} \
             entries during one read; the kernel wrote past the buffer, stopping"
        );
        std::process::abort();
    }
}

/// `struct ifreq` with `ifr_data` (40 bytes on 64-bit Linux).
#[repr(C)]
struct IfReq {
    name: [u8; 16],
    data: *mut c_void,
    _pad: [u8; 16],
}

/// `struct ethtool_sset_info` asking for one set (one `data` word back).
#[repr(C)]
struct SsetInfo {
    cmd: u32,
    reserved: u32,
    sset_mask: u64,
    data: [u32; 1],
}

/// The driver statistics of netdev `ifname`, in the driver's order.
pub fn read(root: &SysRoot, ifname: &str) -> Result<Vec<(String, u64)>, String> {
    if root.0 != std::path::Path::new("/") {
        let text = root
            .read(&format!("ethtool/{ifname}"))
            .ok_or_else(|| format!("no ethtool statistics for {ifname} in the fixture"))?;
        return Ok(parse_ethtool_s(&text));
    }
    Ethtool::open(ifname)?.stats()
}

/// `ethtool -S` text: a `NIC statistics:` header, then `name: value` lines.
pub fn parse_ethtool_s(text: &str) -> Vec<(String, u64)> {
    text.lines()
        .filter_map(|l| {
            let (k, v) = l.trim().rsplit_once(':')?;
            Some((k.trim().to_string(), v.trim().parse().ok()?))
        })
        .collect()
}

/// An `AF_INET` datagram socket to issue the ioctls on, for one netdev.
struct Ethtool {
    fd: i32,
    name: [u8; 16],
    ifname: String,
}

impl Drop for Ethtool {
    fn drop(&mut self) {
        // SAFETY: `fd` is the socket this value opened and owns.
        unsafe { libc::close(self.fd) };
    }
}

impl Ethtool {
    fn open(ifname: &str) -> Result<Ethtool, String> {
        if ifname.is_empty() || ifname.len() >= 16 || ifname.contains('\0') {
            return Err(format!("{ifname:?} is not a netdev name"));
        }
        let mut name = [0u8; 16];
        name[..ifname.len()].copy_from_slice(ifname.as_bytes());
        // SAFETY: plain socket(2) call; the result is checked.
        let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(format!(
                "socket for SIOCETHTOOL: {}",
                std::io::Error::last_os_error()
            ));
        }
        Ok(Ethtool {
            fd,
            name,
            ifname: ifname.to_string(),
        })
    }

    /// One `SIOCETHTOOL` with `data` as the command block.
    fn ioctl(&self, what: &str, data: *mut c_void) -> Result<(), String> {
        let mut ifr = IfReq {
            name: self.name,
            data,
            _pad: [0; 16],
        };
        // The command block has room for the set to have grown since it was counted (see
        // `room`; `check_written` stops the process if even that was not enough).
        // SAFETY: `ifr` is a valid ifreq naming the netdev; `data` points to a command
        // block the caller keeps alive over the call, sized as said above.
        let rc = unsafe { libc::ioctl(self.fd, SIOCETHTOOL as _, &mut ifr as *mut IfReq) };
        if rc < 0 {
            let e = std::io::Error::last_os_error();
            return Err(match e.raw_os_error() {
                Some(libc::EOPNOTSUPP) => {
                    format!("{}: the driver has no ethtool statistics", self.ifname)
                }
                Some(libc::ENODEV) => format!("no netdev {}", self.ifname),
                _ => format!("SIOCETHTOOL {what} on {}: {e}", self.ifname),
            });
        }
        Ok(())
    }

    fn count(&self) -> Result<u32, String> {
        let mut info = SsetInfo {
            cmd: ETHTOOL_GSSET_INFO,
            reserved: 0,
            sset_mask: 1 << ETH_SS_STATS,
            data: [0],
        };
        self.ioctl("GSSET_INFO", (&mut info as *mut SsetInfo).cast())?;
        if info.sset_mask & (1 << ETH_SS_STATS) == 0 {
            return Err(format!(
                "{}: the driver has no ethtool statistics",
                self.ifname
            ));
        }
        match info.data[0] {
            n if n > MAX_STATS => Err(format!("{}: {n} statistics reported, ignored", self.ifname)),
            n => Ok(n),
        }
    }

    fn names(&self, n: u32) -> Result<Vec<String>, String> {
        // Header (cmd, string_set, len: three u32) then n 32-byte names, in
        // u32 words so the header is aligned.
        let bytes = 12 + room(n) * ETH_GSTRING_LEN;
        let mut buf = vec![0u32; bytes.div_ceil(4)];
        buf[0] = ETHTOOL_GSTRINGS;
        buf[1] = ETH_SS_STATS;
        buf[2] = n;
        self.ioctl("GSTRINGS", buf.as_mut_ptr().cast())?;
        check_written(buf[2] as usize, room(n));
        let got = buf[2] as usize;
        let raw: Vec<u8> = buf.iter().flat_map(|w| w.to_ne_bytes()).collect();
        Ok(raw[12..12 + got * ETH_GSTRING_LEN]
            .chunks_exact(ETH_GSTRING_LEN)
            .map(|c| {
                let end = c.iter().position(|&b| b == 0).unwrap_or(c.len());
                String::from_utf8_lossy(&c[..end]).into_owned()
            })
            .collect())
    }

    fn values(&self, n: u32) -> Result<Vec<u64>, String> {
        // Header (cmd, n_stats: two u32 = one u64 word) then n u64 values.
        let mut buf = vec![0u64; 1 + room(n)];
        let mut head = [0u8; 8];
        head[..4].copy_from_slice(&ETHTOOL_GSTATS.to_ne_bytes());
        head[4..].copy_from_slice(&n.to_ne_bytes());
        buf[0] = u64::from_ne_bytes(head);
        self.ioctl("GSTATS", buf.as_mut_ptr().cast())?;
        let head = buf[0].to_ne_bytes();
        let n_back = u32::from_ne_bytes([head[4], head[5], head[6], head[7]]) as usize;
        check_written(n_back, room(n));
        Ok(buf[1..1 + n_back].to_vec())
    }

    fn stats(&self) -> Result<Vec<(String, u64)>, String> {
        let n = self.count()?;
        if n == 0 {
            return Err(format!(
                "{}: the driver has no ethtool statistics",
                self.ifname
            ));
        }
        let names = self.names(n)?;
        let values = self.values(n)?;
        if names.len() != values.len() {
            // The set changed between the two reads: names and values no
            // longer pair up by position.
            return Err(format!(
                "{}: the statistics changed during the read ({} names, {} values)",
                self.ifname,
                names.len(),
                values.len()
            ));
        }
        Ok(names.into_iter().zip(values).collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ethtool_s_text_parses_by_name() {
        let t = "NIC statistics:\n     rx_pause_ctrl_phy: 12\n     tx_discards_phy: 0\n     \
                 rx_prio3_pause: 7\n     bogus line\n";
        assert_eq!(
            parse_ethtool_s(t),
            vec![
                ("rx_pause_ctrl_phy".to_string(), 12),
                ("tx_discards_phy".to_string(), 0),
                ("rx_prio3_pause".to_string(), 7)
            ]
        );
    }

    #[test]
    fn the_ifreq_is_the_kernels_size() {
        assert_eq!(std::mem::size_of::<IfReq>(), 40);
        assert_eq!(std::mem::size_of::<SsetInfo>(), 24);
    }

    /// Every netdev of this host: a driver that answers gives named values
    /// (printed, so a run shows what was read); one that does not says why.
    #[test]
    fn this_hosts_netdevs_answer_or_say_why() {
        let root = SysRoot::default();
        let mut answered = 0;
        for dev in root.list("sys/class/net") {
            match read(&root, &dev) {
                Ok(v) => {
                    answered += 1;
                    assert!(v.iter().all(|(k, _)| !k.is_empty()), "{dev}: {v:?}");
                    println!("{dev}: {} statistics, first {:?}", v.len(), v.first());
                }
                Err(e) => {
                    assert!(e.contains(&dev), "{dev}: {e}");
                    println!("{dev}: {e}");
                }
            }
        }
        println!("{answered} netdevs answered");
    }

    /// `lo` has no driver statistics: a clear error, not a crash or an
    /// empty success; a name that is no netdev says so.
    #[test]
    fn loopback_and_missing_netdevs_say_why() {
        let root = SysRoot::default();
        match read(&root, "lo") {
            Err(e) => assert!(e.contains("lo"), "{e}"),
            // Some kernels give lo statistics; then they have names.
            Ok(v) => assert!(v.iter().all(|(k, _)| !k.is_empty()), "{v:?}"),
        }
        let e = read(&root, "nosuchdev0").unwrap_err();
        assert!(e.contains("nosuchdev0"), "{e}");
        let e = read(&root, "way-too-long-a-name").unwrap_err();
        assert!(e.contains("not a netdev name"), "{e}");
    }
}
