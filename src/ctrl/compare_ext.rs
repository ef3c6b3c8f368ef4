//! `rdmaperf compare` between two hosts: what its two sides tell each other
//! after each run, an rdmaperf-only extension of perftest's protocol. Both
//! sides said in their version messages that they run compare (the
//! `compare` of [`super::wire::PeerParams`]); then, at the close of every
//! run (after `--explain`'s exchange, before the close handshake), each
//! sends one [`Note`] in a [`FRAME_LEN`]-byte frame: the client its post
//! method and whether this run was its last, the server its own method and,
//! for send-bw, its receive cost per message. The server knows no method
//! beforehand: it serves runs until a note says `last`.
//!
//! Like [`super::after_run`], the side registers its note on its own thread
//! before the run ([`provide`]) and takes the peer's after ([`take`]).

use super::wire::WireError;
use std::cell::RefCell;

/// Size of the frame each side sends.
pub const FRAME_LEN: usize = 64;
/// The frame's first bytes: anything else is not a compare peer's frame.
pub const MAGIC: &[u8; 8] = b"RPCMP1\0\0";
/// The longest method name a frame holds.
const NAME_LEN: usize = 16;
const LAST_BIT: u8 = 1;

/// One side's word about one run.
#[derive(Clone, Debug, PartialEq)]
pub struct Note {
    /// The post method this side ran with (`wr-api`, `post-send`, `direct`).
    pub method: String,
    /// The client's last run: the server stops serving after it.
    pub last: bool,
    /// The client's count of runs so far, from 1 (the server echoes its own).
    pub run: u32,
    /// send-bw's receiver: its CPU time per received message, ns (else 0).
    pub recv_ns_per_msg: f64,
}

impl Note {
    /// The frame: magic, flags, run, method (NUL padded), receive cost.
    pub fn encode(&self) -> [u8; FRAME_LEN] {
        let mut f = [0u8; FRAME_LEN];
        f[..8].copy_from_slice(MAGIC);
        f[8] = if self.last { LAST_BIT } else { 0 };
        f[12..16].copy_from_slice(&self.run.to_le_bytes());
        let name = self.method.as_bytes();
        let n = name.len().min(NAME_LEN);
        f[16..16 + n].copy_from_slice(&name[..n]);
        f[32..40].copy_from_slice(&self.recv_ns_per_msg.to_bits().to_le_bytes());
        f
    }

    /// A peer's frame, or why it is not one.
    pub fn decode(b: &[u8]) -> Result<Note, WireError> {
        const STEP: &str = "compare frame";
        if b.len() != FRAME_LEN || &b[..8] != MAGIC {
            return Err(WireError::new(
                STEP,
                "not an rdmaperf compare frame: run `rdmaperf compare <tool>` on both hosts",
                b,
            ));
        }
        let name = &b[16..16 + NAME_LEN];
        let end = name.iter().position(|&c| c == 0).unwrap_or(NAME_LEN);
        let method = std::str::from_utf8(&name[..end])
            .ok()
            .filter(|m| !m.is_empty() && m.bytes().all(|c| c.is_ascii_graphic()))
            .ok_or_else(|| WireError::new(STEP, "the method name is not printable", b))?;
        let cost = f64::from_bits(u64::from_le_bytes(b[32..40].try_into().unwrap_or_default()));
        if !cost.is_finite() || cost < 0.0 {
            return Err(WireError::new(STEP, "the receive cost is not a time", b));
        }
        Ok(Note {
            method: method.to_owned(),
            last: b[8] & LAST_BIT != 0,
            run: u32::from_le_bytes([b[12], b[13], b[14], b[15]]),
            recv_ns_per_msg: cost,
        })
    }
}

thread_local! {
    static LOCAL: RefCell<Option<Note>> = const { RefCell::new(None) };
    static PEER: RefCell<Option<Result<Note, String>>> = const { RefCell::new(None) };
}

/// This thread's next session sends `n` at its close and keeps the peer's.
pub fn provide(n: Note) {
    LOCAL.with(|l| *l.borrow_mut() = Some(n));
    PEER.with(|p| *p.borrow_mut() = None);
}

/// The receiver's cost per message, once its run measured it (nothing
/// without a registered note).
pub fn note_recv_cost(ns: f64) {
    LOCAL.with(|l| {
        if let Some(n) = l.borrow_mut().as_mut() {
            n.recv_ns_per_msg = ns;
        }
    });
}

/// This thread's note to send (once).
pub(crate) fn local() -> Option<Note> {
    LOCAL.with(|l| l.borrow_mut().take())
}

/// Records the peer's note, or why none came.
pub(crate) fn set_peer(n: Result<Note, String>) {
    PEER.with(|p| *p.borrow_mut() = Some(n));
}

/// The peer's note (`None`: the session never reached its close), and drops
/// this thread's note if it was never sent.
pub fn take() -> Option<Result<Note, String>> {
    LOCAL.with(|l| l.borrow_mut().take());
    PEER.with(|p| p.borrow_mut().take())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note() -> Note {
        Note {
            method: "post-send".into(),
            last: true,
            run: 7,
            recv_ns_per_msg: 123.5,
        }
    }

    #[test]
    fn a_note_survives_its_frame() {
        let f = note().encode();
        assert_eq!(&f[..8], MAGIC);
        assert_eq!(Note::decode(&f).unwrap(), note());
        let not_last = Note {
            last: false,
            ..note()
        };
        assert!(!Note::decode(&not_last.encode()).unwrap().last);
    }

    /// Bytes from anything but a compare peer are refused with the step
    /// named: a stock key message, a short read, zeros, a bad name or cost.
    #[test]
    fn foreign_bytes_are_refused() {
        let key = b"0000:000011:000000:000000:00000000:0000000000000000\0".to_vec();
        for (b, want) in [
            (key, "not an rdmaperf compare frame"),
            (vec![0u8; FRAME_LEN], "not an rdmaperf compare frame"),
            (
                note().encode()[..40].to_vec(),
                "not an rdmaperf compare frame",
            ),
        ] {
            let e = Note::decode(&b).unwrap_err().to_string();
            assert!(e.contains(want) && e.contains("compare frame"), "{e}");
        }
        let mut f = note().encode();
        f[16..32].fill(0);
        assert!(Note::decode(&f).unwrap_err().to_string().contains("method"));
        let mut f = note().encode();
        f[32..40].copy_from_slice(&f64::NAN.to_bits().to_le_bytes());
        assert!(Note::decode(&f).unwrap_err().to_string().contains("cost"));
    }

    #[test]
    fn the_receive_cost_lands_in_the_registered_note_only() {
        note_recv_cost(5.0);
        assert_eq!(local(), None, "no note registered, nothing to fill");
        provide(Note {
            recv_ns_per_msg: 0.0,
            ..note()
        });
        note_recv_cost(42.0);
        assert_eq!(local().unwrap().recv_ns_per_msg, 42.0);
        set_peer(Err("gone".into()));
        assert_eq!(take(), Some(Err("gone".into())));
        assert_eq!(take(), None);
    }
}
