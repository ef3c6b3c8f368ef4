//! perftest's defaults and limits (`perftest_parameters.h`, applied in
//! `init_perftest_params` and `force_dependecies`), and the per-tool
//! defaults that depend on the verb, the connection and the mode.

use super::kinds::{Conn, Verb};

pub const DEF_PORT: u16 = 18515;
pub const DEF_SIZE_BW: u64 = 65536;
pub const DEF_SIZE_LAT: u64 = 2;
pub const DEF_SIZE_ATOMIC: u64 = 8;
pub const DEF_ITERS: u64 = 1000;
pub const DEF_ITERS_WB: u64 = 5000;
pub const DEF_TX_BW: u32 = 128;
pub const DEF_TX_LAT: u32 = 1;
pub const DEF_RX_SEND: u32 = 512;
pub const DEF_CQ_MOD: u32 = 100;
pub const DEF_QP_TIME: u8 = 14;
pub const DEF_RETRY_COUNT: u8 = 7;
pub const MAX_SIZE: u64 = 8 * 1024 * 1024;
pub const MIN_ITER: u64 = 5;
/// perftest master's MAX_ITER (4.5: 100000000).
pub const MAX_ITER: u64 = 1 << 32;
pub const MAX_TX: u32 = 15000;
pub const MAX_QP_NUM: u32 = 16384;
pub const MAX_CQ_MOD: u32 = 1024;
pub const MSG_SIZE_CQ_MOD_LIMIT: u64 = 8192;
pub const UC_MAX_RX: u64 = 16000;
/// perftest computes the peak only up to this many iterations.
pub const PEAK_MAX_ITERS: u64 = 20000;
pub const DEF_JSON_FILE: &str = "perftest_out.json";
/// perftest's CTX_POLL_BATCH: completions per poll call in the bw loops.
pub const DEF_CQE_POLL: u32 = 16;
/// perftest's MAX_INLINE (master; 4.5: 912).
pub const MAX_INLINE: u32 = 1024;
/// `--run_infinitely` without `-D` prints a row every this many seconds.
pub const DEF_DURATION: u32 = 5;

/// `-s`'s default: 8 for atomics, 64 KiB for bw, 2 for latency.
pub fn size(verb: Verb, bw: bool) -> u64 {
    match (verb, bw) {
        (Verb::Atomic, _) => DEF_SIZE_ATOMIC,
        (_, true) => DEF_SIZE_BW,
        (_, false) => DEF_SIZE_LAT,
    }
}

/// `-n`'s default: write-bw runs 5000, the rest 1000.
pub fn iters(verb: Verb, bw: bool) -> u64 {
    if verb == Verb::Write && bw {
        DEF_ITERS_WB
    } else {
        DEF_ITERS
    }
}

/// `-r`'s default: SEND on UD/UC posts one receive per iteration (up to
/// UC_MAX_RX), SEND on RC 512, the RDMA verbs 1.
pub fn rx_depth(verb: Verb, conn: Conn, is_dur: bool, iters: u64) -> u32 {
    match (verb, conn) {
        (Verb::Send, Conn::Ud | Conn::Uc) if !is_dur => (iters.min(UC_MAX_RX)) as u32,
        (Verb::Send, _) => DEF_RX_SEND,
        _ => 1,
    }
}

/// `-I`'s default: bw tests 0; latency tests inline what fits perftest's
/// per-verb budget.
pub fn inline_size(bw: bool, verb: Verb, conn: Conn) -> u32 {
    match (bw, verb, conn) {
        (true, _, _) => 0,
        (false, Verb::Write, _) => 220,
        (false, Verb::Send, Conn::Ud) => 188,
        (false, Verb::Send, _) => 236,
        _ => 0,
    }
}
