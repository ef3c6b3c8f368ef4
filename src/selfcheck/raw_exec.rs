//! Running one raw case on a [`RawRig`] (a raw packet SQ, its CQ, and
//! whatever sees the frames it sends): perftest's frames (`raw::frame`,
//! IPv4/UDP, four flows, a payload seed per frame) are laid in the rig's
//! buffer a cache line apart, posted through one raw method, and the frames
//! that left must equal them byte for byte, in order; every frame must be
//! accounted for by a successful completion, and a session case must take
//! the WQEs its limit says (where the rig can count them). Control path:
//! allocation and formatting are fine here.

use std::time::Instant;

use super::exec::{retry_while_full, WAIT};
use super::raw_cases::{raw_cases, PairKind, RawCase, RawMethod, RawRun, RawShape};
use super::Outcome;
use crate::mlx5::raw_sq::RawPkt;
use crate::post::PostError;
use crate::raw::frame::{self, FrameSpec};

/// A raw packet SQ posting through the three raw methods, and the wire it
/// sends to.
pub trait RawRig {
    /// The registered buffer the frames are posted from.
    fn buf(&mut self) -> &mut [u8];
    fn post(&mut self, m: RawMethod, pkts: &[RawPkt]) -> Result<(), PostError>;
    /// Lets a software NIC run and polls the CQ; returns how many frames
    /// posted are not yet accounted for by a completion. `Err`: an error
    /// completion, decoded.
    fn pending(&mut self) -> Result<u64, String>;
    /// The frames that left since the last call, in order.
    fn take_wire(&mut self) -> Vec<Vec<u8>>;
    /// WQEs the NIC has run, where the rig can tell (the model).
    fn wqes_run(&self) -> Option<u64>;
    /// Fault injection (the model): lose the next `n` WQEs; false where
    /// the rig cannot.
    fn inject_drop(&mut self, _n: u32) -> bool {
        false
    }
    /// Runs the raw-eth-bw pair `kind` (two sides, one QP each); `Err`
    /// says what was wrong, or that the rig cannot.
    fn pair(&mut self, _kind: PairKind) -> Result<(), String> {
        Err("this rig runs no raw-eth-bw pair".into())
    }
}

/// Frames of a size case (fewer where the buffer holds fewer).
const FRAMES: usize = 100;
/// A size case's post lists after its first frame, which goes alone.
const LIST: usize = 16;
const SEED: u32 = 0x5e1f_c4ec;

/// Runs every raw case, each on a fresh rig from `rig` (an `Err` is the
/// reason the case is SKIPPED); `before(i, case, rig)` runs before case `i`
/// (fault injection in tests).
pub fn run_raw<'r>(
    mut rig: impl FnMut() -> Result<Box<dyn RawRig + 'r>, String>,
    mut before: impl FnMut(usize, &RawCase, &mut dyn RawRig),
) -> RawRun {
    let mut cases = Vec::new();
    for (i, c) in raw_cases().into_iter().enumerate() {
        let o = match rig() {
            Err(why) => Outcome::NotRun(why),
            Ok(mut r) => {
                before(i, &c, r.as_mut());
                match run_raw_case(r.as_mut(), &c) {
                    Ok(()) => Outcome::Ok,
                    Err(e) => Outcome::Failed(e),
                }
            }
        };
        cases.push((c, o));
    }
    RawRun { cases }
}

/// Runs `c`; `Err` says what was wrong.
pub fn run_raw_case(rig: &mut dyn RawRig, c: &RawCase) -> Result<(), String> {
    match c.shape {
        RawShape::Pair(kind) => rig.pair(kind),
        _ => run_post_case(rig, c),
    }
}

/// A post method's case (a size, or an eMPW session limit).
fn run_post_case(rig: &mut dyn RawRig, c: &RawCase) -> Result<(), String> {
    let (size, n) = match c.shape {
        RawShape::Size(s) => (s as usize, FRAMES),
        RawShape::Session { n, .. } => (64, n as usize),
        RawShape::Pair(_) => return Err("a pair is no post method's case".into()),
    };
    let s = FrameSpec::sample_udp4(size);
    let stride = s.frame_len().next_multiple_of(64);
    let buf = rig.buf();
    let n = n.min(buf.len() / stride);
    let base = buf.as_ptr() as u64;
    let frames: Vec<Vec<u8>> = (0..n)
        .map(|i| frame::frame(&s, (i % 4) as u16, i as u64, SEED ^ i as u32))
        .collect();
    for (i, f) in frames.iter().enumerate() {
        buf[i * stride..i * stride + f.len()].copy_from_slice(f);
    }
    let pkts: Vec<RawPkt> = (0..n)
        .map(|i| RawPkt {
            addr: base + (i * stride) as u64,
            len: s.frame_len() as u32,
        })
        .collect();
    let before = rig.wqes_run();
    match c.shape {
        // One frame alone (BlueFlame), then lists.
        RawShape::Size(_) => {
            let (one, rest) = pkts.split_at(1);
            post_with_room(rig, c.method, one)?;
            for l in rest.chunks(LIST) {
                post_with_room(rig, c.method, l)?;
            }
        }
        _ => post_with_room(rig, c.method, &pkts)?,
    }
    wait_sent(rig)?;
    same_frames(&rig.take_wire(), &frames, size)?;
    if let (RawShape::Session { wqes, .. }, Some(a), Some(b)) = (c.shape, before, rig.wqes_run()) {
        if b - a != wqes as u64 {
            return Err(format!(
                "{n} frames took {} WQEs, the session limit makes it {wqes}",
                b - a
            ));
        }
    }
    Ok(())
}

fn post_with_room(rig: &mut dyn RawRig, m: RawMethod, pkts: &[RawPkt]) -> Result<(), String> {
    let what = ("frames", pkts.len());
    retry_while_full(rig, |r| r.post(m, pkts), |r| r.pending().map(drop), what)
}

/// Waits until every frame posted is accounted for by a completion.
fn wait_sent(rig: &mut dyn RawRig) -> Result<(), String> {
    let t0 = Instant::now();
    loop {
        let left = rig.pending()?;
        if left == 0 {
            return Ok(());
        }
        if t0.elapsed() > WAIT {
            return Err(format!(
                "{left} frames without a completion after {}s",
                WAIT.as_secs()
            ));
        }
    }
}

/// The frames that left against the frames posted, byte for byte.
fn same_frames(wire: &[Vec<u8>], sent: &[Vec<u8>], size: usize) -> Result<(), String> {
    for (i, (w, f)) in wire.iter().zip(sent).enumerate() {
        if w.len() != f.len() {
            return Err(format!(
                "frame {i} (-s {size}) left with {} bytes, {} posted",
                w.len(),
                f.len()
            ));
        }
        if let Some(k) = w.iter().zip(f).position(|(a, b)| a != b) {
            return Err(format!(
                "frame {i} (-s {size}) differs at byte {k} of {}: {:#04x}, raw::frame has {:#04x}",
                f.len(),
                w[k],
                f[k]
            ));
        }
    }
    if wire.len() != sent.len() {
        return Err(format!(
            "{} frames left, {} were posted",
            wire.len(),
            sent.len()
        ));
    }
    Ok(())
}
