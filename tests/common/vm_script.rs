//! `pair` lines of guest scripts (scripts/vm-lib.sh) that run rdmaperf and stock
//! perftest 4.5 against each other: a server `... -p $PORT`, a client
//! `... -p $PORT ADDR`.

/// rdmaperf, as a guest script names it.
pub const RDMAPERF: &str = r#""$RDMAPERF_BIN""#;

/// Who runs which end of a pair; the tests name the pair `NAME_rr`, `NAME_sr`, `NAME_rs`,
/// `NAME_ss`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Ends {
    /// rdmaperf both ends.
    Rr,
    /// A stock server, an rdmaperf client.
    Sr,
    /// An rdmaperf server, a stock client.
    Rs,
    /// Stock perftest both ends (a yardstick).
    Ss,
}

impl Ends {
    /// rdmaperf both ends, and against stock perftest both ways.
    pub const ALL: [Ends; 3] = [Ends::Rr, Ends::Sr, Ends::Rs];

    pub fn suffix(self) -> &'static str {
        match self {
            Ends::Rr => "rr",
            Ends::Sr => "sr",
            Ends::Rs => "rs",
            Ends::Ss => "ss",
        }
    }

    /// Stock perftest runs the server.
    pub fn stock_server(self) -> bool {
        matches!(self, Ends::Sr | Ends::Ss)
    }

    /// Stock perftest runs the client.
    pub fn stock_client(self) -> bool {
        matches!(self, Ends::Rs | Ends::Ss)
    }

    /// The server's command: `tool args` by stock perftest or rdmaperf, as these ends say.
    pub fn server(self, tool: &str, args: &str) -> String {
        cmd(self.stock_server(), tool, args)
    }

    /// The client's command (without `-p` and the address), as [`Ends::server`].
    pub fn client(self, tool: &str, args: &str) -> String {
        cmd(self.stock_client(), tool, args)
    }
}

/// `TOOL ARGS` run by rdmaperf, or (`stock`) by stock perftest's `ib_TOOL`
/// (`ib_write_bw` for write-bw).
pub fn cmd(stock: bool, tool: &str, args: &str) -> String {
    if stock {
        format!("ib_{} {args}", tool.replace('-', "_"))
    } else {
        format!("{RDMAPERF} {tool} {args}")
    }
}

/// `pair NAME 'SERVER -p $PORT' 'CLIENT -p $PORT ADDR'`.
pub fn pair_to(name: &str, server: &str, client: &str, addr: &str) -> String {
    format!("pair {name} '{server} -p $PORT' '{client} -p $PORT {addr}'\n")
}

/// [`pair_to`] the loopback address 127.0.0.1.
pub fn pair(name: &str, server: &str, client: &str) -> String {
    pair_to(name, server, client, "127.0.0.1")
}

/// [`pair`] NAME with rdmaperf's `tool args` at both ends.
pub fn rr(name: &str, tool: &str, args: &str) -> String {
    let c = cmd(false, tool, args);
    pair(name, &c, &c)
}

/// `pair NAME_<ends>` of `tool` to `addr`: the server runs `tool server_args`, the
/// client `tool client_args`.
pub fn pair_ends(
    name: &str,
    e: Ends,
    tool: &str,
    server_args: &str,
    client_args: &str,
    addr: &str,
) -> String {
    pair_to(
        &format!("{name}_{}", e.suffix()),
        &e.server(tool, server_args),
        &e.client(tool, client_args),
        addr,
    )
}

/// [`pair_ends`] to 127.0.0.1 for each of `ends`.
pub fn pairs(
    name: &str,
    ends: &[Ends],
    tool: &str,
    server_args: &str,
    client_args: &str,
) -> String {
    ends.iter()
        .map(|&e| pair_ends(name, e, tool, server_args, client_args, "127.0.0.1"))
        .collect()
}

/// The address rdma_cm clients (`-R`, `-z`) connect to: dummy0's, rxe0's netdev in the VM.
pub const CM_ADDR: &str = "169.254.7.1";

/// [`pair_ends`] of an rdma_cm pair (`-R`, `-z`) to [`CM_ADDR`]. A stock client never
/// retries its connect; under TCG its request is now and then rejected
/// (RDMA_CM_EVENT_REJECTED, status 8: no listener matched yet) while the server waits,
/// and on a loaded host twice in a row (CI once): with a stock client such a pair then
/// runs up to twice more, each rerun's name noted in `$RESULTS/retries`.
pub fn cm_pair(name: &str, e: Ends, tool: &str, server_args: &str, client_args: &str) -> String {
    let line = pair_ends(name, e, tool, server_args, client_args, CM_ADDR);
    if !e.stock_client() {
        return line;
    }
    let (line, name) = (line.trim_end(), format!("{name}_{}", e.suffix()));
    let rerun = format!(
        "{{ grep -q 'Failed to connect\\|Unable to perform rdma_client' \
         $RESULTS/{name}.client.out && echo {name} >> $RESULTS/retries && {line}; }}"
    );
    format!("{line} || {rerun} || {rerun}\n")
}
