//! The queue model's Ethernet wire on a TAP device, Linux's network stack on
//! the other end (feature `model`; run as root where `tun` is loaded: the
//! test VM).
//!
//! The addresses are `raw_eth`'s: tap0 is the frames' destination
//! (02:00:00:00:00:02, 10.0.0.2), the model is their source
//! (02:00:00:00:00:01, 10.0.0.1, a permanent neighbour on tap0).
//!
//! Model → Linux: every raw case of `selfcheck` (each post method: SEND,
//! eMPW by pointer, eMPW inline; `-s` 64 to 1518 and the eMPW session
//! limits) posts `raw::frame`'s IPv4/UDP frames (those of raw-eth-bw
//! `--client` with `raw_steer_model::CLIENT`'s addresses) on the model,
//! which checks them against what was posted; each frame is then written to tap0 and
//! must come out of the UDP socket for its flow's port as one datagram
//! equal to the frame's bytes after the UDP header. The kernel is the
//! independent judge of the headers: `Udp.InDatagrams` must grow by the
//! frame count and no error counter may grow.
//!
//! Linux → model: a UDP socket on tap0 sends datagrams to the model's port
//! and a few to another port; every frame Linux puts on tap0 (those and
//! whatever else it sends: IPv6 neighbour discovery, MLD) goes through the
//! flow table built from a raw-eth-bw server's command line (`raw::steer`)
//! into a raw RQ drained by the server's receive loop (`run::raw_recv`).

use super::model_env::{raw_recv_model, Stepping};
use super::raw_steer_model::{model_rule, params, CLIENT};
use super::tap::{self, Tap};
use etherparse::{NetHeaders, PacketHeaders, TransportHeader};
use rdmaperf::clock::Clock;
use rdmaperf::mlx5::raw_sq::{RawPkt, RawSqConfig};
use rdmaperf::model::Access;
use rdmaperf::post::PostError;
use rdmaperf::raw::frame::FrameSpec;
use rdmaperf::raw::{steer, tools::RawTool};
use rdmaperf::run::raw_recv::{post_all, DirectRx, RawRecvCfg};
use rdmaperf::selfcheck::raw_cases::{raw_cases, RawMethod, RawShape, RAW_SIZES};
use rdmaperf::selfcheck::raw_exec::{run_raw_case, RawRig};
use rdmaperf::selfcheck::raw_model_rig::RawModelRig;
use rdmaperf::tool::session::raw_recv_measure::{self, RecvEnd, Waits};
use rdmaperf::tool::setup::raw_recv_res::slot_stride;
use std::collections::BTreeMap;
use std::net::UdpSocket;
use std::time::{Duration, Instant};

pub const TAP: &str = "tap0";
const TAP_MAC: &str = "02:00:00:00:00:02";
const TAP_IP: &str = "10.0.0.2";
const MODEL_MAC: &str = "02:00:00:00:00:01";
const MODEL_IP: &str = "10.0.0.1";
/// `raw::frame`'s flows (the selfcheck frames use four): flow `i` goes
/// to tap0's port `BASE_PORT + i`.
const FLOWS: u16 = 4;
const BASE_PORT: u16 = 6000;
/// How long one datagram or frame may take through the kernel.
const WAIT: Duration = Duration::from_secs(5);

/// Opens tap0 with tap0's MAC and address and the model as its neighbour.
pub fn open() -> Tap {
    let t = Tap::open(TAP);
    t.configure(TAP_MAC, &format!("{TAP_IP}/24"), (MODEL_IP, MODEL_MAC));
    t
}

/// `selfcheck`'s model rig, keeping a copy of every frame its wire gave.
struct Tee {
    rig: RawModelRig,
    wire: Vec<Vec<u8>>,
}

impl RawRig for Tee {
    fn buf(&mut self) -> &mut [u8] {
        self.rig.buf()
    }
    fn post(&mut self, m: RawMethod, pkts: &[RawPkt]) -> Result<(), PostError> {
        self.rig.post(m, pkts)
    }
    fn pending(&mut self) -> Result<u64, String> {
        self.rig.pending()
    }
    fn take_wire(&mut self) -> Vec<Vec<u8>> {
        let w = self.rig.take_wire();
        self.wire.extend(w.iter().cloned());
        w
    }
    fn wqes_run(&self) -> Option<u64> {
        self.rig.wqes_run()
    }
}

const KERNEL_ERRORS: [&str; 7] = [
    "Ip.InHdrErrors",
    "Ip.InAddrErrors",
    "Ip.InDiscards",
    "Udp.InErrors",
    "Udp.InCsumErrors",
    "Udp.NoPorts",
    "Udp.RcvbufErrors",
];

/// Model → Linux (see the module's words); returns the datagrams per
/// method.
pub fn model_to_linux(tap: &mut Tap) -> BTreeMap<&'static str, u64> {
    for s in RAW_SIZES {
        let p = params(RawTool::Bw, &format!("{CLIENT} -s {s}"));
        let what = "selfcheck's frames are raw-eth-bw's with raw_steer_model::CLIENT";
        assert_eq!(p.frame_spec(), FrameSpec::sample_udp4(s as usize), "{what}");
    }
    let socks: Vec<UdpSocket> = (0..FLOWS).map(|f| bind(BASE_PORT + f)).collect();
    let hdr = FrameSpec::sample_udp4(64).header_len();
    let before = tap::snmp();
    let mut per = BTreeMap::new();
    // The post methods' cases (a pair's frames go between two model
    // hosts, not to tap0).
    let posts = raw_cases().into_iter();
    for c in posts.filter(|c| !matches!(c.shape, RawShape::Pair(_))) {
        let rig = RawModelRig::new().unwrap_or_else(|e| panic!("{c}: {e}"));
        let mut t = Tee { rig, wire: vec![] };
        run_raw_case(&mut t, &c).unwrap_or_else(|e| panic!("{c} on the model: {e}"));
        for (k, f) in t.wire.iter().enumerate() {
            tap.send(f);
            let port = u16::from_be_bytes([f[36], f[37]]);
            let sock = socks
                .get(port.wrapping_sub(BASE_PORT) as usize)
                .unwrap_or_else(|| panic!("{c}, frame {k}: UDP port {port} is no flow's"));
            let got = datagram(sock, &before, &format!("{c}, frame {k}, port {port}"));
            assert!(got[..] == f[hdr..], "{c}, frame {k}: the datagram differs");
        }
        *per.entry(c.method.name()).or_default() += t.wire.len() as u64;
    }
    for s in &socks {
        s.set_nonblocking(true).unwrap();
        let extra = s.recv(&mut [0u8; 2048]);
        assert!(extra.is_err(), "a datagram no frame was written for");
    }
    let total: u64 = per.values().sum();
    let grew = tap::snmp_growth(&before, &KERNEL_ERRORS);
    assert!(grew.values().all(|&v| v == 0), "kernel errors: {grew:?}");
    let got = tap::snmp_growth(&before, &["Udp.InDatagrams"])["Udp.InDatagrams"];
    assert_eq!(got, total, "the kernel's UDP datagrams against the frames");
    per
}

fn bind(port: u16) -> UdpSocket {
    let s = UdpSocket::bind((TAP_IP, port)).unwrap_or_else(|e| panic!("bind {TAP_IP}:{port}: {e}"));
    s.set_read_timeout(Some(WAIT)).unwrap();
    s
}

/// The next datagram on `sock`; a timeout panics naming `what` and the
/// kernel's error counters since `before`.
fn datagram(sock: &UdpSocket, before: &BTreeMap<String, u64>, what: &str) -> Vec<u8> {
    let mut buf = vec![0u8; 2048];
    match sock.recv(&mut buf) {
        Ok(n) => {
            buf.truncate(n);
            buf
        }
        Err(e) => panic!(
            "no datagram within {WAIT:?} for {what} ({e}); kernel error counters grew: {:?}",
            tap::snmp_growth(before, &KERNEL_ERRORS)
        ),
    }
}

/// The model's side of Linux → model: a raw-eth-bw server on the model's
/// address and port, Linux (tap0) its client.
const SERVER: &str = "--server -B 02:00:00:00:00:01 -E 02:00:00:00:00:02 -j 10.0.0.2 \
                      -J 10.0.0.1 -k 6000 -K 5000";
const MODEL_PORT: u16 = 5000;
/// A port of the model's no rule is for.
const OTHER_PORT: u16 = 5999;
/// Datagrams to the model's port, and to the other.
const FRAMES: u64 = 200;
const DECOYS: u64 = 5;
/// `-s`: 124-byte frames, 82 bytes of UDP payload.
const SIZE: u64 = 128;
const SLOTS: u32 = 256;
const QPN: u32 = 0x123;
/// The server's RQ is raw QP 1.
const RING: usize = 1;

/// What Linux put on tap0: the frames to the model's port in order, and
/// how many frames it sent in all (each delivered to the model's port).
struct FromLinux {
    ours: Vec<Vec<u8>>,
    all: u64,
}

/// The UDP destination port of an IPv4 frame to the model's address.
fn to_model_port(f: &[u8]) -> Option<u16> {
    let h = PacketHeaders::from_ethernet_slice(f).ok()?;
    let Some(NetHeaders::Ipv4(ip, _)) = h.net else {
        return None;
    };
    match h.transport {
        Some(TransportHeader::Udp(u)) if ip.destination == [10, 0, 0, 1] => {
            Some(u.destination_port)
        }
        _ => None,
    }
}

/// Linux sends [`FRAMES`] datagrams to the model's port and [`DECOYS`] to
/// another; every frame it puts on tap0 until all of them are seen, and
/// whatever else is queued then, goes to `deliver`.
fn linux_sends(tap: &mut Tap, mut deliver: impl FnMut(&[u8])) -> FromLinux {
    let s = UdpSocket::bind((TAP_IP, BASE_PORT)).unwrap();
    let payload = |i: u64| -> Vec<u8> {
        let n = (SIZE - 4) as usize - FrameSpec::sample_udp4(64).header_len();
        (0..n).map(|k| (i as usize * 7 + k) as u8).collect()
    };
    for (port, n) in [(MODEL_PORT, FRAMES), (OTHER_PORT, DECOYS)] {
        for i in 0..n {
            s.send_to(&payload(i), (MODEL_IP, port)).unwrap();
        }
    }
    let deadline = Instant::now() + WAIT;
    let (mut ours, mut decoys, mut all) = (Vec::new(), 0, 0);
    while (ours.len() as u64) < FRAMES || decoys < DECOYS {
        let f = tap.recv(deadline).unwrap_or_else(|| {
            panic!(
                "in {WAIT:?} Linux put {} of {FRAMES} datagrams to {MODEL_IP}:{MODEL_PORT} and \
                 {decoys} of {DECOYS} to port {OTHER_PORT} on {TAP}",
                ours.len()
            )
        });
        match to_model_port(&f) {
            Some(MODEL_PORT) => ours.push(f.clone()),
            Some(OTHER_PORT) => decoys += 1,
            _ => {}
        }
        deliver(&f);
        all += 1;
    }
    while let Some(f) = tap.recv(Instant::now()) {
        deliver(&f);
        all += 1;
    }
    FromLinux { ours, all }
}

/// Linux → model (see the module's words); returns (frames Linux put on
/// tap0, frames the flow table dropped).
pub fn linux_to_model(tap: &mut Tap) -> (u64, u64) {
    let ps = params(
        RawTool::Bw,
        &format!("{SERVER} -n {FRAMES} -s {SIZE} -r {SLOTS}"),
    );
    let stride = slot_stride(ps.size);
    // Declared before the model: registered memory outlives it.
    let mut rx = vec![0u8; SLOTS as usize * stride as usize];
    let model = raw_recv_model(QPN, 1024, SLOTS);
    // SAFETY: `rx` outlives the model (declared before it).
    let key = unsafe { model.register(rx.as_mut_ptr(), rx.len(), Access::LOCAL_WRITE) };
    // The pair's CQ takes the RQ's completions; its SQ sends nothing.
    let (_sq, mut cq) = model.raw_pair(RawSqConfig::new(key.lkey, 8)).unwrap();
    let mut rq = model.raw_rq(RING).unwrap();
    cq.attach_recv(rq.qpn(), rq.ring());
    for r in steer::rules(&ps) {
        model.add_flow(model_rule(&r, RING)).unwrap();
    }
    // SAFETY: `rx` holds `SLOTS` strides, registered, and outlives the loop.
    let cfg = unsafe { RawRecvCfg::new(rx.as_ptr(), stride, stride, SLOTS, key.lkey) };
    post_all(&mut rq, &cfg).unwrap();
    let sent = linux_sends(tap, |f| {
        model.deliver(f);
    });
    let waits = Waits {
        first: Some(WAIT),
        quiet: WAIT,
    };
    let mut scq = Stepping { cq, model: &model };
    let queues = (&mut rq, &mut scq);
    let out =
        raw_recv_measure::receive::<_, _, DirectRx>(&ps, queues, &cfg, &Clock::calibrate(), waits);
    let c = &out.counts;
    let len = SIZE - 4;
    assert_eq!((out.error, out.end), (None, RecvEnd::Done), "{c:?}");
    assert_eq!((c.packets, c.bytes), (FRAMES, FRAMES * len), "{c:?}");
    assert_eq!(
        (c.ipv4, c.udp, c.csum_ok),
        (FRAMES, FRAMES, FRAMES),
        "{c:?}"
    );
    assert_eq!((c.csum_bad, c.too_long, c.errors), (0, 0, 0), "{c:?}");
    let st = model.raw_rx_stats();
    assert_eq!(st.frames, sent.all, "the port saw every frame Linux sent");
    assert_eq!(
        (st.delivered, st.no_match),
        (FRAMES, sent.all - FRAMES),
        "the rule took the frames to its port and no other: {st:?}"
    );
    assert!(st.no_match >= DECOYS, "{st:?}");
    assert!(model.violations().is_empty(), "{:?}", model.violations());
    for (i, f) in sent.ours.iter().enumerate() {
        let at = i * stride as usize;
        assert!(rx[at..at + f.len()] == f[..], "slot {i} is not frame {i}");
    }
    (sent.all, st.no_match)
}
