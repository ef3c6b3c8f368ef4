//! Control-path set-up shared by the tools: open the device and port, pick the
//! GID, allocate the buffer with perftest's geometry, create CQ and QPs, and
//! connect them from the peer's key messages.

use super::direct_qp::DirectQpHandle;
use super::gpu_mem::GpuMem;
use super::memory;
use super::method::{after_direct_failure, Chosen, Method};
use crate::cli::params::{Conn, Params, RateLimit, Verb};
use crate::cli::rate::RateKind;
use crate::ctrl::wire::Dest;
use crate::mlx5::env::Mlx5Env;
use crate::mlx5::setup::SetupFailure;
use crate::post::wr_api::{send_ops_flags, wr_api_probe};
use crate::post::Op;
use crate::run::geometry::Geometry;
use crate::tool::common::fail::Fail;
use crate::verbs::{
    random_psn, Access, Ah, AhAttr, Context, Cq, Grh, InitAttr, LinkLayer, Mr, Mtu, Pd, PortAttr,
    Qp, QpInit, QpType, RtrAttr, RtsAttr, Srq, UdDest, UD_QKEY,
};
use std::sync::Arc;

/// The opened device and port with the GID this side uses.
pub struct Endpoint {
    pub ctx: Arc<Context>,
    pub port: PortAttr,
    /// GID index and GID when a GID is used (RoCE, or -x given).
    pub gid: Option<(u32, [u8; 16])>,
}

impl Endpoint {
    pub fn open(p: &Params) -> Result<Endpoint, Fail> {
        let ctx = Context::open(p.ib_dev.as_deref()).map_err(Fail::verbs)?;
        let port = ctx.query_port(p.ib_port).map_err(Fail::verbs)?;
        if !port.state.is_active() {
            return Err(Fail::new(format!(
                "port {} of {} is {} — it must be ACTIVE; check the link (`ibv_devinfo -d {}`) or pick another port with -i",
                p.ib_port,
                ctx.name(),
                port.state.name(),
                ctx.name()
            )));
        }
        if let Some(m) = p.mtu.and_then(Mtu::from_bytes) {
            if m.value() > port.active_mtu.value() {
                // perftest's set_mtu notice (stdout, the active MTU as its enum value).
                print!(
                    "Requested mtu is higher than active mtu \nChanging to active mtu - {}\n",
                    port.active_mtu.value()
                );
            }
        }
        let ethernet = port.link_layer == LinkLayer::ETHERNET;
        let gid = if p.gid_index.is_some() || ethernet {
            let table = ctx.gid_table(p.ib_port).map_err(Fail::verbs)?;
            let idx = match p.gid_index {
                Some(i) => i,
                // --ipv6: prefer IPv6 GIDs over IPv4-mapped ones (perftest's ipv6).
                None => table.auto_select(p.conn_opts.prefer_ipv6_gid).ok_or_else(|| {
                    Fail::new(format!(
                        "no usable GID on {} port {}: the GID table is empty; configure an address on the \
                         netdev or give -x\n{}",
                        ctx.name(),
                        p.ib_port,
                        table.describe()
                    ))
                })?,
            };
            let e = table.get(idx).map_err(Fail::verbs)?;
            Some((idx, e.gid.0))
        } else {
            None
        };
        Ok(Endpoint { ctx, port, gid })
    }

    /// The MTU perftest exchanges (the `enum ibv_mtu` value 1..5).
    pub fn mtu_enum(&self, p: &Params) -> u8 {
        // A requested MTU above the port's active one is clamped (perftest's set_mtu).
        match p.mtu.and_then(Mtu::from_bytes) {
            Some(m) => m.value().min(self.port.active_mtu.value()) as u8,
            None => self.port.active_mtu.value() as u8,
        }
    }
}

/// MR access flags perftest uses for a verb.
pub fn access_for(verb: Verb) -> Access {
    let base = Access::LOCAL_WRITE;
    match verb {
        Verb::Write | Verb::Send => base | Access::REMOTE_WRITE,
        Verb::Read => base | Access::REMOTE_READ,
        Verb::Atomic => base | Access::REMOTE_ATOMIC,
    }
}

/// Buffers, CQ and QPs of one side.
pub struct Resources {
    /// The buffer layout of `mr` (of each MR with `--mr_per_qp`, then for one QP).
    pub geometry: Geometry,
    /// The shared buffer's MR; with `--mr_per_qp`, QP 0's.
    pub mr: Mr,
    /// `--mr_per_qp`: the MRs of QPs 1.. (perftest: one buffer and MR per QP).
    pub qp_mrs: Vec<Mr>,
    /// `--use-null-mr`: the lkey the sends use instead of the buffer's.
    pub null_mr: Option<Mr>,
    /// `--use-srq` on a receiving side: the QPs' shared receive queue.
    pub srq: Option<Arc<Srq>>,
    pub cq: Arc<Cq>,
    pub rcq: Arc<Cq>,
    /// `--threads N` (client): one send CQ per worker thread; QP i completes on
    /// `thread_cqs[i % N]`. With one thread it is `[cq]`.
    pub thread_cqs: Vec<Arc<Cq>>,
    /// Verbs QPs (`post-send`, `wr-api`); empty with `--post direct`.
    pub qps: Vec<Arc<Qp>>,
    /// `--post direct`: QPs created through mlx5dv (then `qps` is empty).
    /// Use [`Resources::num_qps`] for the count.
    pub direct_qps: Vec<DirectQpHandle>,
    pub psns: Vec<u32>,
    pub pd: Arc<Pd>,
    pub out_reads: u32,
    /// `--use_cuda`: which GPU holds the buffers and how they were registered.
    pub gpu: Option<String>,
    /// `--wait_destroy` seconds: the drop waits this long before the QPs,
    /// CQs and MRs go (perftest's `destroy_ctx`).
    pub wait_destroy: u32,
}

impl Drop for Resources {
    fn drop(&mut self) {
        if self.wait_destroy > 0 {
            use std::io::Write;
            let mut o = std::io::stdout().lock();
            let _ = writeln!(
                o,
                " Waiting {} seconds before releasing resources...",
                self.wait_destroy
            );
            let _ = o.flush();
            std::thread::sleep(std::time::Duration::from_secs(self.wait_destroy as u64));
        }
    }
}

/// How [`Resources`] creates its QPs.
#[derive(Clone, Copy)]
enum QpMaker<'e> {
    /// `ibv_create_qp`, or `ibv_create_qp_ex` with these `send_ops_flags`.
    Verbs(Option<u64>),
    /// `mlx5dv_create_qp` for the direct path, in libmlx5's environment.
    Direct(&'e Mlx5Env),
}

/// Why [`Resources::build`] failed: a direct set-up step (auto may fall
/// back), or anything else.
enum BuildError {
    Direct(SetupFailure),
    Other(Fail),
}

impl BuildError {
    fn into_fail(self) -> Fail {
        match self {
            BuildError::Direct(why) => Fail::new(format!("--post direct: {why}")),
            BuildError::Other(f) => f,
        }
    }
}

impl From<Fail> for BuildError {
    fn from(f: Fail) -> Self {
        BuildError::Other(f)
    }
}

/// QP control common to verbs and direct QPs (same attribute builders).
trait QpControl {
    fn qpn(&self) -> u32;
    fn to_rtr(&self, a: &RtrAttr) -> crate::verbs::Result<()>;
    fn to_rts(&self, a: &RtsAttr) -> crate::verbs::Result<()>;
    fn to_err(&self) -> crate::verbs::Result<()>;
}

/// Both kinds of QP already have these four as inherent methods.
macro_rules! qp_control_by {
    ($t:ty, $inherent:ident) => {
        impl QpControl for $t {
            fn qpn(&self) -> u32 {
                $inherent::qpn(self)
            }
            fn to_rtr(&self, a: &RtrAttr) -> crate::verbs::Result<()> {
                $inherent::to_rtr(self, a)
            }
            fn to_rts(&self, a: &RtsAttr) -> crate::verbs::Result<()> {
                $inherent::to_rts(self, a)
            }
            fn to_err(&self) -> crate::verbs::Result<()> {
                $inherent::to_err(self)
            }
        }
    };
}
qp_control_by!(Arc<Qp>, Qp);
qp_control_by!(DirectQpHandle, DirectQpHandle);

/// The completion queues and the SRQ, made before the QPs that use them.
struct Cqs {
    cq: Arc<Cq>,
    rcq: Arc<Cq>,
    /// One send CQ per `--threads` worker (client), else `[cq]`.
    thread_cqs: Vec<Arc<Cq>>,
    srq: Option<Arc<Srq>>,
}

impl Cqs {
    fn new(ep: &Endpoint, p: &Params, pd: &Arc<Pd>) -> Result<Cqs, Fail> {
        let depth = (p.tx_depth * p.num_qps).max(p.rx_depth * p.num_qps).max(1);
        let cq = Cq::new(&ep.ctx, depth, p.use_event).map_err(Fail::verbs)?;
        let rcq = if p.tool.verb == Verb::Send {
            Cq::new(&ep.ctx, p.rx_depth * p.num_qps, p.use_event).map_err(Fail::verbs)?
        } else {
            cq.clone()
        };
        // perftest: the SRQ exists where receives are posted (latency tools,
        // the bw server, -b); its max_wr is the rx depth.
        let srq = if p.mem.srq && (!p.tool.is_bw() || p.is_server() || p.duplex) {
            Some(Srq::new(pd, p.rx_depth.max(1)).map_err(Fail::verbs)?)
        } else {
            None
        };
        let nthreads = if p.is_server() {
            1
        } else {
            p.threads.max(1) as usize
        };
        let thread_cqs = if nthreads == 1 {
            vec![cq.clone()]
        } else {
            let per = (p.tx_depth * p.num_qps.div_ceil(nthreads as u32)).max(1);
            (0..nthreads)
                .map(|_| Cq::new(&ep.ctx, per, false).map_err(Fail::verbs))
                .collect::<Result<Vec<_>, _>>()?
        };
        Ok(Cqs {
            cq,
            rcq,
            thread_cqs,
            srq,
        })
    }
}

impl Resources {
    pub fn create(
        ep: &Endpoint,
        p: &Params,
        cycle_buffer: u64,
        cache_line: u64,
        send_ops_flags: Option<u64>,
    ) -> Result<Resources, Fail> {
        Self::build(
            ep,
            p,
            cycle_buffer,
            cache_line,
            QpMaker::Verbs(send_ops_flags),
        )
        .map_err(BuildError::into_fail)
    }

    /// The resources for `method` (as [`method::resolve`] gave it). For
    /// direct, every set-up step runs first; if one fails, `--post auto`
    /// builds verbs QPs for the next method instead and the returned
    /// [`Chosen`] says which ran and why direct did not, while `--post
    /// direct` fails with that reason. Direct QPs are in `direct_qps` (open
    /// them with `tool::direct::open_queues`, and never poll `cq` through
    /// verbs).
    pub fn create_for(
        ep: &Endpoint,
        p: &Params,
        cycle_buffer: u64,
        cache_line: u64,
        method: Method,
        ops: &[Op],
    ) -> Result<(Resources, Chosen), Fail> {
        let verbs = |m: Method| {
            let flags = (m == Method::WrApi).then(|| send_ops_flags(ops));
            Self::create(ep, p, cycle_buffer, cache_line, flags)
        };
        if method != Method::Direct {
            return Ok((verbs(method)?, Chosen::plain(method)));
        }
        // libmlx5's environment, read once here (the doorbell policy goes
        // with each QP, the note into the banner).
        let env = Mlx5Env::from_process();
        match Self::build(ep, p, cycle_buffer, cache_line, QpMaker::Direct(&env)) {
            Ok(r) => {
                let mut chosen = Chosen::plain(Method::Direct);
                chosen.notes.extend(env.doorbell_note());
                Ok((r, chosen))
            }
            Err(BuildError::Other(f)) => Err(f),
            Err(BuildError::Direct(why)) => {
                let qp_type = match p.conn {
                    Conn::Rc => QpType::RC,
                    Conn::Uc => QpType::UC,
                    Conn::Ud => QpType::UD,
                };
                let chosen = after_direct_failure(p.post, ep.ctx.name(), &why, || {
                    wr_api_probe(&ep.ctx, qp_type, send_ops_flags(ops)).map_err(|e| e.to_string())
                })?;
                Ok((verbs(chosen.method)?, chosen))
            }
        }
    }

    /// Every QP (verbs or direct) as the RDMA CM moves it to RTS (`-R`).
    pub fn cm_qps(&self) -> Vec<&dyn crate::verbs::CmQp> {
        let verbs = self.qps.iter().map(|q| &**q as &dyn crate::verbs::CmQp);
        let direct = self.direct_qps.iter().map(|h| h as &dyn crate::verbs::CmQp);
        verbs.chain(direct).collect()
    }

    /// Number of QPs (verbs or direct).
    pub fn num_qps(&self) -> usize {
        self.qps.len() + self.direct_qps.len()
    }

    fn qp_ctl(&self, i: usize) -> &dyn QpControl {
        match self.qps.get(i) {
            Some(q) => q,
            None => &self.direct_qps[i - self.qps.len()],
        }
    }

    fn build(
        ep: &Endpoint,
        p: &Params,
        cycle_buffer: u64,
        cache_line: u64,
        maker: QpMaker<'_>,
    ) -> Result<Resources, BuildError> {
        let pd = Pd::new(&ep.ctx).map_err(Fail::verbs)?;
        let (geometry, mut mrs, gpu) = Self::buffers(ep, p, &pd, cycle_buffer, cache_line)?;
        let null_mr = memory::null_mr(p, &pd)?;
        let mr = mrs.remove(0);
        let cqs = Cqs::new(ep, p, &pd)?;
        let attr = ep.ctx.attr();
        let out_reads = match p.tool.verb {
            Verb::Read | Verb::Atomic => p.outs.unwrap_or(attr.max_qp_rd_atom as u32).max(1),
            _ => 1,
        };
        let (qps, direct_qps) = Self::qps(p, &pd, &cqs, maker)?;
        Ok(Resources {
            gpu,
            geometry,
            mr,
            qp_mrs: mrs,
            null_mr,
            srq: cqs.srq,
            cq: cqs.cq,
            rcq: cqs.rcq,
            thread_cqs: cqs.thread_cqs,
            qps,
            direct_qps,
            psns: (0..p.num_qps).map(|_| random_psn()).collect(),
            pd,
            out_reads,
            wait_destroy: p.wait_destroy,
        })
    }

    /// The buffers and their MRs: one, or one per QP with `--mr_per_qp`
    /// (perftest allocates `buf[i]` the size of a single QP's halves), in
    /// host memory or on the `--use_cuda` GPU; the layout; the GPU's line.
    fn buffers(
        ep: &Endpoint,
        p: &Params,
        pd: &Arc<Pd>,
        cycle_buffer: u64,
        cache_line: u64,
    ) -> Result<(Geometry, Vec<Mr>, Option<String>), Fail> {
        let per_qp = p.mr_per_qp && p.num_qps > 1;
        let slots = if per_qp { 1 } else { p.num_qps as u64 };
        let geometry = Geometry::new(p.max_size(), cycle_buffer, cache_line, slots);
        let ud_extra = if p.conn == Conn::Ud { cache_line } else { 0 };
        let len = (geometry.total() + ud_extra) as usize;
        let fill = (geometry.slot as usize, geometry.slots as usize);
        let access = memory::access(p, access_for(p.tool.verb));
        memory::check_odp(&ep.ctx, p)?;
        let gpu = GpuMem::open(p)?;
        let n_mrs = if per_qp { p.num_qps as usize } else { 1 };
        let mut mrs = Vec::with_capacity(n_mrs);
        for _ in 0..n_mrs {
            if let Some(g) = &gpu {
                mrs.push(g.buffer(p, pd, &ep.ctx, len, fill, access)?);
                continue;
            }
            let mut buf = memory::alloc(p, len, cycle_buffer as usize)?;
            // The client's send halves carry rdmaperf's pattern (see landing.rs)
            // or the payload file; the remote-accessible halves stay zero so a
            // server can check landings.
            memory::fill(p, buf.as_mut_slice(), fill.0, fill.1);
            mrs.push(Mr::new(pd, buf, access).map_err(Fail::verbs)?);
        }
        Ok((geometry, mrs, gpu.as_ref().map(GpuMem::describe)))
    }

    /// The QPs, verbs or direct, each moved to INIT.
    fn qps(
        p: &Params,
        pd: &Arc<Pd>,
        cqs: &Cqs,
        maker: QpMaker<'_>,
    ) -> Result<(Vec<Arc<Qp>>, Vec<DirectQpHandle>), BuildError> {
        let mut init_attr = InitAttr::new(p.ib_port, access_for(p.tool.verb));
        init_attr.pkey_index = p.qos.pkey_index;
        let send_ops_flags = match maker {
            QpMaker::Direct(env) => {
                let send_cqs = (&cqs.thread_cqs[..], &cqs.rcq);
                let direct = DirectQpHandle::create_all(pd, send_cqs, cqs.srq.as_ref(), p, env)
                    .map_err(BuildError::Direct)?;
                for qp in &direct {
                    qp.to_init(&init_attr).map_err(Fail::verbs)?;
                }
                return Ok((Vec::new(), direct));
            }
            QpMaker::Verbs(f) => f,
        };
        let init = QpInit {
            qp_type: match p.conn {
                Conn::Rc => QpType::RC,
                Conn::Uc => QpType::UC,
                Conn::Ud => QpType::UD,
            },
            max_send_wr: p.tx_depth,
            max_recv_wr: p.rx_depth.max(1),
            max_send_sge: 1,
            max_recv_sge: 1,
            max_inline_data: p.inline_size,
            sq_sig_all: false,
            send_ops_flags,
        };
        let mut qps = Vec::with_capacity(p.num_qps as usize);
        for i in 0..p.num_qps as usize {
            let scq = &cqs.thread_cqs[i % cqs.thread_cqs.len()];
            let qp = Qp::create_with_srq(pd, scq, &cqs.rcq, &init, cqs.srq.as_ref())
                .map_err(Fail::verbs)?;
            qp.to_init(&init_attr).map_err(Fail::verbs)?;
            qps.push(qp);
        }
        Ok((qps, Vec::new()))
    }

    /// QP `i`'s memory: its MR and its index in that MR's geometry (`i` in
    /// the shared buffer; 0 in its own with `--mr_per_qp`).
    pub fn qp_mem(&self, i: usize) -> (&Mr, u64) {
        match i.checked_sub(1).and_then(|j| self.qp_mrs.get(j)) {
            Some(mr) => (mr, 0),
            None if self.qp_mrs.is_empty() => (&self.mr, i as u64),
            None => (&self.mr, 0),
        }
    }

    /// A receive poster for QP `i`: its own RQ, or the SRQ with `--use-srq`.
    pub fn recv_queue(&self, i: usize) -> Result<crate::post::verbs_cq::VerbsRecv, Fail> {
        use crate::post::verbs_cq::VerbsRecv;
        let qp = self.qps.get(i).ok_or_else(|| {
            Fail::new(format!(
                "internal: no verbs QP {i} to post receives to (direct QPs post through \
                 tool::session::direct::open_recv); please report this"
            ))
        })?;
        match &self.srq {
            Some(s) => VerbsRecv::srq(qp, s),
            None => VerbsRecv::new(qp),
        }
        .map_err(Fail::verbs)
    }

    /// The lkey a send from `mr` uses: the null MR's with `--use-null-mr`.
    pub fn send_lkey(&self, mr: &Mr) -> u32 {
        self.null_mr.as_ref().map_or(mr.lkey(), Mr::lkey)
    }

    /// Our key message for QP `i` (perftest `set_up_connection`).
    pub fn dest(&self, ep: &Endpoint, i: usize) -> Dest {
        let (mr, gi) = self.qp_mem(i);
        Dest {
            lid: ep.port.lid,
            out_reads: self.out_reads,
            qpn: self.qp_ctl(i).qpn(),
            psn: self.psns[i],
            rkey: mr.rkey(),
            vaddr: mr.addr() + self.geometry.recv_offset(gi),
            gid: ep.gid.map(|g| g.1),
            srqn: 0,
        }
    }

    /// perftest `ctx_connect`: RTR always; RTS when this side sends.
    pub fn connect(
        &self,
        ep: &Endpoint,
        p: &Params,
        mtu: u8,
        remote: &[Dest],
        rts: bool,
    ) -> Result<(), Fail> {
        if p.rdma_cm {
            // -R: the CM connected the QPs already (tool::cm_data).
            return Ok(());
        }
        let path_mtu = Mtu(mtu as u32);
        for i in 0..self.num_qps() {
            let qp = self.qp_ctl(i);
            let r = remote.get(i).ok_or_else(|| {
                Fail::new(format!(
                    "the peer sent {} QP addresses for our {} QPs; give both sides the same -q",
                    remote.len(),
                    self.num_qps()
                ))
            })?;
            let mut rtr = RtrAttr::new(p.ib_port, path_mtu, r.qpn, r.psn);
            rtr.dlid = r.lid;
            rtr.sl = p.sl;
            rtr.max_dest_rd_atomic = self.out_reads.min(255) as u8;
            rtr.grh = grh_of(ep, p, r, i);
            if rtr.grh.is_none() && p.qos.grh_set() {
                return Err(Fail::new(
                    "--tclass/--flow_label: the QPs carry no GRH here (InfiniBand without -x); \
                     give a GID index with -x",
                ));
            }
            let hw_rate = p
                .rate
                .as_ref()
                .filter(|r| r.kind == RateKind::Hw && p.conn != Conn::Ud);
            if let Some(r) = hw_rate {
                rtr.static_rate = r.hw_rate;
            }
            qp.to_rtr(&rtr).map_err(Fail::verbs)?;
            if let Some(r) = hw_rate {
                // A direct (mlx5dv) QP took the same verb; verbs QPs are read back.
                let held = match self.qps.get(i) {
                    Some(q) => q.query_static_rate().map_err(Fail::verbs)?,
                    None => r.hw_rate,
                };
                check_hw_rate(held, ep, p, r, i)?;
            }
            // Verbs QPs are read back; a direct (mlx5dv) QP is modified by the same verb.
            if let (true, Some(q)) = (p.qos.grh_set() || p.qos.pkey_index != 0, self.qps.get(i)) {
                check_qos(q, p, i)?;
            }
            if rts {
                let mut a = RtsAttr::new(self.psns[i], r.out_reads.min(255) as u8);
                a.timeout = p.qp_timeout;
                qp.to_rts(&a).map_err(Fail::verbs)?;
            }
        }
        Ok(())
    }

    /// UD: where sends to the peer `r` go — an AH built from the same
    /// address vector as RTR (perftest `ctx_connect`), its QPN, perftest's Q_Key.
    pub fn ud_dest(&self, ep: &Endpoint, p: &Params, r: &Dest) -> Result<UdDest, Fail> {
        let grh = grh_of(ep, p, r, 0);
        let attr = AhAttr {
            port: p.ib_port,
            dlid: r.lid,
            sl: p.sl,
            grh,
        };
        let ah = Ah::new(&self.pd, &attr).map_err(Fail::verbs)?;
        Ok(UdDest {
            ah,
            remote_qpn: r.qpn,
            remote_qkey: UD_QKEY,
        })
    }

    /// Move every QP to ERR (flushes outstanding work) — used when a run stops early.
    pub fn to_err(&self) {
        for i in 0..self.num_qps() {
            let _ = self.qp_ctl(i).to_err();
        }
    }
}

/// The GRH towards peer QP `r` from our QP `i` (none without GIDs): perftest's
/// hop limit 0xFF, `--tclass`, and `--flow_label` round-robin over the QPs.
fn grh_of(ep: &Endpoint, p: &Params, r: &Dest, i: usize) -> Option<Grh> {
    let (Some((idx, _)), Some(dgid)) = (ep.gid, r.gid) else {
        return None;
    };
    let mut g = Grh::new(dgid, idx as u8);
    g.traffic_class = p.qos.traffic_class;
    g.flow_label = p.qos.flow_label(i);
    Some(g)
}

/// perftest's check after RTR: the QP must read back the static rate asked
/// for, on an InfiniBand link (a RoCE QP does not pace by it).
fn check_hw_rate(held: u8, ep: &Endpoint, p: &Params, r: &RateLimit, i: usize) -> Result<(), Fail> {
    let dev = ep.ctx.name();
    let mut why = Vec::new();
    if held != r.hw_rate {
        why.push(format!(
            "the QP holds static rate {held} after RTR, not the {} asked for",
            r.hw_rate
        ));
    }
    if ep.port.link_layer.is_ethernet() {
        why.push(format!(
            "{dev} port {} is Ethernet (RoCE), where a QP does not pace by its address \
             vector's static rate (perftest refuses it too)",
            p.ib_port
        ));
    }
    if why.is_empty() {
        return Ok(());
    }
    let why = why.join("; ");
    Err(Fail::new(format!(
        "--rate_limit_type=HW: QP {i} on {dev} failed to accept the HW rate limit of {} Gb/s: \
         {why}; use --rate_limit_type=SW",
        r.value
    )))
}

/// `--tclass`/`--flow_label`/`--pkey_index`: the QP must hold what was asked
/// (read back after RTR), so a device that drops them fails the run instead of
/// measuring something else. A UD QP has no address vector (its AH carries
/// the GRH), so only its P_Key index is checked.
fn check_qos(qp: &crate::verbs::Qp, p: &Params, i: usize) -> Result<(), Fail> {
    let (tclass, flow, pkey) = qp.query_grh().map_err(Fail::verbs)?;
    if pkey != p.qos.pkey_index {
        return Err(Fail::new(format!(
            "QP {i}: the device holds P_Key index {pkey} after RTR, not the {} asked for",
            p.qos.pkey_index
        )));
    }
    let want = (p.qos.traffic_class, p.qos.flow_label(i));
    if p.conn != crate::cli::params::Conn::Ud && (tclass, flow) != want {
        return Err(Fail::new(format!(
            "QP {i}: the device holds traffic class {tclass} and flow label {flow} after RTR, \
             not the {} and {} asked for; it does not honour --tclass/--flow_label",
            want.0, want.1
        )));
    }
    Ok(())
}
