//! One rank of a fabric run (feature `mpi`): set-up allgather of endpoint
//! records, then per step: rank 0 says go (with the ranks to skip), every
//! rank runs its pairs (one thread per pair, each the pair tool itself over
//! an [`MpiLink`]), sends its results to rank 0, which prints, streams the
//! JSON and decides the next step. Every wait is bounded; a rank that stops
//! answering is reported by rank 0, which then ends the job (MPI_Abort, so no
//! rank is left running) with a non-zero status.

use super::alive::{self, Silence};
use super::comm;
use super::gpu_pick;
use super::json_out::{JsonStream, RankInfo};
use super::mpi_link::MpiLink;
use super::opts::FabricOpts;
use super::pattern::{Plan, Role};
use super::report::Report;
use super::result::{parse_tool_json, PairResult};
use crate::cli::params::{Kind, Mode, Params};
use crate::ctrl::link;
use crate::ctrl::Role as CtrlRole;
use crate::explain::{gpu_topo::Topo, sysfs::SysRoot};
use crate::gpu::GpuSelect;
use crate::run::stop;
use crate::tool::{self, setup::resources::Endpoint, Out};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const TAG_GO: i32 = 1;
const TAG_RESULT: i32 = 2;
/// A rank's beat to rank 0 while a step runs (`alive`).
const TAG_ALIVE: i32 = 3;
/// Rank 0's word that a rank stopped answering (its body: the rank).
const TAG_GONE: i32 = 4;
/// Rank 0's beat to the others while it gathers a step: a rank waiting for
/// the next go (or running a step) knows rank 0 is still there, and ends
/// within `--timeout` of rank 0's loss rather than after a step's bounds.
const TAG_ROOT_ALIVE: i32 = 5;

/// Size of one rank's set-up record.
const RECORD: usize = 256;

/// Rank 0's word at the start of each step (and at the end).
#[derive(Serialize, Deserialize, Debug)]
struct Go {
    step: usize,
    end: bool,
    /// Ranks to leave out (gone, or failed at set-up).
    skip: Vec<usize>,
}

/// A rank's results of one step, for rank 0.
#[derive(Serialize, Deserialize, Debug)]
struct StepResults {
    step: usize,
    units: Option<String>,
    pairs: Vec<PairResult>,
}

/// The set-up record: who this rank is and what it opened (the endpoint
/// directory; QPN/PSN/rkey/vaddr of each pair's QPs go in the pair tool's own
/// key messages over the pair's link).
#[derive(Serialize, Deserialize, Debug, Clone, Default)]
struct Record {
    host: String,
    device: String,
    /// `--use_cuda`: the GPU this rank's buffers live on (`cuda1`, or a bus id).
    #[serde(default)]
    gpu: String,
    lid: u16,
    gid: String,
    error: Option<String>,
}

/// `index:xxxx:xxxx:...` (the GID as 8 hex groups).
fn gid_text(index: u32, g: &[u8; 16]) -> String {
    let groups: Vec<String> = g
        .chunks(2)
        .map(|c| format!("{:02x}{:02x}", c[0], c[1]))
        .collect();
    format!("[{index}] {}", groups.join(":"))
}

fn never() -> bool {
    false
}

fn hostname() -> String {
    let mut b = [0u8; 256];
    // SAFETY: `b` is a writable buffer of the length passed.
    let rc = unsafe { libc::gethostname(b.as_mut_ptr().cast(), b.len()) };
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    match rc {
        0 => String::from_utf8_lossy(&b[..end]).into_owned(),
        _ => comm::processor_name(),
    }
}

/// Packs `r` into a fixed-size record (JSON, NUL-padded; long errors cut).
fn pack(r: &Record) -> Vec<u8> {
    let mut r = r.clone();
    loop {
        let v = serde_json::to_vec(&r).unwrap_or_default();
        if v.len() <= RECORD {
            let mut out = v;
            out.resize(RECORD, 0);
            return out;
        }
        match &mut r.error {
            Some(e) if e.len() > 8 => {
                let cut = e
                    .char_indices()
                    .nth(e.chars().count() / 2)
                    .map_or(0, |c| c.0);
                e.truncate(cut);
            }
            _ => {
                r.host.truncate(64);
                r.device.truncate(32);
                r.error = r.error.take().map(|_| "error (text too long)".into());
            }
        }
    }
}

fn unpack(b: &[u8]) -> Record {
    let end = b.iter().position(|&c| c == 0).unwrap_or(b.len());
    serde_json::from_slice(&b[..end]).unwrap_or(Record {
        error: Some("unreadable set-up record".into()),
        ..Record::default()
    })
}

/// Bounds of the waits, from `--timeout` (and `-D`).
#[derive(Clone, Copy)]
struct Bounds {
    step: Duration,
    /// A wait over the peer's measurement.
    run: Duration,
}

impl Bounds {
    fn of(p: &Params) -> Bounds {
        let step = Duration::from_secs(p.ctrl_timeout_s.max(1));
        let d = match p.mode {
            Mode::Duration { secs, .. } => Duration::from_secs(secs as u64),
            Mode::Iterations => Duration::ZERO,
        };
        Bounds {
            step,
            run: step + d,
        }
    }
    /// How long rank 0 waits for a step's results (and a rank for the next go).
    fn step_results(&self) -> Duration {
        self.run + 2 * self.step
    }
}

/// This rank's index among the ranks with its host name (the node-local rank).
fn local_rank(hosts: &[String], me: usize) -> usize {
    hosts[..me].iter().filter(|h| **h == hosts[me]).count()
}

/// `-d auto`: the node-local rank (its index among the ranks with its host name)
/// takes the host's i-th device by name. More local ranks than devices is an
/// error, not a silent share: one rank per NIC is the point of the mode.
fn auto_device(p: &mut Params, hosts: &[String], me: usize) -> Result<(), String> {
    if p.ib_dev.as_deref() != Some("auto") {
        return Ok(());
    }
    let local = local_rank(hosts, me);
    let devs = crate::verbs::devices().map_err(|e| format!("-d auto: {e}"))?;
    let mut names: Vec<String> = devs.into_iter().map(|d| d.name).collect();
    names.sort();
    p.ib_dev = Some(pick_auto(&names, local, &hosts[me])?);
    Ok(())
}

/// `--use_cuda auto|I,J,…`: this rank's GPU (`gpu_pick`), in place of the GPU 0 that
/// stood in while the flags were checked. `auto` reads the topology from `/sys`.
fn auto_gpu(p: &mut Params, o: &FabricOpts, hosts: &[String], me: usize) -> Result<(), String> {
    let (Some(pick), Some(g)) = (&o.gpu, p.gpu.as_mut()) else {
        return Ok(());
    };
    let local = local_rank(hosts, me);
    let nic = match &p.ib_dev {
        Some(d) => d.clone(),
        // No -d: the device Endpoint::open takes, the first libibverbs lists.
        None => crate::verbs::devices()
            .map_err(|e| format!("--use_cuda: {e}"))?
            .into_iter()
            .next()
            .map(|d| d.name)
            .ok_or_else(|| format!("--use_cuda: no RDMA device on {}", hosts[me]))?,
    };
    let topo = Topo::read(&SysRoot::default());
    g.select = gpu_pick::choose(pick, local, &hosts[me], &nic, &topo)?;
    Ok(())
}

/// A GPU as the reports name it: `cuda1`, or its PCI bus id.
fn gpu_text(g: &GpuSelect) -> String {
    match g {
        GpuSelect::Index(i) => format!("cuda{i}"),
        GpuSelect::BusId(b) => b.clone(),
    }
}

/// The `local`-th of the host's sorted device `names`, or why not.
fn pick_auto(names: &[String], local: usize, host: &str) -> Result<String, String> {
    match names.get(local) {
        Some(n) => Ok(n.clone()),
        None if names.is_empty() => Err(format!("-d auto: no RDMA device on {host}")),
        None => Err(format!(
            "-d auto: local rank {local} on {host}, but it has {} device(s) ({}); start at most {} rank(s) per host, or name one with -d NAME",
            names.len(),
            names.join(","),
            names.len()
        )),
    }
}

/// Enters network namespace `ns` (a name under /var/run/netns, or a path):
/// this thread and the threads it starts from now on (the pairs); MPI's own
/// threads stay where they were.
fn enter_netns(ns: &str) -> Result<(), String> {
    use std::os::fd::AsRawFd;
    let path = if ns.contains('/') {
        PathBuf::from(ns)
    } else {
        Path::new("/var/run/netns").join(ns)
    };
    let f = std::fs::File::open(&path)
        .map_err(|e| {
            format!(
                "--netns {ns}: open {}: {e} (give a name made by `ip netns add`, or a namespace file's path)",
                path.display()
            )
        })?;
    // SAFETY: `f` is an open namespace file for the call's duration.
    let rc = unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc != 0 {
        return Err(format!(
            "--netns {ns}: setns: {} (needs CAP_SYS_ADMIN)",
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// Runs this rank; returns the exit status (rank 0's is the run's).
pub fn run(o: FabricOpts, mut p: Params) -> i32 {
    stop::install();
    let t0 = Instant::now();
    let mpi = match comm::init() {
        Ok(m) => m,
        Err(e) => {
            eprintln!("rdmaperf fabric: {e}");
            return 1;
        }
    };
    let (me, n) = (mpi.rank, mpi.size);
    let t_init = t0.elapsed();
    let b = Bounds::of(&p);
    let plan = match Plan::new(o.pattern.clone(), n, o.direction, o.serial) {
        Ok(pl) => pl,
        Err(e) => {
            if me == 0 {
                eprintln!("rdmaperf fabric: {e}");
            }
            return 2;
        }
    };
    if o.direction == super::pattern::Direction::Bi {
        p.duplex = true;
    }
    let recs = records(&o, &mut p, me, n, b);
    let ranks = rank_infos(&recs);
    let tmp = std::env::temp_dir().join(format!("rdmaperf-fabric-{}-{me}", std::process::id()));
    if let Err(e) = std::fs::create_dir_all(&tmp) {
        eprintln!(
            "rdmaperf fabric: rank {me}: creating {}: {e}",
            tmp.display()
        );
        comm::abort(1);
    }
    let setup = (t_init, t0.elapsed());
    let status = if me == 0 {
        let su = SetUp {
            recs: &recs,
            mpi_start: setup.0,
            total: setup.1,
        };
        root(&o, &p, &plan, &ranks, su, b, &tmp)
    } else {
        member(&p, &plan, &ranks, me, b, &tmp)
    };
    let _ = std::fs::remove_dir_all(&tmp);
    exit(status, mpi, me, b.step)
}

/// Each rank's name for the report, from the exchanged records.
fn rank_infos(recs: &[Record]) -> Vec<RankInfo> {
    recs.iter()
        .enumerate()
        .map(|(r, x)| RankInfo {
            rank: r,
            host: x.host.clone(),
            device: x.device.clone(),
            gpu: (!x.gpu.is_empty()).then(|| x.gpu.clone()),
        })
        .collect()
}

/// Ends this rank as `status` says: MPI_Finalize and the status, the whole
/// job aborted, or an exit without MPI_Finalize.
///
/// MPI_Finalize waits for every rank (Open MPI fences there): a rank lost
/// after rank 0's last look (killed once its last results were sent, or
/// while the summary printed) holds it forever wherever the launcher does
/// not end the job itself (mpirun --enable-recovery). It is bounded by
/// `--timeout`; past that this rank ends non-zero, saying why.
fn exit(status: Exit, mpi: comm::Mpi, me: usize, bound: Duration) -> i32 {
    match status {
        Exit::Done(st) => {
            // MPI_Finalize: every rank was alive at the last look.
            let late = move || {
                use std::io::Write;
                eprintln!(
                    "rdmaperf fabric: rank {me}: MPI_Finalize did not return within {bound:?} \
                     (--timeout): a rank is gone; ending with status 1"
                );
                let _ = std::io::stdout().flush();
                // _exit, not exit: MPI's exit handlers may be what is stuck.
                // SAFETY: _exit(2) ends the process at once; nothing of ours
                // needs unwinding (the report is printed and flushed).
                unsafe { libc::_exit(1) }
            };
            alive::within(bound, || drop(mpi), late);
            stop::exit_status().unwrap_or(st)
        }
        Exit::Abort(st) => comm::abort(st),
        Exit::Leave(st) => {
            use std::io::Write;
            let _ = std::io::stdout().flush();
            std::process::exit(st)
        }
    }
}

/// The set-up allgathers: host names first (for `-d auto`), then each
/// rank's endpoint record (its device, or the error that stopped it:
/// `--netns`, the device). A rank that misses an allgather ends the job.
fn records(o: &FabricOpts, p: &mut Params, me: usize, n: usize, b: Bounds) -> Vec<Record> {
    let mut rec = Record {
        host: hostname(),
        ..Record::default()
    };
    if let Some(ns) = &o.netns {
        if let Err(e) = enter_netns(ns) {
            rec.error = Some(e);
        }
    }
    // Host names first (for -d auto), then the endpoint records.
    let deadline = Instant::now() + b.step;
    let hosts = match comm::allgather(&pack(&rec), n, deadline) {
        Ok(v) => v.chunks(RECORD).map(|c| unpack(c).host).collect::<Vec<_>>(),
        Err(e) => {
            eprintln!("rdmaperf fabric: rank {me}: {e}");
            comm::abort(1);
        }
    };
    let mut gpu_known = o.gpu.is_none();
    if rec.error.is_none() {
        let picked = auto_device(p, &hosts, me).and_then(|()| auto_gpu(p, o, &hosts, me));
        gpu_known = picked.is_ok();
        match picked.and_then(|()| Endpoint::open(p).map_err(|f| f.msg)) {
            Ok(ep) => {
                rec.device = ep.ctx.name().to_owned();
                rec.lid = ep.port.lid;
                rec.gid = ep.gid.map(|g| gid_text(g.0, &g.1)).unwrap_or_default();
            }
            Err(e) => rec.error = Some(e),
        }
    }
    if rec.device.is_empty() {
        rec.device = p.ib_dev.clone().unwrap_or_else(|| "?".into());
    }
    // A rank whose pick failed has no GPU (GPU 0 only stood in while the flags were checked).
    rec.gpu = match &p.gpu {
        Some(g) if gpu_known => gpu_text(&g.select),
        Some(_) => "?".into(),
        None => String::new(),
    };
    match comm::allgather(&pack(&rec), n, Instant::now() + b.step) {
        Ok(v) => v.chunks(RECORD).map(unpack).collect(),
        Err(e) => {
            eprintln!("rdmaperf fabric: rank {me}: {e}");
            comm::abort(1);
        }
    }
}

/// What rank 0 reports of the set-up.
struct SetUp<'a> {
    recs: &'a [Record],
    mpi_start: Duration,
    total: Duration,
}

enum Exit {
    Done(i32),
    /// End the whole job (MPI_Abort): this rank cannot go on.
    Abort(i32),
    /// A rank is gone, so MPI_Finalize could wait for it forever: exit
    /// without it (the launcher then ends the job, non-zero: with Open MPI's
    /// --enable-recovery an MPI_Abort was seen to leave mpirun's status 0).
    Leave(i32),
}

/// Test hook for the fault tests (a launcher cannot aim a signal at a rank
/// mid-step reliably under QEMU TCG): `RDMAPERF_FABRIC_SIGNAL="RANK:STEP:SIG:MS"`
/// (RANK `*` = every rank, STEP from 1) makes this rank send itself signal SIG
/// MS milliseconds into step STEP: SIGKILL as a crash, SIGTERM as `scancel`,
/// SIGSTOP as a rank that stops answering.
fn signal_hook(me: usize, step: usize) {
    let Ok(spec) = std::env::var("RDMAPERF_FABRIC_SIGNAL") else {
        return;
    };
    let f: Vec<&str> = spec.split(':').collect();
    let [rank, st, sig, ms] = f[..] else { return };
    let rank_ok = rank == "*" || rank.parse::<usize>().ok() == Some(me);
    let (Ok(st), Ok(sig), Ok(ms)) = (st.parse::<usize>(), sig.parse::<i32>(), ms.parse::<u64>())
    else {
        return;
    };
    if rank_ok && st == step + 1 {
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(ms));
            // The tests time rank 0's report from this line.
            eprintln!("rdmaperf fabric: rank {me}: test hook: signal {sig} to itself in step {st}");
            // SAFETY: kill(2) on our own pid with a plain signal number.
            unsafe { libc::kill(libc::getpid(), sig) };
        });
    }
}

/// This rank's pairs of one step, each in its own thread.
fn run_step(
    me: usize,
    p: &Params,
    ranks: &[RankInfo],
    step: usize,
    roles: Vec<Role>,
    b: Bounds,
    tmp: &Path,
) -> StepResults {
    signal_hook(me, step);
    let results: Vec<(Role, Result<Option<String>, String>)> = std::thread::scope(|s| {
        let hs: Vec<_> = roles
            .into_iter()
            .map(|role| {
                let json = tmp.join(format!(
                    "step{step}-{}-{}.json",
                    role.pair.client, role.pair.server
                ));
                let q = side_params(p, ranks, &role, &json);
                let link_role = if role.client {
                    CtrlRole::Client
                } else {
                    CtrlRole::Server
                };
                let l = MpiLink::new(role.peer(), step, role.client, b.run);
                let h = s.spawn(move || {
                    link::provide(link::session(Box::new(l), link_role, b.step));
                    let r = tool::run_side(&q, Out { quiet: true }).map_err(|f| f.msg);
                    // A session the tool never took must not leak into the next pair.
                    let _ = link::take();
                    r.and_then(|()| client_json(&role, &json))
                });
                (role, h)
            })
            .collect();
        hs.into_iter()
            .map(|(role, h)| {
                (
                    role,
                    h.join()
                        .unwrap_or_else(|_| Err("the pair's thread panicked".into())),
                )
            })
            .collect()
    });
    step_results(step, results)
}

/// The pair tool's parameters for one side of a pair: the client connects to
/// its peer's label and writes its JSON to `json`; the server listens.
fn side_params(p: &Params, ranks: &[RankInfo], role: &Role, json: &Path) -> Params {
    let mut q = p.clone();
    q.loopback = false;
    if role.client {
        q.server = Some(ranks[role.peer()].label());
        q.json_file = Some(json.to_path_buf());
    } else {
        q.server = None;
        q.json_file = None;
    }
    q
}

/// After a side ran: the client's JSON text (None on the server side).
fn client_json(role: &Role, json: &Path) -> Result<Option<String>, String> {
    if role.client {
        std::fs::read_to_string(json)
            .map(Some)
            .map_err(|e| format!("the pair tool wrote no JSON ({e})"))
    } else {
        Ok(None)
    }
}

/// Each side's outcome as a pair result (a server side only when it
/// failed); the units of the last client JSON read.
fn step_results(step: usize, results: Vec<(Role, Result<Option<String>, String>)>) -> StepResults {
    let mut units = None;
    let mut pairs = Vec::new();
    for (role, r) in results {
        let side = if role.client { "" } else { "server side: " };
        match r {
            Ok(Some(text)) => match parse_tool_json(&text) {
                Ok((m, u)) => {
                    units = Some(u);
                    pairs.push(PairResult {
                        step,
                        client: role.pair.client,
                        server: role.pair.server,
                        ok: Some(m),
                        error: None,
                    });
                }
                Err(e) => pairs.push(PairResult::failed(step, role.pair, e)),
            },
            Ok(None) => {}
            Err(e) => pairs.push(PairResult::failed(step, role.pair, format!("{side}{e}"))),
        }
    }
    StepResults { step, units, pairs }
}

fn send_json<T: Serialize>(dest: usize, tag: i32, v: &T, within: Duration) -> bool {
    let bytes = serde_json::to_vec(v).unwrap_or_default();
    comm::send(dest, tag, &bytes, Instant::now() + within, never).is_ok()
}

/// Runs `f` (this rank's pairs of `step`) while a thread of its own beats
/// to rank 0 every `alive::beat_period` and takes rank 0's word of ranks
/// gone (the pair links to them then give up). Never inside a pair's
/// measured loop: the beats are MPI calls of this other thread, under the
/// one MPI mutex the loops never take.
///
/// It also takes rank 0's beats into `root_seen`; rank 0 silent for
/// `--timeout` is named gone here, so a pair with it gives up at once.
fn beating<T>(step: usize, b: Bounds, root_seen: &RootSeen, f: impl FnOnce() -> T) -> T {
    use std::sync::atomic::{AtomicBool, Ordering};
    let done = AtomicBool::new(false);
    let period = alive::beat_period(b.step);
    std::thread::scope(|s| {
        s.spawn(|| {
            // The first beat after one period: the go started the clock, and
            // steps shorter than that cost rank 0 no beat at all.
            let mut next = Instant::now() + period;
            while !done.load(Ordering::Acquire) {
                while let Ok((_, m)) = comm::recv(Some(0), TAG_GONE, Instant::now(), never) {
                    if let Ok(r) = serde_json::from_slice::<usize>(&m) {
                        alive::mark_gone(r);
                    }
                }
                if root_seen.silent().is_some() {
                    alive::mark_gone(0);
                }
                if Instant::now() >= next {
                    let _ = send_json(0, TAG_ALIVE, &step, period);
                    next = Instant::now() + period;
                }
                std::thread::sleep(Duration::from_millis(10));
            }
        });
        let out = f();
        done.store(true, Ordering::Release);
        out
    })
}

/// When a member last heard from rank 0 (its go or its beats), shared by
/// the wait for the go and the thread that beats during a step.
struct RootSeen {
    last: std::sync::Mutex<Instant>,
    timeout: Duration,
}

impl RootSeen {
    fn new(timeout: Duration) -> RootSeen {
        RootSeen {
            last: std::sync::Mutex::new(Instant::now()),
            timeout,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Instant> {
        // A poisoned lock only means a thread panicked holding it.
        self.last.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A sign of life from rank 0 now (its go).
    fn heard(&self) {
        *self.lock() = Instant::now();
    }

    /// Takes rank 0's beats that arrived; how long it has been silent when
    /// that is past `--timeout` (`alive::past`), else None.
    fn silent(&self) -> Option<Duration> {
        let mut last = self.lock();
        while comm::recv(Some(0), TAG_ROOT_ALIVE, Instant::now(), never).is_ok() {
            *last = Instant::now();
        }
        alive::past(*last, Instant::now(), self.timeout)
    }
}

/// How often the wait for the go looks at rank 0's beats.
const GO_SLICE: Duration = Duration::from_millis(100);

/// Rank 0's next word, waiting at most `wait` (a step's bounds), and at
/// most `--timeout` past rank 0's last sign of life: its go or its beats
/// ([`TAG_ROOT_ALIVE`]). A rank 0 gone ends this rank non-zero without
/// MPI_Finalize (which would wait for it).
fn next_go(
    me: usize,
    ranks: &[RankInfo],
    b: Bounds,
    wait: Duration,
    seen: &RootSeen,
) -> Result<Go, Exit> {
    let start = Instant::now();
    loop {
        if let Ok((_, m)) = comm::recv(Some(0), TAG_GO, Instant::now() + GO_SLICE, never) {
            seen.heard();
            return serde_json::from_slice(&m).map_err(|e| {
                eprintln!("rdmaperf fabric: rank {me}: unreadable message from rank 0: {e}");
                Exit::Abort(1)
            });
        }
        if let Some(quiet) = seen.silent() {
            eprintln!(
                "rdmaperf fabric: rank {me} ({}): nothing from rank 0 for {:.1} s (--timeout {} s): it is gone; ending the job",
                ranks[me].label(),
                quiet.as_secs_f64(),
                b.step.as_secs()
            );
            return Err(Exit::Leave(1));
        }
        if start.elapsed() >= wait {
            eprintln!(
                "rdmaperf fabric: rank {me} ({}): rank 0 did not answer within {:?}; ending the job",
                ranks[me].label(),
                wait
            );
            return Err(Exit::Abort(1));
        }
    }
}

fn member(p: &Params, plan: &Plan, ranks: &[RankInfo], me: usize, b: Bounds, tmp: &Path) -> Exit {
    // The first go comes once rank 0 has printed its header; later ones after
    // the slowest pair of the step before.
    let mut wait = b.step_results() + b.step;
    let seen = RootSeen::new(b.step);
    loop {
        let go = match next_go(me, ranks, b, wait, &seen) {
            Ok(g) => g,
            Err(e) => return e,
        };
        if go.end {
            // `skip` of the last word: the ranks that are gone.
            if go.skip.iter().any(|&r| r != me) {
                return Exit::Leave(1);
            }
            return Exit::Done(0);
        }
        let roles = if go.skip.contains(&me) {
            Vec::new()
        } else {
            plan.roles(go.step, me)
                .into_iter()
                .filter(|r| !go.skip.contains(&r.peer()))
                .collect()
        };
        let res = beating(go.step, b, &seen, || {
            run_step(me, p, ranks, go.step, roles, b, tmp)
        });
        if !send_json(0, TAG_RESULT, &res, b.step) {
            eprintln!(
                "rdmaperf fabric: rank {me}: rank 0 did not take the results of step {}",
                go.step + 1
            );
            return Exit::Abort(1);
        }
        wait = b.step_results() + b.step;
    }
}

/// Who no longer takes part: `skip` is sent with each go (not paired:
/// gone, or failed at set-up), `gone` stopped answering.
struct Roster {
    skip: Vec<usize>,
    gone: Vec<usize>,
}

impl Roster {
    /// The ranks besides rank 0 still answering.
    fn live(&self, n: usize) -> Vec<usize> {
        (1..n).filter(|r| !self.gone.contains(r)).collect()
    }
    /// Rank `r` stopped answering: it is skipped, and the run ends with this step.
    fn lose(&mut self, r: usize) {
        if !self.skip.contains(&r) {
            self.skip.push(r);
        }
        self.gone.push(r);
    }
}

/// Rank 0: the banner, then each step (go, run and gather, one row per
/// pair), then the summary and the last word to the others.
fn root(
    o: &FabricOpts,
    p: &Params,
    plan: &Plan,
    ranks: &[RankInfo],
    su: SetUp,
    b: Bounds,
    tmp: &Path,
) -> Exit {
    let n = ranks.len();
    let steps = plan.steps();
    let mut roster = Roster {
        skip: banner(p, plan, ranks, &su),
        gone: Vec::new(),
    };
    let mut stopped: Option<String> = None;
    let json = json_stream(o, p, plan, ranks, b);
    let bw_units = if p.report_gbits { "Gb/sec" } else { "MB/sec" };
    let mut report = Report::new(ranks, p.tool.kind == Kind::Lat, bw_units, steps, json);
    print!("{}", report.header());
    for step in 0..steps {
        if stop::requested() {
            stopped = Some(format!("interrupted by signal {}", stop::signal()));
            break;
        }
        let go = Go {
            step,
            end: false,
            skip: roster.skip.clone(),
        };
        for r in roster.live(n) {
            if !send_json(r, TAG_GO, &go, b.step) {
                roster.skip.push(r);
                roster.gone.push(r);
            }
        }
        let mine = if roster.skip.contains(&0) {
            Vec::new()
        } else {
            plan.roles(step, 0)
                .into_iter()
                .filter(|r| !roster.skip.contains(&r.peer()))
                .collect()
        };
        let (units, got) = gather(step, p, ranks, mine, b, tmp, &mut roster);
        let rows = rows_of(step, plan, &got, &roster.skip, ranks);
        print!("{}", report.step(step, rows, units.as_deref()));
        if !roster.gone.is_empty() {
            // A rank lost ends the run with this step: the job then ends
            // within --timeout of the loss (named after that much silence),
            // non-zero, as a launcher that kills the job on a lost rank does.
            break;
        }
    }
    close(o, plan, ranks, report, stopped, &roster.gone, b)
}

/// The run's banner and each rank's set-up line; the ranks that failed at
/// set-up (skipped from the start).
fn banner(p: &Params, plan: &Plan, ranks: &[RankInfo], su: &SetUp) -> Vec<usize> {
    let n = ranks.len();
    let steps = plan.steps();
    println!(
        "rdmaperf fabric {}: pattern {}, direction {}, {}, {n} ranks, {steps} steps",
        p.tool.name(),
        plan.pattern.name(),
        plan.direction.name(),
        if plan.serial { "serial" } else { "concurrent" }
    );
    println!(
        "  set-up: MPI start {:.2} s, devices opened and endpoint records exchanged {:.2} s",
        su.mpi_start.as_secs_f64(),
        (su.total - su.mpi_start).as_secs_f64()
    );
    let mut skip = Vec::new();
    for (r, x) in su.recs.iter().enumerate() {
        match &x.error {
            None => println!(
                "  rank {r:>4}: {}  lid {} gid {}",
                ranks[r].label(),
                x.lid,
                x.gid
            ),
            Some(e) => {
                println!("  rank {r:>4}: {}  FAILED at set-up: {e}", ranks[r].label());
                skip.push(r);
            }
        }
    }
    skip
}

/// `--out_json_file`'s stream, opened with the run's parameters (a path
/// that cannot be created is said, and the run goes on without it).
fn json_stream(
    o: &FabricOpts,
    p: &Params,
    plan: &Plan,
    ranks: &[RankInfo],
    b: Bounds,
) -> Option<JsonStream> {
    let params = serde_json::json!({
        "tool": p.tool.name(), "pattern": plan.pattern.name(), "direction": plan.direction.name(),
        "serial": plan.serial, "ranks": ranks.len(), "steps": plan.steps(), "tolerance_pct": o.tolerance_pct,
        "expect": {"bw": o.expect.bw, "msgrate": o.expect.msgrate, "lat": o.expect.lat},
        "timeout_s": b.step.as_secs(), "tool_args": o.tool_args,
    });
    let f = p.json_file.as_ref()?;
    match JsonStream::create(f, &params, ranks) {
        Ok(j) => Some(j),
        Err(e) => {
            eprintln!(
                "rdmaperf fabric: creating {}: {e}; check the path given to --out_json_file",
                f.display()
            );
            None
        }
    }
}

/// Runs rank 0's own pairs of `step` while gathering the other ranks'
/// results; the units and every result, rank 0's first.
fn gather(
    step: usize,
    p: &Params,
    ranks: &[RankInfo],
    mine: Vec<Role>,
    b: Bounds,
    tmp: &Path,
    roster: &mut Roster,
) -> (Option<String>, Vec<PairResult>) {
    let n = ranks.len();
    // Rank 0's own pairs run in a thread of their own while this one
    // collects the others' results and watches their beats: a rank
    // silent for --timeout is named at once, whatever rank 0's pairs do.
    let waiting: Vec<usize> = roster.live(n);
    let mut c = Collecting {
        watch: Silence::new(&waiting, Instant::now(), b.step),
        waiting,
        units: None,
        got: Vec::new(),
    };
    let own = std::thread::scope(|s| {
        let h = s.spawn(|| run_step(0, p, ranks, step, mine, b, tmp));
        // The bound for a rank that beats but never reports: the step's
        // results bound from the end of rank 0's own pairs (as before).
        let mut own_end: Option<Instant> = None;
        let period = alive::beat_period(b.step);
        let mut next_beat = Instant::now();
        loop {
            c.poll(step, ranks, b, roster);
            if Instant::now() >= next_beat {
                // Rank 0's beat to the others (they bound their wait by it).
                for r in roster.live(n) {
                    let _ = send_json(r, TAG_ROOT_ALIVE, &step, Duration::from_millis(100));
                }
                next_beat = Instant::now() + period;
            }
            if own_end.is_none() && h.is_finished() {
                own_end = Some(Instant::now());
            }
            match own_end {
                Some(_) if c.waiting.is_empty() => break,
                Some(e) if Instant::now() >= e + b.step_results() => break,
                _ => std::thread::sleep(Duration::from_millis(10)),
            }
        }
        h.join().unwrap_or_else(|_| StepResults {
            step,
            units: None,
            pairs: Vec::new(),
        })
    });
    for &r in &c.waiting {
        eprintln!(
            "rdmaperf fabric: rank {r} ({}) stopped answering in step {}: no results within {:?}; the run ends with this step",
            ranks[r].label(),
            step + 1,
            b.step_results()
        );
        roster.lose(r);
    }
    let units = own.units.clone().or(c.units);
    // Rank 0's own results first, the others' after (as they arrived).
    (units, own.pairs.into_iter().chain(c.got).collect())
}

/// Rank 0's view of the other ranks during a step: who has yet to report,
/// their beats, and what they sent.
struct Collecting {
    waiting: Vec<usize>,
    watch: Silence,
    units: Option<String>,
    got: Vec<PairResult>,
}

impl Collecting {
    /// Takes in every result and beat that has arrived; a rank silent for
    /// --timeout is named and no longer waited for.
    fn poll(&mut self, step: usize, ranks: &[RankInfo], b: Bounds, roster: &mut Roster) {
        while let Ok((from, m)) = comm::recv(None, TAG_RESULT, Instant::now(), never) {
            let Ok(sr) = serde_json::from_slice::<StepResults>(&m) else {
                continue;
            };
            if sr.step != step {
                continue; // a late answer of an earlier step
            }
            self.waiting.retain(|&r| r != from);
            self.watch.done(from);
            self.units = self.units.take().or(sr.units);
            self.got.extend(sr.pairs);
        }
        while let Ok((from, _)) = comm::recv(None, TAG_ALIVE, Instant::now(), never) {
            self.watch.heard(from, Instant::now());
        }
        for (r, quiet) in self.watch.silent(Instant::now()) {
            silent(r, quiet, step, ranks, b, roster);
            self.waiting.retain(|&w| w != r);
        }
    }
}

/// Rank `r` sent nothing for `--timeout`: said at once, skipped from now
/// on, and the others' pairs with it told to give up (their links look).
fn silent(
    r: usize,
    quiet: Duration,
    step: usize,
    ranks: &[RankInfo],
    b: Bounds,
    roster: &mut Roster,
) {
    eprintln!(
        "rdmaperf fabric: rank {r} ({}) stopped answering in step {}: nothing from it for {:.1} s (--timeout {} s); the run ends with this step",
        ranks[r].label(),
        step + 1,
        quiet.as_secs_f64(),
        b.step.as_secs()
    );
    alive::mark_gone(r);
    roster.lose(r);
    for o in roster.live(ranks.len()) {
        let _ = send_json(o, TAG_GONE, &r, Duration::from_secs(1));
    }
}

/// One row per pair of the step: a client's result wins over its
/// server's error; a pair nobody reported failed with its rank.
fn rows_of(
    step: usize,
    plan: &Plan,
    got: &[PairResult],
    skip: &[usize],
    ranks: &[RankInfo],
) -> Vec<PairResult> {
    let mut rows: Vec<PairResult> = Vec::new();
    for pair in plan.pairs(step) {
        let of = |r: &&PairResult| r.client == pair.client && r.server == pair.server;
        let ok = got.iter().filter(of).find(|r| r.ok.is_some());
        let err = got.iter().filter(of).find(|r| r.ok.is_none());
        let row = match (ok, err) {
            (Some(r), _) => r.clone(),
            (None, Some(r)) => r.clone(),
            (None, None) => {
                let why = [pair.client, pair.server]
                    .iter()
                    .find(|r| skip.contains(r))
                    .map(|&r| {
                        format!(
                            "rank {r} ({}) is gone or failed at set-up",
                            ranks[r].label()
                        )
                    })
                    .unwrap_or_else(|| "no result from either side".into());
                PairResult::failed(step, pair, why)
            }
        };
        rows.push(row);
    }
    rows
}

/// The summary, the last go (end) to the ranks still answering, and the
/// exit: a rank gone makes the job end non-zero.
fn close(
    o: &FabricOpts,
    plan: &Plan,
    ranks: &[RankInfo],
    report: Report,
    mut stopped: Option<String>,
    gone: &[usize],
    b: Bounds,
) -> Exit {
    if stopped.is_none() && !gone.is_empty() {
        stopped = Some(format!(
            "rank(s) stopped answering: {}",
            gone.iter()
                .map(|r| format!("{r} ({})", ranks[*r].label()))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let per_rank = matches!(
        plan.pattern,
        super::pattern::Pattern::AllToAll | super::pattern::Pattern::Incast(_)
    );
    let end = report.finish(o, stopped, per_rank);
    print!("{}", end.text);
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let bye = Go {
        step: plan.steps(),
        end: true,
        skip: gone.to_vec(),
    };
    for r in (1..ranks.len()).filter(|r| !gone.contains(r)) {
        let _ = send_json(r, TAG_GO, &bye, b.step);
    }
    let st = stop::exit_status().unwrap_or(end.status);
    if !gone.is_empty() {
        Exit::Leave(st.max(1))
    } else {
        Exit::Done(st)
    }
}

#[cfg(test)]
mod tests {
    use super::pick_auto;

    #[test]
    fn auto_device_is_the_local_index_or_a_clear_error() {
        let names: Vec<String> = ["mlx5_0", "mlx5_1"].map(String::from).to_vec();
        assert_eq!(pick_auto(&names, 0, "h").unwrap(), "mlx5_0");
        assert_eq!(pick_auto(&names, 1, "h").unwrap(), "mlx5_1");
        let e = pick_auto(&names, 2, "h").unwrap_err();
        assert!(
            e.contains("-d auto")
                && e.contains("2 device(s) (mlx5_0,mlx5_1)")
                && e.contains("-d NAME"),
            "{e}"
        );
        assert!(pick_auto(&[], 0, "h")
            .unwrap_err()
            .contains("no RDMA device on h"));
    }
}
