//! Two threads run whole control sessions against each other over 127.0.0.1,
//! through a relay that records both byte streams, for every tool and mode
//! of the choreography table.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use rdmaperf::ctrl::choreo::{choreography, wire_messages, Mode, Scenario, Step, Tool};
use rdmaperf::ctrl::wire::{self, BwReport, Dest, PerPortReport, DONE, KEY_LEN, KEY_LEN_GID};
use rdmaperf::ctrl::{Channel, CtrlError, Listener, Role, Session};

const CONNECT: Duration = Duration::from_secs(10);
const STEP: Duration = Duration::from_secs(10);

fn dest(side: u32, qp: u32, gid: bool) -> Dest {
    Dest {
        lid: side as u16,
        out_reads: 1 + side,
        qpn: 0x100 * side + qp,
        psn: 0xab_c000 + side * 16 + qp,
        rkey: 0x1000 + side,
        vaddr: 0x7f00_0000_0000 + u64::from(side) * 0x10_0000 + u64::from(qp) * 0x1000,
        gid: gid.then_some([side as u8; 16]),
        srqn: 0,
    }
}

fn report(side: u32, per_port: bool) -> BwReport {
    BwReport {
        size: 65536,
        iters: 1000 + u64::from(side),
        bw_peak: 100.5 + f64::from(side),
        bw_avg: 90.25 + f64::from(side),
        msg_rate: 0.001 * f64::from(side + 1),
        per_port: per_port.then_some(PerPortReport {
            bw_avg_p1: 1.0,
            msg_rate_p1: 2.0,
            bw_avg_p2: 3.0,
            msg_rate_p2: f64::from(side),
        }),
    }
}

/// Each side's local settings, and what it must learn from the other.
struct Side {
    id: u32,
    cycle_buffer: u32,
    cache_line: u32,
    mtu: u8,
}

const CLIENT: Side = Side {
    id: 1,
    cycle_buffer: 4096,
    cache_line: 128,
    mtu: 5,
};
const SERVER: Side = Side {
    id: 2,
    cycle_buffer: 8192,
    cache_line: 64,
    mtu: 3,
};

/// Runs one side's choreography, checking everything it receives.
fn drive(
    mut s: Session,
    scn: &Scenario,
    me: &Side,
    peer: &Side,
    gid: bool,
    per_port: bool,
) -> Result<usize, CtrlError> {
    let mine: Vec<Dest> = (0..scn.num_qps as u32)
        .map(|q| dest(me.id, q, gid))
        .collect();
    let theirs: Vec<Dest> = (0..scn.num_qps as u32)
        .map(|q| dest(peer.id, q, gid))
        .collect();
    let mut reports = 0;
    for e in choreography(scn) {
        if e.waits_for_peer_run {
            s.wait_for_peer_run();
        }
        match e.step {
            Step::Versions => assert_eq!(s.exchange_versions()?.text, wire::OUR_VERSION),
            Step::SysData => {
                let got = s.exchange_sysdata(me.cycle_buffer, me.cache_line)?;
                assert_eq!(got, (8192, 128));
            }
            Step::Mtu => assert_eq!(s.exchange_mtu(me.mtu)?, 3),
            Step::Keys { qp, .. } => {
                assert_eq!(
                    s.hand_shake_step(&e.step.to_string(), &mine[qp])?,
                    theirs[qp]
                );
            }
            Step::Barrier(_) => {
                assert_eq!(s.hand_shake_step(&e.step.to_string(), &mine[0])?, theirs[0]);
            }
            Step::Connect | Step::Run { .. } => {}
            Step::RunForever => unreachable!("not driven"),
            Step::BwReport => {
                let got = s.exchange_bw_report(&report(me.id, per_port))?;
                assert_eq!(got, report(peer.id, per_port));
                reports += 1;
            }
            Step::Close => {
                s.close(&mine[0])?;
                return Ok(reports);
            }
            Step::Exit => {
                s.finish();
                return Ok(reports);
            }
        }
    }
    unreachable!("every sequence ends in Close or Exit");
}

/// Forwards `from` to `to`, recording the bytes; half-closes `to` at EOF.
fn pump(mut from: TcpStream, mut to: TcpStream, log: Arc<Mutex<Vec<u8>>>) {
    let mut buf = [0u8; 4096];
    loop {
        match from.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                log.lock().unwrap().extend_from_slice(&buf[..n]);
                if to.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    }
    let _ = to.shutdown(Shutdown::Write);
}

/// Client-to-server and server-to-client bytes.
type Recorded = (Vec<u8>, Vec<u8>);

/// A relay between a client and `server_port`; returns its port and the two
/// recorded streams once both directions ended.
fn relay(server_port: u16) -> (u16, thread::JoinHandle<Recorded>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let h = thread::spawn(move || {
        let (c, _) = l.accept().unwrap();
        let s = TcpStream::connect(("127.0.0.1", server_port)).unwrap();
        let (c2s, s2c) = (
            Arc::new(Mutex::new(Vec::new())),
            Arc::new(Mutex::new(Vec::new())),
        );
        let a = {
            let (c, s, log) = (c.try_clone().unwrap(), s.try_clone().unwrap(), c2s.clone());
            thread::spawn(move || pump(c, s, log))
        };
        let b = {
            let log = s2c.clone();
            thread::spawn(move || pump(s, c, log))
        };
        a.join().unwrap();
        b.join().unwrap();
        let take = |m: Arc<Mutex<Vec<u8>>>| std::mem::take(&mut *m.lock().unwrap());
        (take(c2s), take(s2c))
    });
    (port, h)
}

/// Runs client and server for `scn` (client's view) and checks the recorded
/// streams against the choreography's message sizes.
fn run(scn: Scenario, gid: bool, per_port: bool) {
    let listener = Listener::bind(Some("127.0.0.1"), 0).unwrap();
    let (rport, recorder) = relay(listener.port());
    let server_scn = scn.peer();
    let server = thread::spawn(move || {
        let mut ch = listener.accept(Some(CONNECT)).unwrap();
        ch.set_step_timeout(Some(STEP));
        drive(
            Session::new(ch),
            &server_scn,
            &SERVER,
            &CLIENT,
            gid,
            per_port,
        )
    });
    let mut ch = Channel::connect("127.0.0.1", rport, CONNECT).unwrap();
    ch.set_step_timeout(Some(STEP));
    assert_eq!(ch.role(), Role::Client);
    let client_reports = drive(Session::new(ch), &scn, &CLIENT, &SERVER, gid, per_port)
        .unwrap_or_else(|e| panic!("{scn:?}: client: {e}"));
    let server_reports = server
        .join()
        .unwrap()
        .unwrap_or_else(|e| panic!("{scn:?}: server: {e}"));
    assert_eq!(client_reports, server_reports);

    let (c2s, s2c) = recorder.join().unwrap();
    let peer = wire::PeerVersion::from_text(wire::OUR_VERSION).unwrap();
    let key_len = if gid { KEY_LEN_GID } else { KEY_LEN };
    let (sizes, closes) = wire_messages(&choreography(&scn), key_len, per_port, &peer);
    let total: usize = sizes.iter().sum::<usize>() + if closes { DONE.len() } else { 0 };
    assert_eq!(c2s.len(), total, "{scn:?}");
    assert_eq!(s2c.len(), total, "{scn:?}");
    assert_eq!(&c2s[..16], wire::encode_version(wire::OUR_VERSION).unwrap());
    if closes {
        assert_eq!(&c2s[total - 5..], DONE);
        assert_eq!(&s2c[total - 5..], DONE);
    }
}

#[test]
fn write_bw_session_two_qps_with_gid() {
    // The brief's case: versions, sysdata, MTU, keys x2, barrier, reports, close.
    let scn = Scenario {
        num_qps: 2,
        ..Scenario::new(Tool::WriteBw, Role::Client, false, Mode::Iterations)
    };
    run(scn, true, false);
}

#[test]
fn write_bw_session_explicit_calls() {
    // The same session spelled out, as tool code would call it.
    let listener = Listener::bind(Some("127.0.0.1"), 0).unwrap();
    let port = listener.port();
    let server = thread::spawn(move || -> Result<(BwReport, Vec<Dest>), CtrlError> {
        let mut s = Session::new(listener.accept(Some(CONNECT))?);
        assert_eq!(s.role(), Role::Server);
        s.exchange_versions()?;
        assert_eq!(s.exchange_sysdata(8192, 64)?, (8192, 128));
        assert_eq!(s.exchange_mtu(3)?, 3);
        let mine = [dest(2, 0, false), dest(2, 1, false)];
        let mut theirs = Vec::new();
        for d in &mine {
            theirs.push(s.hand_shake(d)?);
        }
        for d in &mine {
            s.hand_shake(d)?;
        }
        s.hand_shake(&mine[0])?; // after RTR
        s.wait_for_peer_run();
        s.hand_shake(&mine[0])?; // waits for the client's run
        let rep = s.exchange_bw_report(&BwReport::default())?;
        s.close(&mine[0])?;
        Ok((rep, theirs))
    });
    let mut s = Session::new(Channel::connect("127.0.0.1", port, CONNECT).unwrap());
    let v = s.exchange_versions().unwrap();
    assert_eq!(v.value, 6.27);
    assert_eq!(s.peer_version(), Some(&v));
    assert_eq!(s.exchange_sysdata(4096, 128).unwrap(), (8192, 128));
    assert_eq!(s.exchange_mtu(5).unwrap(), 3);
    let mine = [dest(1, 0, false), dest(1, 1, false)];
    for (q, d) in mine.iter().enumerate() {
        assert_eq!(s.hand_shake(d).unwrap(), dest(2, q as u32, false));
    }
    for d in &mine {
        s.hand_shake(d).unwrap();
    }
    s.hand_shake(&mine[0]).unwrap();
    thread::sleep(Duration::from_millis(50)); // "the run"
    s.hand_shake(&mine[0]).unwrap();
    let rep = report(1, false);
    assert_eq!(s.exchange_bw_report(&rep).unwrap(), BwReport::default());
    s.close(&mine[0]).unwrap();
    let (got, theirs) = server.join().unwrap().unwrap();
    assert_eq!(got, rep);
    assert_eq!(theirs, mine);
}

#[test]
fn every_tool_and_mode_pairs_up_over_tcp() {
    for tool in Tool::ALL {
        for duplex in [false, true] {
            if duplex && !tool.is_bw() {
                continue;
            }
            for mode in [Mode::Iterations, Mode::Duration, Mode::AllSizes] {
                let scn = Scenario {
                    num_qps: 2,
                    ..Scenario::new(tool, Role::Client, duplex, mode)
                };
                run(scn, tool == Tool::SendBw || tool == Tool::ReadLat, false);
            }
        }
    }
}

#[test]
fn per_port_reports_and_ud_all_sizes() {
    let scn = Scenario::new(Tool::WriteBw, Role::Client, true, Mode::Iterations);
    run(scn, false, true);
    let ud = Scenario {
        ud_mtu: Some(2048),
        ..Scenario::new(Tool::SendBw, Role::Client, true, Mode::AllSizes)
    };
    run(ud, true, false);
}
