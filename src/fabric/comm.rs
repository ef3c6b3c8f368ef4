//! MPI for the fabric mode (feature `mpi`), through rsmpi: start-up, the
//! set-up allgather, and tagged point-to-point messages, every wait bounded by
//! a deadline (non-blocking calls polled, never a blocking wait on a peer that
//! may be gone). Errors return instead of aborting (MPI_ERRORS_RETURN), so a
//! dead rank shows as a timeout that rank 0 can report.
//!
//! Threads: the pair links of one rank run in several threads; every MPI call
//! goes through one mutex, which is what MPI_THREAD_SERIALIZED asks for. No
//! MPI call is made inside a measured loop: the pair tools call the link only
//! between their steps.

use mpi::collective::CommunicatorCollectives;
use mpi::point_to_point::{Destination, MatchedReceiveVec, Source};
use mpi::raw::AsRaw;
use mpi::request::StaticScope;
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::Threading;
use std::sync::{Mutex, MutexGuard, OnceLock};
use std::thread;
use std::time::{Duration, Instant};

/// The world communicator, only ever used under the mutex.
struct World(SimpleCommunicator);

// SAFETY: MPI was initialised with at least MPI_THREAD_SERIALIZED (checked in
// `init`), and the handle is only used while `COMM`'s mutex is held, so no two
// threads make MPI calls at the same time, as that level requires.
unsafe impl Send for World {}

static COMM: OnceLock<Mutex<World>> = OnceLock::new();

/// Poll interval of a bounded wait.
const POLL: Duration = Duration::from_micros(200);

/// Why a message did not go through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommError {
    TimedOut,
    Stopped,
}

/// Keeps MPI up; dropping it finalises MPI.
pub struct Mpi {
    _universe: mpi::environment::Universe,
    pub rank: usize,
    pub size: usize,
}

fn world() -> MutexGuard<'static, World> {
    // A poisoned lock only means a thread panicked while holding it; the
    // handle itself is still valid.
    match COMM.get().expect("fabric::comm::init first").lock() {
        Ok(g) => g,
        Err(p) => p.into_inner(),
    }
}

/// Starts MPI (MPI_Init_thread asking for MPI_THREAD_MULTIPLE, needing at
/// least SERIALIZED) and makes errors return to us.
pub fn init() -> Result<Mpi, String> {
    let (universe, level) = mpi::initialize_with_threading(Threading::Multiple)
        .ok_or("MPI is already initialised in this process; run one rdmaperf fabric per process")?;
    if level < Threading::Serialized {
        return Err(format!(
            "the MPI library gives thread level {level:?}; fabric needs MPI_THREAD_SERIALIZED or \
             more (Open MPI and MPICH give it by default); use another MPI build"
        ));
    }
    let w = universe.world();
    // SAFETY: `w` is the live MPI_COMM_WORLD handle of the just-initialised
    // MPI and RSMPI_ERRORS_RETURN is MPI's predefined handler constant.
    unsafe {
        mpi::ffi::MPI_Comm_set_errhandler(w.as_raw(), mpi::ffi::RSMPI_ERRORS_RETURN);
    }
    let (rank, size) = (w.rank() as usize, w.size() as usize);
    let _ = COMM.set(Mutex::new(World(w)));
    Ok(Mpi {
        _universe: universe,
        rank,
        size,
    })
}

/// Aborts the whole job (every rank) with `code`.
pub fn abort(code: i32) -> ! {
    let w = world();
    w.0.abort(code)
}

/// This node's name as MPI knows it.
pub fn processor_name() -> String {
    mpi::environment::processor_name().unwrap_or_else(|_| "?".into())
}

fn wait_step(deadline: Instant, stop: fn() -> bool) -> Result<(), CommError> {
    if stop() {
        return Err(CommError::Stopped);
    }
    if Instant::now() >= deadline {
        return Err(CommError::TimedOut);
    }
    thread::sleep(POLL);
    Ok(())
}

/// Sends `data` to `dest` with `tag`, waiting at most until `deadline`.
pub fn send(
    dest: usize,
    tag: i32,
    data: &[u8],
    deadline: Instant,
    stop: fn() -> bool,
) -> Result<(), CommError> {
    // The request may outlive this call (a peer that never receives): the
    // buffer is leaked into the request and taken back once it completed.
    let buf: &'static mut [u8] = Box::leak(data.to_vec().into_boxed_slice());
    let ptr: *mut [u8] = buf;
    let mut req = {
        let w = world();
        w.0.process_at_rank(dest as i32)
            .immediate_send_with_tag(StaticScope, &*buf, tag)
    };
    loop {
        let r = {
            let _w = world();
            req.test()
        };
        match r {
            Ok(_) => {
                // SAFETY: `ptr` came from Box::leak above and the request that
                // borrowed it has completed, so nothing else refers to it.
                drop(unsafe { Box::from_raw(ptr) });
                return Ok(());
            }
            Err(r) => req = r,
        }
        if let Err(e) = wait_step(deadline, stop) {
            // SAFETY: the request stays pending inside MPI; its buffer is
            // leaked ('static), so it outlives the request whatever MPI does.
            let _ = unsafe { req.into_raw() };
            return Err(e);
        }
    }
}

/// Receives the next message with `tag` from `src` (None: any rank), waiting
/// at most until `deadline`; returns the sender and the bytes.
pub fn recv(
    src: Option<usize>,
    tag: i32,
    deadline: Instant,
    stop: fn() -> bool,
) -> Result<(usize, Vec<u8>), CommError> {
    loop {
        let got = {
            let w = world();
            let probe = match src {
                Some(r) => {
                    w.0.process_at_rank(r as i32)
                        .immediate_matched_probe_with_tag(tag)
                }
                None => w.0.any_process().immediate_matched_probe_with_tag(tag),
            };
            probe.map(|m| {
                let from = m.1.source_rank() as usize;
                let (v, _) = m.matched_receive_vec::<u8>();
                (from, v)
            })
        };
        if let Some(m) = got {
            return Ok(m);
        }
        wait_step(deadline, stop)?;
    }
}

/// MPI_Allgather of one fixed-size record per rank, bounded by `deadline`;
/// on timeout the job is aborted (at set-up every rank must be there).
pub fn allgather(mine: &[u8], size: usize, deadline: Instant) -> Result<Vec<u8>, String> {
    let send: &'static [u8] = Box::leak(mine.to_vec().into_boxed_slice());
    let recv: &'static mut [u8] = Box::leak(vec![0u8; mine.len() * size].into_boxed_slice());
    let rptr: *mut [u8] = recv;
    let mut req = {
        let w = world();
        w.0.immediate_all_gather_into(StaticScope, send, recv)
    };
    loop {
        let r = {
            let _w = world();
            req.test()
        };
        match r {
            Ok(_) => break,
            Err(r) => req = r,
        }
        if Instant::now() >= deadline {
            // SAFETY: as in `send`: the leaked buffers outlive the request.
            let _ = unsafe { req.into_raw() };
            return Err("the set-up allgather of endpoint records did not complete: a rank did not start or is stuck before it".into());
        }
        thread::sleep(POLL);
    }
    // SAFETY: the allgather completed, so MPI no longer writes `rptr`, which
    // came from Box::leak above; reading it is then the only access.
    let out = unsafe { &*rptr }.to_vec();
    Ok(out)
}
