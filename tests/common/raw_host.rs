//! What the raw tools' client-against-server model tests share
//! (`raw_lat_model`, `raw_burst_lat_model`, `raw_duplex_model`): each side
//! is a model host of
//! its own (a raw QP 0 with its direct SQ, RQ and CQ, and a flow table
//! built from that side's command line by `raw::steer`, as
//! `ibv_create_flow` would install it), run in its own thread. A side's
//! polls step its NIC, put what its port sent on the wire to the peer
//! (dropping the `n`-th frame where asked), and deliver the peer's frames
//! to its port (`Model::deliver`). Every frame is logged with its time for
//! the checks and the pcap. What runs on a side's QP is the test's session
//! ([`Go`]); the latency tools' is [`lat_session`] ([`pair`]).

use super::raw_steer_model::{self, CLIENT, SERVER};
use rdmaperf::selfcheck::model_port::{PartCq, Port, RawSide};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use etherparse::{Ethernet2Header, Ipv4Header, UdpHeader};
use rdmaperf::clock::Clock;
use rdmaperf::mlx5::raw_sq::RawPkt;
use rdmaperf::mlx5::rq::DirectRq;
use rdmaperf::model::ModelMmio;
use rdmaperf::model::ModelRecvMmio;
use rdmaperf::post::{CompletionQueue, RecvQueue};
use rdmaperf::raw::params::RawParams;
use rdmaperf::raw::pcap::{self, PcapWriter};
use rdmaperf::raw::slots::{self, Slots};
use rdmaperf::raw::{frame, tools::RawTool};
use rdmaperf::run::raw_bw::{Direct, RawPost};
use rdmaperf::run::raw_lat::{RawQp, RxRing};
use rdmaperf::tool::session::raw_burst_lat_measure::BurstLatRun;
use rdmaperf::tool::session::raw_lat_measure::frames;
use rdmaperf::tool::session::raw_lat_measure::RawLatRun;
use rdmaperf::tool::session::raw_lat_session::{Ran, Session};
use rdmaperf::tool::setup::raw_lat_res::rx_depth;
use rdmaperf::tool::setup::raw_recv_res::slot_stride;

const QPN: u32 = 0x123;
const SEED: u32 = 0x5eed;

/// What crossed the wire: (from the client?, microseconds, frame).
pub type Log = Arc<Mutex<Vec<(bool, u64, Vec<u8>)>>>;

/// A side's QP on its model host, as the session under test gets it: the
/// direct SQ and the send half of the CQ, the direct RQ and the receive
/// half, the frames (`raw::slots`, from `tx_base`) and the receive ring.
pub struct Host<'a> {
    pub post: &'a mut Direct<ModelMmio>,
    pub scq: &'a mut PartCq,
    pub rq: &'a mut DirectRq<ModelRecvMmio>,
    pub rcq: &'a mut PartCq,
    pub frames: &'a [RawPkt],
    pub ring: RxRing,
    pub tx_base: u64,
    pub slots: Slots,
}

/// A session: what runs on one side's QP (its parameters, its host, the
/// stall allowance), and what it gives back.
pub type Go<R> = fn(&RawParams, Host<'_>, Duration) -> R;

/// What the latency tools' session ran (`tool::session::raw_lat_session`,
/// as the tool runs it) and its printed table.
pub struct Lat {
    pub lat: Option<RawLatRun>,
    pub bursts: Option<BurstLatRun>,
    pub report: Result<String, String>,
}

/// The latency tools' session on a side's QP.
pub fn lat_session(p: &RawParams, h: Host<'_>, stall: Duration) -> Lat {
    lat_on(
        p,
        RawQp::new((h.post, h.scq), (h.rq, h.rcq), (h.frames, h.ring)),
        stall,
    )
}

/// The latency tools' session on `qp` (a side's QP, its CQs as the test
/// wraps them).
pub fn lat_on<P, R, C, D>(p: &RawParams, qp: RawQp<'_, P, R, C, D>, stall: Duration) -> Lat
where
    P: RawPost,
    R: RecvQueue,
    C: CompletionQueue,
    D: CompletionQueue,
{
    let clock = Clock::calibrate();
    let session = Session {
        p,
        clock: &clock,
        stall,
    };
    let ran = session.run(qp).unwrap();
    let report = ran.report(p, clock.hz());
    let (lat, bursts) = match ran {
        Ran::PingPong(r) => (Some(r), None),
        Ran::Bursts(r) => (None, Some(r)),
    };
    Lat {
        lat,
        bursts,
        report,
    }
}

/// What one side ran (`run`, its session's result), its send buffer and
/// layout, its parameters, and the frames its flow table matched to no
/// rule.
pub struct Side<R = Lat> {
    pub run: R,
    pub tx: Vec<u8>,
    pub slots: Slots,
    pub p: RawParams,
    pub no_match: u64,
}

/// One end of the wire: out, in, the log and its start, the frame to drop.
struct Wire {
    out: Sender<Vec<u8>>,
    inp: Receiver<Vec<u8>>,
    log: Log,
    t0: Instant,
    drop_nth: Option<u64>,
}

/// One side, its session `go`, on a model host of its own.
fn side<R>(p: RawParams, w: Wire, stall: Duration, go: Go<R>) -> Side<R> {
    let client = p.raw.side != Some(rdmaperf::raw::ctx::Side::Server);
    let slots = Slots::new(p.size, p.raw.flows, p.raw.flows_burst, p.post_list, 4096);
    // raw-eth-bw -b posts -r receives; the latency tools their own count.
    let posted = match p.raw.tool {
        RawTool::Bw => p.raw.rx_depth.max(1),
        _ => rx_depth(&p),
    } as u32;
    let stride = slot_stride(p.size);
    // Declared before the model: registered memory outlives it.
    let mut tx = vec![0u8; slots.buffer_len()];
    // As `tool::setup::raw_lat_res` fills it (`--payload_file_path`'s
    // pattern, else perftest_rand).
    slots::fill_body(&mut tx, &p.frame_spec(), &slots, p.body(SEED));
    let mut rx = vec![0u8; posted as usize * stride as usize];
    // SAFETY: both buffers outlive the model (declared before it).
    let host = unsafe { RawSide::new(&p, (&mut tx, &mut rx), (QPN, posted)) };
    let host = host.unwrap_or_else(|e| panic!("{e}"));
    let mut rq = host.rq;
    let frames = frames(tx.as_ptr() as u64, &slots);
    let ring = RxRing {
        base: rx.as_ptr() as u64,
        stride,
        room: stride,
        slots: posted,
        lkey: host.rx_lkey,
    };
    // Every frame logged with its time; the `drop_nth` one (1-based) lost.
    let (log, t0, drop_nth, mut sent) = (w.log, w.t0, w.drop_nth, 0);
    let on_wire = move |f: &[u8]| {
        sent += 1;
        let us = t0.elapsed().as_micros() as u64;
        log.lock().unwrap().push((client, us, f.to_vec()));
        drop_nth != Some(sent)
    };
    let port = Port::new((host.model, host.cq), (w.out, w.inp), 1, Box::new(on_wire));
    let (mut scq, mut rcq) = (PartCq(port.clone(), None), PartCq(port.clone(), Some(0)));
    let mut post = Direct::<ModelMmio>(host.sq);
    let host = Host {
        post: &mut post,
        scq: &mut scq,
        rq: &mut rq,
        rcq: &mut rcq,
        frames: &frames,
        ring,
        tx_base: tx.as_ptr() as u64,
        slots,
    };
    let run = go(&p, host, stall);
    let port = port.borrow();
    let v = port.model.violations();
    assert!(v.is_empty(), "{v:?}");
    assert!(port.model.eth_rejected().is_empty());
    let no_match = port.model.raw_rx_stats().no_match;
    drop(port);
    drop(rx);
    Side {
        run,
        tx,
        slots,
        p,
        no_match,
    }
}

/// Client and server of `tool` against each other.
pub struct Pair<R = Lat> {
    pub client: Side<R>,
    pub server: Side<R>,
    pub log: Vec<(bool, u64, Vec<u8>)>,
}

/// The latency tools' client and server ([`pair_with`] [`lat_session`]).
pub fn pair(tool: RawTool, extra: &str, drop_nth: Option<u64>, stall: Duration) -> Pair {
    pair_with(tool, (extra, drop_nth), stall, lat_session)
}

/// Client and server of `tool` running `go`, `extra` on both command
/// lines (MACs, IPs and ports mirrored), each in its own thread; the
/// client's `drop_nth` frame is lost on the wire.
pub fn pair_with<R: Send + 'static>(
    tool: RawTool,
    (extra, drop_nth): (&str, Option<u64>),
    stall: Duration,
    go: Go<R>,
) -> Pair<R> {
    let params = |side: &str| raw_steer_model::params(tool, &format!("{side} {extra}"));
    pair_of((params(CLIENT), params(SERVER)), drop_nth, stall, go)
}

/// [`pair_with`] on the client's and the server's parameters as given.
pub fn pair_of<R: Send + 'static>(
    (cp, sp): (RawParams, RawParams),
    drop_nth: Option<u64>,
    stall: Duration,
    go: Go<R>,
) -> Pair<R> {
    let (c2s, s_in) = channel();
    let (s2c, c_in) = channel();
    let log: Log = Arc::default();
    let t0 = Instant::now();
    let sw = Wire {
        out: s2c,
        inp: s_in,
        log: log.clone(),
        t0,
        drop_nth: None,
    };
    let server = std::thread::spawn(move || side(sp, sw, stall, go));
    let cw = Wire {
        out: c2s,
        inp: c_in,
        log: log.clone(),
        t0,
        drop_nth,
    };
    let client = side(cp, cw, stall, go);
    let server = server.join().unwrap();
    let log = std::mem::take(&mut *log.lock().unwrap());
    Pair {
        client,
        server,
        log,
    }
}

/// The latency table's row in a side's report: the line starting with
/// `-s`.
pub fn row(s: &Side) -> Vec<String> {
    let report = s.run.report.as_ref().unwrap();
    let line = report
        .lines()
        .find(|l| l.trim_start().starts_with(&format!("{} ", s.p.size)))
        .unwrap_or_else(|| panic!("no row: {report}"));
    line.split_whitespace().map(String::from).collect()
}

/// A side's table: the header, and a row of nine columns with `iters` as
/// `#iterations` and seven positive figures, min ≤ typical ≤ max.
pub fn check_row(s: &Side, iters: u64, at: &str) {
    let r = s.run.report.as_ref().unwrap();
    assert!(r.contains("t_min[usec]") && r.contains("99.9"), "{at}: {r}");
    let cols = row(s);
    assert_eq!(cols.len(), 9, "{at}: {cols:?}");
    assert_eq!(cols[1], iters.to_string(), "{at}: #iterations");
    let figs: Vec<f64> = cols[2..].iter().map(|c| c.parse().unwrap()).collect();
    assert!(figs.iter().all(|v| *v > 0.0), "{at}: {figs:?}");
    assert!(
        figs[0] <= figs[2] && figs[2] <= figs[1],
        "{at}: min ≤ typical ≤ max"
    );
}

/// The client's `-U` and `-H` dumps (perftest's "#, usec" lines before
/// the table, whose header comes again after them): the samples of each.
pub fn dumps(s: &Side) -> (Vec<f64>, Vec<f64>) {
    let r = s.run.report.as_ref().unwrap();
    let parts: Vec<&str> = r.split("#, usec\n").collect();
    assert_eq!(parts.len(), 3, "two dumps: {r}");
    assert_eq!(r.matches("t_min[usec]").count(), 2, "the header again: {r}");
    let samples = |t: &str| -> Vec<f64> {
        t.lines()
            .take_while(|l| !l.starts_with("---"))
            .map(|l| l.split(", ").nth(1).unwrap().parse().unwrap())
            .collect()
    };
    (samples(parts[1]), samples(parts[2]))
}

/// A frame on the wire: the sender's slot for its flow, byte for byte,
/// and its headers as etherparse reads them (the server's with MACs, IPs
/// and ports swapped).
pub fn check_frame<R>(f: &[u8], from: &Side<R>, flow: u64, at: &str) {
    check_frame_at(f, from, (flow, flow * from.slots.flow_bytes), at);
}

/// [`check_frame`] for a frame of `flow` sent from the slot at `off` in the
/// sender's buffer (raw-eth-bw's frames walk `raw::slots`'s layout).
pub fn check_frame_at<R>(f: &[u8], from: &Side<R>, (flow, off): (u64, u64), at: &str) {
    let off = off as usize;
    let len = from.slots.frame_len as usize;
    assert_eq!(f.len(), len, "{at}");
    assert_eq!(f, &from.tx[off..off + len], "{at}: not the slot's frame");
    let want = frame::frame(&from.p.frame_spec(), flow as u16, 0, SEED);
    assert_eq!(f[..42], want[..42], "{at}: not raw::frame's headers");
    let client = from.p.raw.side != Some(rdmaperf::raw::ctx::Side::Server);
    let (me, peer) = if client { (1, 2) } else { (2, 1) };
    let (eth, rest) = Ethernet2Header::from_slice(f).unwrap();
    assert_eq!(eth.source, [2, 0, 0, 0, 0, me], "{at}");
    assert_eq!(eth.destination, [2, 0, 0, 0, 0, peer], "{at}");
    let (ip, rest) = Ipv4Header::from_slice(rest).unwrap();
    assert_eq!(ip.header_checksum, ip.calc_header_checksum(), "{at}");
    assert_eq!(ip.source, [10, 0, 0, me], "{at}");
    assert_eq!(ip.destination, [10, 0, 0, peer], "{at}");
    let (udp, _) = UdpHeader::from_slice(rest).unwrap();
    let f16 = flow as u16;
    let ports = if client {
        (5000 + f16, 6000 + f16)
    } else {
        (6000 + f16, 5000 + f16)
    };
    assert_eq!((udp.source_port, udp.destination_port), ports, "{at}");
}

/// Every logged frame checked against its sender (frame k of a side is
/// flow `k % --flows`); the frames each way, (client's, server's).
pub fn check_log<R>(pair: &Pair<R>, at: &str) -> (u64, u64) {
    let flows = pair.client.p.raw.flows.max(1) as u64;
    let (mut from_client, mut from_server) = (0u64, 0u64);
    for (i, (client, _, f)) in pair.log.iter().enumerate() {
        let (side, k) = if *client {
            from_client += 1;
            (&pair.client, from_client - 1)
        } else {
            from_server += 1;
            (&pair.server, from_server - 1)
        };
        check_frame(f, side, k % flows, &format!("{at}: frame {i}"));
    }
    (from_client, from_server)
}

/// The log written as `target/<name>` (pcap, linktype 1) and read back:
/// the records it holds.
pub fn write_pcap(log: &[(bool, u64, Vec<u8>)], name: &str) -> usize {
    let mut w = PcapWriter::new(Vec::new()).unwrap();
    for (_, us, f) in log {
        w.record(*us, f).unwrap();
    }
    let bytes = w.finish().unwrap();
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("target");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(name), &bytes).unwrap();
    let (link, recs) = pcap::read(&bytes).unwrap();
    assert_eq!(link, 1);
    recs.len()
}
