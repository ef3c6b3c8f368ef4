//! perftest's control-protocol steps as methods, in the form each tool calls
//! them (`exchange_versions`, `check_sys_data`, `check_mtu`, `ctx_hand_shake`,
//! `xchg_bw_reports`, `ctx_close_connection`). Which steps a tool runs, and in
//! which order, is in [`super::choreo`].

use std::net::SocketAddr;
use std::time::Duration;

use super::channel::{Channel, Role};
use super::error::CtrlError;
use super::wire::{
    self, BwReport, Dest, PeerVersion, ReportField, WireError, KEY_LEN, KEY_LEN_GID,
    MIN_PEER_VERSION, NEGOTIATING_VERSION, OUR_VERSION, VERSION_LEN,
};

/// One side of a control session.
#[derive(Debug)]
pub struct Session {
    /// Dropped before the channel (fields drop in order): e.g. the caller's
    /// registration of the socket with a signal handler.
    guard: Option<Box<dyn std::any::Any + Send>>,
    channel: Channel,
    local_version: String,
    peer_version: Option<PeerVersion>,
    hand_shakes: usize,
    /// The next read waits for the peer's measurement run.
    peer_run_pending: bool,
    peer_run_timeout: Option<Duration>,
    /// Carried in binary key messages only (`-R`).
    gid_index: u32,
    /// Sent after our version string (see [`wire::PeerParams`]).
    local_params: Option<wire::PeerParams>,
}

/// Frame size of the after-run exchange (an rdma_cm control message).
pub const AFTER_RUN_FRAME: usize = 512;

impl Session {
    /// A session over a connected channel; we advertise [`OUR_VERSION`].
    pub fn new(channel: Channel) -> Session {
        Session {
            guard: None,
            channel,
            local_version: OUR_VERSION.to_owned(),
            peer_version: None,
            hand_shakes: 0,
            peer_run_pending: false,
            peer_run_timeout: None,
            gid_index: 0,
            local_params: None,
        }
    }

    /// Keep `g` alive exactly as long as the connection (dropped just before it).
    pub fn with_guard(mut self, g: Box<dyn std::any::Any + Send>) -> Session {
        self.guard = Some(g);
        self
    }

    /// Advertise another version string. It must keep perftest's wire
    /// behaviour: 5.70 <= atof(v) < 6.28 (6.28+ would make a master peer send
    /// its parameter-negotiation blob, which we do not speak).
    pub fn with_local_version(mut self, v: &str) -> Result<Session, CtrlError> {
        let local = |problem: String| CtrlError::Local {
            step: "version".into(),
            source: WireError::new("version", problem, &[]),
        };
        wire::encode_version(v).map_err(|source| CtrlError::Local {
            step: "version".into(),
            source,
        })?;
        match wire::atof(v.as_bytes()) {
            Some(x) if (MIN_PEER_VERSION..NEGOTIATING_VERSION).contains(&x) => {}
            _ => return Err(local(format!("{v:?} must read as 5.70 <= version < 6.28"))),
        }
        self.local_version = v.to_owned();
        Ok(self)
    }

    /// Send `p` in the version message's padding (stock perftest ignores it).
    pub fn set_local_params(&mut self, p: wire::PeerParams) {
        self.local_params = Some(p);
    }

    /// Client (writes first) or server (reads first).
    pub fn role(&self) -> Role {
        self.channel.role()
    }

    /// The peer's address.
    pub fn peer(&self) -> SocketAddr {
        self.channel.peer()
    }

    /// The peer's version, once exchanged.
    pub fn peer_version(&self) -> Option<&PeerVersion> {
        self.peer_version.as_ref()
    }

    /// Watch the control connection for the peer's exit while a
    /// measurement runs (see [`crate::run::peer`]); None over rdma_cm.
    pub fn watch_peer(&self) -> Option<crate::run::peer::PeerWatch> {
        self.channel
            .try_clone_socket()
            .map(crate::run::peer::PeerWatch::start)
    }

    /// The channel, e.g. to change its step timeout.
    pub fn channel_mut(&mut self) -> &mut Channel {
        &mut self.channel
    }

    /// Bound on a read that waits for the peer's run (default: none; a
    /// closed peer still ends the wait at once).
    pub fn set_peer_run_timeout(&mut self, t: Option<Duration>) {
        self.peer_run_timeout = t;
    }

    /// The next read may take as long as the peer's measurement run (`-D`,
    /// large `-n`, `--run_infinitely`), so it uses the peer-run timeout
    /// instead of the step timeout. Call it before the steps that
    /// [`super::choreo::Entry::waits_for_peer_run`] marks.
    pub fn wait_for_peer_run(&mut self) {
        self.peer_run_pending = true;
    }

    fn read_timeout(&mut self) -> Option<Duration> {
        if std::mem::take(&mut self.peer_run_pending) {
            self.peer_run_timeout
        } else {
            self.channel.step_timeout()
        }
    }

    fn exchange(&mut self, step: &str, out: &[u8], in_len: usize) -> Result<Vec<u8>, CtrlError> {
        let t = self.read_timeout();
        self.channel.exchange_timeout(step, out, in_len, t)
    }

    fn protocol(&self, step: &str, source: WireError) -> CtrlError {
        CtrlError::Protocol {
            step: step.to_owned(),
            peer: self.peer(),
            source,
        }
    }

    fn peer_v(&self) -> Result<PeerVersion, CtrlError> {
        self.peer_version
            .clone()
            .ok_or(CtrlError::Order("exchange_versions must come first"))
    }

    /// `exchange_versions` + `check_version_compatibility`: 16 bytes each way;
    /// a peer below 5.70 (or not speaking perftest) is refused.
    pub fn exchange_versions(&mut self) -> Result<PeerVersion, CtrlError> {
        const STEP: &str = "version";
        let mut out =
            wire::encode_version(&self.local_version).map_err(|source| CtrlError::Local {
                step: STEP.into(),
                source,
            })?;
        if let Some(p) = &self.local_params {
            wire::encode_params(&mut out, self.local_version.len(), p);
        }
        let got = self.exchange(STEP, &out, VERSION_LEN)?;
        let v = wire::decode_version(&got).map_err(|e| self.protocol(STEP, e))?;
        self.peer_version = Some(v.clone());
        Ok(v)
    }

    /// `check_sys_data`: cycle buffer then cache line size, 4 bytes BE each;
    /// both sides continue with the maxima. Skipped for peers < 5.32.
    pub fn exchange_sysdata(
        &mut self,
        cycle_buffer: u32,
        cache_line: u32,
    ) -> Result<(u32, u32), CtrlError> {
        if !self.peer_v()?.has_sysdata() {
            return Ok((cycle_buffer, cache_line));
        }
        let mut theirs = [0u32; 2];
        let mine = [(cycle_buffer, "cycle_buffer"), (cache_line, "cache_line")];
        for ((v, what), slot) in mine.into_iter().zip(&mut theirs) {
            let step = format!("sysdata {what}");
            let got = self.exchange(&step, &wire::encode_sysdata(v), wire::SYSDATA_LEN)?;
            *slot = wire::decode_sysdata(what, &got).map_err(|e| self.protocol(&step, e))?;
        }
        Ok((cycle_buffer.max(theirs[0]), cache_line.max(theirs[1])))
    }

    /// `check_mtu`: the `ibv_mtu` enum (1..5) as ASCII; both use the smaller.
    pub fn exchange_mtu(&mut self, local: u8) -> Result<u8, CtrlError> {
        const STEP: &str = "MTU";
        let peer = self.peer_v()?;
        let out = wire::encode_mtu(local, peer.mtu_len()).map_err(|source| CtrlError::Local {
            step: STEP.into(),
            source,
        })?;
        if !peer.has_mtu() {
            return Ok(local);
        }
        let got = self.exchange(STEP, &out, peer.mtu_len())?;
        let theirs = wire::decode_mtu(&got).map_err(|e| self.protocol(STEP, e))?;
        Ok(local.min(theirs))
    }

    /// `ctx_hand_shake`: one key message each way. The format (59 bytes, or
    /// 108 with GID) follows `my.gid`, as in perftest; a peer using the other
    /// format is reported as such.
    pub fn hand_shake(&mut self, my: &Dest) -> Result<Dest, CtrlError> {
        let step = format!("key message (hand_shake #{})", self.hand_shakes + 1);
        self.hand_shake_step(&step, my)
    }

    /// [`Session::hand_shake`] with the step named in errors, e.g. the
    /// `Display` of a [`super::choreo::Step`].
    pub fn hand_shake_step(&mut self, step: &str, my: &Dest) -> Result<Dest, CtrlError> {
        self.hand_shakes += 1;
        if self.channel.is_cm() {
            return self.hand_shake_bin(step, my);
        }
        let out = wire::encode_key(my).map_err(|source| CtrlError::Local {
            step: step.to_owned(),
            source,
        })?;
        let timeout = self.read_timeout();
        match self.role() {
            Role::Client => {
                self.channel.send(step, &out)?;
                self.recv_key(step, out.len(), timeout)
            }
            Role::Server => {
                let theirs = self.recv_key(step, out.len(), timeout)?;
                self.channel.send(step, &out)?;
                Ok(theirs)
            }
        }
    }

    /// Over rdma_cm the key message is perftest's binary struct (56 bytes; 64
    /// from a 6.29 peer, told apart by the message's own length).
    fn hand_shake_bin(&mut self, step: &str, my: &Dest) -> Result<Dest, CtrlError> {
        // A 6.29+ peer reads its own, longer struct (we advertise 6.27, so
        // it sends us the 64-byte form too, told apart by length below).
        let long = self
            .peer_version
            .as_ref()
            .is_some_and(|v| v.value >= wire::KEY_BIN_629_VERSION - 1e-9);
        let out: Vec<u8> = if long {
            wire::encode_key_bin_629(my, self.gid_index).to_vec()
        } else {
            wire::encode_key_bin(my, self.gid_index).to_vec()
        };
        let timeout = self.read_timeout();
        let recv = |s: &mut Session| -> Result<Dest, CtrlError> {
            let len = s
                .channel
                .next_message_len(step, timeout)?
                .unwrap_or(wire::KEY_LEN_BIN);
            let got = s.channel.recv_timeout(step, len, timeout)?;
            wire::decode_key_bin(&got).map_err(|e| s.protocol(step, e))
        };
        match self.role() {
            Role::Client => {
                self.channel.send(step, &out)?;
                recv(self)
            }
            Role::Server => {
                let theirs = recv(self)?;
                self.channel.send(step, &out)?;
                Ok(theirs)
            }
        }
    }

    /// The GID index sent in binary (rdma_cm) key messages.
    pub fn set_gid_index(&mut self, i: u32) {
        self.gid_index = i;
    }

    fn recv_key(
        &mut self,
        step: &str,
        len: usize,
        timeout: Option<Duration>,
    ) -> Result<Dest, CtrlError> {
        let mut buf = Vec::with_capacity(len);
        // Read the short format's size first: if we expect the GID format and
        // the peer sent a complete short one, say so instead of waiting for
        // 49 bytes that will never come.
        self.channel
            .recv_more(step, &mut buf, KEY_LEN, timeout)
            .map_err(|e| e.expecting(len))?;
        if len == KEY_LEN_GID {
            if wire::is_plain_key(&buf) {
                let e = WireError::new(
                    "key message",
                    "the peer sent the 59-byte key message without GID, but we use a GID \
                     (RoCE, or -x given): both sides must use GIDs or neither — give both the \
                     same -x (on RoCE a GID is always used)",
                    &buf,
                );
                return Err(self.protocol(step, e));
            }
            self.channel
                .recv_more(step, &mut buf, KEY_LEN_GID, timeout)?;
        }
        wire::decode_key(&buf).map_err(|e| self.protocol(step, e))
    }

    /// `xchg_bw_reports`: 5 lock-step exchanges (9 with per-port values, if
    /// `mine.per_port` is set — both sides must agree). Returns the peer's.
    pub fn exchange_bw_report(&mut self, mine: &BwReport) -> Result<BwReport, CtrlError> {
        let peer = self.peer_v()?;
        let mut theirs = BwReport::default();
        for &field in ReportField::sequence(mine.per_port.is_some()) {
            let out = field.encode(mine, &peer);
            let got = self.exchange(field.name(), &out, field.len(&peer))?;
            field
                .decode(&mut theirs, &got, &peer)
                .map_err(|e| self.protocol(field.name(), e))?;
        }
        Ok(theirs)
    }

    /// `ctx_close_connection`: a last hand_shake of `my` (usually QP 0's dest),
    /// then perftest 4.5's `"done\0"` (harmless to newer peers, which no
    /// longer send it) and close.
    pub fn close(mut self, my: &Dest) -> Result<(), CtrlError> {
        self.exchange_after_run();
        self.exchange_compare();
        self.hand_shake_step("close handshake", my)?;
        self.channel.finish(Some(wire::DONE));
        Ok(())
    }

    /// Ends without a close handshake (ib_write_lat does this).
    pub fn finish(mut self) {
        self.exchange_after_run();
        self.exchange_compare();
        self.channel.finish(None);
    }

    /// `--explain` on both sides (each said so in its version message):
    /// the two explanations cross (`super::after_run`), in frames of
    /// [`AFTER_RUN_FRAME`] bytes each way (an rdma_cm control link carries
    /// 512-byte messages), after their lengths. Otherwise it records why
    /// the peer gives none. A failure is recorded, never fatal: the run's
    /// result stands.
    fn exchange_after_run(&mut self) {
        use super::after_run::{self, PeerExplain};
        let mine = self.local_params.is_some_and(|p| p.explain);
        let theirs = self.peer_version.as_ref().map(|v| v.params);
        match (mine, theirs) {
            (false, _) => return,
            (true, Some(None) | None) => return after_run::set(PeerExplain::Stock),
            (true, Some(Some(p))) if !p.explain => return after_run::set(PeerExplain::NotAsked),
            _ => {}
        }
        let local = after_run::local().unwrap_or_default();
        let got = self.cross_after_run(&local);
        after_run::set(match got {
            Ok(b) => PeerExplain::Received(b),
            Err(e) => PeerExplain::Failed(e.to_string()),
        });
    }

    /// `rdmaperf compare` on both sides (each said so in its version
    /// message): one [`super::compare_ext::Note`] each way. What came, or
    /// why nothing did, is recorded for [`super::compare_ext::take`].
    fn exchange_compare(&mut self) {
        use super::compare_ext::{self, Note, FRAME_LEN};
        const STEP: &str = "compare frame";
        let on = |p: Option<wire::PeerParams>| p.is_some_and(|p| p.compare);
        if !on(self.local_params) || !on(self.peer_version.as_ref().and_then(|v| v.params)) {
            return;
        }
        // Always one frame each way, so the two sides stay in step.
        let mine = compare_ext::local().unwrap_or_else(|| Note {
            method: "unknown".into(),
            last: false,
            run: 0,
            recv_ns_per_msg: 0.0,
        });
        let got = self
            .exchange(STEP, &mine.encode(), FRAME_LEN)
            .and_then(|b| Note::decode(&b).map_err(|e| self.protocol(STEP, e)));
        compare_ext::set_peer(got.map_err(|e| e.to_string()));
    }

    fn cross_after_run(&mut self, mine: &[u8]) -> Result<Vec<u8>, CtrlError> {
        const STEP: &str = "explain exchange";
        let len = (mine.len() as u32).to_le_bytes();
        let got = self.exchange(STEP, &len, 4)?;
        let n = u32::from_le_bytes([got[0], got[1], got[2], got[3]]);
        if n > super::after_run::MAX_LEN {
            return Err(self.protocol(
                STEP,
                WireError::new(STEP, format!("the peer announced {n} bytes"), &got),
            ));
        }
        let rounds = mine.len().max(n as usize).div_ceil(AFTER_RUN_FRAME);
        let mut theirs = Vec::with_capacity(rounds * AFTER_RUN_FRAME);
        for r in 0..rounds {
            let mut frame = [0u8; AFTER_RUN_FRAME];
            let part = mine.get(r * AFTER_RUN_FRAME..).unwrap_or(&[]);
            let k = part.len().min(AFTER_RUN_FRAME);
            frame[..k].copy_from_slice(&part[..k]);
            theirs.extend(self.exchange(STEP, &frame, AFTER_RUN_FRAME)?);
        }
        theirs.truncate(n as usize);
        Ok(theirs)
    }
}
