//! What a model is made of, as its user states it: the queues' shape
//! ([`ModelConfig`], the receive rings' [`RecvSpec`]), the transport, access
//! rights and keys, and what a modelled peer reports. Imports nothing from
//! the model: every other file of it stands on this one.

/// Which transport the modelled QP is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ModelTransport {
    /// RC: all operations; SENDs need a peer receive or fail with RNR.
    Rc,
    /// UD: SENDs only; delivered when the AV names `peer_qpn` with `qkey`
    /// and a peer receive is posted, silently dropped otherwise.
    Ud { peer_qpn: u32, qkey: u32 },
    /// A raw packet QP on an Ethernet port (`eth_port.rs`): SEND and eMPW
    /// WQEs become frames on the model's wire. `min_inline` is the device's
    /// minimum inline header (0 or 18); with 18, eMPW is refused.
    RawEth { min_inline: u8 },
}

/// Shape of the modelled queues.
#[derive(Clone, Copy, Debug)]
pub struct ModelConfig {
    /// SQ size in WQEBBs (power of two, <= 32768).
    pub wqe_cnt: u32,
    /// CQ entries (power of two, >= 2).
    pub cqe_cnt: u32,
    /// Bytes per CQ entry: 64, or 128 (`MLX5_CQE_SIZE=128`: the 64-byte CQE
    /// is written in the second half, the first half stays as allocated).
    pub cqe_size: u32,
    /// BlueFlame half size: 0 (doorbells only) or a multiple of 64, <= 1024.
    pub bf_size: u32,
    /// QPN of the first QP; QP `i` has `qpn + i`.
    pub qpn: u32,
    /// Number of QPs (SQs) completing on the one CQ (1..=256).
    pub qps: u32,
    pub transport: ModelTransport,
    /// RC `rnr_retry` (as `ibv_qp_attr`): a SEND/WRITE_IMM without a peer
    /// receive is retried this many NIC steps before RNR_RETRY_EXC_ERR; 7
    /// retries forever (back-pressure, perftest's setting). Default 0.
    pub rnr_retry: u8,
    /// Keep every MMIO event for [`Model::history`](super::handle::Model::history) (turn off for long runs).
    pub record_history: bool,
    /// Real receive rings at the peers (RQ per QP, or one SRQ), posted by
    /// `mlx5::rq`/`mlx5::srq` and completed on the one CQ; `None`: the
    /// abstract peer queues of [`Model::post_peer_recv_on`](super::handle::Model::post_peer_recv_on).
    pub recv: Option<RecvSpec>,
}

impl Default for ModelConfig {
    fn default() -> Self {
        Self {
            wqe_cnt: 64,
            cqe_cnt: 64,
            cqe_size: 64,
            bf_size: 256,
            qpn: 0x000123,
            qps: 1,
            transport: ModelTransport::Rc,
            rnr_retry: 0,
            record_history: true,
            recv: None,
        }
    }
}

impl ModelConfig {
    /// A raw Ethernet QP with no minimum inline and no history kept: what a
    /// timed or allocation-counting loop of raw posts runs on.
    pub fn raw_eth_loop(wqe_cnt: u32) -> Self {
        Self {
            wqe_cnt,
            cqe_cnt: 256,
            transport: ModelTransport::RawEth { min_inline: 0 },
            record_history: false,
            ..Self::default()
        }
    }

    /// A raw Ethernet host of `qps` QPs from QPN `qpn` (no minimum inline,
    /// no history, a CQ of 4096) whose RQs hold `slots` receives each: what
    /// the raw tools' sessions run on against a model peer.
    pub fn raw_eth_host(qps: u32, qpn: u32, slots: u32) -> Self {
        Self {
            qps,
            wqe_cnt: 256,
            cqe_cnt: 4096,
            qpn,
            transport: ModelTransport::RawEth { min_inline: 0 },
            record_history: false,
            recv: Some(RecvSpec {
                slots,
                qpn,
                ..RecvSpec::default()
            }),
            ..Self::default()
        }
    }
}

/// Memory-region access rights (values as `IBV_ACCESS_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Access(pub u32);

impl Access {
    pub const LOCAL_WRITE: Self = Self(1);
    pub const REMOTE_WRITE: Self = Self(2);
    pub const REMOTE_READ: Self = Self(4);
    pub const REMOTE_ATOMIC: Self = Self(8);
    pub const ALL: Self = Self(15);
    /// Local read only (a gather source).
    pub const NONE: Self = Self(0);
}

/// Keys of a registered region (as on mlx5, lkey == rkey).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MrKeys {
    pub lkey: u32,
    pub rkey: u32,
}

/// A receive completed at the modelled peer (SEND, SEND_IMM, WRITE_IMM).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PeerCompletion {
    /// Index of the sending QP (0-based; its QPN is `qpn + qp`).
    pub qp: u32,
    pub wr_id: u64,
    pub byte_len: u32,
    /// The send opcode that consumed it.
    pub opcode: u8,
    /// Immediate data as on the wire.
    pub imm: Option<[u8; 4]>,
    /// False when the message did not fit.
    pub ok: bool,
}

/// Shape of the modelled receive queues ([`ModelConfig::recv`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecvSpec {
    /// One SRQ every peer receives from (else one RQ per peer QP).
    pub srq: bool,
    /// Slots: RQ `wqe_cnt`, or SRQ `tail + 1` (a power of two >= 2).
    pub slots: u32,
    /// WQE stride in bytes (a power of two; RQ >= 16, SRQ >= 32).
    pub stride: u32,
    /// QPN of sender QP 0's peer (QP i's peer is `qpn + i`).
    pub qpn: u32,
    /// RC/UC SENDs that fit land in the CQE, not in the buffer. Off by
    /// default, as the tools create their direct QPs
    /// (`MLX5DV_QP_CREATE_DISABLE_SCATTER_TO_CQE`; libmlx5's own default
    /// is on).
    pub scatter_to_cqe: bool,
    /// With 128-byte CQEs, payloads of up to 32 bytes are scattered in
    /// format 1 (inside the 64-byte CQE, the entry's second half) and only
    /// larger ones, up to 64, in format 2 (the entry's first half).
    pub format1_in_128: bool,
    /// RQ: WQEs consumed in swapped pairs (1, 0, 3, 2, ...). SRQ: WQEs
    /// taken in list order but completed in swapped pairs, so the poller
    /// frees them out of order (the CQE of an odd count's last message
    /// waits for the next one).
    pub out_of_order: bool,
    /// UD: a 40-byte GRH precedes the payload, and the CQE says so.
    pub grh: bool,
}

impl Default for RecvSpec {
    fn default() -> Self {
        Self {
            srq: false,
            slots: 64,
            stride: 16,
            qpn: 0x000456,
            scatter_to_cqe: false,
            format1_in_128: false,
            out_of_order: false,
            grh: false,
        }
    }
}

/// The receive spec's own checks (a bad test set-up, said plainly).
pub(crate) fn check_recv(cfg: &ModelConfig, r: &RecvSpec) -> Result<(), String> {
    let min_stride = if r.srq { 32 } else { 16 };
    // An RQ may be described with 65536 slots, as a device would, so that
    // the direct path's refusal of it can be tested (`mlx5::rq`).
    let max_slots = if r.srq { 1 << 15 } else { 1 << 16 };
    if !r.slots.is_power_of_two() || r.slots < 2 || r.slots > max_slots {
        return Err(format!(
            "model: recv slots {} must be a power of two 2..={max_slots}",
            r.slots
        ));
    }
    if !r.stride.is_power_of_two() || r.stride < min_stride || r.stride > 1024 {
        return Err(format!(
            "model: recv stride {} must be a power of two {min_stride}..=1024",
            r.stride
        ));
    }
    if r.qpn
        .checked_add(cfg.qps - 1)
        .map_or(true, |q| q > 0x00ff_ffff)
    {
        return Err(format!(
            "model: recv qpn {:#x} + {} QPs exceeds 24 bits",
            r.qpn, cfg.qps
        ));
    }
    Ok(())
}
