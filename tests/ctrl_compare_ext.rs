//! `rdmaperf compare` between hosts (`ctrl::compare_ext`): real control
//! sessions over 127.0.0.1. A server that knows no methods beforehand serves
//! one session per run until the client's note says `last`; each close
//! crosses the two notes (the client's method, the server's receive cost)
//! and still ends with the close handshake. Without compare on both sides
//! (a plain rdmaperf, stock perftest's empty padding) no frame crosses.

use std::net::TcpListener;
use std::thread;
use std::time::Duration;

use rdmaperf::ctrl::compare_ext::{self, Note};
use rdmaperf::ctrl::wire::PeerParams;
use rdmaperf::ctrl::{Channel, Dest, Listener, Session};

const CONNECT: Duration = Duration::from_secs(10);

fn params(compare: bool) -> PeerParams {
    PeerParams {
        conn: b'R',
        num_qps: 1,
        iters: 1000,
        reversed: false,
        data_validation: false,
        explain: false,
        compare,
    }
}

fn note(method: &str, run: u32, last: bool, cost: f64) -> Note {
    Note {
        method: method.into(),
        last,
        run,
        recv_ns_per_msg: cost,
    }
}

fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// One session on an accepted or connected channel: parameters (None: a
/// stock peer), the version exchange, the close (with the dest as key).
fn session(ch: Channel, p: Option<PeerParams>, qpn: u32) {
    let mut s = Session::new(ch);
    if let Some(p) = p {
        s.set_local_params(p);
    }
    s.exchange_versions().unwrap();
    let d = Dest {
        qpn,
        ..Dest::default()
    };
    s.close(&d).unwrap();
}

#[test]
fn the_server_serves_runs_until_the_clients_last_note() {
    let port = free_port();
    let server = thread::spawn(move || {
        let mut seen = Vec::new();
        for run in 1.. {
            let l = Listener::bind(Some("127.0.0.1"), port).unwrap();
            compare_ext::provide(note("wr-api", run, false, 10.0 * run as f64));
            session(l.accept(Some(CONNECT)).unwrap(), Some(params(true)), 1);
            let n = compare_ext::take().expect("a note").expect("a good note");
            seen.push((n.method.clone(), n.run));
            if n.last {
                return seen;
            }
        }
        unreachable!()
    });
    let methods = ["wr-api", "post-send", "wr-api", "post-send", "wr-api"];
    let mut costs = Vec::new();
    for (i, m) in methods.iter().enumerate() {
        let run = i as u32 + 1;
        compare_ext::provide(note(m, run, run == methods.len() as u32, 0.0));
        let ch = Channel::connect("127.0.0.1", port, CONNECT).unwrap();
        session(ch, Some(params(true)), 2);
        let n = compare_ext::take().expect("a note").expect("a good note");
        assert_eq!((n.method.as_str(), n.run, n.last), ("wr-api", run, false));
        costs.push(n.recv_ns_per_msg);
    }
    assert_eq!(costs, [10.0, 20.0, 30.0, 40.0, 50.0]);
    let seen = server.join().unwrap();
    let want: Vec<_> = (1..=5)
        .map(|r| (methods[r - 1].to_string(), r as u32))
        .collect();
    assert_eq!(seen, want, "every run served, then the server stopped");
}

/// Only where both sides run compare do frames cross; otherwise both end
/// with the plain close handshake (which would fail on stray bytes).
#[test]
fn no_frame_without_compare_on_both_sides() {
    for (srv, cli) in [
        (Some(params(true)), Some(params(false))),
        (Some(params(false)), Some(params(true))),
        (Some(params(true)), None),
        (None, Some(params(true))),
    ] {
        let port = free_port();
        let l = Listener::bind(Some("127.0.0.1"), port).unwrap();
        let h = thread::spawn(move || {
            compare_ext::provide(note("wr-api", 1, false, 1.0));
            session(l.accept(Some(CONNECT)).unwrap(), srv, 1);
            compare_ext::take()
        });
        compare_ext::provide(note("post-send", 1, true, 0.0));
        session(
            Channel::connect("127.0.0.1", port, CONNECT).unwrap(),
            cli,
            2,
        );
        assert_eq!(compare_ext::take(), None, "{srv:?} / {cli:?}");
        assert_eq!(h.join().unwrap(), None, "{srv:?} / {cli:?}");
    }
}
