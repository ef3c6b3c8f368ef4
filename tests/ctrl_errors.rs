//! Misbehaving peers give a named-step error: no panic, no hang.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;
use std::time::Duration;

use rdmaperf::ctrl::wire::{self, Dest};
use rdmaperf::ctrl::{Channel, CtrlError, Listener, Session};

/// Bounds every test: a bug shows up as a timeout error, not a hung test.
const STEP: Duration = Duration::from_secs(10);

mod common;
use common::ctrl::{free_port, CONNECT};

/// A raw TCP peer on 127.0.0.1 running `script` on its one connection.
fn fake_server<F>(script: F) -> (u16, thread::JoinHandle<()>)
where
    F: FnOnce(TcpStream) + Send + 'static,
{
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let h = thread::spawn(move || {
        let (s, _) = l.accept().unwrap();
        s.set_read_timeout(Some(STEP)).unwrap();
        script(s);
    });
    (port, h)
}

/// A raw TCP client of 127.0.0.1:`port` that sends `first` and then reads
/// until the server closes.
fn raw_client(port: u16, first: &'static [u8]) -> thread::JoinHandle<()> {
    thread::spawn(move || {
        let mut s = TcpStream::connect(("127.0.0.1", port)).unwrap();
        s.write_all(first).unwrap();
        s.set_read_timeout(Some(STEP)).unwrap();
        read_to_eof(&mut s);
    })
}

fn client(port: u16) -> Session {
    let mut ch = Channel::connect("127.0.0.1", port, CONNECT).unwrap();
    ch.set_step_timeout(Some(STEP));
    Session::new(ch)
}

fn read_n(s: &mut TcpStream, n: usize) -> Vec<u8> {
    let mut b = vec![0u8; n];
    s.read_exact(&mut b).unwrap();
    b
}

/// Reads until the peer closes (keeps the connection open meanwhile).
fn read_to_eof(s: &mut TcpStream) {
    let mut sink = Vec::new();
    let _ = s.read_to_end(&mut sink);
}

/// What stock perftest 4.5 does as server up to the key exchange.
fn perftest_preamble(s: &mut TcpStream) {
    read_n(s, 16);
    let mut v = [0u8; 16];
    v[..4].copy_from_slice(b"6.06");
    s.write_all(&v).unwrap();
    read_n(s, 4);
    s.write_all(&4096u32.to_be_bytes()).unwrap();
    read_n(s, 4);
    s.write_all(&64u32.to_be_bytes()).unwrap();
    read_n(s, 2);
    s.write_all(b"3\0").unwrap();
}

fn our_preamble(s: &mut Session) {
    s.exchange_versions().unwrap();
    assert_eq!(s.exchange_sysdata(4096, 64).unwrap(), (4096, 64));
    assert_eq!(s.exchange_mtu(3).unwrap(), 3);
}

fn gid_dest() -> Dest {
    Dest {
        qpn: 0x11,
        psn: 0x123456,
        gid: Some([0xfe; 16]),
        ..Dest::default()
    }
}

#[test]
fn http_server_is_not_perftest() {
    let (port, h) = fake_server(|mut s| {
        // Consume all we sent, so closing does not reset the connection.
        read_n(&mut s, 16);
        let _ = s.write_all(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
    });
    let e = client(port).exchange_versions().unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, CtrlError::Protocol { .. }), "{msg}");
    assert!(msg.starts_with("reading version from 127.0.0.1:"), "{msg}");
    assert!(msg.contains("not perftest or rdmaperf"), "{msg}");
    assert!(msg.contains("48 54 54 50"), "{msg}"); // "HTTP"
    h.join().unwrap();
}

#[test]
fn http_client_is_not_perftest() {
    let listener = Listener::bind(Some("127.0.0.1"), 0).unwrap();
    let port = listener.port();
    let h = raw_client(port, b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
    let mut ch = listener.accept(Some(CONNECT)).unwrap();
    ch.set_step_timeout(Some(STEP));
    let e = Session::new(ch).exchange_versions().unwrap_err();
    let msg = e.to_string();
    assert!(
        msg.contains("version") && msg.contains("\"GET / HTTP/1.1\\r\\n\""),
        "{msg}"
    );
    h.join().unwrap();
}

#[test]
fn short_key_message_then_close() {
    let short = wire::encode_key(&gid_dest()).unwrap()[..17].to_vec();
    let (e, msg) = after_preamble(108, short, false, |c| {
        c.hand_shake_step("key message for QP 1", &gid_dest())
            .unwrap_err()
    });
    assert!(
        matches!(
            e,
            CtrlError::PeerClosed {
                got: 17,
                expected: 108,
                ..
            }
        ),
        "{msg}"
    );
    assert!(
        msg.starts_with("reading key message for QP 1 from 127.0.0.1:"),
        "{msg}"
    );
    assert!(
        msg.contains("peer closed after 17 of 108 bytes: 30 30 30 30 3a 30 30 30 30 3a"),
        "{msg}"
    );
}

/// A stock perftest server past the preamble: it reads `read` bytes of our
/// next message, answers `reply`, then reads until we close (`then_eof`) or
/// closes at once. `call` is our side's step; its error and the text.
fn after_preamble(
    read: usize,
    reply: Vec<u8>,
    then_eof: bool,
    call: impl FnOnce(&mut Session) -> CtrlError,
) -> (CtrlError, String) {
    let (port, h) = fake_server(move |mut s| {
        perftest_preamble(&mut s);
        read_n(&mut s, read);
        s.write_all(&reply).unwrap();
        if then_eof {
            read_to_eof(&mut s);
        }
    });
    let mut c = client(port);
    our_preamble(&mut c);
    let e = call(&mut c);
    drop(c);
    h.join().unwrap();
    let msg = e.to_string();
    (e, msg)
}

/// A stock perftest server (no GID: it reads 59 bytes of our key message)
/// that answers `ours` with `reply`.
fn key_reply_error(reply: Vec<u8>, ours: &Dest) -> (CtrlError, String) {
    let ours = *ours;
    after_preamble(59, reply, true, move |c| c.hand_shake(&ours).unwrap_err())
}

#[test]
fn garbled_key_message() {
    let mut k = wire::encode_key(&Dest::default()).unwrap();
    k[12] = b'z';
    let (e, msg) = key_reply_error(k, &Dest::default());
    assert!(matches!(e, CtrlError::Protocol { .. }), "{msg}");
    assert!(msg.contains("reading key message (hand_shake #1)"), "{msg}");
    assert!(msg.contains("field qpn at byte 10"), "{msg}");
}

#[test]
fn peer_without_gid_while_we_use_one() {
    // We send 108 bytes; a perftest without GID reads 59 and answers 59. We
    // must say so at once instead of waiting for 49 more bytes.
    let (_, msg) = key_reply_error(wire::encode_key(&Dest::default()).unwrap(), &gid_dest());
    assert!(msg.contains("59-byte key message without GID"), "{msg}");
    assert!(msg.contains("-x"), "{msg}");
}

#[test]
fn peer_with_gid_while_we_use_none() {
    let (_, msg) = key_reply_error(wire::encode_key(&gid_dest()).unwrap(), &Dest::default());
    assert!(msg.contains("108-byte key message with GID"), "{msg}");
}

#[test]
fn old_perftest_is_refused() {
    let (port, h) = fake_server(|mut s| {
        read_n(&mut s, 16);
        let mut v = [0u8; 16];
        v[..4].copy_from_slice(b"5.60");
        s.write_all(&v).unwrap();
    });
    let msg = client(port).exchange_versions().unwrap_err().to_string();
    assert!(msg.contains("\"5.60\", older than 5.70"), "{msg}");
    h.join().unwrap();
}

#[test]
fn no_server_listening() {
    let port = free_port();
    let e = Channel::connect("127.0.0.1", port, Duration::from_millis(300)).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, CtrlError::NoServer { .. }), "{msg}");
    assert!(
        msg.starts_with(&format!(
            "no rdmaperf/perftest server at 127.0.0.1:{port} after 0.3s"
        )),
        "{msg}"
    );
    assert!(msg.ends_with("start the server first or check -p"), "{msg}");
}

#[test]
fn client_retries_until_the_server_is_up() {
    let port = free_port();
    let h = thread::spawn(move || {
        thread::sleep(Duration::from_millis(300));
        let l = Listener::bind(Some("127.0.0.1"), port).unwrap();
        let mut s = Session::new(l.accept(Some(CONNECT)).unwrap());
        s.exchange_versions().unwrap();
    });
    let mut c = client(port);
    assert_eq!(c.exchange_versions().unwrap().text, "6.27-rs");
    h.join().unwrap();
}

#[test]
fn silent_peer_times_out() {
    let (port, h) = fake_server(|mut s| read_to_eof(&mut s));
    let mut c = client(port);
    c.channel_mut()
        .set_step_timeout(Some(Duration::from_millis(200)));
    let e = c.exchange_versions().unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, CtrlError::Timeout { .. }), "{msg}");
    assert!(msg.contains("reading version from 127.0.0.1:"), "{msg}");
    assert!(
        msg.contains("timed out after 0.2s with 0 of 16 bytes"),
        "{msg}"
    );
    drop(c);
    h.join().unwrap();
}

#[test]
fn peer_run_wait_is_not_bounded_by_the_step_timeout() {
    let (port, h) = fake_server(|mut s| {
        read_n(&mut s, 59);
        thread::sleep(Duration::from_millis(400)); // the peer's "run"
        s.write_all(&wire::encode_key(&Dest::default()).unwrap())
            .unwrap();
        read_n(&mut s, 59);
        thread::sleep(Duration::from_millis(400));
        s.write_all(&wire::encode_key(&Dest::default()).unwrap())
            .unwrap();
    });
    let mut c = client(port);
    c.channel_mut()
        .set_step_timeout(Some(Duration::from_millis(100)));
    c.wait_for_peer_run();
    c.hand_shake(&Dest::default()).unwrap();
    // The wait applies to one read only.
    let e = c.hand_shake(&Dest::default()).unwrap_err();
    assert!(matches!(e, CtrlError::Timeout { .. }), "{e}");
    drop(c);
    h.join().unwrap();
}

#[test]
fn accept_timeout() {
    let l = Listener::bind(Some("127.0.0.1"), 0).unwrap();
    let port = l.port();
    let e = l.accept(Some(Duration::from_millis(100))).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, CtrlError::AcceptTimeout { .. }), "{msg}");
    assert!(msg.contains(&format!("-p {port}")), "{msg}");
}

#[test]
fn port_in_use() {
    let a = Listener::bind(Some("127.0.0.1"), 0).unwrap();
    let e = Listener::bind(Some("127.0.0.1"), a.port()).unwrap_err();
    let msg = e.to_string();
    assert!(matches!(e, CtrlError::Listen { .. }), "{msg}");
    assert!(msg.contains("pick another port with -p"), "{msg}");
}

#[test]
fn server_port_is_reusable_right_after_a_session() {
    // The server closes first, leaving its side in TIME_WAIT; without
    // SO_REUSEADDR the next bind would fail for a minute.
    let l = Listener::bind(Some("127.0.0.1"), 0).unwrap();
    let port = l.port();
    let h = raw_client(port, b"");
    let ch = l.accept(Some(CONNECT)).unwrap();
    drop(ch);
    h.join().unwrap();
    Listener::bind(Some("127.0.0.1"), port).unwrap();
}

#[test]
fn out_of_order_use_is_reported() {
    let (port, h) = fake_server(|mut s| read_to_eof(&mut s));
    let mut c = client(port);
    let e = c.exchange_mtu(3).unwrap_err();
    assert!(matches!(e, CtrlError::Order(_)), "{e}");
    drop(c);
    h.join().unwrap();
}

#[test]
fn peer_closes_during_report() {
    let reply = vec![0, 0, 0, 0, 0, 1, 0, 0];
    let (_, msg) = after_preamble(8, reply, false, |c| {
        c.exchange_bw_report(&wire::BwReport::default())
            .unwrap_err()
    });
    // Either our write or our read notices, depending on timing.
    assert!(msg.contains("bw report iters"), "{msg}");
}
