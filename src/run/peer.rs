//! Is the peer still there? During a measurement the control connection is
//! silent, so its end of file means the peer process exited (or was killed).
//! A helper thread watches a clone of the socket and sets a flag; the run
//! loops read the flag only when they have waited a while without a
//! completion, so a healthy run pays nothing for it. (Tested in
//! `tests/peer_watch.rs`: the flags are process-wide, so not among the unit tests.)

use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

static GONE: AtomicBool = AtomicBool::new(false);
/// The peer sent its next control message: its side of the run is over.
static FINISHED: AtomicBool = AtomicBool::new(false);
/// Watches running (a wait for the verdict is pointless without one).
static ACTIVE: AtomicUsize = AtomicUsize::new(0);

/// How often the watcher wakes to see whether it should stop.
const TICK: Duration = Duration::from_millis(50);

/// The idle time after which a loop that knows the peer is gone gives up:
/// long enough for the last acknowledgements of a finished peer (a
/// latency peer closes right after its last round trip), short next to
/// `--cq-timeout`.
pub const GRACE: Duration = Duration::from_secs(1);

/// True once a watched control connection reached end of file. One relaxed load.
#[inline(always)]
pub fn gone() -> bool {
    GONE.load(Ordering::Relaxed)
}

/// True once the peer sent a control message during the run: it finished
/// its loop and moved on to the next step. One relaxed load.
#[inline(always)]
pub fn finished() -> bool {
    FINISHED.load(Ordering::Relaxed)
}

/// After a failure: wait up to `t` for the watcher's verdict (the socket's
/// end of file can trail the error completions it caused). False at once
/// when nothing is watched.
pub fn gone_within(t: Duration) -> bool {
    let start = Instant::now();
    while ACTIVE.load(Ordering::Acquire) > 0 && !gone() && start.elapsed() < t {
        std::thread::sleep(Duration::from_millis(10));
    }
    gone()
}

/// A running watch; dropping it stops and joins the thread.
pub struct PeerWatch {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl PeerWatch {
    /// Watch `sock` (a clone of the control socket) until dropped. Clears a
    /// verdict left by an earlier session.
    pub fn start(sock: TcpStream) -> PeerWatch {
        GONE.store(false, Ordering::Relaxed);
        FINISHED.store(false, Ordering::Relaxed);
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        ACTIVE.fetch_add(1, Ordering::AcqRel);
        let thread = std::thread::Builder::new()
            .name("peer-watch".into())
            .spawn(move || {
                watch(&sock, &flag);
                ACTIVE.fetch_sub(1, Ordering::AcqRel);
            });
        match thread {
            Ok(t) => PeerWatch {
                stop,
                thread: Some(t),
            },
            Err(_) => {
                // No thread, no watch: the loops fall back to --cq-timeout.
                ACTIVE.fetch_sub(1, Ordering::AcqRel);
                PeerWatch { stop, thread: None }
            }
        }
    }
}

fn watch(sock: &TcpStream, stop: &AtomicBool) {
    if sock.set_read_timeout(Some(TICK)).is_err() {
        return;
    }
    let mut b = [0u8; 1];
    while !stop.load(Ordering::Relaxed) {
        match sock.peek(&mut b) {
            Ok(0) => {
                GONE.store(true, Ordering::Relaxed);
                return;
            }
            // The peer already sent its next message: alive; look again later
            // (peek would return at once while the byte is unread).
            Ok(_) => {
                FINISHED.store(true, Ordering::Relaxed);
                std::thread::sleep(TICK)
            }
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock
                        | std::io::ErrorKind::TimedOut
                        | std::io::ErrorKind::Interrupted
                ) => {}
            Err(_) => {
                // Reset by the peer (ECONNRESET) or the like: gone too.
                GONE.store(true, Ordering::Relaxed);
                return;
            }
        }
    }
}

impl Drop for PeerWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        // The verdict belongs to this watch's run only.
        GONE.store(false, Ordering::Relaxed);
        FINISHED.store(false, Ordering::Relaxed);
    }
}
