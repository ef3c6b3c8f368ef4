//! Page-aligned buffers and memory regions.

use std::ptr::NonNull;
use std::sync::Arc;

use super::devmem::{DevReg, DeviceMemory};
use super::error::{last_errno, warn_if_failed, Result, VerbsError};
use super::pd::Pd;
use super::rdma_core::reg_dmabuf_mr;
use crate::sys;

/// MR / QP access flags (`IBV_ACCESS_*`). Chosen by us, combined with `|`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default, Debug)]
#[repr(transparent)]
pub struct Access(pub u32);

impl Access {
    pub const NONE: Self = Self(0);
    pub const LOCAL_WRITE: Self = Self(sys::IBV_ACCESS_LOCAL_WRITE);
    pub const REMOTE_WRITE: Self = Self(sys::IBV_ACCESS_REMOTE_WRITE);
    pub const REMOTE_READ: Self = Self(sys::IBV_ACCESS_REMOTE_READ);
    pub const REMOTE_ATOMIC: Self = Self(sys::IBV_ACCESS_REMOTE_ATOMIC);
    pub const ON_DEMAND: Self = Self(sys::IBV_ACCESS_ON_DEMAND);
    pub const HUGETLB: Self = Self(sys::IBV_ACCESS_HUGETLB);
    /// Optional: dropped by libibverbs where the kernel cannot honour it.
    pub const RELAXED_ORDERING: Self = Self(sys::IBV_ACCESS_RELAXED_ORDERING);

    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }

    /// "LOCAL_WRITE|REMOTE_WRITE" for error messages.
    pub fn describe(self) -> String {
        const NAMES: [(Access, &str); 7] = [
            (Access::LOCAL_WRITE, "LOCAL_WRITE"),
            (Access::REMOTE_WRITE, "REMOTE_WRITE"),
            (Access::REMOTE_READ, "REMOTE_READ"),
            (Access::REMOTE_ATOMIC, "REMOTE_ATOMIC"),
            (Access::ON_DEMAND, "ON_DEMAND"),
            (Access::HUGETLB, "HUGETLB"),
            (Access::RELAXED_ORDERING, "RELAXED_ORDERING"),
        ];
        let mut rest = self.0;
        let mut parts: Vec<String> = Vec::new();
        for (a, n) in NAMES {
            if self.contains(a) {
                parts.push(n.to_string());
                rest &= !a.0;
            }
        }
        if rest != 0 {
            parts.push(format!("{rest:#x}"));
        }
        if parts.is_empty() {
            "none".to_string()
        } else {
            parts.join("|")
        }
    }
}

impl std::ops::BitOr for Access {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

impl std::ops::BitOrAssign for Access {
    fn bitor_assign(&mut self, rhs: Self) {
        self.0 |= rhs.0;
    }
}

/// The system page size (perftest's `cycle_buffer` default), 4096 if unknown.
pub fn page_size() -> usize {
    // SAFETY: sysconf has no memory-safety preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 {
        p as usize
    } else {
        4096
    }
}

/// A heap buffer from `posix_memalign`, page-aligned by default, freed on
/// drop. The NIC reads and writes it behind the compiler's back, so code that
/// polls it for remote writes must use volatile reads through `as_ptr`.
pub struct AlignedBuf {
    pub(super) ptr: NonNull<u8>,
    pub(super) len: usize,
    pub(super) align: usize,
    /// Where the memory came from, so Drop gives it back the same way.
    pub(super) backing: Backing,
}

/// How an [`AlignedBuf`]'s memory was obtained (see `membuf` for the
/// non-heap ones).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backing {
    /// `posix_memalign` (freed with `free`).
    Heap,
    /// `shmget(SHM_HUGETLB)` + `shmat` (`--use_hugepages`; `shmdt` on drop).
    HugeShm,
    /// `mmap` of a file (`--mmap`): `map_len` bytes mapped (`munmap` on drop).
    FileMap { map_len: usize },
}

// SAFETY: the buffer is plain owned memory; nothing in it is thread-bound.
unsafe impl Send for AlignedBuf {}
// SAFETY: shared access only hands out `&[u8]` / raw pointers.
unsafe impl Sync for AlignedBuf {}

impl std::fmt::Debug for AlignedBuf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "AlignedBuf({:p}, {} B, align {})",
            self.ptr, self.len, self.align
        )
    }
}

impl AlignedBuf {
    /// `len` zero bytes, page-aligned.
    pub fn zeroed(len: usize) -> Result<Self> {
        Self::with_align(len, page_size())
    }

    /// `len` bytes of `byte`, page-aligned.
    pub fn filled(len: usize, byte: u8) -> Result<Self> {
        let mut b = Self::zeroed(len)?;
        b.as_mut_slice().fill(byte);
        Ok(b)
    }

    /// `len` zero bytes aligned to `align` (a power of two ≥ pointer size).
    pub fn with_align(len: usize, align: usize) -> Result<Self> {
        if len == 0 {
            return Err(VerbsError::new(
                "posix_memalign",
                0,
                "a buffer of 0 bytes was requested; the message size must be at least 1",
            ));
        }
        let mut p: *mut libc::c_void = std::ptr::null_mut();
        // SAFETY: `p` is a valid out-pointer; posix_memalign validates align.
        let ret = unsafe { libc::posix_memalign(&mut p, align, len) };
        let ptr = match NonNull::new(p as *mut u8) {
            Some(ptr) if ret == 0 => ptr,
            _ => {
                return Err(VerbsError::new(
                    "posix_memalign",
                    if ret == 0 { libc::ENOMEM } else { ret },
                    format!(
                        "could not allocate {len} bytes aligned to {align}; use a smaller size \
                         (-s) or fewer QPs (-q)"
                    ),
                ))
            }
        };
        // SAFETY: `ptr` points to `len` writable bytes just allocated.
        unsafe { std::ptr::write_bytes(ptr.as_ptr(), 0, len) };
        Ok(Self {
            ptr,
            len,
            align,
            backing: Backing::Heap,
        })
    }

    /// Fills with a cheap pseudo-random pattern (perftest fills its buffers
    /// with random bytes so compression/zero-detection cannot flatter it).
    pub fn fill_pseudo_random(&mut self, seed: u64) {
        let mut x = seed | 1;
        for chunk in self.as_mut_slice().chunks_mut(8) {
            // xorshift64
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let b = x.to_le_bytes();
            chunk.copy_from_slice(&b[..chunk.len()]);
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn align(&self) -> usize {
        self.align
    }

    pub fn backing(&self) -> Backing {
        self.backing
    }

    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Address as the NIC sees it (virtual address, `u64`).
    pub fn addr(&self) -> u64 {
        self.ptr.as_ptr() as u64
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `ptr` is valid for `len` initialised bytes while `self` lives.
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and `&mut self` makes this the only borrow.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        let p = self.ptr.as_ptr() as *mut libc::c_void;
        match self.backing {
            // SAFETY: `ptr` came from posix_memalign and is freed once.
            Backing::Heap => unsafe { libc::free(p) },
            // SAFETY: `ptr` came from shmat and is detached once; the segment
            // was marked IPC_RMID, so the last detach frees it.
            Backing::HugeShm => unsafe {
                libc::shmdt(p);
            },
            // SAFETY: `ptr..ptr+map_len` came from mmap and is unmapped once.
            Backing::FileMap { map_len } => unsafe {
                libc::munmap(p, map_len);
            },
        }
    }
}

/// The soft RLIMIT_MEMLOCK in bytes (`None`: unlimited or unreadable).
pub(crate) fn memlock_limit() -> Option<u64> {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a valid out-pointer for one `rlimit`.
    let ret = unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut r) };
    (ret == 0 && r.rlim_cur != libc::RLIM_INFINITY).then_some(r.rlim_cur)
}

/// The hint for a failed registration; names the size and access flags, and
/// for the errnos of a pinning failure the bytes needed against `memlock`
/// (the RLIMIT_MEMLOCK in force, `None` = unlimited).
pub(crate) fn reg_mr_hint(
    len: usize,
    addr: u64,
    access: Access,
    errno: i32,
    max_mr: u64,
    memlock: Option<u64>,
) -> String {
    let mut h = format!(
        "registering {len} bytes at {addr:#x} with access {}",
        access.describe()
    );
    if errno == libc::ENOMEM || errno == libc::EPERM || errno == libc::EAGAIN {
        let kib = (len as u64).div_ceil(1024);
        match memlock {
            Some(lim) => h.push_str(&format!(
                "; the locked-memory limit is too low: {len} bytes must be locked but \
                 RLIMIT_MEMLOCK is {lim} bytes (`ulimit -l` {}): raise it to at least {kib} KiB \
                 (`ulimit -l unlimited`, or memlock in /etc/security/limits.conf, or \
                 LimitMEMLOCK= for a systemd service)",
                lim / 1024
            )),
            None => h.push_str(&format!(
                "; {len} bytes must be locked and `ulimit -l` is unlimited, so the kernel or \
                 device ran out of memory for the pinning: use a smaller size (-s) or fewer \
                 QPs (-q)"
            )),
        }
    }
    if max_mr != 0 && len as u64 > max_mr {
        h.push_str(&format!("; the device's max_mr_size is {max_mr}"));
    }
    h
}

/// A registered memory region. Owns its buffer (when made with [`Mr::new`])
/// and holds its PD; deregistered on drop before the buffer is freed.
pub struct Mr {
    mr: NonNull<sys::ibv_mr>,
    access: Access,
    buf: Option<AlignedBuf>,
    /// Device memory (a GPU's) this MR owns, how it was registered and its
    /// device address (the iova the peer must use; a dma-buf MR's `addr` is
    /// the fd offset). Dropped after deregistration, like `buf`.
    dev: Option<(Box<dyn DeviceMemory>, DevReg, u64)>,
    pd: Arc<Pd>,
}

// SAFETY: MR verbs are thread-safe; lkey/rkey/addr are immutable after
// registration and the buffer is Send/Sync.
unsafe impl Send for Mr {}
// SAFETY: as above.
unsafe impl Sync for Mr {}

impl Mr {
    /// Registers `buf` (taking ownership, so it outlives the registration).
    pub fn new(pd: &Arc<Pd>, buf: AlignedBuf, access: Access) -> Result<Mr> {
        // SAFETY: `buf` is valid for its length and moves into the Mr, which
        // deregisters before freeing it.
        let mut mr = unsafe { Self::register(pd, buf.as_ptr(), buf.len(), access)? };
        mr.buf = Some(buf);
        Ok(mr)
    }

    /// Registers memory the caller owns (hugepages, shared memory, ...).
    ///
    /// # Safety
    /// `addr..addr+len` must stay valid (mapped, not freed) until the `Mr`
    /// is dropped.
    pub unsafe fn register(pd: &Arc<Pd>, addr: *mut u8, len: usize, access: Access) -> Result<Mr> {
        // SAFETY: the PD is live (Arc); the caller guarantees the range.
        // iova = addr: the NIC addresses it by its virtual address, as
        // ibv_reg_mr does; optional flags are dropped where unsupported.
        let p = unsafe { sys::ibv_reg_mr_iova2(pd.raw(), addr.cast(), len, addr as u64, access.0) };
        match NonNull::new(p) {
            Some(mr) => Ok(Mr {
                mr,
                access,
                buf: None,
                dev: None,
                pd: Arc::clone(pd),
            }),
            None => {
                let errno = last_errno();
                Err(VerbsError::new(
                    "ibv_reg_mr",
                    errno,
                    reg_mr_hint(
                        len,
                        addr as u64,
                        access,
                        errno,
                        pd.context().attr().max_mr_size,
                        memlock_limit(),
                    ),
                ))
            }
        }
    }

    /// Wraps an MR of `pd` the caller made (the null MR).
    ///
    /// # Safety
    /// `mr` must be a live MR of `pd`, deregistered by nobody else.
    pub(super) unsafe fn from_raw(pd: &Arc<Pd>, mr: NonNull<sys::ibv_mr>) -> Mr {
        Mr {
            mr,
            access: Access::NONE,
            buf: None,
            dev: None,
            pd: Arc::clone(pd),
        }
    }

    /// Registers device memory, taking ownership: with a dma-buf export via
    /// `ibv_reg_dmabuf_mr` (iova = the device address, since that MR's
    /// `addr` is the fd offset), otherwise via `ibv_reg_mr` on the address.
    pub fn device(pd: &Arc<Pd>, mem: Box<dyn DeviceMemory>, access: Access) -> Result<Mr> {
        let (va, len) = (mem.va(), mem.len());
        let (p, how) = match mem.dmabuf() {
            Some(d) => {
                let reg =
                    reg_dmabuf_mr().map_err(|e| VerbsError::new("ibv_reg_dmabuf_mr", 0, e))?;
                // SAFETY: the PD is live; the fd and range come from the owner,
                // which lives in the Mr until after deregistration.
                let p = unsafe { reg(pd.raw(), d.offset, len, va, d.fd, access.0 as i32) };
                (p, DevReg::DmaBuf)
            }
            // SAFETY: as above; the kernel (or a peer-memory client) pins
            // the range, the CPU never dereferences it here.
            None => (
                unsafe { sys::ibv_reg_mr_iova2(pd.raw(), va as *mut _, len, va, access.0) },
                DevReg::PeerMemory,
            ),
        };
        match NonNull::new(p) {
            // SAFETY: a live MR of `pd` just made, owned by nobody else.
            Some(mr) => Ok(unsafe { Mr::from_device(pd, mr, access, mem, how, va) }),
            None => {
                let verb = match how {
                    DevReg::DmaBuf => "ibv_reg_dmabuf_mr",
                    DevReg::PeerMemory => "ibv_reg_mr",
                };
                Err(VerbsError::new(verb, last_errno(), String::new()))
            }
        }
    }

    /// Wraps an MR of `pd` over device memory (see `devmem`).
    ///
    /// # Safety
    /// `mr` must be a live MR of `pd` over `mem`'s range, deregistered by nobody else.
    unsafe fn from_device(
        pd: &Arc<Pd>,
        mr: NonNull<sys::ibv_mr>,
        access: Access,
        mem: Box<dyn DeviceMemory>,
        how: DevReg,
        iova: u64,
    ) -> Mr {
        Mr {
            mr,
            access,
            buf: None,
            dev: Some((mem, how, iova)),
            pd: Arc::clone(pd),
        }
    }

    fn attrs(&self) -> &sys::ibv_mr {
        // SAFETY: `mr` is registered until Drop; the fields are immutable.
        unsafe { self.mr.as_ref() }
    }

    pub fn lkey(&self) -> u32 {
        self.attrs().lkey
    }

    pub fn rkey(&self) -> u32 {
        self.attrs().rkey
    }

    /// Start address of the region as the NIC (and the peer) addresses it:
    /// device memory's iova, else the host address.
    pub fn addr(&self) -> u64 {
        match &self.dev {
            Some((_, _, iova)) => *iova,
            None => self.attrs().addr as u64,
        }
    }

    pub fn len(&self) -> usize {
        self.attrs().length
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn access(&self) -> Access {
        self.access
    }

    /// The region's start for the CPU; `None` over device memory, which the
    /// CPU must never dereference (copy through [`Mr::device_mem`] instead).
    pub fn host_ptr(&self) -> Option<*mut u8> {
        match self.dev {
            Some(_) => None,
            None => Some(self.attrs().addr.cast()),
        }
    }

    /// The device memory under this MR and how it was registered.
    pub fn device_mem(&self) -> Option<(&dyn DeviceMemory, DevReg)> {
        self.dev.as_ref().map(|(m, how, _)| (&**m, *how))
    }

    /// The owned buffer, if made with [`Mr::new`].
    pub fn buf(&self) -> Option<&AlignedBuf> {
        self.buf.as_ref()
    }

    pub fn buf_mut(&mut self) -> Option<&mut AlignedBuf> {
        self.buf.as_mut()
    }

    pub fn pd(&self) -> &Arc<Pd> {
        &self.pd
    }

    /// The raw MR, valid while `self` lives.
    pub fn raw(&self) -> *mut sys::ibv_mr {
        self.mr.as_ptr()
    }
}

impl Drop for Mr {
    fn drop(&mut self) {
        // SAFETY: registered once, deregistered once; the buffer field is
        // dropped after this body, so the memory outlives the registration.
        let ret = unsafe { sys::ibv_dereg_mr(self.mr.as_ptr()) };
        warn_if_failed("ibv_dereg_mr", ret);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn access_describe() {
        let a = Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::RELAXED_ORDERING;
        assert_eq!(a.describe(), "LOCAL_WRITE|REMOTE_WRITE|RELAXED_ORDERING");
        assert_eq!(Access::NONE.describe(), "none");
        assert_eq!(Access(0x4000_0000).describe(), "0x40000000");
        assert!(a.contains(Access::REMOTE_WRITE));
        assert!(!a.contains(Access::REMOTE_READ));
    }

    #[test]
    fn aligned_buf_is_page_aligned_and_zeroed() {
        let b = AlignedBuf::zeroed(10_000).unwrap();
        assert_eq!(b.addr() % page_size() as u64, 0);
        assert_eq!(b.len(), 10_000);
        assert!(b.as_slice().iter().all(|&x| x == 0));
        let f = AlignedBuf::filled(100, 0xab).unwrap();
        assert!(f.as_slice().iter().all(|&x| x == 0xab));
    }

    #[test]
    fn aligned_buf_rejects_zero_and_bad_align() {
        let e = AlignedBuf::zeroed(0).unwrap_err();
        assert!(e.to_string().contains("0 bytes"), "{e}");
        let e = AlignedBuf::with_align(64, 3).unwrap_err();
        assert_eq!(e.errno, libc::EINVAL);
        assert!(e.to_string().contains("64 bytes aligned to 3"), "{e}");
    }

    #[test]
    fn pseudo_random_fill_differs_by_seed() {
        let mut a = AlignedBuf::zeroed(4099).unwrap();
        let mut b = AlignedBuf::zeroed(4099).unwrap();
        a.fill_pseudo_random(1);
        b.fill_pseudo_random(2);
        assert_ne!(a.as_slice(), b.as_slice());
        assert!(a.as_slice().iter().filter(|&&x| x == 0).count() < 100);
    }

    #[test]
    fn reg_mr_hint_names_size_access_and_memlock() {
        let h = reg_mr_hint(
            1 << 20,
            0x1000,
            Access::LOCAL_WRITE | Access::REMOTE_READ,
            libc::ENOMEM,
            0,
            Some(65536),
        );
        assert!(h.contains("1048576 bytes at 0x1000"), "{h}");
        assert!(h.contains("LOCAL_WRITE|REMOTE_READ"), "{h}");
        assert!(h.contains("ulimit -l` 64"), "{h}");
        assert!(h.contains("RLIMIT_MEMLOCK is 65536 bytes"), "{h}");
        assert!(h.contains("at least 1024 KiB"), "{h}");
        let h = reg_mr_hint(4096, 0, Access::LOCAL_WRITE, libc::ENOMEM, 0, None);
        assert!(h.contains("unlimited"), "{h}");
        let h = reg_mr_hint(100, 0, Access::LOCAL_WRITE, libc::EINVAL, 50, Some(64));
        assert!(!h.contains("ulimit"), "{h}");
        assert!(h.contains("max_mr_size is 50"), "{h}");
    }

    #[test]
    fn memlock_limit_reads_the_soft_limit() {
        let mut saved = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: valid out-pointer.
        let rc = unsafe { libc::getrlimit(libc::RLIMIT_MEMLOCK, &mut saved) };
        assert_eq!(rc, 0);
        // A soft limit at or below the hard one can always be set and restored.
        let soft = saved.rlim_max.min(65536);
        let low = libc::rlimit {
            rlim_cur: soft,
            rlim_max: saved.rlim_max,
        };
        // SAFETY: valid in-pointers; only the soft limit changes.
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &low) }, 0);
        let got = memlock_limit();
        // SAFETY: as above, restoring the saved value.
        assert_eq!(unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &saved) }, 0);
        assert_eq!(got, Some(soft));
    }
}
