//! The peer watch (`rdmaperf::run::peer`): its flags are process-wide, so it
//! is tested in its own process, not among the unit tests whose loops read them.

use rdmaperf::run::peer::{finished, gone, gone_within, PeerWatch};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

fn pair() -> (TcpStream, TcpStream) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
    (a, l.accept().unwrap().0)
}

#[test]
fn a_closed_peer_and_a_peer_that_moved_on_are_seen_a_live_one_is_not() {
    let (a, b) = pair();
    let w = PeerWatch::start(a.try_clone().unwrap());
    assert!(!gone_within(Duration::from_millis(200)), "peer alive");
    assert!(!finished());
    drop(b);
    assert!(gone_within(Duration::from_secs(5)), "peer closed");
    drop(w);
    // A new watch forgets the old verdict; the peer's next message is seen.
    let (a, b) = pair();
    let w = PeerWatch::start(a.try_clone().unwrap());
    assert!(!gone() && !finished());
    use std::io::Write;
    (&b).write_all(b"x").unwrap();
    let t = Instant::now();
    while !finished() && t.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(finished(), "the peer's message is seen");
    assert!(!gone());
    drop(w);
    assert!(!finished(), "the verdict ends with its watch");
}
