//! A TAP device for the tests that put a software NIC's wire on a real
//! Linux network stack: `/dev/net/tun` opened with `IFF_TAP | IFF_NO_PI`
//! (whole Ethernet frames, no packet-information prefix), the interface
//! given a MAC, an IPv4 address and a permanent neighbour entry with
//! `ip` (so Linux sends to the peer without ARP), and frames read and
//! written whole. Every wait is bounded and a timeout names what was
//! awaited. Needs root and the `tun` driver (the test VM loads it).

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::OpenOptionsExt;
use std::process::Command;
use std::time::Instant;

/// Bytes of the largest frame read: a 1500-byte MTU's frame, with room.
const MAX_FRAME: usize = 2048;

/// An open TAP interface; closing the fd removes it.
pub struct Tap {
    file: File,
    pub name: String,
}

impl Tap {
    /// Creates the TAP interface `name` (at most 15 bytes); panics naming
    /// the step that failed.
    pub fn open(name: &str) -> Tap {
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open("/dev/net/tun")
            .unwrap_or_else(|e| panic!("tap: cannot open /dev/net/tun (tun driver, root): {e}"));
        // SAFETY: ifreq is plain old data; all zeroes is a valid value.
        let mut req: libc::ifreq = unsafe { std::mem::zeroed() };
        assert!(
            name.len() < req.ifr_name.len(),
            "tap: name {name:?} too long"
        );
        for (d, s) in req.ifr_name.iter_mut().zip(name.bytes()) {
            *d = s as libc::c_char;
        }
        req.ifr_ifru.ifru_flags = (libc::IFF_TAP | libc::IFF_NO_PI) as libc::c_short;
        // SAFETY: TUNSETIFF reads and writes one ifreq, which `req` is, on
        // the open tun fd.
        let rc = unsafe { libc::ioctl(file.as_raw_fd(), libc::TUNSETIFF, &mut req) };
        if rc != 0 {
            panic!(
                "tap: TUNSETIFF {name} failed: {}",
                std::io::Error::last_os_error()
            );
        }
        Tap {
            file,
            name: name.to_owned(),
        }
    }

    /// Sets the interface's MAC and IPv4 address (`a.b.c.d/len`), brings
    /// it up, and adds a permanent neighbour entry `peer_ip` → `peer_mac`.
    pub fn configure(&self, mac: &str, cidr: &str, (peer_ip, peer_mac): (&str, &str)) {
        let dev = self.name.as_str();
        ip(&["link", "set", "dev", dev, "address", mac]);
        ip(&["addr", "add", cidr, "dev", dev]);
        ip(&["link", "set", "dev", dev, "up"]);
        ip(&[
            "neigh",
            "replace",
            peer_ip,
            "lladdr",
            peer_mac,
            "dev",
            dev,
            "nud",
            "permanent",
        ]);
    }

    /// Puts `frame` (Ethernet header on, no CRC) on the interface as if it
    /// had arrived from the wire.
    pub fn send(&mut self, frame: &[u8]) {
        let n = self
            .file
            .write(frame)
            .unwrap_or_else(|e| panic!("tap: write of a {}-byte frame: {e}", frame.len()));
        assert_eq!(n, frame.len(), "tap: short write");
    }

    /// The next frame Linux sent on the interface, or `None` when none came
    /// by `deadline`.
    pub fn recv(&mut self, deadline: Instant) -> Option<Vec<u8>> {
        let mut buf = vec![0u8; MAX_FRAME];
        loop {
            match self.file.read(&mut buf) {
                Ok(n) => {
                    buf.truncate(n);
                    return Some(buf);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                Err(e) => panic!("tap: read from {}: {e}", self.name),
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return None;
            }
            self.wait_readable(left.as_millis().max(1) as i32);
        }
    }

    fn wait_readable(&self, ms: i32) {
        let mut p = libc::pollfd {
            fd: self.file.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd for the duration of the call.
        let rc = unsafe { libc::poll(&mut p, 1, ms) };
        let err = std::io::Error::last_os_error();
        assert!(
            rc >= 0 || err.kind() == ErrorKind::Interrupted,
            "tap: poll: {err}"
        );
    }
}

/// Runs `ip args`; panics with its output when it fails.
fn ip(args: &[&str]) {
    let out = Command::new("ip")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("tap: cannot run ip {args:?}: {e}"));
    assert!(
        out.status.success(),
        "tap: ip {} failed: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The kernel's IPv4/UDP counters (`/proc/net/snmp`) as `"Udp.InErrors"`
/// → value.
pub fn snmp() -> BTreeMap<String, u64> {
    let text = std::fs::read_to_string("/proc/net/snmp")
        .unwrap_or_else(|e| panic!("cannot read /proc/net/snmp: {e}"));
    let lines: Vec<&str> = text.lines().collect();
    let mut m = BTreeMap::new();
    for pair in lines.chunks(2) {
        let [names, values] = pair else { continue };
        let (Some((proto, names)), Some((_, values))) =
            (names.split_once(": "), values.split_once(": "))
        else {
            continue;
        };
        for (n, v) in names.split_whitespace().zip(values.split_whitespace()) {
            if let Ok(v) = v.parse() {
                m.insert(format!("{proto}.{n}"), v);
            }
        }
    }
    m
}

/// How much each counter in `names` grew from `before` to now.
pub fn snmp_growth(before: &BTreeMap<String, u64>, names: &[&str]) -> BTreeMap<String, u64> {
    let now = snmp();
    names
        .iter()
        .map(|&n| {
            let get = |m: &BTreeMap<String, u64>| {
                *m.get(n)
                    .unwrap_or_else(|| panic!("no {n} in /proc/net/snmp"))
            };
            (n.to_owned(), get(&now) - get(before))
        })
        .collect()
}
