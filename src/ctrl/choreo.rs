//! The order of control-protocol steps per tool, role and mode, as stock
//! perftest's `*_bw.c` / `*_lat.c` `main()` run them (identical in 4.5 and
//! master for plain WRITE/READ/SEND/ATOMIC over TCP; master adds steps only for
//! `--write_with_imm` and `--data_validation`, which we do not speak).
//!
//! Every exchange is lock-step, so the client's and the server's sequences
//! must contain the same exchanges in the same order; the local steps between
//! them (connect, runs) differ per role. [`choreography`] returns one side's
//! sequence; a test checks that both sides always pair up.

use std::fmt;

use super::channel::Role;
use super::wire::{PeerVersion, ReportField, SYSDATA_LEN, VERSION_LEN};

/// A perftest tool.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tool {
    WriteBw,
    ReadBw,
    AtomicBw,
    SendBw,
    WriteLat,
    ReadLat,
    SendLat,
    AtomicLat,
}

impl Tool {
    pub const ALL: [Tool; 8] = [
        Tool::WriteBw,
        Tool::ReadBw,
        Tool::AtomicBw,
        Tool::SendBw,
        Tool::WriteLat,
        Tool::ReadLat,
        Tool::SendLat,
        Tool::AtomicLat,
    ];

    /// A bandwidth tool (has -b and report exchange).
    pub fn is_bw(self) -> bool {
        matches!(
            self,
            Tool::WriteBw | Tool::ReadBw | Tool::AtomicBw | Tool::SendBw
        )
    }
}

/// How the run is bounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `-n` (default).
    Iterations,
    /// `-D`.
    Duration,
    /// `-a`: all sizes 2..2^23 (UD send: 2..MTU). atomic_* run once.
    AllSizes,
    /// `--run_infinitely`: runs until killed; the close is never reached.
    Infinite,
}

/// What a tool invocation looks like, as far as the control protocol cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scenario {
    pub tool: Tool,
    pub role: Role,
    /// `-b` (bw tools only; ignored for latency tools).
    pub duplex: bool,
    pub mode: Mode,
    /// `-q` (>= 1).
    pub num_qps: usize,
    /// `Some(MTU bytes)` for UD: send_bw/send_lat `-a` stop at the MTU.
    pub ud_mtu: Option<u32>,
}

impl Scenario {
    /// A single-QP RC scenario.
    pub fn new(tool: Tool, role: Role, duplex: bool, mode: Mode) -> Scenario {
        Scenario {
            tool,
            role,
            duplex,
            mode,
            num_qps: 1,
            ud_mtu: None,
        }
    }

    /// The same invocation on the other side.
    pub fn peer(&self) -> Scenario {
        let role = match self.role {
            Role::Client => Role::Server,
            Role::Server => Role::Client,
        };
        Scenario { role, ..*self }
    }

    /// Sizes `-a` runs, in order.
    pub fn all_sizes(&self) -> Vec<u64> {
        let max_exp = match (self.tool, self.ud_mtu) {
            (Tool::SendBw | Tool::SendLat, Some(mtu)) => mtu.max(2).ilog2(),
            _ => 23,
        };
        (1..=max_exp).map(|i| 1u64 << i).collect()
    }
}

/// Round of per-QP key exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyRound {
    /// Before `ctx_connect`: gives each side the peer's QP numbers and keys.
    First,
    /// After `ctx_connect` (same content; perftest prints the remote side here).
    AfterConnect,
}

/// Why a `ctx_hand_shake(my_dest[0])` is done; the bytes are QP 0's key message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Barrier {
    /// write/read/atomic_lat: one extra hand_shake before the per-QP keys.
    LatPrelude,
    /// send_bw/send_lat: right after `ctx_connect`.
    AfterConnect,
    /// "An additional handshake is required after moving qp to RTR."
    AfterRtr,
    /// Before a run (duplex bw, send tools: the receiver has posted its recvs).
    BeforeRun,
    /// After a run (duplex write/read `-a`; send_bw `-a`).
    AfterRun,
    /// Unidirectional write/read/atomic_bw: the server waits here for the
    /// client's whole run, then both exchange reports.
    RunDone,
}

/// One step of a tool's control sequence.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// `exchange_versions` (16 B).
    Versions,
    /// `check_sys_data` (4 B + 4 B).
    SysData,
    /// `check_mtu` (2 B).
    Mtu,
    /// `ctx_hand_shake(my_dest[qp])`.
    Keys { qp: usize, round: KeyRound },
    /// `ctx_hand_shake(my_dest[0])` as a barrier.
    Barrier(Barrier),
    /// Local: `ctx_connect` (QPs to RTR/RTS with the peer's keys). No bytes.
    Connect,
    /// Local: one measurement (`None`: the `-s` size). No bytes.
    Run { size: Option<u64> },
    /// Local: `--run_infinitely`; never returns.
    RunForever,
    /// `xchg_bw_reports` (5 x 8 B, 9 with --report-per-port).
    BwReport,
    /// `ctx_close_connection`: hand_shake, 4.5's `"done\0"`, close.
    Close,
    /// End without close handshake (ib_write_lat): the socket just closes.
    Exit,
}

impl Step {
    /// True for steps that put bytes on the wire.
    pub fn is_exchange(self) -> bool {
        !matches!(
            self,
            Step::Connect | Step::Run { .. } | Step::RunForever | Step::Exit
        )
    }

    /// The lock-step messages of this step (each is sent both ways) and their
    /// sizes, for a peer of version `peer`, key messages of `key_len` bytes
    /// and the given --report-per-port setting. The close's `"done\0"` is not
    /// exchanged and not included.
    pub fn messages(
        self,
        key_len: usize,
        per_port: bool,
        peer: &PeerVersion,
    ) -> Vec<(Message, usize)> {
        match self {
            Step::Versions => vec![(Message::Version, VERSION_LEN)],
            Step::SysData if peer.has_sysdata() => vec![
                (Message::SysData("cycle_buffer"), SYSDATA_LEN),
                (Message::SysData("cache_line"), SYSDATA_LEN),
            ],
            Step::Mtu if peer.has_mtu() => vec![(Message::Mtu, peer.mtu_len())],
            Step::Keys { .. } | Step::Barrier(_) | Step::Close => vec![(Message::Key, key_len)],
            Step::BwReport => ReportField::sequence(per_port)
                .iter()
                .map(|&f| (Message::Report(f), f.len(peer)))
                .collect(),
            _ => Vec::new(),
        }
    }

    /// Just the sizes of [`Step::messages`].
    pub fn message_sizes(self, key_len: usize, per_port: bool, peer: &PeerVersion) -> Vec<usize> {
        self.messages(key_len, per_port, peer)
            .into_iter()
            .map(|(_, n)| n)
            .collect()
    }
}

/// The kind of one lock-step message, selecting its codec in [`super::wire`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Message {
    Version,
    /// "cycle_buffer" or "cache_line".
    SysData(&'static str),
    Mtu,
    Key,
    Report(ReportField),
}

impl fmt::Display for Step {
    /// Step names as used in error messages.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Versions => f.write_str("version"),
            Step::SysData => f.write_str("sysdata"),
            Step::Mtu => f.write_str("MTU"),
            Step::Keys {
                qp,
                round: KeyRound::First,
            } => write!(f, "key message for QP {qp}"),
            Step::Keys {
                qp,
                round: KeyRound::AfterConnect,
            } => write!(f, "key message for QP {qp} (after connect)"),
            Step::Barrier(b) => {
                let why = match b {
                    Barrier::LatPrelude => "before key exchange",
                    Barrier::AfterConnect => "after connect",
                    Barrier::AfterRtr => "after RTR",
                    Barrier::BeforeRun => "before run",
                    Barrier::AfterRun => "after run",
                    Barrier::RunDone => "end of run",
                };
                write!(f, "key message (barrier {why})")
            }
            Step::Connect => f.write_str("QP connect"),
            Step::Run { size: Some(s) } => write!(f, "run ({s} B)"),
            Step::Run { size: None } => f.write_str("run"),
            Step::RunForever => f.write_str("run (infinite)"),
            Step::BwReport => f.write_str("bw report"),
            Step::Close => f.write_str("close handshake"),
            Step::Exit => f.write_str("exit"),
        }
    }
}

/// A step and whether its first read may wait for the peer's measurement
/// (then call [`super::session::Session::wait_for_peer_run`] before it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Entry {
    pub step: Step,
    pub waits_for_peer_run: bool,
}

/// One side's steps, in order, with peer-run waits marked: an exchange waits
/// if the peer runs a measurement between its previous exchange and this one.
/// With `--run_infinitely` one side's sequence ends in [`Step::RunForever`];
/// the other's then ends waiting in an exchange that never completes.
pub fn choreography(s: &Scenario) -> Vec<Entry> {
    let mine = steps(s);
    let theirs = steps(&s.peer());
    // For the peer's k-th exchange: did it run since its (k-1)-th?
    let mut peer_ran = Vec::new();
    let mut ran = false;
    for st in &theirs {
        match st {
            Step::Run { .. } | Step::RunForever => ran = true,
            st if st.is_exchange() => {
                peer_ran.push(ran);
                ran = false;
            }
            _ => {}
        }
    }
    let mut k = 0;
    mine.into_iter()
        .map(|step| {
            // Past the peer's last exchange: it ran forever (or exited), so
            // this read waits for that run.
            let waits = step.is_exchange() && peer_ran.get(k).copied().unwrap_or(ran);
            if step.is_exchange() {
                k += 1;
            }
            Entry {
                step,
                waits_for_peer_run: waits,
            }
        })
        .collect()
}

/// The bare step list for one side (see [`choreography`]).
pub fn steps(s: &Scenario) -> Vec<Step> {
    let mut v = vec![Step::Versions, Step::SysData, Step::Mtu];
    match s.tool {
        Tool::WriteBw | Tool::ReadBw | Tool::AtomicBw => rdma_bw(s, &mut v),
        Tool::SendBw => send_runs(s, &mut v, true),
        Tool::WriteLat | Tool::ReadLat | Tool::AtomicLat => rdma_lat(s, &mut v),
        Tool::SendLat => send_runs(s, &mut v, false),
    }
    v
}

fn keys(s: &Scenario, round: KeyRound, v: &mut Vec<Step>) {
    v.extend((0..s.num_qps.max(1)).map(|qp| Step::Keys { qp, round }));
}

/// Setup of write/read/atomic tools: keys, connect, keys, barrier after RTR.
fn rdma_setup(s: &Scenario, v: &mut Vec<Step>) {
    keys(s, KeyRound::First, v);
    v.push(Step::Connect);
    keys(s, KeyRound::AfterConnect, v);
    v.push(Step::Barrier(Barrier::AfterRtr));
}

/// Setup of send tools: keys, connect, one barrier, keys.
fn send_setup(s: &Scenario, v: &mut Vec<Step>) {
    keys(s, KeyRound::First, v);
    v.push(Step::Connect);
    v.push(Step::Barrier(Barrier::AfterConnect));
    keys(s, KeyRound::AfterConnect, v);
}

/// write_bw.c / read_bw.c / atomic_bw.c.
fn rdma_bw(s: &Scenario, v: &mut Vec<Step>) {
    rdma_setup(s, v);
    let server_waits = s.role == Role::Server && !s.duplex;
    if server_waits {
        // "For half duplex tests, server just waits for client to exit."
        v.extend([Step::Barrier(Barrier::RunDone), Step::BwReport, Step::Close]);
        return;
    }
    match s.mode {
        Mode::Infinite => {
            v.push(Step::RunForever);
            return;
        }
        // atomic_bw treats -a like a regular run.
        Mode::AllSizes if s.tool != Tool::AtomicBw => {
            for size in s.all_sizes() {
                if s.duplex {
                    v.push(Step::Barrier(Barrier::BeforeRun));
                }
                v.push(Step::Run { size: Some(size) });
                if s.duplex {
                    // Guarded by `atof(local version) >= 4.6`: always true.
                    v.extend([Step::Barrier(Barrier::AfterRun), Step::BwReport]);
                }
            }
        }
        _ => {
            if s.duplex {
                v.push(Step::Barrier(Barrier::BeforeRun));
            }
            v.push(Step::Run { size: None });
            if s.duplex {
                v.push(Step::BwReport);
            }
        }
    }
    if !s.duplex {
        // The client's side of the server's RunDone wait.
        v.extend([Step::Barrier(Barrier::RunDone), Step::BwReport]);
    }
    v.push(Step::Close);
}

/// send_bw.c and send_lat.c: every run is preceded by a barrier (the
/// receiver has posted its receives). Only send_bw closes each `-a` size with
/// a second barrier, and only its bidirectional `-b` runs in iteration mode
/// exchange a report; `-D` duplex runs do not.
fn send_runs(s: &Scenario, v: &mut Vec<Step>, bw: bool) {
    send_setup(s, v);
    let reports = bw && s.duplex && s.mode != Mode::Duration;
    let sizes: Vec<Option<u64>> = match s.mode {
        Mode::Infinite => {
            v.extend([Step::Barrier(Barrier::BeforeRun), Step::RunForever]);
            return;
        }
        Mode::AllSizes => s.all_sizes().into_iter().map(Some).collect(),
        Mode::Iterations | Mode::Duration => vec![None],
    };
    for size in sizes {
        v.extend([Step::Barrier(Barrier::BeforeRun), Step::Run { size }]);
        if reports {
            v.push(Step::BwReport);
        }
        if bw && size.is_some() {
            v.push(Step::Barrier(Barrier::AfterRun));
        }
    }
    v.push(Step::Close);
}

/// write_lat.c / read_lat.c / atomic_lat.c: an extra first hand_shake, no
/// per-size sync. write_lat never closes; the read/atomic server goes
/// straight to the close and waits there for the client's run.
fn rdma_lat(s: &Scenario, v: &mut Vec<Step>) {
    v.push(Step::Barrier(Barrier::LatPrelude));
    rdma_setup(s, v);
    let runs = s.tool == Tool::WriteLat || s.role == Role::Client;
    if runs {
        match s.mode {
            Mode::Infinite => {
                v.push(Step::RunForever);
                return;
            }
            Mode::AllSizes if s.tool != Tool::AtomicLat => {
                v.extend(
                    s.all_sizes()
                        .into_iter()
                        .map(|size| Step::Run { size: Some(size) }),
                );
            }
            _ => v.push(Step::Run { size: None }),
        }
    }
    v.push(if s.tool == Tool::WriteLat {
        Step::Exit
    } else {
        Step::Close
    });
}

/// The lock-step message sizes of a whole sequence (the same in both
/// directions), and whether a close (with 4.5's trailing `"done\0"`) ends it.
pub fn wire_messages(
    entries: &[Entry],
    key_len: usize,
    per_port: bool,
    peer: &PeerVersion,
) -> (Vec<usize>, bool) {
    let sizes = entries
        .iter()
        .flat_map(|e| e.step.message_sizes(key_len, per_port, peer))
        .collect();
    let closes = entries.last().is_some_and(|e| e.step == Step::Close);
    (sizes, closes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ctrl::wire::{KEY_LEN, KEY_LEN_GID};

    const MODES: [Mode; 4] = [
        Mode::Iterations,
        Mode::Duration,
        Mode::AllSizes,
        Mode::Infinite,
    ];

    fn all_scenarios() -> Vec<Scenario> {
        let mut v = Vec::new();
        for tool in Tool::ALL {
            for role in [Role::Client, Role::Server] {
                for duplex in [false, true] {
                    for mode in MODES {
                        for num_qps in [1, 3] {
                            for ud_mtu in [None, Some(1024)] {
                                v.push(Scenario {
                                    tool,
                                    role,
                                    duplex,
                                    mode,
                                    num_qps,
                                    ud_mtu,
                                });
                            }
                        }
                    }
                }
            }
        }
        v
    }

    fn exchanges(s: &Scenario) -> Vec<Step> {
        steps(s).into_iter().filter(|st| st.is_exchange()).collect()
    }

    use Barrier as B;
    use KeyRound::{AfterConnect as AC, First};
    use Step as S;

    /// An RDMA tool's connect: keys, connect, keys again, the RTR barrier.
    const RDMA_CONNECT: [S; 4] = [
        S::Keys {
            qp: 0,
            round: First,
        },
        S::Connect,
        S::Keys { qp: 0, round: AC },
        S::Barrier(B::AfterRtr),
    ];

    #[test]
    fn both_sides_always_pair_up() {
        let peer = PeerVersion::from_text("6.06").unwrap();
        for s in all_scenarios() {
            let (mine, theirs) = (exchanges(&s), exchanges(&s.peer()));
            if s.mode == Mode::Infinite {
                // The runner's exchanges are a prefix of the waiter's.
                let n = mine.len().min(theirs.len());
                assert_eq!(mine[..n], theirs[..n], "{s:?}");
                continue;
            }
            assert_eq!(mine, theirs, "{s:?}");
            for key_len in [KEY_LEN, KEY_LEN_GID] {
                let a = wire_messages(&choreography(&s), key_len, false, &peer);
                let b = wire_messages(&choreography(&s.peer()), key_len, false, &peer);
                assert_eq!(a, b, "{s:?}");
            }
        }
    }

    #[test]
    fn every_sequence_starts_with_the_preamble_and_ends_once() {
        for s in all_scenarios() {
            let st = steps(&s);
            assert_eq!(&st[..3], &[S::Versions, S::SysData, S::Mtu], "{s:?}");
            let ends = st
                .iter()
                .filter(|x| matches!(x, S::Close | S::Exit | S::RunForever))
                .count();
            assert_eq!(ends, 1, "{s:?}");
            assert!(matches!(
                st.last(),
                Some(S::Close | S::Exit | S::RunForever)
            ));
            assert_eq!(st.iter().filter(|x| **x == S::Connect).count(), 1);
        }
    }

    #[test]
    fn write_bw_unidirectional() {
        let c = Scenario::new(Tool::WriteBw, Role::Client, false, Mode::Iterations);
        let mut setup = vec![S::Versions, S::SysData, S::Mtu];
        setup.extend(RDMA_CONNECT);
        let mut client = setup.to_vec();
        client.extend([
            S::Run { size: None },
            S::Barrier(B::RunDone),
            S::BwReport,
            S::Close,
        ]);
        assert_eq!(steps(&c), client);
        let mut server = setup.to_vec();
        server.extend([S::Barrier(B::RunDone), S::BwReport, S::Close]);
        assert_eq!(steps(&c.peer()), server);
        // The server's RunDone read waits for the client's run; nothing else does.
        let waits: Vec<Step> = choreography(&c.peer())
            .into_iter()
            .filter(|e| e.waits_for_peer_run)
            .map(|e| e.step)
            .collect();
        assert_eq!(waits, [S::Barrier(B::RunDone)]);
        assert!(choreography(&c).iter().all(|e| !e.waits_for_peer_run));
        let peer = PeerVersion::from_text("6.06").unwrap();
        let (sizes, closes) = wire_messages(&choreography(&c), KEY_LEN, false, &peer);
        assert_eq!(sizes, [16, 4, 4, 2, 59, 59, 59, 59, 8, 8, 8, 8, 8, 59]);
        assert!(closes);
    }

    #[test]
    fn infinite_run_leaves_the_server_waiting() {
        let c = Scenario::new(Tool::WriteBw, Role::Client, false, Mode::Infinite);
        assert_eq!(steps(&c).last(), Some(&S::RunForever));
        let server = choreography(&c.peer());
        let rd = server
            .iter()
            .find(|e| e.step == S::Barrier(B::RunDone))
            .unwrap();
        assert!(rd.waits_for_peer_run);
    }

    #[test]
    fn multi_qp_keys_come_in_qp_order_twice() {
        let s = Scenario {
            num_qps: 3,
            ..Scenario::new(Tool::ReadBw, Role::Server, false, Mode::Duration)
        };
        let keys: Vec<(usize, KeyRound)> = steps(&s)
            .into_iter()
            .filter_map(|st| match st {
                S::Keys { qp, round } => Some((qp, round)),
                _ => None,
            })
            .collect();
        assert_eq!(
            keys,
            [
                (0, First),
                (1, First),
                (2, First),
                (0, AC),
                (1, AC),
                (2, AC)
            ]
        );
    }

    #[test]
    fn duplex_write_bw_all_sizes_syncs_every_size() {
        let s = Scenario::new(Tool::WriteBw, Role::Server, true, Mode::AllSizes);
        let st = steps(&s);
        let body = &st[7..st.len() - 1];
        assert_eq!(body.len(), 23 * 4);
        assert_eq!(
            &body[..4],
            &[
                S::Barrier(B::BeforeRun),
                S::Run { size: Some(2) },
                S::Barrier(B::AfterRun),
                S::BwReport
            ]
        );
        assert_eq!(
            body[body.len() - 3],
            S::Run {
                size: Some(1 << 23)
            }
        );
        // Both sides run, so each AfterRun barrier waits for the peer's run.
        let ch = choreography(&s);
        assert!(ch[7..]
            .iter()
            .filter(|e| e.step == S::Barrier(B::AfterRun))
            .all(|e| e.waits_for_peer_run));
    }

    #[test]
    fn unidirectional_all_sizes_has_no_per_size_sync() {
        let s = Scenario::new(Tool::WriteBw, Role::Client, false, Mode::AllSizes);
        let ex = exchanges(&s);
        assert_eq!(ex.len(), 3 + 3 + 3);
        assert_eq!(
            steps(&s)
                .iter()
                .filter(|x| matches!(x, S::Run { .. }))
                .count(),
            23
        );
    }

    #[test]
    fn atomic_bw_runs_all_sizes_once() {
        let s = Scenario::new(Tool::AtomicBw, Role::Client, true, Mode::AllSizes);
        let runs: Vec<Step> = steps(&s)
            .into_iter()
            .filter(|x| matches!(x, S::Run { .. }))
            .collect();
        assert_eq!(runs, [S::Run { size: None }]);
    }

    #[test]
    fn send_bw() {
        let s = Scenario::new(Tool::SendBw, Role::Client, false, Mode::Iterations);
        assert_eq!(
            steps(&s),
            [
                S::Versions,
                S::SysData,
                S::Mtu,
                S::Keys {
                    qp: 0,
                    round: First
                },
                S::Connect,
                S::Barrier(B::AfterConnect),
                S::Keys { qp: 0, round: AC },
                S::Barrier(B::BeforeRun),
                S::Run { size: None },
                S::Close
            ]
        );
        // Duplex exchanges reports, except with -D.
        let d = Scenario::new(Tool::SendBw, Role::Server, true, Mode::Iterations);
        assert!(steps(&d).contains(&S::BwReport));
        let dd = Scenario::new(Tool::SendBw, Role::Server, true, Mode::Duration);
        assert!(!steps(&dd).contains(&S::BwReport));
        // -a: barrier before and after every size; UD stops at the MTU.
        let a = Scenario {
            ud_mtu: Some(1024),
            ..Scenario::new(Tool::SendBw, Role::Client, false, Mode::AllSizes)
        };
        assert_eq!(a.all_sizes(), [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]);
        let st = steps(&a);
        assert_eq!(
            st.iter()
                .filter(|x| **x == S::Barrier(B::BeforeRun))
                .count(),
            10
        );
        assert_eq!(
            st.iter().filter(|x| **x == S::Barrier(B::AfterRun)).count(),
            10
        );
    }

    #[test]
    fn send_lat_all_sizes_has_one_barrier_per_size() {
        // send_lat.c: a barrier before each size, none after, no reports.
        let a = Scenario::new(Tool::SendLat, Role::Client, true, Mode::AllSizes);
        let st = steps(&a);
        let count = |want: S| st.iter().filter(|x| **x == want).count();
        assert_eq!(count(S::Barrier(B::BeforeRun)), a.all_sizes().len());
        assert_eq!(count(S::Barrier(B::AfterRun)), 0);
        assert_eq!(count(S::BwReport), 0);
    }

    #[test]
    fn latency_tools() {
        let lat_setup = |first_barrier: bool| {
            let mut v = vec![S::Versions, S::SysData, S::Mtu];
            if first_barrier {
                v.push(S::Barrier(B::LatPrelude));
            }
            v
        };
        // write_lat: both sides run, nobody closes.
        let w = Scenario::new(Tool::WriteLat, Role::Server, false, Mode::Iterations);
        let mut want = lat_setup(true);
        want.extend(RDMA_CONNECT);
        want.extend([S::Run { size: None }, S::Exit]);
        assert_eq!(steps(&w), want);
        // read_lat: the server closes at once and waits there for the client.
        let r = Scenario::new(Tool::ReadLat, Role::Server, false, Mode::AllSizes);
        let ch = choreography(&r);
        assert_eq!(ch.last().unwrap().step, S::Close);
        assert!(ch.last().unwrap().waits_for_peer_run);
        assert!(!ch.iter().any(|e| matches!(e.step, S::Run { .. })));
        let rc = steps(&r.peer());
        assert_eq!(rc.iter().filter(|x| matches!(x, S::Run { .. })).count(), 23);
        // atomic_lat -a runs once.
        let a = Scenario::new(Tool::AtomicLat, Role::Client, false, Mode::AllSizes);
        assert_eq!(
            steps(&a)
                .iter()
                .filter(|x| matches!(x, S::Run { .. }))
                .count(),
            1
        );
        // send_lat: barrier before each size, close at the end.
        let s = Scenario::new(Tool::SendLat, Role::Client, false, Mode::AllSizes);
        let st = steps(&s);
        assert_eq!(
            st.iter()
                .filter(|x| **x == S::Barrier(B::BeforeRun))
                .count(),
            23
        );
        assert_eq!(st.last(), Some(&S::Close));
        assert!(!st.contains(&S::Barrier(B::LatPrelude)));
    }

    #[test]
    fn step_names_for_errors() {
        assert_eq!(
            S::Keys {
                qp: 1,
                round: First
            }
            .to_string(),
            "key message for QP 1"
        );
        assert_eq!(
            S::Barrier(B::AfterRtr).to_string(),
            "key message (barrier after RTR)"
        );
    }
}
