//! The invocation as the rules see it: the parsed flags, the tool, and the
//! values perftest derives from them with its defaults, before any rule has
//! refused anything. A flag whose text must parse keeps its `Result`; the
//! row at its place in the table reports the error, so the refusal printed
//! is the first one in the table's order. The derived numbers are computed
//! whatever the flags say (no division, nothing that can panic): the rules
//! decide whether they stand, and `params::resolve` takes them as they are.

use super::parse;
use crate::cli::args::PerfArgs;
use crate::cli::defaults::MSG_SIZE_CQ_MOD_LIMIT;
use crate::cli::defaults::{self, DEF_CQ_MOD, DEF_DURATION, DEF_TX_BW, DEF_TX_LAT};
use crate::cli::kinds::{AtomicType, Conn, ConnOpts, PostChoice, Tool, Verb};
use crate::cli::mcast_rules::{self, Mcast};
use crate::cli::mem_opts::{self, MemOpts};
use crate::cli::rate::{self, RateLimit};
use crate::cli::values::{Mode, OutputKind};

/// Parsed flags and derived values (see the module comment).
pub struct Ctx<'a> {
    pub a: &'a PerfArgs,
    pub tool: Tool,
    pub bw: bool,
    pub verb: Verb,
    /// `-c` as given.
    pub conn_given: Result<Conn, String>,
    pub mcast: Result<Option<Mcast>, String>,
    /// The connection the test runs: `-c`'s, or UD under `-g`.
    pub conn: Conn,
    pub flow_labels: Result<Vec<u32>, String>,
    pub conn_opts: Result<ConnOpts, String>,
    pub counters: Result<Vec<String>, String>,
    pub atomic_type: Result<AtomicType, String>,
    /// `-s` or its default.
    pub size: u64,
    pub sizes: Vec<u64>,
    pub mem: Result<MemOpts, String>,
    pub mode: Mode,
    pub is_dur: bool,
    /// Iterations per QP (0 in duration mode).
    pub iters: u64,
    pub threads: u32,
    pub cpus: Result<Option<Vec<usize>>, String>,
    pub num_qps: u32,
    pub post_list: u32,
    /// `-t` or its default, before perftest clamps it to `-n`.
    pub tx_given: u32,
    pub tx_depth: u32,
    pub cq_mod: u32,
    pub rx_depth: u32,
    pub inline_size: u32,
    pub mtu: Result<Option<u32>, String>,
    pub output: Result<Option<OutputKind>, String>,
    /// `--post` as given.
    pub post_given: Result<PostChoice, String>,
    /// The post method (`--use_old_post_send` is `--post post-send`).
    pub post: PostChoice,
    /// The rate limit and perftest's notices about it.
    pub rate: Result<(Option<RateLimit>, Vec<String>), String>,
}

/// The numbers that size the queues.
struct Depths {
    tx_given: u32,
    tx_depth: u32,
    cq_mod: u32,
    rx_depth: u32,
}

impl<'a> Ctx<'a> {
    pub fn of(tool: Tool, a: &'a PerfArgs) -> Ctx<'a> {
        let (bw, verb) = (tool.is_bw(), tool.verb);
        let conn_given = parse::conn(a, verb);
        let mcast = mcast_rules::mcast(a, verb);
        // -g: perftest runs multicast on UD whatever -c says.
        let conn = match mcast {
            Ok(Some(_)) => Conn::Ud,
            _ => *conn_given.as_ref().unwrap_or(&Conn::Rc),
        };
        let size = a.size.unwrap_or(defaults::size(verb, bw));
        let sizes: Vec<u64> = if a.all {
            (1..=23).map(|i| 1u64 << i).collect()
        } else {
            vec![size]
        };
        let max_size = sizes.iter().copied().max().unwrap_or(size);
        let mode = mode(a);
        let is_dur = matches!(mode, Mode::Duration { .. });
        let iters = if is_dur {
            0
        } else {
            a.iters.unwrap_or(defaults::iters(verb, bw))
        };
        let threads = a.threads.unwrap_or(1);
        let post_list = a.post_list.unwrap_or(1);
        let mut c = Ctx {
            a,
            tool,
            bw,
            verb,
            conn_given,
            mcast,
            conn,
            flow_labels: parse::flow_labels(a),
            conn_opts: crate::cli::conn_rules::conn_opts(a, conn),
            counters: parse::counters(a),
            atomic_type: parse::atomic_type(a),
            size,
            sizes,
            mem: mem_opts::mem_opts(tool, a, conn, max_size),
            mode,
            is_dur,
            iters,
            threads,
            cpus: parse::cpus(a),
            // Each thread owns at least one QP: with --threads and no -q, one QP per thread.
            num_qps: a.qps.unwrap_or(threads),
            post_list,
            tx_given: 0,
            tx_depth: 0,
            cq_mod: 0,
            rx_depth: 0,
            inline_size: a
                .inline_size
                .unwrap_or(defaults::inline_size(bw, verb, conn)),
            mtu: parse::mtu(a),
            output: parse::output(a),
            post_given: PostChoice::parse(&a.post),
            post: PostChoice::Auto,
            rate: Ok((None, Vec::new())),
        };
        let d = c.depths();
        (c.tx_given, c.tx_depth, c.cq_mod, c.rx_depth) =
            (d.tx_given, d.tx_depth, d.cq_mod, d.rx_depth);
        c.post = match (a.use_old_post_send, &c.post_given) {
            (true, _) => PostChoice::PostSend,
            (false, p) => *p.as_ref().unwrap_or(&PostChoice::Auto),
        };
        let mut notices = Vec::new();
        c.rate = rate::rate_of(a, tool, c.tx_depth, threads, &mut notices).map(|r| (r, notices));
        c
    }

    /// perftest's queue depths: `-t` clamped to `-n`, the CQ moderation
    /// (`-l`'s size when `-l` is given without `-Q`; every message signalled
    /// above 8 KiB unless `-Q`; 1 in latency tests; at most the TX depth),
    /// and the receive depth (WRITE posts none; SEND at most one per iteration).
    fn depths(&self) -> Depths {
        let a = self.a;
        let tx_given = a
            .tx_depth
            .unwrap_or(if self.bw { DEF_TX_BW } else { DEF_TX_LAT });
        let tx_depth = if !self.is_dur && tx_given as u64 > self.iters {
            self.iters as u32
        } else {
            tx_given
        };
        let cq_mod = match a.cq_mod {
            _ if !self.bw => 1,
            Some(q) => q,
            None if self.post_list > 1 => self.post_list,
            None if self.size > MSG_SIZE_CQ_MOD_LIMIT
                && self.conn != Conn::Ud
                && !a.all
                && !a.events =>
            {
                1
            }
            None => DEF_CQ_MOD,
        };
        let def_rx = defaults::rx_depth(self.verb, self.conn, self.is_dur, self.iters);
        let mut rx_depth = if self.verb == Verb::Write {
            1
        } else {
            a.rx_depth.unwrap_or(def_rx)
        };
        if self.verb == Verb::Send && !self.is_dur && rx_depth as u64 > self.iters {
            rx_depth = self.iters as u32;
        }
        Depths {
            tx_given,
            tx_depth,
            cq_mod: cq_mod.min(tx_depth),
            rx_depth,
        }
    }
}

/// `-D` (or `--run_infinitely`'s row period) with `-f`'s margin (default D/4).
fn mode(a: &PerfArgs) -> Mode {
    let duration = a.duration.or(if a.run_infinitely {
        Some(DEF_DURATION)
    } else {
        None
    });
    match duration {
        Some(secs) => Mode::Duration {
            secs,
            margin: a.margin.unwrap_or(secs / 4),
        },
        None => Mode::Iterations,
    }
}
