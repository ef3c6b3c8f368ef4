//! The invocation's vocabulary: which tool (verb and kind), connection
//! type, post method and connection options. It sits below `params` and its
//! rule files (`conn_rules`, `mcast_rules`, `mem_opts`, `rate`), which all
//! speak it, so none of them imports another in a circle; `params`
//! re-exports it for the rest of the crate.

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Verb {
    Write,
    Read,
    Send,
    Atomic,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Bw,
    Lat,
}

/// One of perftest's eight tools.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Tool {
    pub verb: Verb,
    pub kind: Kind,
}

impl Tool {
    pub const ALL: [(&'static str, &'static str, Tool); 8] = [
        (
            "write-bw",
            "ib_write_bw",
            Tool {
                verb: Verb::Write,
                kind: Kind::Bw,
            },
        ),
        (
            "read-bw",
            "ib_read_bw",
            Tool {
                verb: Verb::Read,
                kind: Kind::Bw,
            },
        ),
        (
            "send-bw",
            "ib_send_bw",
            Tool {
                verb: Verb::Send,
                kind: Kind::Bw,
            },
        ),
        (
            "atomic-bw",
            "ib_atomic_bw",
            Tool {
                verb: Verb::Atomic,
                kind: Kind::Bw,
            },
        ),
        (
            "write-lat",
            "ib_write_lat",
            Tool {
                verb: Verb::Write,
                kind: Kind::Lat,
            },
        ),
        (
            "read-lat",
            "ib_read_lat",
            Tool {
                verb: Verb::Read,
                kind: Kind::Lat,
            },
        ),
        (
            "send-lat",
            "ib_send_lat",
            Tool {
                verb: Verb::Send,
                kind: Kind::Lat,
            },
        ),
        (
            "atomic-lat",
            "ib_atomic_lat",
            Tool {
                verb: Verb::Atomic,
                kind: Kind::Lat,
            },
        ),
    ];

    /// Our name and perftest's (`write-bw`, `ib_write_bw`).
    fn names(self) -> (&'static str, &'static str) {
        Self::ALL
            .iter()
            .find(|t| t.2 == self)
            .map_or(("?", "?"), |t| (t.0, t.1))
    }
    pub fn name(self) -> &'static str {
        self.names().0
    }
    pub fn perftest_name(self) -> &'static str {
        self.names().1
    }
    pub fn is_bw(self) -> bool {
        self.kind == Kind::Bw
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Conn {
    Rc,
    Uc,
    Ud,
}

impl Conn {
    pub fn name(self) -> &'static str {
        match self {
            Conn::Rc => "RC",
            Conn::Uc => "UC",
            Conn::Ud => "UD",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum AtomicType {
    FetchAdd,
    CmpSwap,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum PostChoice {
    Auto,
    PostSend,
    WrApi,
    Direct,
}

impl PostChoice {
    pub fn parse(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Self::Auto),
            "post-send" | "post_send" => Ok(Self::PostSend),
            "wr-api" | "wr_api" => Ok(Self::WrApi),
            "direct" => Ok(Self::Direct),
            _ => Err(format!(
                "--post {s}: unknown post method; use one of post-send, wr-api, direct, auto"
            )),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::PostSend => "post-send",
            Self::WrApi => "wr-api",
            Self::Direct => "direct",
        }
    }
}

/// How the two ends find each other: `-T`, `--retry_count`, `-z`, `--ipv6`,
/// `--ipv6-addr`, `--bind_source_ip` (rules in `cli::conn_rules`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConnOpts {
    /// `-T` (with -R): the ToS the RDMA CM puts on the data QPs' path.
    pub tos: Option<u8>,
    /// `--retry_count` (with -R): the retry count the RDMA CM puts in the
    /// data QPs' connect request (perftest's default 7).
    pub retry_count: u8,
    /// `-z`: the control channel over rdma_cm, data QPs connected by hand.
    pub comm_rdma_cm: bool,
    /// `--ipv6`: GID auto-selection prefers IPv6 GIDs.
    pub prefer_ipv6_gid: bool,
    /// `--ipv6-addr`: the TCP control connection over IPv6.
    pub ipv6_ctrl: bool,
    /// `--bind_source_ip` (client): the control socket's source address
    /// (port 0; an IPv6 link-local one carries its scope).
    pub source_ip: Option<std::net::SocketAddr>,
}

impl ConnOpts {
    /// The IPv4 source for the rdma_cm ids (`-R`/`-z` are IPv4-only, so an
    /// IPv6 source never gets this far: `--ipv6-addr` is refused with them).
    pub fn source_v4(&self) -> Option<std::net::Ipv4Addr> {
        match self.source_ip? {
            std::net::SocketAddr::V4(a) => Some(*a.ip()),
            std::net::SocketAddr::V6(_) => None,
        }
    }
}
