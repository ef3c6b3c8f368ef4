//! The raw receive loop against a scripted queue and CQ: classification by
//! both methods, the checksum verdict, reposting, the stops and the report.

use std::collections::VecDeque;

use super::raw_recv::*;
use crate::post::rx_offload::{RxOffload, WC_IP_CSUM_OK};
use crate::post::wc::poll_queued;
use crate::post::{Completion, CompletionQueue, PostError, RecvQueue, WcOpcode, WcStatus};

const STRIDE: usize = 128;

#[derive(Default)]
pub(super) struct Rq {
    pub(super) posted: Vec<(u64, u64, u32)>,
}
impl RecvQueue for Rq {
    fn post_recv(&mut self, wr_id: u64, addr: u64, _: u32, len: u32) -> Result<(), PostError> {
        self.posted.push((wr_id, addr, len));
        Ok(())
    }
}

#[derive(Default)]
pub(super) struct Cq(pub(super) VecDeque<Completion>);
impl CompletionQueue for Cq {
    fn poll(&mut self, out: &mut [Completion]) -> Result<usize, PostError> {
        Ok(poll_queued(&mut self.0, out))
    }
}

/// Slot 0: IPv4/UDP; slot 1: VLAN + IPv6/TCP; slot 2: ARP (neither).
fn buffers() -> Vec<u8> {
    let mut b = vec![0u8; 3 * STRIDE];
    b[12..14].copy_from_slice(&[0x08, 0x00]);
    b[14] = 0x45;
    b[23] = 17;
    let s = STRIDE;
    b[s + 12..s + 14].copy_from_slice(&[0x81, 0x00]);
    b[s + 16..s + 18].copy_from_slice(&[0x86, 0xdd]);
    b[s + 18] = 0x60;
    b[s + 24] = 6;
    b[2 * s + 12..2 * s + 14].copy_from_slice(&[0x08, 0x06]);
    b
}

pub(super) fn recv(slot: u64, len: u32, wc_flags: u32, rx: u16) -> Completion {
    Completion {
        wr_id: slot,
        opcode: WcOpcode::RECV,
        byte_len: len,
        wc_flags,
        rx: RxOffload(rx),
        ..Completion::default()
    }
}

fn run<K: RxClassify>(
    b: &[u8],
    wcs: Vec<Completion>,
    until: u64,
) -> (Result<(), RawRecvError>, RawRecvCounts, Rq) {
    // SAFETY: `b` holds 3 slots of STRIDE bytes and outlives the loop.
    let cfg = unsafe { RawRecvCfg::new(b.as_ptr(), STRIDE as u32, 100, 3, 7) };
    let (mut rq, mut cq) = (Rq::default(), Cq(wcs.into()));
    let mut counts = RawRecvCounts::default();
    let r = run_raw_recv::<_, _, K>(&mut rq, &mut cq, &cfg, &mut counts, until, &mut || true);
    (r, counts, rq)
}

#[test]
fn verbs_reads_the_headers_from_the_frame_and_the_checksum_from_wc_flags() {
    let b = buffers();
    let wcs = vec![
        recv(0, 60, WC_IP_CSUM_OK, 0),
        recv(1, 90, 0, 0),
        recv(2, 60, 0, 0),
        recv(0, 60, 0, 0),
    ];
    let (r, c, rq) = run::<VerbsRx>(&b, wcs, 4);
    assert_eq!(r, Ok(()));
    assert_eq!((c.packets, c.bytes), (4, 270));
    assert_eq!((c.ipv4, c.ipv6, c.l3_other), (2, 1, 1));
    assert_eq!((c.udp, c.tcp, c.l4_other), (2, 1, 1));
    // The second IPv4/UDP frame came without IP_CSUM_OK: bad.
    assert_eq!((c.csum_ok, c.csum_bad, c.csum_unchecked), (1, 1, 2));
    // Each slot posted again where it was, for the posted room.
    let base = b.as_ptr() as u64;
    assert_eq!(rq.posted[1], (1, base + STRIDE as u64, 100));
    assert_eq!(rq.posted.len(), 4);
}

#[test]
fn direct_reads_the_cqe_bytes_not_the_frame() {
    // Buffers all zero: only the CQE says what arrived.
    let b = vec![0u8; 3 * STRIDE];
    let wcs = vec![
        recv(0, 60, 0, 0x0728),
        recv(1, 60, 0, 0x0528),
        recv(2, 60, 0, 0x0714),
        recv(0, 60, 0, 0x0100),
    ];
    let (_, c, _) = run::<DirectRx>(&b, wcs, 4);
    assert_eq!((c.ipv4, c.ipv6, c.l3_other), (2, 1, 1));
    assert_eq!((c.udp, c.tcp, c.l4_other), (2, 1, 1));
    assert_eq!((c.csum_ok, c.csum_bad, c.csum_unchecked), (1, 1, 2));
}

#[test]
fn errors_sends_and_flushes_are_told_apart() {
    let b = buffers();
    let send = Completion {
        opcode: WcOpcode::SEND,
        ..Completion::default()
    };
    // libibverbs leaves a failed completion's opcode undefined.
    let long = Completion {
        status: WcStatus::LOC_LEN_ERR,
        opcode: WcOpcode::SEND,
        ..recv(1, 0, 0, 0)
    };
    let prot = Completion {
        status: WcStatus::LOC_PROT_ERR,
        ..recv(2, 0, 0, 0)
    };
    let flush = Completion {
        status: WcStatus::WR_FLUSH_ERR,
        ..recv(0, 0, 0, 0)
    };
    let (r, c, rq) = run::<VerbsRx>(&b, vec![send, long, prot, flush], 10);
    assert_eq!(r, Err(RawRecvError::Flushed));
    assert_eq!(
        (c.packets, c.other_cqes, c.too_long, c.errors),
        (0, 1, 1, 1)
    );
    assert_eq!(c.last_error, WcStatus::LOC_PROT_ERR);
    assert_eq!(
        rq.posted.len(),
        2,
        "failed receives are posted again, a flush is not"
    );
    // Idle with packets short of the target: the caller's idle() ends it.
    let (r, c, _) = run::<VerbsRx>(&b, vec![recv(0, 60, 0, 0)], 10);
    assert_eq!((r, c.packets), (Ok(()), 1));
}

#[test]
fn findings_name_their_counts() {
    let mut c = RawRecvCounts {
        csum_ok: 7,
        csum_bad: 3,
        rq_dry: Some(0),
        ..RawRecvCounts::default()
    };
    let f = c.findings(64);
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(
        f[0].starts_with("3 of 10 IPv4 TCP/UDP frames arrived with a bad checksum"),
        "{f:?}"
    );
    c.csum_bad = 0;
    c.rq_dry = Some(12);
    let f = c.findings(1518);
    assert!(
        f[0].starts_with("one RQ did not keep up at this frame size (1518 B): 12 frames"),
        "{f:?}"
    );
    assert!(c
        .lines()
        .iter()
        .any(|l| l == "dropped with no receive posted: 12"));
    c.rq_dry = None;
    assert!(c.findings(64).is_empty());
    assert_eq!(c.lines().len(), 3);
}
