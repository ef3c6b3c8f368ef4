//! The after-run exchange of `--explain` (`ctrl::after_run`): two real
//! control sessions over 127.0.0.1, each side in its own thread with its
//! own provider, meeting at the close. Both with `--explain`: each gets the
//! other's bytes, across several 512-byte frames one way and one the other;
//! one side without it: no bytes cross and the side that asked is told the
//! peer ran without; a peer that sends no parameters (stock perftest): the
//! side that asked is told so. The close handshake still happens after.

use std::net::TcpListener;
use std::thread;
use std::time::Duration;

use rdmaperf::ctrl::after_run::{self, PeerExplain};
use rdmaperf::ctrl::wire::PeerParams;
use rdmaperf::ctrl::{Channel, Dest, Listener, Session};

const CONNECT: Duration = Duration::from_secs(10);

fn params(explain: bool) -> PeerParams {
    PeerParams {
        conn: b'R',
        num_qps: 1,
        iters: 1000,
        reversed: false,
        data_validation: false,
        explain,
        compare: false,
    }
}

/// One side's set-up: its parameters (`None`: a stock peer, which sends
/// none) and, when it explains, its payload; then the version exchange.
fn side(s: &mut Session, p: Option<PeerParams>, payload: Vec<u8>) {
    if let Some(p) = p {
        s.set_local_params(p);
        if p.explain {
            after_run::provide(move || payload.clone());
        }
    }
    s.exchange_versions().unwrap();
}

fn run(
    server: Option<PeerParams>,
    client: Option<PeerParams>,
    payloads: (Vec<u8>, Vec<u8>),
) -> (Option<PeerExplain>, Option<PeerExplain>) {
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let l = Listener::bind(Some("127.0.0.1"), port).unwrap();
    let (sp, cp) = payloads;
    let h = thread::spawn(move || {
        let mut s = Session::new(l.accept(Some(CONNECT)).unwrap());
        side(&mut s, server, sp);
        s.close(&Dest::default()).unwrap();
        after_run::take()
    });
    let mut c = Session::new(Channel::connect("127.0.0.1", port, CONNECT).unwrap());
    side(&mut c, client, cp);
    c.close(&Dest::default()).unwrap();
    let theirs = after_run::take();
    (h.join().unwrap(), theirs)
}

#[test]
fn both_explain_and_each_gets_the_others() {
    let big: Vec<u8> = (0..1300u32).map(|i| (i * 7) as u8).collect();
    let small = b"{\"findings\":[]}".to_vec();
    let (srv, cli) = run(
        Some(params(true)),
        Some(params(true)),
        (big.clone(), small.clone()),
    );
    assert_eq!(srv, Some(PeerExplain::Received(small)));
    assert_eq!(cli, Some(PeerExplain::Received(big)));
}

#[test]
fn one_side_without_explain_sends_nothing_and_says_so() {
    let (srv, cli) = run(
        Some(params(false)),
        Some(params(true)),
        (Vec::new(), b"x".to_vec()),
    );
    assert_eq!(srv, None, "the server did not ask");
    assert_eq!(cli, Some(PeerExplain::NotAsked));
}

#[test]
fn a_stock_peer_has_nothing_to_give() {
    let (srv, cli) = run(None, Some(params(true)), (Vec::new(), b"x".to_vec()));
    assert_eq!(srv, None);
    assert_eq!(cli, Some(PeerExplain::Stock));
}
