//! The forwarding loop against a fake NIC: frames arrive only into posted
//! receives (written into the slot as a NIC would), sends complete a poll
//! after they are posted. Checked: each frame goes back once with its MACs
//! swapped, never before it arrived, within the TX window; a slot's receive
//! comes back only after its send completed; silence is a stall.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;

use super::raw_bw::{RawBwConfig, RawPost};
use super::raw_fw::*;
use super::raw_recv::{RawRecvCfg, RawRecvCounts, VerbsRx};
use super::raw_recv_tests::recv;
use crate::mlx5::raw_sq::RawPkt;
use crate::post::{Completion, CompletionQueue, PostError, RecvQueue, WcOpcode};
use core::marker::PhantomData;

const STRIDE: usize = 64;
const LEN: u32 = 60;

/// The peer's frame `k`: its own MACs and a payload naming it.
fn frame(k: u64) -> Vec<u8> {
    let mut f = vec![k as u8; LEN as usize];
    f[..6].copy_from_slice(&[0x02, 0, 0, 0, 0xd5, k as u8]);
    f[6..12].copy_from_slice(&[0x04, 0, 0, 0, 0x5c, k as u8]);
    f
}

#[derive(Default)]
struct Nic {
    base: usize,
    /// Receives posted, oldest first (slots).
    posted: VecDeque<u64>,
    /// Frames the peer has left to send, and those it sent.
    to_arrive: u64,
    arrived: u64,
    /// What went out, in order; signaled completions not yet polled.
    sent: Vec<Vec<u8>>,
    pending: VecDeque<Completion>,
    completed: u64,
    /// Receives posted again, each with the sends completed by then.
    reposts: Vec<(u64, u64)>,
    /// The TX window (0: 3, or `-l` above it).
    tx_depth: u64,
    faults: Vec<String>,
    /// The frame whose receive fails, if any.
    fail: Option<u64>,
    /// Refuse every other post with a full ring.
    full: bool,
    tries: u64,
    /// Frames a receive poll may take (0: one), and empty polls first.
    burst: usize,
    delay: u64,
    /// The loop's clock.
    ticks: u64,
    /// The loop's `-Q` (0: 2).
    cq_mod: u32,
    /// Each post's list length.
    lists: Vec<u64>,
    /// The loop's `-l` and (`-D`) window; 1 and none by default.
    post_list: u32,
    window: Option<super::bw::Deadlines>,
}

#[derive(Clone)]
struct Fake(Rc<RefCell<Nic>>);

impl RecvQueue for Fake {
    fn post_recv(&mut self, wr_id: u64, _: u64, _: u32, _: u32) -> Result<(), PostError> {
        let mut n = self.0.borrow_mut();
        let done = n.completed;
        n.reposts.push((wr_id, done));
        n.posted.push_back(wr_id);
        Ok(())
    }
}

/// The receive CQ: up to `burst` frames a poll (one by default), each into
/// the oldest posted receive, after `delay` empty polls.
struct RecvCq(Fake);
impl CompletionQueue for RecvCq {
    fn poll(&mut self, out: &mut [Completion]) -> Result<usize, PostError> {
        let mut n = self.0 .0.borrow_mut();
        if n.delay > 0 {
            n.delay -= 1;
            n.ticks += 1;
            return Ok(0);
        }
        let mut k = 0;
        while k < out.len() && k < n.burst.max(1) && n.to_arrive > 0 {
            let Some(slot) = n.posted.pop_front() else {
                break;
            };
            let f = frame(n.arrived);
            let at = n.base + slot as usize * STRIDE;
            // SAFETY: the test's buffer holds every slot, and this slot's
            // receive was posted: the loop leaves it alone until it completes.
            unsafe { core::ptr::copy_nonoverlapping(f.as_ptr(), at as *mut u8, f.len()) };
            n.to_arrive -= 1;
            n.arrived += 1;
            out[k] = recv(slot, LEN, 0, 0);
            if n.fail == Some(n.arrived - 1) {
                out[k].status = crate::post::WcStatus::LOC_PROT_ERR;
            }
            k += 1;
        }
        Ok(k)
    }
}

/// The send CQ: what was signaled by the last poll.
struct SendCq(Fake);
impl CompletionQueue for SendCq {
    fn poll(&mut self, out: &mut [Completion]) -> Result<usize, PostError> {
        let mut n = self.0 .0.borrow_mut();
        let mut k = 0;
        while let Some(c) = n.pending.pop_front() {
            n.completed = c.wr_id;
            out[k] = c;
            k += 1;
        }
        Ok(k)
    }
}

impl RawPost for Fake {
    fn post_frames(&mut self, pkts: &[RawPkt], first: u64, signal: bool) -> Result<(), PostError> {
        let mut n = self.0.borrow_mut();
        n.tries += 1;
        if n.full && n.tries % 2 == 1 {
            return Err(PostError::QueueFull);
        }
        for (j, p) in pkts.iter().enumerate() {
            let k = first + j as u64;
            let slot = (p.addr as usize - n.base) / STRIDE;
            if n.posted.contains(&(slot as u64)) {
                n.faults.push(format!(
                    "frame {k}: slot {slot} sent with its receive posted"
                ));
            }
            let arrived = n.arrived;
            if k >= arrived {
                n.faults.push(format!("frame {k} sent, {arrived} arrived"));
            }
            if k - n.completed >= n.tx_depth {
                n.faults.push(format!("frame {k}: TX window over"));
            }
            // SAFETY: the frame lies in the test's buffer (its slot).
            let bytes = unsafe { std::slice::from_raw_parts(p.addr as *const u8, p.len as usize) };
            n.sent.push(bytes.to_vec());
        }
        n.lists.push(pkts.len() as u64);
        if signal {
            n.pending.push_back(Completion {
                wr_id: first + pkts.len() as u64,
                opcode: WcOpcode::SEND,
                ..Completion::default()
            });
        }
        Ok(())
    }
}

/// Forwards with `slots` receives while the peer sends `arrive` of `iters`.
fn forward(slots: u32, (iters, arrive): (u64, u64)) -> (FwOutcome, Nic, RawRecvCounts) {
    forward_on(slots, (iters, arrive), Nic::default())
}

/// [`forward`] on a NIC set up as `nic` (its faults to inject).
fn forward_on(
    slots: u32,
    (iters, arrive): (u64, u64),
    nic: Nic,
) -> (FwOutcome, Nic, RawRecvCounts) {
    let mut mem = vec![0u8; slots as usize * STRIDE];
    let nic = Fake(Rc::new(RefCell::new(Nic {
        base: mem.as_mut_ptr() as usize,
        to_arrive: arrive,
        tx_depth: match nic.tx_depth {
            0 => 3.max(nic.post_list as u64),
            d => d,
        },
        ..nic
    })));
    // SAFETY: `mem` holds `slots` slots and outlives the loop; the fake NIC
    // writes a slot only while its receive is posted.
    let cfg = unsafe { RawRecvCfg::new(mem.as_ptr(), STRIDE as u32, STRIDE as u32, slots, 7) };
    // SAFETY: as above; `mem` is this test's own, writable.
    let buf = unsafe { FwBuf::new(cfg) };
    let (mut post, mut rq) = (nic.clone(), nic.clone());
    for s in 0..slots as u64 {
        rq.post_recv(s, 0, 0, 0).unwrap();
    }
    nic.0.borrow_mut().reposts.clear();
    let (mut scq, mut rcq) = (SendCq(nic.clone()), RecvCq(nic.clone()));
    let mut counts = RawRecvCounts::default();
    let mut held = vec![(0, 0); slots as usize];
    let mut wc = [Completion::default(); 4];
    let (post_list, window, tx_depth, cq_mod) = {
        let n = nic.0.borrow();
        (
            n.post_list.max(1),
            n.window,
            n.tx_depth as u32,
            n.cq_mod.max(2),
        )
    };
    let mut list = vec![RawPkt::default(); post_list as usize];
    // The clock ticks once a read, and once an empty poll of `delay`.
    let clock = nic.clone();
    let now = || {
        let mut n = clock.0.borrow_mut();
        n.ticks += 1;
        n.ticks
    };
    let out = FwLoop::<_, _, _, _, VerbsRx, _> {
        cfg: RawBwConfig {
            iters,
            post_list,
            tx_depth,
            cq_mod,
            stall_ticks: 50,
        },
        window,
        post: &mut post,
        send_cq: &mut scq,
        rq: &mut rq,
        recv_cq: &mut rcq,
        buf: &buf,
        counts: &mut counts,
        held: &mut held,
        list: &mut list,
        wc: &mut wc,
        now,
        classify: PhantomData,
    }
    .run();
    drop((post, rq, scq, rcq, clock));
    let nic = Rc::try_unwrap(nic.0).ok().unwrap().into_inner();
    (out, nic, counts)
}

#[test]
fn each_frame_goes_back_once_with_its_macs_swapped() {
    let (o, nic, counts) = forward(4, (25, 25));
    assert_eq!(o.error, None);
    assert_eq!((o.received, o.sent.posted, o.sent.completed), (25, 25, 25));
    assert_eq!(counts.packets, 25);
    assert_eq!(nic.faults, Vec::<String>::new());
    assert_eq!(nic.sent.len(), 25);
    for (k, got) in nic.sent.iter().enumerate() {
        let mut want = frame(k as u64);
        let (d, s) = want.split_at_mut(6);
        d.swap_with_slice(&mut s[..6]);
        assert_eq!(got, &want, "frame {k}");
    }
    assert!(o.sent.t_start != 0 && o.sent.t_end >= o.sent.t_start);
}

/// A full ring refuses every other post: the frame goes next pass, its
/// MACs swapped once all the same.
#[test]
fn a_full_ring_retries_the_frame_unchanged() {
    let full = Nic {
        full: true,
        ..Nic::default()
    };
    let (o, nic, _) = forward_on(4, (9, 9), full);
    assert_eq!((o.error, o.sent.completed), (None, 9));
    assert_eq!(nic.faults, Vec::<String>::new());
    for (k, got) in nic.sent.iter().enumerate() {
        assert_eq!(
            got[..12],
            [&frame(k as u64)[6..12], &frame(k as u64)[..6]].concat()[..]
        );
    }
}

/// A receive completing with an error ends the run (perftest's
/// `NOTIFY_COMP_ERROR_RECV`), frames before it forwarded.
#[test]
fn a_failed_receive_ends_the_run() {
    let fail = Nic {
        fail: Some(5),
        ..Nic::default()
    };
    let (o, nic, counts) = forward_on(4, (10, 10), fail);
    assert_eq!(
        o.error,
        Some(FwError::RecvFailed(crate::post::WcStatus::LOC_PROT_ERR))
    );
    assert_eq!((o.received, counts.errors), (5, 1));
    assert!(nic.sent.len() <= 5);
}

#[test]
fn a_slot_comes_back_only_after_its_send_completed() {
    let (o, nic, _) = forward(2, (12, 12));
    assert_eq!(o.error, None);
    assert_eq!(nic.faults, Vec::<String>::new());
    assert_eq!(o.reposted, 12);
    for (k, (slot, done)) in nic.reposts.iter().enumerate() {
        assert!(*done > k as u64, "repost {k} with {done} sends completed");
        assert_eq!(*slot, k as u64 % 2, "repost {k}: slots come back in order");
    }
}

#[test]
fn forwarding_never_outruns_the_receives_and_silence_stalls() {
    let (o, nic, _) = forward(4, (10, 3));
    assert_eq!(nic.faults, Vec::<String>::new());
    assert_eq!(nic.sent.len(), 3);
    assert_eq!(
        o.error,
        Some(FwError::Stalled {
            received: 3,
            sent: 3,
            // Frame 2 asked for no completion (-Q 2).
            completed: 2
        })
    );
}

/// Every frame the fake NIC saw go out is the peer's, in order, with its
/// MACs swapped.
fn each_swapped_in_order(nic: &Nic) {
    for (k, got) in nic.sent.iter().enumerate() {
        let mut want = frame(k as u64);
        let (d, s) = want.split_at_mut(6);
        d.swap_with_slice(&mut s[..6]);
        assert_eq!(got, &want, "frame {k}");
    }
}

/// `-l 4` with frames arriving four a poll: the forwards go in lists of
/// four (the last cut at `-n`), each frame swapped once and in order,
/// never ahead of its arrival, within the window.
#[test]
fn a_post_list_forwards_whole_lists_of_what_arrived() {
    let nic = Nic {
        post_list: 4,
        burst: 4,
        ..Nic::default()
    };
    let (o, nic, _) = forward_on(8, (26, 26), nic);
    assert_eq!(o.error, None);
    assert_eq!((o.received, o.sent.posted, o.sent.completed), (26, 26, 26));
    assert_eq!(nic.faults, Vec::<String>::new());
    assert_eq!(nic.sent.len(), 26);
    each_swapped_in_order(&nic);
    assert_eq!(nic.lists.iter().sum::<u64>(), 26);
    assert!(nic.lists.iter().all(|&l| l <= 4), "{:?}", nic.lists);
    assert!(
        nic.lists.iter().filter(|&&l| l == 4).count() >= 5,
        "{:?}",
        nic.lists
    );
}

/// One receive slot and `-l 4` (`-t 16`): a list can never fill, so each
/// frame goes alone once the receive CQ is empty, and asks for a
/// completion (under `-Q 2` frame 0 would not, its slot would never come
/// back and the run would stall).
#[test]
fn a_short_list_goes_when_nothing_more_came_and_is_signaled() {
    let nic = Nic {
        post_list: 4,
        tx_depth: 16,
        ..Nic::default()
    };
    let (o, nic, _) = forward_on(1, (10, 10), nic);
    assert_eq!(o.error, None);
    assert_eq!((o.received, o.sent.completed, o.reposted), (10, 10, 10));
    assert_eq!(nic.faults, Vec::<String>::new());
    assert_eq!(nic.lists, vec![1; 10]);
    each_swapped_in_order(&nic);
}

/// The `-D` window in ticks from the first frame (the fake clock ticks
/// once a read).
const WINDOW: super::bw::Deadlines = super::bw::Deadlines {
    sample_start: 200,
    sample_stop: 1000,
    end: 1200,
};

/// `-D`: the window starts at the first frame (here after 500 empty
/// polls, past the window's whole length from the loop's start) and the
/// run ends at its end, however many frames the peer has left; the table's
/// count is the completions inside the sample, timed over it.
#[test]
fn duration_forwards_until_the_window_ends_and_measures_its_sample() {
    let nic = Nic {
        window: Some(WINDOW),
        delay: 500,
        ..Nic::default()
    };
    let (o, nic, counts) = forward_on(4, (0, 1_000_000), nic);
    assert_eq!(o.error, None);
    let s = &o.sent;
    assert!(o.received > 0 && o.received < 1_000_000, "{}", o.received);
    assert_eq!(counts.packets, o.received);
    assert!(s.completed <= s.posted && s.posted <= o.received);
    assert!(s.measured > 0 && s.measured < s.completed, "{s:?}");
    let span = s.t_end - s.t_start;
    assert!((780..900).contains(&span), "sample of {span} ticks");
    assert_eq!(nic.faults, Vec::<String>::new());
    each_swapped_in_order(&nic);
}

/// `-D`: a peer that goes quiet is no stall: the run waits out its window.
#[test]
fn duration_outlasts_a_quiet_peer() {
    let nic = Nic {
        window: Some(WINDOW),
        ..Nic::default()
    };
    let (o, nic, _) = forward_on(4, (0, 5), nic);
    assert_eq!(o.error, None);
    assert_eq!((o.received, o.sent.posted), (5, 5));
    // -Q 2 and no last frame under -D: frame 4 asks for no completion.
    assert_eq!(o.sent.completed, 4);
    assert_eq!(nic.faults, Vec::<String>::new());
}

/// `-t 8 -Q 8 -l 5`: the first list holds no 8th frame, and after it no
/// second list fits the window: it asks for a completion all the same
/// (else the second would wait for ever).
#[test]
fn a_list_that_leaves_no_room_for_another_is_signaled() {
    let nic = Nic {
        post_list: 5,
        burst: 5,
        tx_depth: 8,
        cq_mod: 8,
        ..Nic::default()
    };
    let (o, nic, _) = forward_on(16, (40, 40), nic);
    assert_eq!(o.error, None);
    assert_eq!((o.received, o.sent.completed), (40, 40));
    assert_eq!(nic.faults, Vec::<String>::new());
    assert!(
        nic.lists.iter().filter(|&&l| l == 5).count() >= 4,
        "{:?}",
        nic.lists
    );
    each_swapped_in_order(&nic);
}
