//! perftest's buffer geometry (reference perftest.md §3.6). A stock peer
//! writes/reads at `vaddr + k*INC(size, cl)` for k cycling through
//! `cycle_buffer / INC` slots, so our buffers must be laid out the same way.

/// perftest `BUFF_SIZE(size, cycle_buffer)`: a per-QP slot is at least one cycle buffer.
pub const fn buff_size(size: u64, cycle_buffer: u64) -> u64 {
    if size < cycle_buffer {
        cycle_buffer
    } else {
        size
    }
}

/// perftest `INC(size, cache_line)`: the address step between posts.
pub const fn inc(size: u64, cache_line: u64) -> u64 {
    if size > cache_line {
        size.div_ceil(cache_line) * cache_line
    } else {
        cache_line
    }
}

/// The layout of one context's buffer: `2 * slots` halves of `slot` bytes; the
/// first `slots` are send buffers, the next `slots` are receive (remote-accessible).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub size: u64,
    pub cycle_buffer: u64,
    pub cache_line: u64,
    /// Bytes per QP slot: INC(BUFF_SIZE(size, cycle_buffer), cache_line).
    pub slot: u64,
    /// Number of QP slots (num_qps, or 1 with --mr_per_qp per buffer).
    pub slots: u64,
}

impl Geometry {
    pub fn new(size: u64, cycle_buffer: u64, cache_line: u64, slots: u64) -> Self {
        let slot = inc(buff_size(size, cycle_buffer), cache_line);
        Self {
            size,
            cycle_buffer,
            cache_line,
            slot,
            slots,
        }
    }
    /// Total buffer bytes (send halves + receive halves).
    pub fn total(&self) -> u64 {
        self.slot * 2 * self.slots
    }
    /// Offset of QP i's send buffer.
    pub fn send_offset(&self, qp: u64) -> u64 {
        qp * self.slot
    }
    /// Offset of QP i's remote-accessible (advertised) buffer.
    pub fn recv_offset(&self, qp: u64) -> u64 {
        (self.slots + qp) * self.slot
    }
    /// Whether addresses advance per post (perftest: size <= cycle_buffer/2).
    pub fn cycles(&self) -> bool {
        self.size <= self.cycle_buffer / 2
    }
    /// Address step per post.
    pub fn step(&self) -> u64 {
        inc(self.size, self.cache_line)
    }
    /// Posts before the address wraps back to the start.
    pub fn positions(&self) -> u64 {
        if self.cycles() {
            (self.cycle_buffer / self.step()).max(1)
        } else {
            1
        }
    }
    /// Offset within a QP's buffer of the k-th post.
    pub fn post_offset(&self, k: u64) -> u64 {
        (k % self.positions()) * self.step()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn perftest_macros() {
        assert_eq!(buff_size(64, 4096), 4096);
        assert_eq!(buff_size(65536, 4096), 65536);
        assert_eq!(inc(2, 64), 64);
        assert_eq!(inc(65, 64), 128);
        assert_eq!(inc(64, 64), 64);
    }

    #[test]
    fn small_messages_cycle_through_the_page() {
        let g = Geometry::new(64, 4096, 64, 2);
        assert_eq!(g.slot, 4096);
        assert_eq!(g.total(), 4 * 4096);
        assert_eq!(g.recv_offset(0), 8192);
        assert!(g.cycles());
        assert_eq!(g.positions(), 64);
        assert_eq!(g.post_offset(63), 63 * 64);
        assert_eq!(g.post_offset(64), 0);
    }

    #[test]
    fn large_messages_do_not_cycle() {
        let g = Geometry::new(65536, 4096, 64, 1);
        assert!(!g.cycles());
        assert_eq!(g.positions(), 1);
        assert_eq!(g.post_offset(5), 0);
        assert_eq!(g.slot, 65536);
        // 2049 B > half a page: no cycling, slot rounded to the cache line.
        let g = Geometry::new(2049, 4096, 64, 1);
        assert!(!g.cycles());
        assert_eq!(g.slot, 4096);
    }
}
