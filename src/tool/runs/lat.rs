//! write-lat / read-lat / send-lat / atomic-lat: perftest's control
//! choreography (driven by [`crate::ctrl::choreography`], so the order of
//! exchanges is the table's), the latency loops of [`crate::run::lat`] with
//! the chosen post method, and perftest master's LAT report.
//!
//! Per tool (perftest `*_lat.c`): write-lat both sides ping-pong and nobody
//! closes; read/atomic-lat only the client runs, the server goes straight to
//! the close and waits there; send-lat both sides ping-pong after pre-posting
//! their receives, then close.

use crate::cli::params::{Conn, Mode, Params, Verb};
use crate::clock::{self, Clock};
use crate::ctrl::choreo::{Barrier, Entry, KeyRound};
use crate::ctrl::{choreography, Dest, Session, Step};
use crate::post::event_cq::{self, EventCq};
use crate::post::post_send::PostSendQueue;
use crate::post::verbs_cq::VerbsCq;
use crate::post::wr_api::{send_ops_flags, WrApiQueue};
use crate::post::{CompletionQueue, RecvQueue, SendQueue};
use crate::report::info::TestInfo;
use crate::report::{json, stats, text};
use crate::run::lat::{self, LatConfig, LatError, LatOutcome, LatTarget, Mailbox};
use crate::tool::common::fail::Fail;
use crate::tool::common::out::Out;
use crate::tool::common::scenario::qp_type;
use crate::tool::session::control::{connect, to_text_dest as text_dest};
use crate::tool::session::direct::{self, DirectQueues, DirectRx};
use crate::tool::session::info::test_info;
use crate::tool::setup::method::{self, Method};
use crate::tool::setup::resources::{Endpoint, Resources};
use crate::verbs::{Mr, UdDest};
use std::marker::PhantomData;
use std::sync::Arc;
use std::time::Duration;

/// perftest's `UD_ADDITION`: room for the GRH in front of each UD receive.
const UD_GRH: u64 = 40;

/// Who posts first: perftest's write-lat server, send-lat client.
fn initiator(p: &Params) -> bool {
    match p.tool.verb {
        Verb::Write => p.is_server(),
        _ => !p.is_server(),
    }
}

pub fn run(p: &Params, out: Out) -> Result<(), Fail> {
    let ep = Endpoint::open(p)?;
    let op = p.op();
    let method = method::resolve(&ep.ctx, p, qp_type(p), &[op])?;
    let flags = (method == Method::WrApi).then(|| send_ops_flags(&[op]));

    let mut sess = connect(p, &ep)?;
    let (cb, cl, mtu) = crate::tool::session::control::preamble(&mut sess, &ep, p)?;
    let counters = crate::tool::session::counters::for_run(p, &ep)?;
    // Direct: every set-up step first; `--post auto` falls back (the
    // banner and JSON say why), `--post direct` fails with the reason.
    let (res, chosen) = if method == Method::Direct {
        Resources::create_for(&ep, p, cb, cl, method, &[op])?
    } else {
        let r = Resources::create(&ep, p, cb, cl, flags)?;
        (r, method::Chosen::plain(method))
    };
    let method = chosen.method;
    let _cm = crate::tool::session::cm_data::connect_qps(&mut sess, &ep, p, &res)?;
    let clock = Clock::calibrate();
    crate::run::watchdog::configure(&clock);
    let mtu_bytes = crate::verbs::Mtu(mtu as u32).bytes().unwrap_or(0);
    let info = test_info(p, &ep, &res, mtu_bytes, &chosen, &clock);
    out.print(&text::info_block(&info));

    let plan = choreography(&crate::tool::common::scenario::scenario(p, mtu_bytes));
    check_preamble(&plan)?;
    let mut my: Vec<Dest> = (0..res.num_qps()).map(|i| res.dest(&ep, i)).collect();
    // -g: this side's QP joins its group; kept (attached) until the run ends.
    let _mcast = crate::tool::session::mcast::join(&ep, p, &res, &mut my)?;
    let mut lat = Lat {
        p,
        out,
        ep: &ep,
        res: &res,
        clock: &clock,
        info: &info,
        method,
        mtu,
        // Placeholders until the first key round fills them (it precedes Connect).
        rem: my.clone(),
        my,
        ud: Vec::new(),
        dq: None,
        drx: None,
        header_done: false,
        json: p
            .json_file
            .as_ref()
            .map(|f| json::JsonReport::new(f, &info)),
        samples_written: false,
        counters,
    };
    lat.walk(&mut sess, &plan[3..plan.len() - 1])?;
    lat.end(sess, plan[plan.len() - 1])
}

/// The plan's first three steps are the preamble `preamble` already did.
fn check_preamble(plan: &[Entry]) -> Result<(), Fail> {
    let preamble = [Step::Versions, Step::SysData, Step::Mtu];
    if plan.len() < 4 || plan[..3].iter().map(|e| e.step).ne(preamble) {
        return Err(Fail::new(
            "internal: the latency choreography does not start with versions, sysdata, MTU; \
             please report this",
        ));
    }
    Ok(())
}

/// One side's state while it walks the choreography.
struct Lat<'a> {
    p: &'a Params,
    out: Out,
    ep: &'a Endpoint,
    res: &'a Resources,
    clock: &'a Clock,
    info: &'a TestInfo,
    method: Method,
    mtu: u8,
    my: Vec<Dest>,
    rem: Vec<Dest>,
    /// UD: per-QP destination (after Connect).
    ud: Vec<UdDest>,
    /// `--post direct`: QP 0's direct SQ and the poller of the send CQ,
    /// opened at the first size (after Connect: UD needs the AH) and kept
    /// across sizes (their ring indices carry over).
    dq: Option<DirectQueues<'a>>,
    /// `--post direct` send-lat: the RQs and the receive CQ's poller,
    /// opened before the first receive and kept across sizes.
    drx: Option<DirectRx<'a>>,
    header_done: bool,
    json: Option<json::JsonReport>,
    /// `--samples-file` was written for an earlier size.
    samples_written: bool,
    /// `-W`: counters reported after each row.
    counters: Option<crate::tool::session::counters::Counters>,
}

impl<'a> Lat<'a> {
    /// The choreography's steps between the preamble and the last one; each
    /// run step knows the next run's size.
    fn walk(&mut self, sess: &mut Session, body: &[Entry]) -> Result<(), Fail> {
        for (k, e) in body.iter().enumerate() {
            if e.waits_for_peer_run {
                sess.set_peer_run_timeout(None);
                sess.wait_for_peer_run();
            }
            let next_run = body[k + 1..].iter().find_map(|e| match e.step {
                Step::Run { size } => Some(size),
                _ => None,
            });
            self.step(sess, e.step, next_run)?;
        }
        Ok(())
    }

    /// The last step (close or exit) with the closing line around it, and a
    /// passive side's JSON file.
    fn end(&mut self, mut sess: Session, last: Entry) -> Result<(), Fail> {
        let p = self.p;
        // read/atomic-lat print the closing line after the close, the others before.
        let line_after = matches!(p.tool.verb, Verb::Read | Verb::Atomic);
        if !line_after {
            self.out.print(crate::tool::common::out::result_line(p));
        }
        match last.step {
            Step::Close => {
                if last.waits_for_peer_run {
                    sess.set_peer_run_timeout(None);
                    sess.wait_for_peer_run();
                }
                sess.close(&self.my[0]).map_err(Fail::ctrl)?;
            }
            Step::Exit => sess.finish(),
            s => return Err(Fail::new(format!("internal: latency test ends in {s}"))),
        }
        if line_after {
            self.out.print(crate::tool::common::out::result_line(p));
        }
        if let Some(j) = self.json.as_ref().filter(|j| j.records().is_empty()) {
            // A passive read/atomic-lat server measures nothing (perftest prints
            // nothing there) but still writes its file: test_info, no records.
            j.write().map_err(|e| Fail::new(e.to_string()))?;
        }
        Ok(())
    }

    fn size_of(&self, size: Option<u64>) -> u64 {
        size.unwrap_or_else(|| self.p.sizes.first().copied().unwrap_or(0))
    }

    fn header(&mut self) {
        if !self.header_done {
            self.header_done = true;
            self.out.print(&text::lat_header(self.info));
        }
    }

    fn shake(&self, sess: &mut Session, step: Step, d: &Dest) -> Result<Dest, Fail> {
        sess.hand_shake_step(&step.to_string(), d)
            .map_err(Fail::ctrl)
    }

    /// One step of the choreography (not the preamble, not the end).
    fn step(
        &mut self,
        sess: &mut Session,
        step: Step,
        next_run: Option<Option<u64>>,
    ) -> Result<(), Fail> {
        match step {
            Step::Keys {
                qp,
                round: KeyRound::First,
            } => {
                self.rem[qp] = self.shake(sess, step, &self.my[qp])?;
            }
            Step::Connect => self.connect()?,
            Step::Keys {
                qp,
                round: KeyRound::AfterConnect,
            } => self.keys_after_connect(sess, step, qp)?,
            Step::Barrier(b) => {
                if b == Barrier::BeforeRun {
                    // send-lat: receives for the coming size go up before the
                    // barrier, so the peer never sends into an empty queue.
                    self.header();
                    let size = self.size_of(next_run.flatten());
                    self.post_recvs(size)?;
                }
                self.shake(sess, step, &self.my[0])?;
            }
            Step::Run { size } => {
                self.header();
                let size = self.size_of(size);
                // A peer that exits mid-run is noticed at once, not after --cq-timeout.
                let _watch = sess.watch_peer();
                self.run_size(size)?;
            }
            s => {
                return Err(Fail::new(format!(
                    "internal: step {s} has no place in a latency test; please report this"
                )))
            }
        }
        Ok(())
    }

    /// The QPs to RTS with the first round's keys; UD: each peer's address.
    fn connect(&mut self) -> Result<(), Fail> {
        self.res
            .connect(self.ep, self.p, self.mtu, &self.rem, true)?;
        if self.p.conn == Conn::Ud {
            self.ud = self
                .rem
                .iter()
                .map(|r| self.res.ud_dest(self.ep, self.p, r))
                .collect::<Result<_, _>>()?;
        }
        Ok(())
    }

    /// The key round perftest prints: this side's addresses (before QP 0's
    /// round), then the peer's for `qp`.
    fn keys_after_connect(
        &mut self,
        sess: &mut Session,
        step: Step,
        qp: usize,
    ) -> Result<(), Fail> {
        if qp == 0 {
            for l in &self.my {
                self.out.print(&text::address_line(
                    text::Side::Local,
                    &text_dest(l),
                    self.info,
                ));
            }
        }
        self.rem[qp] = self.shake(sess, step, &self.my[qp])?;
        self.out.print(&text::address_line(
            text::Side::Remote,
            &text_dest(&self.rem[qp]),
            self.info,
        ));
        Ok(())
    }

    /// Where send-lat receives land: the remote half; UD leaves the GRH room
    /// in front (perftest: `+ cache_line - 40`, length `size + 40`).
    fn recv_buf(&self, size: u64) -> (u64, u32) {
        let base = self.res.mr.addr() + self.res.geometry.recv_offset(0);
        if self.p.conn == Conn::Ud {
            let cl = self.res.geometry.cache_line;
            (base + cl - UD_GRH, (size + UD_GRH) as u32)
        } else {
            (base, size as u32)
        }
    }

    fn post_recvs(&mut self, size: u64) -> Result<(), Fail> {
        for q in 0..self.res.qps.len() {
            self.post_recvs_on(size, &mut self.res.recv_queue(q)?)?;
        }
        // Direct QPs: only send-lat's peer SENDs; the RQs are opened (and
        // posted directly) at the first size and kept across sizes.
        if self.res.direct_qps.is_empty() || self.p.tool.verb != Verb::Send {
            return Ok(());
        }
        let mut rx = match self.drx.take() {
            Some(rx) => rx,
            None => direct::open_recv(self.res, self.p.use_event)?,
        };
        let r = rx
            .rqs
            .iter_mut()
            .try_for_each(|rq| self.post_recvs_on(size, rq));
        self.drx = Some(rx);
        r
    }

    fn post_recvs_on<R: RecvQueue>(&self, size: u64, rq: &mut R) -> Result<(), Fail> {
        let (addr, len) = self.recv_buf(size);
        for i in 0..self.p.rx_depth as u64 {
            rq.post_recv(i, addr, self.res.mr.lkey(), len)
                .map_err(|e| {
                    Fail::new(format!(
                        "posting receive {i} of {} failed: {e:?}; lower -r/--rx-depth",
                        self.p.rx_depth
                    ))
                })?;
        }
        Ok(())
    }

    fn run_size(&mut self, size: u64) -> Result<(), Fail> {
        let ud = self.ud.first().cloned();
        let m = match self.method {
            Method::PostSend => {
                let qp = &self.res.qps[0];
                let mut sq = PostSendQueue::new(qp, 1, ud).map_err(Fail::verbs)?;
                let mut cq = self.verbs_cq()?;
                self.measure(size, &mut sq, &mut cq, None)?
            }
            Method::WrApi => {
                let qp = &self.res.qps[0];
                let mut sq = WrApiQueue::new(qp, ud).map_err(Fail::verbs)?;
                let mut cq = self.verbs_cq()?;
                self.measure(size, &mut sq, &mut cq, None)?
            }
            Method::Direct => {
                let mut dq = match self.dq.take() {
                    Some(dq) => dq,
                    None => self.open_direct()?,
                };
                let mut rx = self.drx.take();
                let r = self.measure(size, &mut dq.sqs[0], &mut dq.cq, rx.as_mut());
                self.dq = Some(dq);
                self.drx = rx;
                r?
            }
        };
        if let Some(e) = m.outcome.error {
            self.res.to_err();
            return Err(Fail::new(describe(e, &m.outcome)));
        }
        self.report(size, m)
    }

    /// The verbs poller of the send CQ (post-send, wr-api).
    fn verbs_cq(&self) -> Result<EventCq<VerbsCq>, Fail> {
        event_cq::verbs(&self.res.cq, 1, self.p.use_event).map_err(Fail::verbs)
    }

    /// The direct queues, once (after Connect). The direct poller owns the
    /// send CQ; send-lat's receive completions go to the separate receive
    /// CQ, which a second direct poller owns (`drx`), so no receive CQE can
    /// reach (and be dropped by) the send poller.
    fn open_direct(&self) -> Result<DirectQueues<'a>, Fail> {
        let res: &'a Resources = self.res;
        if self.p.tool.verb == Verb::Send && Arc::ptr_eq(&res.cq, &res.rcq) {
            return Err(Fail::new(
                "internal: --post direct send-lat needs a receive CQ apart from the send CQ; \
                 please report this, and use --post wr-api",
            ));
        }
        let uds: Vec<Option<UdDest>> = self.ud.iter().cloned().map(Some).collect();
        direct::open_queues(res, &uds, self.p.use_event)
    }

    /// Where QP 0's messages of `size` go from and to.
    fn target(&self, size: u64) -> LatTarget {
        let res = self.res;
        let (recv_addr, recv_len) = self.recv_buf(size);
        LatTarget {
            laddr: res.mr.addr() + res.geometry.send_offset(0),
            lkey: res.send_lkey(&res.mr),
            raddr: self.rem[0].vaddr,
            rkey: self.rem[0].rkey,
            recv_addr,
            recv_len,
        }
    }

    /// write-lat: the last byte of QP 0's receive slot (the peer's write
    /// lands there) and of its send slot (the sequence this side writes).
    fn mailbox(&self, size: u64) -> Result<BufMailbox<'a>, Fail> {
        let (res, g) = (self.res, &self.res.geometry);
        BufMailbox::new(
            &res.mr,
            g.recv_offset(0) + size - 1,
            g.send_offset(0) + size - 1,
        )
        .ok_or_else(|| {
            Fail::new(format!(
                "internal: write-lat mailbox for {size} B lies outside the {} B buffer",
                res.mr.len()
            ))
        })
    }

    /// One size with post method `S` polled by `C` (monomorphised per method).
    fn measure<S: SendQueue, C: CompletionQueue>(
        &self,
        size: u64,
        sq: &mut S,
        cq: &mut C,
        rx: Option<&mut DirectRx<'a>>,
    ) -> Result<Measured, Fail> {
        let p = self.p;
        let target = self.target(size);
        let mut tposted = vec![0u64; p.iters as usize];
        let start = clock::now();
        let cpu = match p.mode {
            Mode::Duration { secs, margin } if p.cpu_util => Some(
                crate::tool::common::cpu_util::Sampler::start(margin, secs - 2 * margin),
            ),
            _ => None,
        };
        let (cfg, window) = lat_config(p, size, self.clock, start);
        let outcome = match p.tool.verb {
            Verb::Write => {
                let mut mb = self.mailbox(size)?;
                lat::write_lat(&cfg, sq, cq, &mut mb, &target, &mut tposted, clock::now)
            }
            Verb::Read | Verb::Atomic => {
                lat::rdma_lat(&cfg, sq, cq, &target, &mut tposted, clock::now)
            }
            Verb::Send => self.send_lat(&cfg, sq, cq, rx, &target, &mut tposted)?,
        };
        let cpu = cpu.map_or(0.0, |c| c.finish());
        let n = (outcome.iters as usize).min(tposted.len());
        tposted.truncate(n);
        Ok(Measured {
            outcome,
            tposted,
            window,
            cpu,
        })
    }

    /// send-lat's loop on QP 0 with its receive side: the direct RQ and
    /// poller when `rx` has them, else the verbs ones.
    fn send_lat<S: SendQueue, C: CompletionQueue>(
        &self,
        cfg: &LatConfig,
        sq: &mut S,
        cq: &mut C,
        rx: Option<&mut DirectRx<'a>>,
        target: &LatTarget,
        tposted: &mut [u64],
    ) -> Result<LatOutcome, Fail> {
        let (p, res) = (self.p, self.res);
        match rx {
            // Direct: QP 0's RQ and the receive CQ's direct poller.
            Some(DirectRx { rqs, cq: rcq }) => {
                let rq = rqs.first_mut().ok_or_else(|| {
                    Fail::new("internal: send-lat --post direct without a receive queue")
                })?;
                Ok(lat::send_lat(
                    cfg,
                    sq,
                    cq,
                    rq,
                    rcq,
                    target,
                    tposted,
                    clock::now,
                ))
            }
            None if res.qps.is_empty() => Err(Fail::new(
                "internal: send-lat --post direct ran before its receives were posted",
            )),
            None => {
                let mut rcq = event_cq::verbs(&res.rcq, 1, p.use_event).map_err(Fail::verbs)?;
                let mut rq = res.recv_queue(0)?;
                Ok(lat::send_lat(
                    cfg,
                    sq,
                    cq,
                    &mut rq,
                    &mut rcq,
                    target,
                    tposted,
                    clock::now,
                ))
            }
        }
    }

    fn report(&mut self, size: u64, m: Measured) -> Result<(), Fail> {
        let hz = self.clock.hz();
        let rtt = self.info.verb.rtt_factor();
        let (row, rec) = if self.p.is_duration() {
            let n = m.outcome.measured;
            if n == 0 {
                return Err(Fail::new(
                    "no round trip completed inside the -D sample window; lengthen -D or shorten -f",
                ));
            }
            let r = stats::lat_duration(m.window, n, hz, rtt)
                .map_err(|e| Fail::new(format!("computing the result: {e}")))?;
            (
                text::lat_duration_row(size, n, &r, self.info, m.cpu),
                json::Record::lat_duration(size, n, &r, self.info, m.cpu),
            )
        } else {
            let units = if self.p.samples.cycles {
                stats::LatUnits::Cycles
            } else {
                stats::LatUnits::Usec
            };
            let stamps = measured_stamps(&m.tposted, self.p.perftest_stats);
            self.samples(size, stamps, hz, rtt, units)?;
            let s = lat_stats(stamps, hz, rtt, self.p.perftest_stats, units)?;
            (
                text::lat_row(size, self.p.iters, &s, self.info, 0.0),
                json::Record::lat(size, self.p.iters, &s, self.info, 0.0),
            )
        };
        self.out.print(&row);
        if let Some(c) = self.counters.as_mut() {
            self.out.print(&c.report()?);
        }
        if let Some(j) = self.json.as_mut() {
            j.push(rec).map_err(|e| Fail::new(e.to_string()))?;
        }
        Ok(())
    }
}

impl Lat<'_> {
    /// `-U`, `-H`, `--samples-file`: every sample of one size, before its row.
    fn samples(
        &mut self,
        size: u64,
        tposted: &[u64],
        hz: f64,
        rtt: u32,
        units: stats::LatUnits,
    ) -> Result<(), Fail> {
        let sr = &self.p.samples;
        if !(sr.unsorted || sr.histogram || sr.file.is_some()) {
            return Ok(());
        }
        let deltas = stats::lat_deltas(tposted);
        let q = stats::lat_quotient(hz, rtt, units);
        if let Some(f) = &sr.file {
            let usec = stats::lat_quotient(hz, rtt, stats::LatUnits::Usec);
            write_samples(f, size, &deltas, usec, self.samples_written)
                .map_err(|e| Fail::new(format!("--samples-file {}: {e}", f.display())))?;
            self.samples_written = true;
        }
        if self.info.output != crate::report::info::OutputMode::Full {
            return Ok(());
        }
        if sr.unsorted {
            self.out.print(&text::lat_dump(units, &deltas, q));
        }
        if sr.histogram {
            let v: Vec<f64> = deltas.iter().map(|&d| d as f64 / q).collect();
            self.out
                .print(&crate::report::histogram::text(&v, units.label()));
        }
        if sr.unsorted || sr.histogram {
            // perftest repeats the table header after the dump.
            self.out.print(&text::lat_header(self.info));
        }
        Ok(())
    }
}

/// `--samples-file`: CSV `size,index,cycles,usec`; `cycles` is the TSC ticks
/// from one post to the next (a round trip), `usec` the latency perftest
/// reports for it (halved for write/send ping-pong). The first size creates
/// the file, later sizes of `-a` append.
fn write_samples(
    path: &std::path::Path,
    size: u64,
    deltas: &[u64],
    usec_quotient: f64,
    append: bool,
) -> std::io::Result<()> {
    use std::io::Write;
    let f = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .append(append)
        .truncate(!append)
        .open(path)?;
    let mut w = std::io::BufWriter::new(f);
    if !append {
        writeln!(w, "size,index,cycles,usec")?;
    }
    for (k, &d) in deltas.iter().enumerate() {
        writeln!(w, "{size},{},{d},{}", k + 1, d as f64 / usec_quotient)?;
    }
    w.flush()
}

/// The stamps whose round trips are samples. Exact statistics leave out the
/// first round trip: it is a warm-up that absorbs the peer's entry into its
/// loop (stock perftest calibrates its clock there, `get_cpu_mhz`, 0.1-0.2 s
/// after the last handshake, so an initiator's first sample against it read
/// ~100-220 ms on soft-RoCE; a responder's first one carries the initiator's
/// first-iteration costs, 1-2 ms under TCG). `--perftest-stats` keeps every
/// round trip, as perftest does (its dropped tail hides the warm-up).
fn measured_stamps(tposted: &[u64], perftest: bool) -> &[u64] {
    if perftest || tposted.len() < 3 {
        tposted
    } else {
        &tposted[1..]
    }
}

/// The latency loop's settings for one size of `p`, the run starting at
/// `start` (ticks of `clock`), and the duration mode's sample window in
/// ticks (0 in iterations mode).
pub fn lat_config(p: &Params, size: u64, clock: &Clock, start: u64) -> (LatConfig, u64) {
    let inline = matches!(p.tool.verb, Verb::Write | Verb::Send)
        && p.inline_size > 0
        && size <= p.inline_size as u64;
    let mut cfg = LatConfig {
        op: p.op(),
        size: size as u32,
        iters: p.iters,
        inline,
        initiator: initiator(p),
        stall_ticks: clock.cycles_for(Duration::from_secs(p.cq_timeout_s)),
        end: 0,
        sample_start: 0,
        sample_stop: 0,
        rx_depth: p.rx_depth as u64,
        gap_ticks: clock.cycles_for(Duration::from_micros(p.latency_gap_us as u64)),
    };
    let mut window = 0;
    if let Mode::Duration { secs, margin } = p.mode {
        let at = |s: u32| start + clock.cycles_for(Duration::from_secs(s as u64));
        cfg.end = at(secs).max(start + 1);
        cfg.sample_start = at(margin);
        cfg.sample_stop = at(secs - margin);
        window = cfg.sample_stop - cfg.sample_start;
    }
    (cfg, window)
}

/// A run's stamps and what the loop said.
struct Measured {
    outcome: LatOutcome,
    /// Iterations mode: one stamp per posted message.
    tposted: Vec<u64>,
    /// Duration mode: the sample window in ticks.
    window: u64,
    /// `--cpu_util` over the sample window (0 without it).
    cpu: f32,
}

/// Latency statistics from post stamps: exact by default, perftest's own
/// formulas with `--perftest-stats`.
pub fn lat_stats(
    tposted: &[u64],
    hz: f64,
    rtt_factor: u32,
    perftest: bool,
    units: stats::LatUnits,
) -> Result<stats::LatStats, Fail> {
    let mut d = stats::lat_deltas(tposted);
    let r = if perftest {
        stats::lat_perftest(&mut d, hz, rtt_factor, units)
    } else {
        stats::lat_exact(&mut d, hz, rtt_factor, units)
    };
    r.map_err(|e| Fail::new(format!("computing the latency statistics: {e}")))
}

fn describe(e: LatError, o: &LatOutcome) -> String {
    match e {
        LatError::Completion { wc } if crate::tool::common::peer_exit::peer_exited_before(&wc) => {
            format!(
                "{}; our outstanding work then failed with {} after {} messages — the peer's own \
             output says why it stopped",
                crate::tool::common::peer_exit::PEER_EXITED,
                wc.status.name(),
                o.iters
            )
        }
        LatError::PeerExited { at } => format!(
            "{} while we waited for round trip {at} — the peer's own output says why it stopped",
            crate::tool::common::peer_exit::PEER_EXITED
        ),
        LatError::PeerFinished { at } => format!(
            "the peer ended its run (it sent its next control message) while we waited for round \
             trip {at}: the two sides' -n differ — give both the same -n"
        ),
        LatError::Completion { wc } => format!(
            "completion with error: status {} ({}), vendor error {:#x}, after {} messages; \
             the run stopped — check the peer's rkey/permissions and the link",
            wc.status.name(),
            wc.status.0,
            wc.vendor_err,
            o.iters
        ),
        LatError::Post { err } => format!(
            "posting failed: {err:?} (after {} messages); the QP is no longer usable — \
             if it says QueueFull, the peer or the NIC stopped answering",
            o.iters
        ),
        LatError::Poll { err } => format!("polling the CQ failed: {err:?}"),
        LatError::Stalled { at } => format!(
            "no answer for --cq-timeout seconds while waiting for round trip {at}; the peer \
             stopped or the link is down — check the peer (same -n/-s/-c on both sides?), or \
             raise --cq-timeout"
        ),
        LatError::Interrupted => "interrupted: QPs moved to ERR, partial result above".into(),
    }
}

/// write-lat's mailbox over the registered buffer: the peer's RDMA WRITEs
/// land in the receive half behind the CPU's back, so both ends are accessed
/// with volatile reads/writes, never through references.
struct BufMailbox<'a> {
    recv: *const u8,
    send: *mut u8,
    _mr: PhantomData<&'a Mr>,
}

impl<'a> BufMailbox<'a> {
    /// `recv`/`send`: byte offsets into `mr`; `None` if either lies outside it
    /// or `mr` is device memory.
    fn new(mr: &'a Mr, recv: u64, send: u64) -> Option<Self> {
        let len = mr.len() as u64;
        if recv >= len || send >= len {
            return None;
        }
        // Device memory has no CPU address: no mailbox (write-lat refuses it).
        let base = mr.host_ptr()?;
        Some(BufMailbox {
            // SAFETY: both offsets were checked to be inside the MR's buffer,
            // so the resulting pointers stay within that one allocation.
            recv: unsafe { base.add(recv as usize) },
            // SAFETY: as above.
            send: unsafe { base.add(send as usize) },
            _mr: PhantomData,
        })
    }
}

impl Mailbox for BufMailbox<'_> {
    #[inline(always)]
    fn received(&self) -> u8 {
        // SAFETY: `recv` points into the MR's buffer, which the borrow `'a`
        // keeps alive; the NIC writes it concurrently, hence a volatile read
        // of one byte (no reference to the buffer is ever formed here).
        unsafe { core::ptr::read_volatile(self.recv) }
    }

    #[inline(always)]
    fn stamp(&mut self, seq: u8) {
        // SAFETY: `send` points into the MR's buffer (kept alive by `'a`);
        // only this thread writes it, and the NIC reads it only after the
        // post that follows, so a volatile byte store is sound.
        unsafe { core::ptr::write_volatile(self.send, seq) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::post::{Completion, CompletionQueue, Op, PostError, WcStatus, WrDesc};
    use std::cell::{Cell, RefCell};
    use std::collections::VecDeque;
    use std::rc::Rc;

    /// A fake clock: every read advances it by a jittery step, so the
    /// round-trip samples differ.
    struct FakeClock(Cell<u64>, Cell<u64>);
    impl FakeClock {
        fn tick(&self) -> u64 {
            let k = self
                .1
                .get()
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1);
            self.1.set(k);
            let t = self.0.get() + 100 + (k >> 58);
            self.0.set(t);
            t
        }
    }

    /// Completes every post at once; the "peer" answers each write by
    /// bumping the mailbox to the sequence number just sent.
    #[derive(Default)]
    struct Peer {
        cqes: VecDeque<Completion>,
        posted: u64,
        mailbox: u8,
    }
    /// A peer shared by the test's queues, its mailbox at `mailbox` (1: the
    /// client waits first, as perftest's write-lat server starts).
    fn peer(mailbox: u8) -> Rc<RefCell<Peer>> {
        Rc::new(RefCell::new(Peer {
            mailbox,
            ..Default::default()
        }))
    }
    struct Sq(Rc<RefCell<Peer>>);
    struct Cq(Rc<RefCell<Peer>>);
    struct Mb(Rc<RefCell<Peer>>, u8);

    impl SendQueue for Sq {
        fn post(&mut self, _op: Op, wrs: &[WrDesc]) -> Result<(), PostError> {
            let mut p = self.0.borrow_mut();
            p.posted += 1;
            // The peer started, so its answer to our write n is its write n + 1.
            p.mailbox = (p.posted + 1) as u8;
            p.cqes.push_back(Completion {
                wr_id: wrs[0].wr_id,
                status: WcStatus::SUCCESS,
                ..Default::default()
            });
            Ok(())
        }
    }
    impl CompletionQueue for Cq {
        fn poll(&mut self, out: &mut [Completion]) -> Result<usize, PostError> {
            match self.0.borrow_mut().cqes.pop_front() {
                Some(c) => {
                    out[0] = c;
                    Ok(1)
                }
                None => Ok(0),
            }
        }
    }
    impl Mailbox for Mb {
        fn received(&self) -> u8 {
            self.0.borrow().mailbox
        }
        fn stamp(&mut self, seq: u8) {
            self.1 = seq;
        }
    }

    fn cfg(op: Op, initiator: bool) -> LatConfig {
        LatConfig {
            op,
            size: 2,
            iters: 300,
            inline: true,
            initiator,
            stall_ticks: 1 << 20,
            end: 0,
            sample_start: 0,
            sample_stop: 0,
            rx_depth: 1,
            gap_ticks: 0,
        }
    }

    fn check_stats(tposted: &[u64], rtt: u32) {
        for perftest in [false, true] {
            let s = lat_stats(tposted, 1e9, rtt, perftest, stats::LatUnits::Usec).unwrap();
            assert!(s.t_min > 0.0, "{s:?}");
            assert!(s.t_min <= s.t_typical, "{s:?}");
            assert!(s.t_typical <= s.t_max, "{s:?}");
            assert!(s.t_min <= s.t_avg && s.t_avg <= s.t_max, "{s:?}");
            assert!(s.p99 <= s.p99_9 && s.p99_9 <= s.t_max * 1.0000001, "{s:?}");
        }
    }

    #[test]
    fn write_lat_run_gives_sane_stats() {
        // The client waits first (perftest: the write-lat server starts).
        let peer = peer(1);
        let clk = FakeClock(Cell::new(1000), Cell::new(7));
        let c = cfg(Op::Write, false);
        let mut tposted = vec![0u64; c.iters as usize];
        let o = lat::write_lat(
            &c,
            &mut Sq(peer.clone()),
            &mut Cq(peer.clone()),
            &mut Mb(peer.clone(), 0),
            &LatTarget::default(),
            &mut tposted,
            || clk.tick(),
        );
        assert_eq!(o.error, None);
        assert_eq!(o.iters, c.iters);
        assert!(tposted.windows(2).all(|w| w[1] > w[0]));
        check_stats(&tposted, 2);
    }

    /// read-lat's loop against a fresh peer (it answers every post at once).
    fn run_rdma(
        c: &LatConfig,
        tposted: &mut [u64],
        now: impl Fn() -> u64,
    ) -> (lat::LatOutcome, Rc<RefCell<Peer>>) {
        let peer = peer(0);
        let (mut sq, mut cq) = (Sq(peer.clone()), Cq(peer.clone()));
        let o = lat::rdma_lat(c, &mut sq, &mut cq, &LatTarget::default(), tposted, now);
        (o, peer)
    }

    #[test]
    fn read_lat_run_gives_sane_stats() {
        let clk = FakeClock(Cell::new(5), Cell::new(99));
        let c = cfg(Op::Read, true);
        let mut tposted = vec![0u64; c.iters as usize];
        let (o, peer) = run_rdma(&c, &mut tposted, || clk.tick());
        assert_eq!((o.error, o.iters), (None, c.iters));
        assert_eq!(peer.borrow().posted, c.iters);
        check_stats(&tposted, 1);
    }

    #[test]
    fn latency_gap_waits_but_stays_out_of_the_samples() {
        // A steady clock (100 ticks a read): the same run with and without
        // a 10000-tick gap has the same samples, and the gapped run lasts
        // at least iters * gap longer.
        let run = |gap_ticks: u64| {
            let t = Cell::new(0u64);
            let c = LatConfig {
                gap_ticks,
                ..cfg(Op::Read, true)
            };
            let mut tposted = vec![0u64; c.iters as usize];
            let (o, _) = run_rdma(&c, &mut tposted, || {
                t.set(t.get() + 100);
                t.get()
            });
            assert_eq!((o.error, o.iters), (None, c.iters));
            (stats::lat_deltas(&tposted), o.t_end - o.t_start)
        };
        let (plain, plain_span) = run(0);
        let (gapped, gapped_span) = run(10_000);
        assert_eq!(plain, gapped);
        assert!(
            gapped_span >= plain_span + 300 * 10_000,
            "{gapped_span} vs {plain_span}"
        );
    }

    /// send-lat's peer: every send we post is answered by one receive
    /// completion; `recv_posts` counts our reposts.
    struct Rq(u64);
    impl crate::post::RecvQueue for Rq {
        fn post_recv(&mut self, _: u64, _: u64, _: u32, _: u32) -> Result<(), PostError> {
            self.0 += 1;
            Ok(())
        }
    }
    /// Receive completions: one per send we posted, plus the starter's
    /// first message when this side waits first, but never more than the
    /// peer's iterations (it sends exactly that many).
    struct Replies(Rc<RefCell<Peer>>, u64, u64, u64);
    impl CompletionQueue for Replies {
        fn poll(&mut self, out: &mut [Completion]) -> Result<usize, PostError> {
            let (first, consumed, cap) = (self.1, self.2, self.3);
            if (self.0.borrow().posted + first).min(cap) <= consumed {
                return Ok(0);
            }
            self.2 += 1;
            out[0] = Completion {
                status: WcStatus::SUCCESS,
                ..Default::default()
            };
            Ok(1)
        }
    }

    #[test]
    fn send_lat_both_sides_end_after_iters_and_repost_only_what_is_needed() {
        for initiator in [true, false] {
            let peer = peer(0);
            let clk = FakeClock(Cell::new(1), Cell::new(3));
            let c = LatConfig {
                rx_depth: 50,
                ..cfg(Op::Send, initiator)
            };
            let mut tposted = vec![0u64; c.iters as usize];
            let mut rq = Rq(0);
            // The waiting side finds the starter's first message already there.
            let mut rcq = Replies(peer.clone(), u64::from(!initiator), 0, c.iters);
            let o = lat::send_lat(
                &c,
                &mut Sq(peer.clone()),
                &mut Cq(peer.clone()),
                &mut rq,
                &mut rcq,
                &LatTarget::default(),
                &mut tposted,
                || clk.tick(),
            );
            assert_eq!(o.error, None, "initiator {initiator}");
            assert_eq!(o.iters, c.iters);
            assert_eq!(rq.0, c.iters - c.rx_depth, "reposts");
            check_stats(&tposted, 2);
        }
    }

    #[test]
    fn write_lat_duration_ends_at_end_not_with_a_stall() {
        // The peer answers the first 100 writes, then goes quiet (it ended first).
        let peer = peer(1);
        let clk = FakeClock(Cell::new(0), Cell::new(5));
        let c = LatConfig {
            iters: 0,
            end: 400_000,
            sample_start: 10_000,
            sample_stop: 30_000,
            stall_ticks: 1 << 30,
            ..cfg(Op::Write, false)
        };
        struct Quiet(Rc<RefCell<Peer>>);
        impl Mailbox for Quiet {
            fn received(&self) -> u8 {
                let p = self.0.borrow();
                if p.posted >= 100 {
                    p.posted as u8
                } else {
                    p.mailbox
                }
            }
            fn stamp(&mut self, _: u8) {}
        }
        let o = lat::write_lat(
            &c,
            &mut Sq(peer.clone()),
            &mut Cq(peer.clone()),
            &mut Quiet(peer.clone()),
            &LatTarget::default(),
            &mut [],
            || clk.tick(),
        );
        assert_eq!(o.error, None);
        assert!(o.t_end >= c.end);
        assert!(o.measured > 0 && o.measured < o.iters, "{o:?}");
        assert_eq!(o.iters, 100);
    }

    #[test]
    fn the_first_round_trip_is_a_warm_up_in_exact_statistics() {
        // A 100 ms first round trip, then 10 us ones.
        let mut t = vec![0u64, 100_000_000];
        for i in 1..=10u64 {
            t.push(100_000_000 + i * 10_000);
        }
        let exact = lat_stats(
            measured_stamps(&t, false),
            1e9,
            1,
            false,
            stats::LatUnits::Usec,
        )
        .unwrap();
        assert!((exact.t_max - 10.0).abs() < 1e-9, "{exact:?}");
        assert_eq!(
            measured_stamps(&t, true).len(),
            t.len(),
            "perftest keeps all"
        );
        assert_eq!(measured_stamps(&t[..2], false).len(), 2);
    }

    #[test]
    fn stats_need_enough_samples() {
        assert!(lat_stats(&[1], 1e9, 2, false, stats::LatUnits::Usec).is_err());
        assert!(lat_stats(&[1, 2, 3], 1e9, 2, true, stats::LatUnits::Usec).is_err());
    }

    #[test]
    fn who_starts_follows_perftest() {
        let mut p = crate::cli::params::resolve(
            crate::cli::params::Tool::ALL[4].2,
            &crate::cli::args::PerfArgs {
                post: "auto".into(),
                ..Default::default()
            },
        )
        .unwrap();
        assert!(initiator(&p), "write-lat server writes first");
        p.server = Some("h".into());
        assert!(!initiator(&p));
        p.tool = crate::cli::params::Tool::ALL[6].2;
        assert!(initiator(&p), "send-lat client sends first");
    }
}
