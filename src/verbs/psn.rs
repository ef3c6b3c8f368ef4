//! 24-bit packet sequence numbers. perftest uses `lrand48() & 0xffffff`;
//! any value works as long as each side tells the peer its own. A small
//! seeded generator avoids a crate dependency.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// PSNs are 24 bits.
pub const PSN_MASK: u32 = 0x00ff_ffff;

/// splitmix64: tiny, full-period, good enough to spread PSNs.
#[derive(Clone, Debug)]
pub struct PsnRng {
    state: u64,
}

impl PsnRng {
    pub fn new(seed: u64) -> Self {
        Self { state: seed }
    }

    /// Seeded from the clock, the pid and a per-process counter, so QPs
    /// created in the same nanosecond still differ.
    pub fn from_entropy() -> Self {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let t = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let pid = u64::from(std::process::id());
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        Self::new(t ^ (pid << 32) ^ n.wrapping_mul(0x9e37_79b9_7f4a_7c15))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A PSN in 0..=0xffffff.
    pub fn next_psn(&mut self) -> u32 {
        (self.next_u64() as u32) & PSN_MASK
    }
}

/// One fresh random 24-bit PSN.
pub fn random_psn() -> u32 {
    PsnRng::from_entropy().next_psn()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn psns_fit_24_bits_and_vary() {
        let mut r = PsnRng::new(42);
        let v: Vec<u32> = (0..1000).map(|_| r.next_psn()).collect();
        assert!(v.iter().all(|&p| p <= PSN_MASK));
        let mut d = v.clone();
        d.sort_unstable();
        d.dedup();
        assert!(d.len() > 990, "only {} distinct PSNs", d.len());
        // The top bits are used too, not only low ones.
        assert!(v.iter().any(|&p| p > 0x80_0000));
    }

    #[test]
    fn same_seed_same_sequence() {
        let a: Vec<u32> = {
            let mut r = PsnRng::new(7);
            (0..5).map(|_| r.next_psn()).collect()
        };
        let mut r = PsnRng::new(7);
        let b: Vec<u32> = (0..5).map(|_| r.next_psn()).collect();
        assert_eq!(a, b);
    }

    #[test]
    fn entropy_seeds_differ() {
        let v: Vec<u32> = (0..8).map(|_| random_psn()).collect();
        assert!(v.iter().all(|&p| p <= PSN_MASK));
        assert!(v.windows(2).any(|w| w[0] != w[1]));
    }
}
