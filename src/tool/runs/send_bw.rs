//! send-bw, unidirectional, RC/UC/UD: walks perftest's send_bw choreography
//! (`ctrl::choreo`: keys, connect, barrier, keys; per size: the server posts
//! its receives, barrier, run; `-a` adds a barrier after each size). The
//! client runs the bw loop with SEND (SEND_IMM with --send_with_imm) and the
//! chosen post method; the server runs the receiver loop. Each side prints
//! its own row — the server's is the RX view, timed from the first receive,
//! without peak — and no reports are exchanged.

use crate::cli::params::{Conn, Mode, Params};
use crate::clock::{self, Clock};
use crate::ctrl::choreo::{Barrier, KeyRound};
use crate::ctrl::{self, choreography, BwReport, Dest, Session, Step};
use crate::post::event_cq;
use crate::post::verbs_cq::VerbsRecv;
use crate::post::wr_api::send_ops_flags;
use crate::post::Completion;
use crate::report::info::TestInfo;
use crate::report::{json, stats, text};
use crate::run::bw::RunError;
use crate::run::geometry::Geometry;
use crate::run::recv::{self, RecvBuf, RecvConfig, RecvLoop, RecvOutcome, RxCount, Window};
use crate::tool::common::fail::Fail;
use crate::tool::common::out::Out;
use crate::tool::common::scenario::qp_type;
use crate::tool::session::bw_measure::{measure_size, qp_targets};
use crate::tool::session::bw_result::{check_limits, report_of, SizeSummary};
use crate::tool::session::control::{connect, to_text_dest};
use crate::tool::session::direct::{self, DirectRx};
use crate::tool::session::info::test_info;
use crate::tool::session::queues;
use crate::tool::setup::method::{self, Chosen, Method};
use crate::tool::setup::resources::{Endpoint, Resources};
use crate::verbs::{Mtu, UdDest};
use std::time::Duration;

/// perftest `UD_ADDITION`: the GRH a UD receive buffer must hold before the payload.
pub const UD_GRH: u64 = 40;

/// The sizes a UD test may use: perftest clamps `-s` to the MTU and stops `-a` there.
pub(crate) fn clamp_for_ud(p: &mut Params, mtu: u64) -> Result<(), Fail> {
    if p.conn != Conn::Ud {
        return Ok(());
    }
    if p.all_sizes {
        p.sizes.retain(|&s| s <= mtu);
    } else if p.size_given && p.sizes.iter().any(|&s| s > mtu) {
        // perftest (ctx_check_mtu): a requested size is refused, not shrunk.
        return Err(Fail::new(format!(
            "Max message size in UD cannot be greater than MTU: -s {} with -c UD, the MTU is \
             {mtu} bytes; use -s {mtu} or less (or -m for a larger MTU)",
            p.sizes[0]
        )));
    } else {
        for s in &mut p.sizes {
            if *s > mtu {
                eprintln!(" Max msg size in UD is MTU {mtu}\n Changing to this MTU");
                *s = mtu;
            }
        }
    }
    Ok(())
}

/// Where the AH of a UD sender points: the peer's LID/GID as the RTR would.
pub(crate) fn ud_dests(
    ep: &Endpoint,
    p: &Params,
    res: &Resources,
    rem: &[Dest],
) -> Result<Vec<Option<UdDest>>, Fail> {
    if p.conn != Conn::Ud {
        return Ok(vec![None; rem.len()]);
    }
    rem.iter()
        .map(|r| res.ud_dest(ep, p, r).map(Some))
        .collect()
}

/// The server's receive side, kept across sizes. Its receive queues are
/// `rqs` (verbs QPs) or, with `--post direct`, a [`DirectRx`] the caller
/// opens once the set-up is over and hands to [`Receiver::prepare`] and
/// [`Receiver::run`].
pub(crate) struct Receiver {
    /// The verbs QPs' receive queues (empty with direct QPs).
    pub(crate) rqs: Vec<VerbsRecv>,
    pub(crate) bufs: Vec<RecvBuf>,
    pub(crate) counts: Vec<RxCount>,
    pub(crate) cfg: Option<RecvConfig>,
}

impl Receiver {
    pub(crate) fn new(res: &Resources, p: &Params) -> Result<Receiver, Fail> {
        let ud_off = if p.conn == Conn::Ud {
            // perftest: the GRH goes in the cache line before the payload slot.
            res.geometry.cache_line - UD_GRH
        } else {
            0
        };
        Ok(Receiver {
            rqs: (0..res.qps.len())
                .map(|q| {
                    res.recv_queue(q)
                        .map(|r| r.with_list(p.recv_post_list as usize))
                })
                .collect::<Result<_, _>>()?,
            bufs: (0..res.num_qps())
                .map(|q| {
                    let (mr, gi) = res.qp_mem(q);
                    RecvBuf {
                        addr: mr.addr() + res.geometry.recv_offset(gi) + ud_off,
                        lkey: mr.lkey(),
                    }
                })
                .collect(),
            counts: vec![RxCount::default(); res.num_qps()],
            cfg: None,
        })
    }

    /// perftest `ctx_set_recv_wqes` for `size`: before the barrier.
    pub(crate) fn prepare(
        &mut self,
        p: &Params,
        res: &Resources,
        size: u64,
        clock: &Clock,
        direct: Option<&mut DirectRx<'_>>,
    ) -> Result<(), Fail> {
        let g = Geometry::new(
            size,
            res.geometry.cycle_buffer,
            res.geometry.cache_line,
            res.geometry.slots,
        );
        let secs = |s: u32| clock.cycles_for(Duration::from_secs(s as u64));
        let cfg = RecvConfig {
            iters: p.iters,
            // perftest with an SRQ: rx_depth / num_qps receives per QP's
            // slot range, all in the one queue (the rule keeps it >= 1).
            rx_depth: if res.srq.is_some() {
                (p.rx_depth / p.num_qps).max(1) as u64
            } else {
                p.rx_depth.max(1) as u64
            },
            len: (size + if p.conn == Conn::Ud { UD_GRH } else { 0 }) as u32,
            positions: g.positions(),
            step: g.step(),
            stall_ticks: secs(p.cq_timeout_s.min(u32::MAX as u64) as u32),
            window: window(p, clock),
            list: p.recv_post_list as u64,
            cost: !p.no_cost,
        };
        let posted = match direct {
            Some(d) => recv::prepost(&mut d.rqs, &self.bufs, &mut self.counts, &cfg),
            None if self.rqs.len() != self.bufs.len() => {
                return Err(Fail::new(
                    "internal: the direct receive queues were not opened before the first \
                     receive; please report this, and use --post wr-api",
                ))
            }
            None => recv::prepost(&mut self.rqs, &self.bufs, &mut self.counts, &cfg),
        };
        posted.map_err(|e| Fail::new(describe_recv(e, size, &cfg)))?;
        self.cfg = Some(cfg);
        Ok(())
    }

    /// perftest `run_iter_bw_server`; the row's numbers, the error if any,
    /// and the receive cost per message (`method` names it for `compare`).
    #[allow(clippy::too_many_arguments)]
    fn run(
        &mut self,
        p: &Params,
        res: &Resources,
        size: u64,
        clock: &Clock,
        method: &'static str,
        direct: Option<&mut DirectRx<'_>>,
    ) -> Result<SizeOut, Fail> {
        let cfg = self
            .cfg
            .take()
            .ok_or_else(|| Fail::new("internal: receives not posted before the run"))?;
        let o = self.receive(p, res, cfg, direct)?;
        let err = o.error.map(|e| match o.received {
            0 => nothing_arrived(p, e).unwrap_or_else(|| describe_recv(e, size, &cfg)),
            _ => describe_recv(e, size, &cfg),
        });
        let r = recv_row(p, size, clock, &o, &err)?;
        let per_msg = match o.busy_msgs {
            0 => 0.0,
            n => clock.nanos(o.busy_ticks) / n as f64,
        };
        Ok(SizeOut {
            row: r,
            err,
            unknown: 0,
            summary: SizeSummary {
                size,
                result: r,
                method,
                ns_per_call: 0.0,
                ns_per_wr: 0.0,
                recv_ns_per_msg: per_msg,
            },
        })
    }

    /// The receive loop over the direct RQs and poller when given, else the
    /// verbs ones (the method is chosen once, here, outside the loop).
    fn receive(
        &mut self,
        p: &Params,
        res: &Resources,
        cfg: RecvConfig,
        direct: Option<&mut DirectRx<'_>>,
    ) -> Result<RecvOutcome, Fail> {
        let mut wcs = vec![Completion::default(); p.cqe_poll as usize];
        Ok(match direct {
            Some(d) => RecvLoop {
                cfg,
                rqs: &mut d.rqs,
                cq: &mut d.cq,
                bufs: &self.bufs,
                counts: &mut self.counts,
                wcs: &mut wcs,
                now: clock::now,
            }
            .run(),
            None => {
                let mut cq = event_cq::verbs(&res.rcq, p.cqe_poll as usize, p.use_event)
                    .map_err(Fail::verbs)?;
                RecvLoop {
                    cfg,
                    rqs: &mut self.rqs,
                    cq: &mut cq,
                    bufs: &self.bufs,
                    counts: &mut self.counts,
                    wcs: &mut wcs,
                    now: clock::now,
                }
                .run()
            }
        })
    }
}

/// The receiver's row: perftest's formula over the whole receive interval
/// (the window's with -D or after an error).
fn recv_row(
    p: &Params,
    size: u64,
    clock: &Clock,
    o: &RecvOutcome,
    err: &Option<String>,
) -> Result<stats::BwResult, Fail> {
    let duration = p.is_duration() || o.error.is_some();
    let inp = stats::BwInput {
        size,
        iters: if duration { o.measured } else { p.iters },
        num_qps: p.num_qps,
        duration,
        no_peak: true,
        post_list: p.post_list,
        cq_mod: p.cq_mod,
        tposted: &[o.t_start],
        tcompleted: &[o.t_end],
        hz: clock.hz(),
        units: stats::BwUnits::of(p.report_gbits),
        inf_bidir_factor: 1,
    };
    // With nothing received there is no interval to compute: the run's
    // own error is the story.
    match (stats::bw_perftest(&inp), err) {
        (Ok(r), _) => Ok(r),
        (Err(_), Some(e)) => Err(Fail::new(e.clone())),
        (Err(e), None) => Err(Fail::new(format!("computing the result: {e}"))),
    }
}

/// `-D`: the sample window (margin, sample stop, end) in clock ticks.
pub(crate) fn window(p: &Params, clock: &Clock) -> Option<Window> {
    let secs = |s: u32| clock.cycles_for(Duration::from_secs(s as u64));
    match p.mode {
        Mode::Duration { secs: d, margin } => Some(Window {
            margin: secs(margin),
            sample_stop: secs(d - margin),
            end: secs(d),
        }),
        Mode::Iterations => None,
    }
}

/// rdma_bw's wording of a failed completion is about rkeys; a failed SEND is
/// usually a receive-side problem.
pub(crate) fn send_completion_hint(e: &str, size: u64) -> Option<String> {
    e.starts_with("completion with error").then(|| {
        format!(
            "{e}; for SEND, a remote error usually means the peer's receive buffers are smaller \
             than {size} B (give both sides the same -s/-a/-c) or it has no receive posted"
        )
    })
}

/// A receiver's error when not one message arrived before the sender
/// finished, exited or went silent. Against an rdmaperf peer `-c` is
/// compared at connect; stock perftest sends no connection type (its key
/// message is LID:QPN:PSN:rkey:vaddr:GID for every -c), and a SEND of
/// another QP type is dropped by our QP without an error on either side, so
/// this is where the mismatch shows.
pub(crate) fn nothing_arrived(p: &Params, e: RunError) -> Option<String> {
    let what = match e {
        RunError::PeerFinished => "the sender ended its run (it sent its next control message)",
        RunError::PeerExited => "the sender exited",
        RunError::Stalled { .. } => "nothing came for --cq-timeout seconds",
        _ => return None,
    };
    Some(format!(
        "not one message arrived and {what}: most likely the sender runs another connection \
         type (this side -c {}; SENDs from a UC/UD QP to an RC QP, or the reverse, are dropped \
         without an error on either side, and stock perftest does not send its -c, so it cannot \
         be compared at connect) — give both sides the same -c",
        p.conn.name()
    ))
}

/// How long a client waits for the server's close handshake after its own
/// run: the server ends its run as soon as its last message arrived (RC:
/// acknowledged before our last completion), or at its own -D end.
pub(crate) fn close_wait(p: &Params) -> Duration {
    let d = match p.mode {
        Mode::Duration { secs, .. } => secs as u64,
        Mode::Iterations => 0,
    };
    Duration::from_secs(p.cq_timeout_s.max(1) + d)
}

/// The client's close handshake timed out: the server still waits for
/// messages. Stock perftest's server reads first there, so this timeout is
/// all the client sees of a -n, -q or (UC/UD) -c mismatch.
pub(crate) fn close_error(p: &Params, e: ctrl::CtrlError) -> Fail {
    if p.is_server() || !matches!(e, ctrl::CtrlError::Timeout { .. }) {
        return Fail::ctrl(e);
    }
    let lost = if p.conn == Conn::Rc {
        String::new()
    } else {
        format!(
            "; with -c {} nothing is retransmitted, so the rate above counts messages the \
             server may never have received: a server on another -c (stock perftest does not \
             send its -c) drops them all",
            p.conn.name()
        )
    };
    Fail::new(format!(
        "the server has not ended its run {} s after ours ({e}): it still expects messages — \
         the two sides' -n or -q differ (ours -n {} -q {}){lost}; give both sides the same flags",
        close_wait(p).as_secs(),
        p.iters,
        p.num_qps
    ))
}

pub(crate) fn describe_recv(e: RunError, size: u64, cfg: &RecvConfig) -> String {
    match e {
        RunError::Completion { wc, .. } if crate::tool::common::peer_exit::peer_exited_before(&wc) => format!(
            "{}; our posted receives then failed with {} — partial result above, the peer's \
             own output says why it stopped",
            crate::tool::common::peer_exit::PEER_EXITED,
            wc.status.name()
        ),
        RunError::PeerExited => format!(
            "{}; partial result above — the peer's own output says why it stopped",
            crate::tool::common::peer_exit::PEER_EXITED
        ),
        RunError::PeerFinished => {
            let more = if cfg.iters == 0 {
                String::new()
            } else {
                format!(" (we expect {} per QP)", cfg.iters)
            };
            format!(
                "the sender ended its run (it sent its next control message) while we still \
                 expect messages{more}: the two sides' -n differ (or -q, -D) — give both the same -n"
            )
        }
        RunError::Completion { qp, wc, .. } => format!(
            "receive completion with error on QP {qp}: status {} ({}), vendor error {:#x}, {} bytes; \
             the run stopped — LOC_LEN_ERR (rxe: LOC_QP_OP_ERR) means the sender's messages exceed \
             the {} byte receive buffers ({size} B messages): give both sides the same -s/-a/-c",
            wc.status.name(),
            wc.status.0,
            wc.vendor_err,
            wc.byte_len,
            cfg.len
        ),
        RunError::Post { qp, err } => format!(
            "posting a receive on QP {qp} failed: {err:?}; lower -r/--rx-depth to what the device allows"
        ),
        RunError::Poll { err } => format!("polling the receive CQ failed: {err:?}"),
        RunError::Stalled { qp, outstanding, last_completed, .. } => format!(
            "no message for --cq-timeout seconds: QP {qp} received {last_completed} and still expects \
             {outstanding}; the sender stopped, or (UC/UD) messages were dropped because no receive was \
             posted — check the peer (same -n/-q on both sides?), raise -r/--rx-depth, or raise \
             --cq-timeout"
        ),
        RunError::Interrupted => "interrupted: QPs moved to ERR, partial result above".into(),
    }
}

/// One size on the client: the bw loop with SEND and post method `method`
/// (`dq`: the direct queues when the method is direct).
#[allow(clippy::too_many_arguments)]
fn send_one(
    p: &Params,
    res: &Resources,
    rem: &[Dest],
    uds: &[Option<UdDest>],
    method: Method,
    dq: Option<&mut direct::DirectQueues<'_>>,
    size: u64,
    clock: &Clock,
) -> Result<SizeOut, Fail> {
    let (targets, g) = (qp_targets(res, rem), &res.geometry);
    let run = match method {
        Method::PostSend => {
            let mut sqs = queues::post_send(&res.qps, p.post_list, uds.iter().cloned())?;
            let mut cq =
                event_cq::verbs(&res.cq, p.cqe_poll as usize, p.use_event).map_err(Fail::verbs)?;
            measure_size(p, g, size, &targets, &mut sqs, &mut cq, clock, None)?
        }
        Method::WrApi => {
            let mut sqs = queues::wr_api(&res.qps, uds.iter().cloned())?;
            let mut cq =
                event_cq::verbs(&res.cq, p.cqe_poll as usize, p.use_event).map_err(Fail::verbs)?;
            measure_size(p, g, size, &targets, &mut sqs, &mut cq, clock, None)?
        }
        Method::Direct => {
            let q = dq.ok_or_else(|| Fail::new("--post direct: queues not opened (internal)"))?;
            direct::run_size(p, g, size, &targets, &mut q.sqs, &mut q.cq, clock)?
        }
    };
    let unknown = run.unknown_qpn_cqes;
    let cost = SizeSummary::of(p, size, &run, method.name(), clock);
    let r = run.row;
    let err = run.error.map(|e| send_error(p, size, e, r.iters));
    Ok(SizeOut {
        row: r,
        err,
        unknown,
        summary: cost,
    })
}

/// The client's error, with what a SEND failure usually means (`done`: the
/// messages that completed).
fn send_error(p: &Params, size: u64, e: String, done: u64) -> String {
    if let Some(hinted) = send_completion_hint(&e, size) {
        hinted
    } else if e.starts_with("no completion for --cq-timeout") && p.conn == Conn::Rc {
        // A SEND receiver posts exactly its -n receives; past them our
        // SENDs wait on RNR forever while it waits in its close handshake
        // (stock perftest's server reads first there, so no message says so).
        format!(
            "{e}; for SEND, the server posts as many receives as its -n: a server with a \
             smaller -n (perhaps {done}, what completed here; ours {}) stops receiving — \
             give both sides the same -n",
            p.iters
        )
    } else {
        e
    }
}

/// One size's outcome on either side: the row, the error, the CQEs of no
/// known QP (direct client), and what `compare` aggregates.
pub(crate) struct SizeOut {
    pub(crate) row: stats::BwResult,
    pub(crate) err: Option<String>,
    pub(crate) unknown: u64,
    pub(crate) summary: SizeSummary,
}

/// Everything after the MTU exchange, built once (send-bw and duplex).
pub(crate) struct Ready {
    pub(crate) res: Resources,
    /// The method that runs (auto may have fallen back from direct).
    pub(crate) method: Method,
    pub(crate) info: TestInfo,
    pub(crate) clock: Clock,
    pub(crate) mtu: u8,
    pub(crate) my: Vec<Dest>,
    /// `-g` receiver: the QP's group membership (detached on drop).
    pub(crate) _mcast: Option<crate::tool::session::mcast::Joined>,
    pub(crate) rem: Vec<Dest>,
    /// `-R`: the data QPs' CM ids, kept for the run.
    pub(crate) cm: Option<crate::tool::session::cm_data::CmQps>,
}

impl Ready {
    /// The choreography's MTU step: exchange the MTU, create the resources,
    /// print the info block; also opens the JSON report when asked for.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn at_mtu(
        sess: &mut Session,
        ep: &Endpoint,
        p: &Params,
        cb_cl: (u32, u32),
        flags: Option<u64>,
        method: Method,
        out: Out,
    ) -> Result<(Ready, Option<json::JsonReport>), Fail> {
        let mtu = sess.exchange_mtu(ep.mtu_enum(p)).map_err(Fail::ctrl)?;
        // Both sides: the client's SQs and the server's RQs are direct.
        let (res, chosen) = if method == Method::Direct {
            let (cb, cl) = (cb_cl.0 as u64, cb_cl.1 as u64);
            Resources::create_for(ep, p, cb, cl, method, &[p.op()])?
        } else {
            let r = Resources::create(ep, p, cb_cl.0 as u64, cb_cl.1 as u64, flags)?;
            (r, Chosen::plain(method))
        };
        let cm = crate::tool::session::cm_data::connect_qps(sess, ep, p, &res)?;
        let clock = Clock::calibrate();
        crate::run::watchdog::configure(&clock);
        let mtu_bytes = Mtu(mtu as u32).bytes().unwrap_or(0);
        let info = test_info(p, ep, &res, mtu_bytes, &chosen, &clock);
        out.print(&text::info_block(&info));
        let mut my: Vec<Dest> = (0..res.num_qps()).map(|i| res.dest(ep, i)).collect();
        let mcast = crate::tool::session::mcast::join(ep, p, &res, &mut my)?;
        let report = p
            .json_file
            .as_ref()
            .map(|f| json::JsonReport::new(f, &info));
        let ready = Ready {
            _mcast: mcast,
            method: chosen.method,
            rem: my.clone(),
            cm,
            res,
            info,
            clock,
            mtu,
            my,
        };
        Ok((ready, report))
    }

    /// A key-message step; after connecting, prints the address lines as
    /// perftest does (all local lines before the first remote one).
    pub(crate) fn keys(
        &mut self,
        sess: &mut Session,
        p: &Params,
        step: &Step,
        qp: usize,
        round: KeyRound,
        out: Out,
    ) -> Result<(), Fail> {
        if round == KeyRound::AfterConnect && qp == 0 {
            for l in &self.my {
                out.print(&text::address_line(
                    text::Side::Local,
                    &to_text_dest(l),
                    &self.info,
                ));
            }
        }
        let got = sess
            .hand_shake_step(&step.to_string(), &self.my[qp])
            .map_err(Fail::ctrl)?;
        // Before the second round, rem holds the first round's keys.
        let after = round == KeyRound::AfterConnect;
        crate::tool::common::peer_check::key(p, &self.rem, &got, qp, after)?;
        self.rem[qp] = got;
        if round == KeyRound::AfterConnect {
            out.print(&text::address_line(
                text::Side::Remote,
                &to_text_dest(&self.rem[qp]),
                &self.info,
            ));
        }
        Ok(())
    }
}

/// What send-bw and duplex open before the control session: the device,
/// the parameters clamped to a UD MTU, the post method (with its WR-API
/// flags) and the choreography.
pub(crate) struct Opened {
    pub ep: Endpoint,
    pub p: Params,
    pub method: Method,
    pub flags: Option<u64>,
    pub steps: Vec<ctrl::Entry>,
}

pub(crate) fn open(p0: &Params) -> Result<Opened, Fail> {
    let ep = Endpoint::open(p0)?;
    let local_mtu = Mtu(ep.mtu_enum(p0) as u32).bytes().unwrap_or(1024) as u64;
    let mut p = p0.clone();
    clamp_for_ud(&mut p, local_mtu)?;
    let op = p.op();
    let method = method::resolve(&ep.ctx, &p, qp_type(&p), &[op])?;
    let flags = (method == Method::WrApi).then(|| send_ops_flags(&[op]));
    let steps = choreography(&crate::tool::common::scenario::scenario(
        &p,
        local_mtu as u32,
    ));
    Ok(Opened {
        ep,
        p,
        method,
        flags,
        steps,
    })
}

/// A send-bw or duplex side's set-up, filled in step by step.
#[derive(Default)]
/// (Fields in the order they are dropped, as the tools' locals were.)
pub(crate) struct SetUp {
    pub(crate) report: Option<json::JsonReport>,
    pub(crate) receiver: Option<Receiver>,
    pub(crate) uds: Vec<Option<UdDest>>,
    pub(crate) ready: Option<Ready>,
    cb_cl: (u32, u32),
    /// Where the set-up steps end in `o.steps` ([`set_up_end`]): the
    /// barriers and runs from there on only read the resources.
    pub(crate) runs_from: usize,
}

impl SetUp {
    /// Versions, system data and the MTU (which builds the resources), the
    /// same on every side; false for any other step.
    pub(crate) fn common(
        &mut self,
        step: &Step,
        sess: &mut Session,
        o: &Opened,
        out: Out,
    ) -> Result<bool, Fail> {
        match step {
            Step::Versions => {
                crate::tool::common::peer_check::versions(sess, &o.p)?;
            }
            Step::SysData => {
                let page = crate::verbs::mr::page_size() as u32;
                self.cb_cl = sess.exchange_sysdata(page, 64).map_err(Fail::ctrl)?;
            }
            Step::Mtu => {
                let (r, j) = Ready::at_mtu(sess, &o.ep, &o.p, self.cb_cl, o.flags, o.method, out)?;
                self.ready = Some(r);
                self.report = j;
            }
            _ => return Ok(false),
        }
        Ok(true)
    }

    /// Walks the set-up steps (each waiting for the peer's run where the
    /// choreography says so): the common ones here, the others by `side`
    /// (given the steps from its own on). The resources they built, and the
    /// rest of the set-up (with where the steps after it start).
    pub(crate) fn walk(
        o: &Opened,
        sess: &mut Session,
        out: Out,
        side: SideStep,
    ) -> Result<(Ready, SetUp), Fail> {
        let mut su = SetUp {
            runs_from: set_up_end(&o.steps),
            ..SetUp::default()
        };
        for i in 0..su.runs_from {
            let e = &o.steps[i];
            if e.waits_for_peer_run {
                sess.wait_for_peer_run();
            }
            if !su.common(&e.step, sess, o, out)? {
                side(o, &mut su, sess, &o.steps[i..], out)?;
            }
        }
        let r = su.ready.take().ok_or_else(no_resources)?;
        Ok((r, su))
    }
}

/// A side's own set-up step (see [`SetUp::walk`]).
pub(crate) type SideStep =
    fn(&Opened, &mut SetUp, &mut Session, &[ctrl::Entry], Out) -> Result<(), Fail>;

/// Where the set-up steps (versions .. the last key exchange) end: they
/// change the resources; the barriers and runs after them only read them,
/// so the direct queues can borrow them for every size.
fn set_up_end(steps: &[ctrl::Entry]) -> usize {
    steps
        .iter()
        .rposition(|e| matches!(e.step, Step::Keys { .. } | Step::Connect | Step::Mtu))
        .map_or(0, |i| i + 1)
}

/// A step needs the resources before the MTU exchange built them.
pub(crate) fn no_resources() -> Fail {
    Fail::new("internal: no resources")
}

/// send-bw on one side; each size's summary (the client's post cost, the
/// server's receive cost per message) for `compare`.
pub fn run(p0: &Params, out: Out) -> Result<Vec<SizeSummary>, Fail> {
    if p0.run_infinitely {
        return Err(Fail::new(
            "send-bw --run_infinitely: not implemented yet in rdmaperf; use -D, or stock ib_send_bw",
        ));
    }
    let o = open(p0)?;
    let mut sess: Session = connect(&o.p, &o.ep)?;
    let (r, su) = SetUp::walk(&o, &mut sess, out, set_up_step)?;
    run_sizes(&o, sess, su, r, out)
}

/// The set-up steps after the MTU: keys (the header after the last),
/// connect (the server's receiver, the client's UD destinations) and the
/// barriers; `rest` starts at the step.
fn set_up_step(
    o: &Opened,
    su: &mut SetUp,
    sess: &mut Session,
    rest: &[ctrl::Entry],
    out: Out,
) -> Result<(), Fail> {
    let (p, ep, e) = (&o.p, &o.ep, &rest[0]);
    match e.step {
        Step::Keys { qp, round } => {
            let r = su.ready.as_mut().ok_or_else(no_resources)?;
            r.keys(sess, p, &e.step, qp, round, out)?;
            if round == KeyRound::AfterConnect && qp + 1 == r.my.len() {
                out.print(&text::bw_header(&r.info));
            }
        }
        Step::Connect => {
            let r = su.ready.as_ref().ok_or_else(no_resources)?;
            r.res.connect(ep, p, r.mtu, &r.rem, !p.is_server())?;
            if p.is_server() {
                su.receiver = Some(Receiver::new(&r.res, p)?);
            } else {
                su.uds = match r.cm.as_ref().filter(|c| !c.ud.is_empty()) {
                    // -R UD: the CM's replies say where to send.
                    Some(c) => c.ud.iter().cloned().map(Some).collect(),
                    None => ud_dests(ep, p, &r.res, &r.rem)?,
                };
            }
        }
        Step::Barrier(b) => {
            let r = su.ready.as_ref().ok_or_else(no_resources)?;
            let rx = su.receiver.as_mut().map(|rx| (rx, None));
            barrier(sess, &e.step, b, rx, p, r, rest)?;
        }
        _ => {
            return Err(Fail::new(format!(
                "internal: send-bw set-up has no step {} here",
                e.step
            )))
        }
    }
    Ok(())
}

/// The steps after the set-up: barriers and one run per size (the client
/// sends, the server receives), then the result line, limits and close.
/// (`r` is dropped first, `sess` last: the QPs go before the control
/// connection closes, as they did in one function.)
fn run_sizes(
    o: &Opened,
    mut sess: Session,
    mut su: SetUp,
    r: Ready,
    out: Out,
) -> Result<Vec<SizeSummary>, Fail> {
    let (p, steps, r) = (&o.p, &o.steps, &r);
    // The client's direct queues, or the server's direct receive side,
    // kept across sizes (their indices carry over).
    let (mut dq, mut drx) = open_direct(p, r, &su.uds)?;
    let mut last = BwReport::default();
    let mut sums = Vec::with_capacity(p.sizes.len());
    for (i, e) in steps.iter().enumerate().skip(su.runs_from) {
        if e.waits_for_peer_run {
            sess.wait_for_peer_run();
        }
        match e.step {
            Step::Barrier(b) => {
                let rx = su.receiver.as_mut().map(|rx| (rx, drx.as_mut()));
                barrier(&mut sess, &e.step, b, rx, p, r, &steps[i..])?;
            }
            Step::Run { size } => {
                let size = size.unwrap_or(p.sizes[0]);
                let so = run_one(p, r, &mut sess, &mut su, dq.as_mut(), drx.as_mut(), size)?;
                let (row, err) = size_row(p, r, so, &mut sums, &mut su.report, out)?;
                if p.compare && p.is_server() {
                    // compare between hosts: the client reads this cost in the close's note.
                    let ns = sums.last().map_or(0.0, |s| s.recv_ns_per_msg);
                    crate::ctrl::compare_ext::note_recv_cost(ns);
                }
                last = report_of(size, &row);
                if let Some(e) = err {
                    return Err(failed_run(p, r, out, e));
                }
            }
            Step::Close => break,
            _ => {
                return Err(Fail::new(format!(
                    "internal: send-bw unidirectional has no step {} here",
                    e.step
                )))
            }
        }
    }
    drop(dq);
    drop(drx);
    close(p, r, sess, &last, out).map(|()| sums)
}

/// A failed run ends the test: the QPs go to the error state, the result
/// line prints, and the error returns (the peer sees the control connection
/// close).
pub(crate) fn failed_run(p: &Params, r: &Ready, out: Out, e: String) -> Fail {
    r.res.to_err();
    out.print(crate::tool::common::out::result_line(p));
    Fail::new(e)
}

/// --post direct: the client's SQs and send CQ poller, or the server's
/// receive side, kept across sizes (their indices carry over).
fn open_direct<'r>(
    p: &Params,
    r: &'r Ready,
    uds: &[Option<UdDest>],
) -> Result<(Option<direct::DirectQueues<'r>>, Option<DirectRx<'r>>), Fail> {
    let direct = r.method == Method::Direct;
    let dq = if direct && !p.is_server() {
        Some(direct::open_queues(&r.res, uds, p.use_event)?)
    } else {
        None
    };
    let drx = if direct && p.is_server() {
        Some(direct::open_recv(&r.res, p.use_event)?)
    } else {
        None
    };
    Ok((dq, drx))
}

/// One size: the server receives, the client sends; a peer that exits
/// mid-run is noticed at once.
fn run_one(
    p: &Params,
    r: &Ready,
    sess: &mut Session,
    su: &mut SetUp,
    dq: Option<&mut direct::DirectQueues<'_>>,
    drx: Option<&mut DirectRx<'_>>,
    size: u64,
) -> Result<SizeOut, Fail> {
    let watch = sess.watch_peer();
    let method = r.method;
    let m = method.name();
    let so = match su.receiver.as_mut() {
        Some(rx) => rx.run(p, &r.res, size, &r.clock, m, drx)?,
        None => send_one(p, &r.res, &r.rem, &su.uds, method, dq, size, &r.clock)?,
    };
    drop(watch);
    Ok(so)
}

/// The result line, the limits (on the last row) and the close handshake
/// (the client waits for the server's own close); a failed close wins.
fn close(p: &Params, r: &Ready, mut sess: Session, last: &BwReport, out: Out) -> Result<(), Fail> {
    out.print(crate::tool::common::out::result_line(p));
    let limits = check_limits(p, last);
    if !p.is_server() {
        sess.set_peer_run_timeout(Some(close_wait(p)));
    }
    sess.close(&r.my[0]).map_err(|e| close_error(p, e))?;
    limits
}

/// A size's row (and the unknown-QPN line), its summary and JSON record;
/// the row and the run's error.
fn size_row(
    p: &Params,
    r: &Ready,
    o: SizeOut,
    sums: &mut Vec<SizeSummary>,
    report: &mut Option<json::JsonReport>,
    out: Out,
) -> Result<(stats::BwResult, Option<String>), Fail> {
    let (row, err, unknown) = (o.row, o.err, o.unknown);
    sums.push(o.summary);
    out.print(&text::bw_row(&row, &r.info, 0.0));
    if unknown > 0 {
        out.print(&crate::tool::session::bw_measure::unknown_qpn_line(unknown));
    }
    if let Some(j) = report.as_mut() {
        let mut rec = json::Record::bw(&row, &r.info, 0.0);
        if r.method == Method::Direct && !p.is_server() {
            rec = rec.with("unknown_qpn_cqes", unknown);
        }
        if let Some(e) = &err {
            rec = rec.with("error", e.as_str());
        }
        j.push(rec).map_err(|e| Fail::new(e.to_string()))?;
    }
    Ok((row, err))
}

/// A barrier hand_shake; before a run the server posts its receives first
/// (perftest `ctx_set_recv_wqes`), for the next run's size in `rest`, into
/// the direct receive queues when there are.
pub(crate) fn barrier(
    sess: &mut Session,
    step: &Step,
    b: Barrier,
    rx: Option<(&mut Receiver, Option<&mut DirectRx<'_>>)>,
    p: &Params,
    r: &Ready,
    rest: &[ctrl::Entry],
) -> Result<(), Fail> {
    if b == Barrier::BeforeRun {
        if let Some((rx, direct)) = rx {
            rx.prepare(p, &r.res, next_size(p, rest), &r.clock, direct)?;
        }
    }
    sess.hand_shake_step(&step.to_string(), &r.my[0])
        .map(|_| ())
        .map_err(Fail::ctrl)
}

/// The size of the next run in `rest` (the `-s` size when the step has none).
pub(crate) fn next_size(p: &Params, rest: &[ctrl::Entry]) -> u64 {
    rest.iter()
        .find_map(|e| match e.step {
            Step::Run { size } => Some(size.unwrap_or(p.sizes[0])),
            _ => None,
        })
        .unwrap_or(p.sizes[0])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::args::PerfArgs;
    use crate::cli::params::{resolve, Kind, Tool as PTool, Verb};

    fn params(f: impl FnOnce(&mut PerfArgs)) -> Params {
        let mut a = PerfArgs {
            post: "auto".into(),
            timeout: 30,
            cq_timeout: 10,
            ..Default::default()
        };
        f(&mut a);
        resolve(
            PTool {
                verb: Verb::Send,
                kind: Kind::Bw,
            },
            &a,
        )
        .unwrap()
    }

    #[test]
    fn ud_sizes_stop_at_the_mtu() {
        let mut p = params(|a| {
            a.connection = Some("UD".into());
            a.all = true;
        });
        clamp_for_ud(&mut p, 1024).unwrap();
        assert_eq!(p.sizes, [2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]);
        let s = crate::tool::common::scenario::scenario(&p, 1024);
        let runs: Vec<u64> = choreography(&s)
            .iter()
            .filter_map(|e| match e.step {
                Step::Run { size } => size,
                _ => None,
            })
            .collect();
        assert_eq!(runs, p.sizes);
        // Default size 65536 is clamped, as perftest does.
        let mut p = params(|a| a.connection = Some("UD".into()));
        clamp_for_ud(&mut p, 4096).unwrap();
        assert_eq!(p.sizes, [4096]);
        // A requested size above the MTU is refused (perftest's ctx_check_mtu).
        let mut p = params(|a| {
            a.connection = Some("UD".into());
            a.size = Some(4096);
        });
        let e = clamp_for_ud(&mut p, 1024).unwrap_err();
        assert!(
            e.msg
                .starts_with("Max message size in UD cannot be greater than MTU"),
            "{e}"
        );
        assert!(e.msg.contains("use -s 1024"), "{e}");
        // RC keeps its sizes.
        let mut p = params(|_| {});
        clamp_for_ud(&mut p, 1024).unwrap();
        assert_eq!(p.sizes, [65536]);
    }

    #[test]
    fn each_run_is_preceded_by_the_barrier_that_posts_receives() {
        let p = params(|a| {
            a.all = true;
            a.iters = Some(20);
        });
        let ch = choreography(&crate::tool::common::scenario::scenario(&p, 1024));
        for (i, e) in ch.iter().enumerate() {
            if let Step::Run { size } = e.step {
                assert_eq!(ch[i - 1].step, Step::Barrier(Barrier::BeforeRun));
                assert_eq!(next_size(&p, &ch[i - 1..]), size.unwrap());
                assert_eq!(ch[i + 1].step, Step::Barrier(Barrier::AfterRun));
            }
        }
        assert!(!ch.iter().any(|e| e.step == Step::BwReport));
    }
}
