//! Real-device checks of the verbs control path and the two verbs post
//! methods: two QPs on one device talk to each other (loopback). Runs where a
//! device exists (soft-RoCE VM: `scripts/rxe-vm.sh`); elsewhere SKIPPED.
//! Device: $RDMAPERF_TEST_DEV or the first one; port 1.

use std::sync::Arc;
use std::time::{Duration, Instant};

use rdmaperf::post::post_send::PostSendQueue;
use rdmaperf::post::verbs_cq::{VerbsCq, VerbsRecv};
use rdmaperf::post::wr_api::{send_ops_flags, wr_api_probe, WrApiQueue};
use rdmaperf::post::{
    Completion, CompletionQueue, Op, RecvQueue, SendQueue, WcOpcode, WcStatus, WrDesc,
};
use rdmaperf::selfcheck::verbs_rig::Dev;
use rdmaperf::verbs::*;

/// The device the tests run on: port 1, its GID on Ethernet, a PD.
type Env = Dev;

/// `RDMAPERF_TEST_DEV` (or the first device), or None (SKIPPED) where there
/// is none or its port 1 is not ACTIVE.
fn env() -> Option<Env> {
    let name = std::env::var("RDMAPERF_TEST_DEV").ok();
    let ctx = match Context::open(name.as_deref()) {
        Ok(c) => c,
        Err(e) => {
            println!("SKIPPED: no RDMA device: {e}");
            return None;
        }
    };
    let pa = ctx.query_port(1).expect("query_port(1)");
    if !pa.state.is_active() {
        println!("SKIPPED: {} port 1 is {}", ctx.name(), pa.state.name());
        return None;
    }
    Some(Dev::on(ctx).expect("port 1's GID and a PD"))
}

const ALL: Access = Access(
    Access::LOCAL_WRITE.0
        | Access::REMOTE_WRITE.0
        | Access::REMOTE_READ.0
        | Access::REMOTE_ATOMIC.0,
);

fn mr(e: &Env, len: usize, byte: u8) -> Mr {
    Mr::new(&e.pd, AlignedBuf::filled(len, byte).unwrap(), ALL).expect("reg mr")
}

struct Side {
    qp: Arc<Qp>,
    cq: VerbsCq,
    psn: u32,
}

fn side(e: &Env, t: QpType, ops: Option<u64>, inline: u32) -> Side {
    let cq = Cq::new(&e.ctx, 64, false).unwrap();
    let init = QpInit {
        max_inline_data: inline,
        send_ops_flags: ops,
        ..QpInit::new(t)
    };
    let qp = Qp::create(&e.pd, &cq, &cq, &init).expect("create qp");
    qp.to_init(&InitAttr::new(e.port, ALL)).expect("to_init");
    Side {
        qp,
        cq: VerbsCq::new(&cq, 16).unwrap(),
        psn: random_psn(),
    }
}

fn rtr_to(e: &Env, peer: &Side) -> RtrAttr {
    let mut r = RtrAttr::new(e.port, e.mtu, peer.qp.qpn(), peer.psn);
    r.dlid = e.lid;
    r.grh = e.grh;
    r.max_dest_rd_atomic = 16;
    r
}

/// Two connected QPs of type `t`, both at RTS.
fn pair(e: &Env, t: QpType, ops: Option<u64>, inline: u32) -> (Side, Side) {
    let a = side(e, t, ops, inline);
    let b = side(e, t, ops, inline);
    for (x, y) in [(&a, &b), (&b, &a)] {
        x.qp.to_rtr(&rtr_to(e, y)).expect("to_rtr");
        x.qp.to_rts(&RtsAttr::new(x.psn, 16)).expect("to_rts");
    }
    (a, b)
}

fn wait(cq: &mut VerbsCq, n: usize) -> Vec<Completion> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut got = Vec::new();
    let mut buf = [Completion::default(); 16];
    while got.len() < n {
        let k = cq.poll(&mut buf).expect("poll");
        got.extend_from_slice(&buf[..k]);
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {n} completions, got {got:?}"
        );
    }
    got
}

fn desc(i: u64, l: &Mr, loff: u64, r: &Mr, roff: u64, len: u32, signaled: bool) -> WrDesc {
    WrDesc {
        wr_id: i,
        laddr: l.addr() + loff,
        lkey: l.lkey(),
        len,
        raddr: r.addr() + roff,
        rkey: r.rkey(),
        signaled,
        ..Default::default()
    }
}

/// 4 WRITEs of 64 B in one list, last signaled; checks the bytes landed.
fn check_write(e: &Env, q: &mut dyn SendQueue, a: &mut Side, inline: bool) {
    let mut src = mr(e, 4096, 0);
    src.buf_mut().unwrap().fill_pseudo_random(99);
    let dst = mr(e, 4096, 0);
    let wrs: Vec<WrDesc> = (0..4)
        .map(|i| WrDesc {
            inline,
            ..desc(i, &src, i * 64, &dst, i * 128, 64, i == 3)
        })
        .collect();
    q.post(Op::Write, &wrs).expect("post writes");
    let c = wait(&mut a.cq, 1);
    assert_eq!(c[0].status, WcStatus::SUCCESS, "{c:?}");
    assert_eq!(c[0].opcode, WcOpcode::RDMA_WRITE);
    assert_eq!(c[0].wr_id, 3);
    let (s, d) = (src.buf().unwrap().as_slice(), dst.buf().unwrap().as_slice());
    for i in 0..4 {
        assert_eq!(&d[i * 128..i * 128 + 64], &s[i * 64..i * 64 + 64], "WR {i}");
        assert!(d[i * 128 + 64..i * 128 + 128].iter().all(|&x| x == 0));
    }
}

#[test]
fn device_port_gid_queries() {
    let Some(e) = env() else { return };
    let d = e.ctx.attr();
    assert!(d.max_qp_wr > 0 && d.max_sge > 0 && d.max_cqe > 0, "{d:?}");
    assert!(d.phys_port_cnt >= 1);
    let bad = e
        .ctx
        .query_port(d.phys_port_cnt + 1)
        .unwrap_err()
        .to_string();
    assert!(bad.contains("valid ports are"), "{bad}");
    let t = e.ctx.gid_table(1).unwrap();
    println!("{} port 1 GIDs:\n{}", e.ctx.name(), t.describe());
    let bad = t.get(t.entries.len() as u32 + 5).unwrap_err().to_string();
    assert!(bad.contains("-x/--gid-index"), "{bad}");
    let e2 = Context::open(Some("no-such-dev")).unwrap_err().to_string();
    assert!(e2.contains(e.ctx.name()), "{e2}");
}

/// RC WRITEs through `ibv_post_send`, their data inline or not.
fn rc_writes_post_send(inline: bool) {
    let Some(e) = env() else { return };
    let (mut a, _b) = pair(&e, QpType::RC, None, if inline { 64 } else { 0 });
    let mut q = PostSendQueue::new(&a.qp, 8, None).unwrap();
    check_write(&e, &mut q, &mut a, inline);
}

#[test]
fn rc_write_post_send() {
    rc_writes_post_send(false);
}

#[test]
fn rc_write_wr_api_and_inline() {
    let Some(e) = env() else { return };
    let ops = send_ops_flags(&[Op::Write, Op::Read, Op::FetchAdd, Op::CmpSwap, Op::SendImm]);
    if let Err(why) = wr_api_probe(&e.ctx, QpType::RC, ops) {
        println!("SKIPPED: WR API: {why}");
        return;
    }
    let (mut a, _b) = pair(&e, QpType::RC, Some(ops), 64);
    assert!(a.qp.caps().max_inline_data >= 64);
    let mut q = WrApiQueue::new(&a.qp, None).unwrap();
    check_write(&e, &mut q, &mut a, false);
    check_write(&e, &mut q, &mut a, true);
    // An op outside send_ops_flags is refused before touching the QP.
    assert_eq!(
        q.post(Op::Send, &[WrDesc::default()]),
        Err(rdmaperf::post::PostError::Unsupported)
    );
}

#[test]
fn rc_inline_post_send() {
    rc_writes_post_send(true);
}

/// Posts `wr` as one `op`, waits for its completion on `cq` and checks it
/// succeeded as `want`.
fn post_one(q: &mut dyn SendQueue, cq: &mut VerbsCq, op: Op, wr: WrDesc, want: WcOpcode) {
    q.post(op, &[wr]).unwrap();
    let c = wait(cq, 1);
    assert_eq!(
        (c[0].status, c[0].opcode),
        (WcStatus::SUCCESS, want),
        "{c:?}"
    );
}

/// The u64 at byte `off` of `m`'s host buffer.
///
/// # Safety
/// `off` is 8-byte aligned and inside the buffer, and no RDMA is in flight
/// on those bytes.
unsafe fn u64_at(m: &Mr, off: usize) -> u64 {
    // SAFETY: the caller's promise.
    unsafe { (m.host_ptr().unwrap().add(off) as *const u64).read_volatile() }
}

fn check_read_atomics(e: &Env, q: &mut dyn SendQueue, a: &mut Side) {
    let local = mr(e, 4096, 0);
    let remote = mr(e, 4096, 0x5a);
    post_one(
        q,
        &mut a.cq,
        Op::Read,
        desc(1, &local, 0, &remote, 0, 256, true),
        WcOpcode::RDMA_READ,
    );
    assert!(local.buf().unwrap().as_slice()[..256]
        .iter()
        .all(|&x| x == 0x5a));

    // SAFETY: test-owned buffer, no RDMA in flight on these bytes.
    unsafe { (remote.host_ptr().unwrap().add(1024) as *mut u64).write_volatile(10) };
    let fa = WrDesc {
        swap_add: 5,
        ..desc(2, &local, 512, &remote, 1024, 8, true)
    };
    post_one(q, &mut a.cq, Op::FetchAdd, fa, WcOpcode::FETCH_ADD);
    // SAFETY: the atomic completed; aligned test-owned u64s.
    let (old, new) = unsafe { (u64_at(&local, 512), u64_at(&remote, 1024)) };
    assert_eq!((old, new), (10, 15));

    let cs = WrDesc {
        compare: 15,
        swap_add: 99,
        ..desc(3, &local, 520, &remote, 1024, 8, true)
    };
    post_one(q, &mut a.cq, Op::CmpSwap, cs, WcOpcode::COMP_SWAP);
    // SAFETY: as above.
    let (old, new) = unsafe { (u64_at(&local, 520), u64_at(&remote, 1024)) };
    assert_eq!((old, new), (15, 99));
}

#[test]
fn rc_read_atomics_both_methods() {
    let Some(e) = env() else { return };
    if !e.ctx.attr().atomic_cap.supported() {
        println!("SKIPPED: {} has no atomics", e.ctx.name());
        return;
    }
    let (mut a, _b) = pair(&e, QpType::RC, None, 0);
    let mut q = PostSendQueue::new(&a.qp, 1, None).unwrap();
    check_read_atomics(&e, &mut q, &mut a);

    let ops = send_ops_flags(&[Op::Read, Op::FetchAdd, Op::CmpSwap]);
    if wr_api_probe(&e.ctx, QpType::RC, ops).is_ok() {
        let (mut a, _b) = pair(&e, QpType::RC, Some(ops), 0);
        let mut q = WrApiQueue::new(&a.qp, None).unwrap();
        check_read_atomics(&e, &mut q, &mut a);
    }
}

#[test]
fn rc_send_imm_and_recv() {
    let Some(e) = env() else { return };
    let (mut a, mut b) = pair(&e, QpType::RC, None, 0);
    let src = mr(&e, 4096, 0x33);
    let dst = mr(&e, 4096, 0);
    let mut rq = VerbsRecv::new(&b.qp).unwrap();
    rq.post_recv(42, dst.addr(), dst.lkey(), 4096).unwrap();
    let mut q = PostSendQueue::new(&a.qp, 1, None).unwrap();
    let d = WrDesc {
        imm: 0xabcd_0123,
        ..desc(7, &src, 0, &src, 0, 100, true)
    };
    post_one(&mut q, &mut a.cq, Op::SendImm, d, WcOpcode::SEND);
    let r = wait(&mut b.cq, 1);
    assert_eq!(r[0].status, WcStatus::SUCCESS, "{r:?}");
    assert_eq!(
        (r[0].opcode, r[0].wr_id, r[0].byte_len),
        (WcOpcode::RECV, 42, 100)
    );
    assert_eq!(r[0].imm, 0xabcd_0123u32.to_be());
    assert_eq!(r[0].qp_num, b.qp.qpn());
    assert!(dst.buf().unwrap().as_slice()[..100]
        .iter()
        .all(|&x| x == 0x33));
}

#[test]
fn ud_send_both_methods() {
    let Some(e) = env() else { return };
    for wr_api in [false, true] {
        let ops = send_ops_flags(&[Op::Send]);
        if wr_api && wr_api_probe(&e.ctx, QpType::UD, ops).is_err() {
            println!("note: UD WR API not supported on {}", e.ctx.name());
            continue;
        }
        let (mut a, mut b) = pair(&e, QpType::UD, wr_api.then_some(ops), 0);
        let ah = Ah::new(&e.pd, &rtr_to(&e, &b).ah_attr()).expect("create ah");
        let dest = UdDest {
            ah,
            remote_qpn: b.qp.qpn(),
            remote_qkey: UD_QKEY,
        };
        let src = mr(&e, 4096, 0x77);
        let dst = mr(&e, 4096, 0);
        let mut rq = VerbsRecv::new(&b.qp).unwrap();
        rq.post_recv(5, dst.addr(), dst.lkey(), 64 + 40).unwrap();
        let mut q: Box<dyn SendQueue> = if wr_api {
            Box::new(WrApiQueue::new(&a.qp, Some(dest)).unwrap())
        } else {
            Box::new(PostSendQueue::new(&a.qp, 4, Some(dest)).unwrap())
        };
        q.post(Op::Send, &[desc(9, &src, 0, &src, 0, 64, true)])
            .unwrap();
        assert_eq!(
            q.post(Op::Write, &[desc(9, &src, 0, &src, 0, 64, true)]),
            Err(rdmaperf::post::PostError::Unsupported)
        );
        let c = wait(&mut a.cq, 1);
        assert_eq!(c[0].status, WcStatus::SUCCESS, "{c:?}");
        let r = wait(&mut b.cq, 1);
        assert_eq!(r[0].status, WcStatus::SUCCESS, "{r:?}");
        // 40 bytes of GRH precede the payload.
        assert_eq!((r[0].wr_id, r[0].byte_len), (5, 104));
        assert!(dst.buf().unwrap().as_slice()[40..104]
            .iter()
            .all(|&x| x == 0x77));
    }
}

#[test]
fn errors_name_the_problem() {
    let Some(e) = env() else { return };
    // REMOTE_WRITE without LOCAL_WRITE is invalid for an MR.
    let r = Mr::new(
        &e.pd,
        AlignedBuf::zeroed(4096).unwrap(),
        Access::REMOTE_WRITE,
    );
    match r {
        Err(err) => {
            let s = err.to_string();
            assert!(
                s.contains("ibv_reg_mr failed") && s.contains("4096 bytes"),
                "{s}"
            );
            assert!(s.contains("REMOTE_WRITE"), "{s}");
        }
        Ok(_) => println!(
            "note: {} accepted REMOTE_WRITE without LOCAL_WRITE",
            e.ctx.name()
        ),
    }
    let cq = Cq::new(&e.ctx, 4, false).unwrap();
    let huge = QpInit {
        max_send_wr: u32::MAX / 2,
        ..QpInit::new(QpType::RC)
    };
    let s = Qp::create(&e.pd, &cq, &cq, &huge).unwrap_err().to_string();
    assert!(
        s.contains("ibv_create_qp failed") && s.contains("max_qp_wr"),
        "{s}"
    );
    let inl = Qp::probe_max_inline(&e.pd, &cq, QpType::RC, 4096);
    println!("{}: max inline (RC) {inl}", e.ctx.name());
}
