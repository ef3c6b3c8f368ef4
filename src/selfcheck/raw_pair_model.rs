//! selfcheck's raw pair cases on the queue model: raw-eth-bw `-b` (client
//! and server each sending `-n` and counting the peer's) and `--server -v`
//! (a `-b` client, a server forwarding its frames back with the MACs
//! swapped), one QP a side, as the tools run them today. Each side is a
//! model host of its own (a raw QP with its direct SQ, RQ and CQ, the flow
//! table built from that side's command line by `raw::steer`) in a thread
//! of its own; a poll steps its NIC, puts what its port sent on the wire
//! to the peer and delivers the peer's frames. The sessions are the
//! tools' (`session::raw_measure` beside `run::raw_duplex`'s receive side,
//! `tool::runs::raw_fw::run_loop`). Control path: allocation is fine.

use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::model_port::{PartCq, Port, RawSide};
use super::raw_cases::PairKind;
use crate::clock::{self, Clock};
use crate::model::ModelMmio;
use crate::post::Completion;
use crate::raw::params::{self, RawParams, Side};
use crate::raw::slots::{self, Slots};
use crate::raw::{args, tools::RawTool};
use crate::run::raw_bw::Direct;
use crate::run::raw_duplex::RecvSide;
use crate::run::raw_fw::FwBuf;
use crate::run::raw_recv::{DirectRx, RawRecvCfg, RawRecvCounts};
use crate::tool::runs::{raw_duplex, raw_fw};
use crate::tool::session::{raw_measure, raw_recv_measure};

/// Frames each way.
const N: u64 = 200;
/// A side gives up after this long without progress.
const STALL: Duration = Duration::from_secs(5);
const QPN: u32 = 0x123;
const STRIDE: usize = 2048;
const CLIENT: &str = "--client -B 02:00:00:00:00:01 -E 02:00:00:00:00:02 -j 10.0.0.1 \
                      -J 10.0.0.2 -k 5000 -K 5000";
const SERVER: &str = "--server -B 02:00:00:00:00:02 -E 02:00:00:00:00:01 -j 10.0.0.1 \
                      -J 10.0.0.2 -k 5000 -K 5000";

/// What crossed the wire, in order: (from the client?, the frame).
type Log = Arc<Mutex<Vec<(bool, Vec<u8>)>>>;

/// Runs the pair `kind` (`-n 200 -s 128` each way); `Err` says what was
/// wrong.
pub fn run_pair(kind: PairKind) -> Result<(), String> {
    let flag = match kind {
        PairKind::Duplex => "-b",
        PairKind::Forward => "-v",
    };
    let line = |side: &str| parse(&format!("{side} {flag} -n {N} -s 128"));
    let (cp, sp) = (line(CLIENT)?, line(SERVER)?);
    let (c2s, s_in) = channel();
    let (s2c, c_in) = channel();
    let log: Log = Arc::default();
    let slog = log.clone();
    let server = std::thread::spawn(move || side(sp, (s2c, s_in), slog));
    let client = side(cp, (c2s, c_in), log.clone());
    let server = server
        .join()
        .map_err(|_| "the server's thread panicked".to_string())?;
    let (client, server) = (client?, server?);
    let log = std::mem::take(&mut *log.lock().map_err(|_| "the wire's log")?);
    client.check_sent(&log, true)?;
    match kind {
        PairKind::Duplex => server.check_sent(&log, false),
        PairKind::Forward => check_forwarded(&log),
    }
}

fn parse(cmd: &str) -> Result<RawParams, String> {
    let argv: Vec<String> = cmd.split_whitespace().map(String::from).collect();
    args::parse(&argv)
        .and_then(|a| params::resolve(RawTool::Bw, &a))
        .map_err(|e| format!("{cmd}: {e}"))
}

/// What a side sent from (its buffer and layout) and whether it did all
/// it should.
struct Ran {
    tx: Vec<u8>,
    slots: Slots,
}

impl Ran {
    /// The side's frames on the wire, `N` of them, each its buffer's slot
    /// byte for byte (raw-eth-bw's frames walk `raw::slots`'s layout).
    fn check_sent(&self, log: &[(bool, Vec<u8>)], client: bool) -> Result<(), String> {
        let who = if client { "client" } else { "server" };
        let mine: Vec<&Vec<u8>> = log
            .iter()
            .filter(|(c, _)| *c == client)
            .map(|(_, f)| f)
            .collect();
        if mine.len() as u64 != N {
            return Err(format!(
                "the {who} put {} frames on the wire, not {N}",
                mine.len()
            ));
        }
        let len = self.slots.frame_len as usize;
        for (k, f) in mine.iter().enumerate() {
            let at = self.slots.offset(k as u64) as usize;
            if f[..] != self.tx[at..at + len] {
                return Err(format!("the {who}'s frame {k} is not its buffer's slot"));
            }
        }
        Ok(())
    }
}

/// The forwarder's k-th frame is the client's k-th with source and
/// destination MAC swapped, every other byte the same.
fn check_forwarded(log: &[(bool, Vec<u8>)]) -> Result<(), String> {
    let sent: Vec<&Vec<u8>> = log.iter().filter(|(c, _)| *c).map(|(_, f)| f).collect();
    let back: Vec<&Vec<u8>> = log.iter().filter(|(c, _)| !*c).map(|(_, f)| f).collect();
    if back.len() != sent.len() {
        return Err(format!("{} frames forwarded of {}", back.len(), sent.len()));
    }
    for (k, (s, b)) in sent.iter().zip(&back).enumerate() {
        let swapped = b.len() == s.len() && b[..6] == s[6..12] && b[6..12] == s[..6];
        if !swapped || b[12..] != s[12..] {
            return Err(format!(
                "forwarded frame {k} is not the client's with the MACs swapped"
            ));
        }
    }
    Ok(())
}

/// One side on a model host of its own, its session run to its end.
fn side(
    p: RawParams,
    (out, inp): (Sender<Vec<u8>>, Receiver<Vec<u8>>),
    log: Log,
) -> Result<Ran, String> {
    let client = p.raw.side != Some(Side::Server);
    let slots = Slots::new(p.size, p.raw.flows, p.raw.flows_burst, p.post_list, 4096);
    // Declared before the model: registered memory outlives it.
    let mut tx = vec![0u8; slots.buffer_len()];
    slots::fill_body(&mut tx, &p.frame_spec(), &slots, p.body(0x5eed));
    // `-r` receives (perftest's default holds a whole run here: the model
    // delivers a burst at once, and a ring that ran dry would drop it).
    let rx_slots = p.raw.rx_depth.max(1) as u32;
    let mut rx = vec![0u8; rx_slots as usize * STRIDE];
    // SAFETY: both buffers outlive the model (declared before it) and
    // stay in place (never resized).
    let host = unsafe { RawSide::new(&p, (&mut tx, &mut rx), (QPN, rx_slots))? };
    let mut rq = host.rq;
    // A forwarder sends from its receive buffer (`RawSide` set its SQ up so).
    let fwd = p.raw.mac_fwd && !client;
    // SAFETY: `rx` holds `rx_slots` strides, registered for local write, and
    // outlives every loop over it; only the NIC (and the forwarder, a slot
    // between its receive and its send) touch it.
    let cfg = unsafe {
        RawRecvCfg::new(
            rx.as_ptr(),
            STRIDE as u32,
            STRIDE as u32,
            rx_slots,
            host.rx_lkey,
        )
    };
    let on_wire = move |f: &[u8]| {
        if let Ok(mut l) = log.lock() {
            l.push((client, f.to_vec()));
        }
        true
    };
    let port = Port::new((host.model, host.cq), (out, inp), 1, Box::new(on_wire));
    let (mut scq, mut rcq) = (PartCq(port.clone(), None), PartCq(port.clone(), Some(0)));
    let mut post = Direct::<ModelMmio>(host.sq);
    let ran = if fwd {
        forward(&p, (&mut post, &mut scq), (&mut rq, &mut rcq), cfg)
    } else {
        duplex(
            &p,
            (&mut post, &mut scq),
            (&mut rq, &mut rcq),
            (&cfg, tx.as_ptr() as u64, slots),
        )
    };
    let v = port.borrow().model.violations();
    ran?;
    if !v.is_empty() {
        return Err(format!("the model saw protocol violations: {v:?}"));
    }
    let no_match = port.borrow().model.raw_rx_stats().no_match;
    if no_match != 0 {
        return Err(format!(
            "{no_match} frames matched no rule of the {} side",
            if client { "client" } else { "server" }
        ));
    }
    drop(port);
    drop(rx);
    Ok(Ran { tx, slots })
}

type Rq = crate::mlx5::rq::DirectRq<crate::model::ModelRecvMmio>;

/// `-b`'s session, as `tool::runs::raw_duplex` runs it: `N` sent, `N` of
/// the peer's counted, good checksums.
fn duplex(
    p: &RawParams,
    (post, scq): (&mut Direct<ModelMmio>, &mut PartCq),
    (rq, rcq): (&mut Rq, &mut PartCq),
    (cfg, base, slots): (&RawRecvCfg, u64, Slots),
) -> Result<(), String> {
    raw_recv_measure::post_receives(rq, cfg, "selfcheck")?;
    let clock = Clock::calibrate();
    let mut counts = RawRecvCounts::default();
    let mut wc = [Completion::default(); 16];
    let wait = raw_duplex::rx_wait(p, &clock, STALL);
    let scratch = (&mut counts, &mut wc[..]);
    let mut side = RecvSide::<_, _, DirectRx, _>::new((rq, rcq), cfg, scratch, wait, clock::now);
    let posts = std::slice::from_mut(post);
    let out = raw_measure::measure_beside(p, (posts, scq), (&[base], slots), &clock, &mut side);
    let who = if p.raw.side == Some(Side::Server) {
        "server"
    } else {
        "client"
    };
    if let Some(e) = side.error.take() {
        return Err(format!("the {who}'s receive side: {e:?}"));
    }
    if let Some(e) = out.error {
        return Err(format!(
            "the {who}'s sends: {}",
            raw_measure::error_words(&e)
        ));
    }
    if (out.posted, out.completed) != (N, N) {
        return Err(format!(
            "the {who} sent {} and completed {} of {N}",
            out.posted, out.completed
        ));
    }
    received(who, &counts)
}

/// The forwarder, as `tool::runs::raw_fw` runs it: `N` in, `N` out.
fn forward(
    p: &RawParams,
    (post, scq): (&mut Direct<ModelMmio>, &mut PartCq),
    (rq, rcq): (&mut Rq, &mut PartCq),
    cfg: RawRecvCfg,
) -> Result<(), String> {
    // SAFETY: the ring's buffer is registered for local write and outlives
    // the loop (the side keeps it); only the NIC and the loop touch it.
    let buf = unsafe { FwBuf::new(cfg) };
    let fw = raw_fw::run_loop::<_, _, _, _, DirectRx>(p, (post, scq), (rq, rcq, &buf), STALL)
        .map_err(|f| f.msg)?;
    let o = &fw.out;
    if let Some(e) = &o.error {
        return Err(format!("the forwarder: {}", raw_fw::error_words(e, o, N)));
    }
    if (o.received, o.sent.posted, o.sent.completed) != (N, N, N) {
        return Err(format!(
            "the forwarder received {}, sent {} and completed {} of {N}",
            o.received, o.sent.posted, o.sent.completed
        ));
    }
    received("forwarder", &fw.counts)
}

fn received(who: &str, c: &RawRecvCounts) -> Result<(), String> {
    if (c.packets, c.udp, c.csum_ok) != (N, N, N) || c.csum_bad != 0 || c.errors != 0 {
        return Err(format!(
            "the {who} counted {} frames ({} UDP, {} good checksums, {} bad, {} errors), not {N}",
            c.packets, c.udp, c.csum_ok, c.csum_bad, c.errors
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(dst: u8, src: u8, body: u8) -> Vec<u8> {
        let mut f = vec![body; 60];
        f[..6].fill(dst);
        f[6..12].fill(src);
        f
    }

    #[test]
    fn a_forward_must_swap_the_macs_and_keep_the_rest() {
        let sent = (true, frame(2, 1, 7));
        let good = vec![sent.clone(), (false, frame(1, 2, 7))];
        assert_eq!(check_forwarded(&good), Ok(()));
        let unswapped = vec![sent.clone(), (false, frame(2, 1, 7))];
        assert!(check_forwarded(&unswapped)
            .unwrap_err()
            .contains("MACs swapped"));
        let changed = vec![sent.clone(), (false, frame(1, 2, 8))];
        assert!(check_forwarded(&changed).is_err());
        let lost = vec![sent];
        assert!(check_forwarded(&lost)
            .unwrap_err()
            .contains("0 frames forwarded of 1"));
    }

    #[test]
    fn a_side_must_send_n_frames_each_its_slot() {
        let p = parse(&format!("{CLIENT} -b -n {N} -s 128")).unwrap();
        let slots = Slots::new(p.size, 1, 1, 1, 4096);
        let mut tx = vec![0u8; slots.buffer_len()];
        slots::fill(&mut tx, &p.frame_spec(), &slots, 1);
        let len = slots.frame_len as usize;
        let log: Vec<(bool, Vec<u8>)> = (0..N)
            .map(|k| {
                let at = slots.offset(k) as usize;
                (true, tx[at..at + len].to_vec())
            })
            .collect();
        let ran = Ran { tx, slots };
        assert_eq!(ran.check_sent(&log, true), Ok(()));
        let e = ran.check_sent(&log[1..], true).unwrap_err();
        assert!(
            e.contains(&format!("199 frames on the wire, not {N}")),
            "{e}"
        );
        let mut bad = log.clone();
        bad[5].1[70] ^= 1;
        let e = ran.check_sent(&bad, true).unwrap_err();
        assert!(e.contains("frame 5 is not its buffer's slot"), "{e}");
    }
}
