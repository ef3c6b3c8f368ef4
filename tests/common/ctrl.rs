//! Control-session helpers for the tests that run real sessions over
//! 127.0.0.1.

use std::net::TcpListener;
use std::time::Duration;

use rdmaperf::ctrl::wire::PeerParams;

/// How long a side waits to connect or accept: a bug shows as an error.
pub const CONNECT: Duration = Duration::from_secs(10);

/// A port nobody listens on (bound, then released).
pub fn free_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

/// An RC run's parameters, 1 QP, 1000 iterations, with the two opt-in
/// exchanges as given.
pub fn peer_params(explain: bool, compare: bool) -> PeerParams {
    PeerParams {
        conn: b'R',
        num_qps: 1,
        iters: 1000,
        reversed: false,
        data_validation: false,
        explain,
        compare,
    }
}
