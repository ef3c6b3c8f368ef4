//! Test buffers that are not plain heap memory, as perftest master makes them:
//! huge pages (`--use_hugepages`: `shmget(SHM_HUGETLB)` + `shmat`, its
//! `alloc_hugepage_region`), a `MAP_SHARED` mapping of a file (`--mmap`,
//! its `mmap_memory.c`), the null MR (`--use-null-mr`, `ibv_alloc_null_mr`)
//! and the On-Demand Paging capabilities (`--odp`, `ibv_query_device_ex`).

use std::ptr::NonNull;
use std::sync::Arc;

use super::context::Context;
use super::error::{last_errno, strerror, Result, VerbsError};
use super::mr::{AlignedBuf, Backing, Mr};
use super::pd::Pd;
use crate::sys;

/// perftest rounds a huge-page segment up to 2 MiB (`HUGEPAGE_SIZE_2MB`).
pub const HUGE_2M: usize = 2 * 1024 * 1024;

/// The fix for a failed huge-page allocation of `len` bytes (`errno` from
/// shmget), naming the sysctl that reserves pages.
pub fn huge_hint(len: usize, errno: i32) -> String {
    let pages = len.div_ceil(HUGE_2M);
    match errno {
        libc::EPERM => format!(
            "--use_hugepages: this user may not create SHM_HUGETLB segments; run as root, or \
             add the user's group to /proc/sys/vm/hugetlb_shm_group (needs {pages} 2 MiB pages)"
        ),
        _ => format!(
            "--use_hugepages: no {pages} free 2 MiB huge pages for {len} bytes; reserve them with \
             `echo {pages} > /proc/sys/vm/nr_hugepages` (as root; check HugePages_Free in \
             /proc/meminfo), or drop --use_hugepages"
        ),
    }
}

impl AlignedBuf {
    /// `len` zero bytes in huge pages (`--use_hugepages`): a private SysV
    /// segment of `len` rounded up to 2 MiB, attached and then marked for
    /// removal, so it goes when the buffer detaches (as perftest does).
    pub fn huge_shm(len: usize) -> Result<AlignedBuf> {
        if len == 0 {
            return Err(VerbsError::new(
                "shmget",
                0,
                "a buffer of 0 bytes was requested",
            ));
        }
        let seg = len.div_ceil(HUGE_2M) * HUGE_2M;
        let flags = libc::SHM_HUGETLB | libc::IPC_CREAT | libc::SHM_R | libc::SHM_W;
        // SAFETY: shmget has no memory-safety preconditions.
        let id = unsafe { libc::shmget(libc::IPC_PRIVATE, seg, flags) };
        if id < 0 {
            let e = last_errno();
            return Err(VerbsError::new("shmget(SHM_HUGETLB)", e, huge_hint(seg, e)));
        }
        // SAFETY: `id` is the segment just created; a null address lets the
        // kernel choose where to attach it.
        let p = unsafe { libc::shmat(id, std::ptr::null(), 0) };
        let e = last_errno();
        // SAFETY: marking the segment for removal has no memory effects; an
        // attached segment lives until its last detach.
        unsafe { libc::shmctl(id, libc::IPC_RMID, std::ptr::null_mut()) };
        if p as isize == -1 {
            return Err(VerbsError::new(
                "shmat",
                e,
                "could not attach the huge-page segment; check `ulimit -l` and the shm limits \
                 (/proc/sys/kernel/shmmax), or drop --use_hugepages",
            ));
        }
        let ptr = NonNull::new(p as *mut u8).expect("shmat returned a non-null address");
        // SAFETY: the segment is `seg >= len` bytes, attached read-write.
        unsafe { std::ptr::write_bytes(ptr.as_ptr(), 0, len) };
        Ok(AlignedBuf {
            ptr,
            len,
            align: HUGE_2M,
            backing: Backing::HugeShm,
        })
    }

    /// `len` bytes of `path` from byte `offset`, mapped shared and
    /// read-write (`--mmap`/`--mmap-offset`): what the NIC writes lands in
    /// the file. The file must already hold `offset + len` bytes (a shorter
    /// one would fault when touched), and `offset` must be a multiple of the
    /// page size (mmap's rule).
    pub fn file_map(path: &std::path::Path, offset: u64, len: usize) -> Result<AlignedBuf> {
        let page = super::mr::page_size() as u64;
        let name = path.display();
        if offset % page != 0 {
            return Err(VerbsError::new(
                "mmap",
                0,
                format!(
                    "--mmap-offset {offset}: the offset into {name} must be a multiple of the page \
                     size ({page}); use {}",
                    offset / page * page
                ),
            ));
        }
        let f = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(|e| {
                VerbsError::new(
                    "open",
                    e.raw_os_error().unwrap_or(0),
                    format!("--mmap {name}: the file must exist and be readable and writable"),
                )
            })?;
        let have = f.metadata().map(|m| m.len()).unwrap_or(0);
        let need = offset + len as u64;
        if have < need {
            return Err(VerbsError::new(
                "mmap",
                0,
                format!(
                    "--mmap {name}: the test buffer needs {need} bytes of the file (offset {offset} \
                     + {len}) but it holds {have}; grow it (`truncate -s {need} {name}`) or lower \
                     --mmap-offset/-s"
                ),
            ));
        }
        use std::os::fd::AsRawFd;
        // SAFETY: `f` is an open file of at least `offset + len` bytes; a
        // null address lets the kernel choose; the mapping outlives `f`.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                f.as_raw_fd(),
                offset as libc::off_t,
            )
        };
        if p == libc::MAP_FAILED {
            let e = last_errno();
            return Err(VerbsError::new(
                "mmap",
                e,
                format!("--mmap {name}: could not map {len} bytes at offset {offset}"),
            ));
        }
        let ptr = NonNull::new(p as *mut u8).expect("mmap returned a non-null address");
        Ok(AlignedBuf {
            ptr,
            len,
            align: page as usize,
            backing: Backing::FileMap { map_len: len },
        })
    }
}

impl Mr {
    /// `ibv_alloc_null_mr` (`--use-null-mr`): an lkey whose writes are
    /// dropped and whose reads return nothing meaningful. A device without
    /// it fails with the device's name and its reason.
    pub fn null(pd: &Arc<Pd>) -> Result<Mr> {
        // SAFETY: the PD is live (Arc).
        let p = unsafe { sys::ibv_alloc_null_mr(pd.raw()) };
        match NonNull::new(p) {
            // SAFETY: `p` is a registered MR of this PD with no memory of its own.
            Some(mr) => Ok(unsafe { Mr::from_raw(pd, mr) }),
            None => {
                let e = last_errno();
                Err(VerbsError::new(
                    "ibv_alloc_null_mr",
                    e,
                    null_mr_hint(pd.context().name(), e),
                ))
            }
        }
    }
}

/// Why a device refused the null MR, and the fix.
pub fn null_mr_hint(dev: &str, errno: i32) -> String {
    let why = match errno {
        libc::EOPNOTSUPP | libc::ENOSYS => {
            "the device's provider does not implement null MRs".to_string()
        }
        0 => "the provider gave no reason".to_string(),
        e => strerror(e),
    };
    format!("--use-null-mr: {dev} refused a null MR ({why}); null MRs are a ConnectX (mlx5) feature - drop --use-null-mr")
}

/// The On-Demand Paging capabilities of a device (`odp_caps`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct OdpCaps {
    pub general: u64,
    pub rc: u32,
    pub uc: u32,
    pub ud: u32,
}

impl Context {
    /// `ibv_query_device_ex`'s `odp_caps`.
    pub fn odp_caps(&self) -> Result<OdpCaps> {
        let (ret, a) = self.device_attr_ex();
        VerbsError::check(ret, "ibv_query_device_ex", || {
            format!(
                "--odp: {} did not report its On-Demand Paging capabilities; drop --odp",
                self.name()
            )
        })?;
        let t = a.odp_caps.per_transport_caps;
        Ok(OdpCaps {
            general: a.odp_caps.general_caps,
            rc: t.rc_odp_caps,
            uc: t.uc_odp_caps,
            ud: t.ud_odp_caps,
        })
    }
}

impl Context {
    /// Whether the device checks IPv4/TCP/UDP checksums on raw packet QPs'
    /// receives (`raw_packet_caps & IBV_RAW_PACKET_CAP_IP_CSUM`); false when
    /// the query fails (nothing is judged then).
    pub fn raw_rx_csum(&self) -> bool {
        let (ret, a) = self.device_attr_ex();
        ret == 0 && a.raw_packet_caps & sys::IBV_RAW_PACKET_CAP_IP_CSUM != 0
    }

    /// The packet pacing range in kbit/s (`packet_pacing_caps`), when the
    /// device paces raw packet QPs; None when it does not or the query fails.
    pub fn raw_pacing_kbps(&self) -> Option<(u32, u32)> {
        let (ret, a) = self.device_attr_ex();
        let c = a.packet_pacing_caps;
        let raw = 1u32 << sys::IBV_QPT_RAW_PACKET;
        (ret == 0 && c.qp_rate_limit_max > 0 && c.supported_qpts & raw != 0)
            .then_some((c.qp_rate_limit_min, c.qp_rate_limit_max))
    }

    /// `ibv_query_device_ex` with no input: its status and the attributes
    /// (zeroed where it failed).
    fn device_attr_ex(&self) -> (i32, sys::ibv_device_attr_ex) {
        let mut a = sys::ibv_device_attr_ex::default();
        // SAFETY: the context is open, `a` a valid out-struct of the size
        // passed, and a null input asks for the default query.
        let ret = unsafe { sys::ibv_query_device_ex(self.raw(), std::ptr::null(), &mut a) };
        (ret, a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_hint_names_the_sysctl_and_the_page_count() {
        let h = huge_hint(3 * HUGE_2M, libc::ENOMEM);
        assert!(h.contains("/proc/sys/vm/nr_hugepages"), "{h}");
        assert!(h.contains("echo 3 >"), "{h}");
        let h = huge_hint(HUGE_2M, libc::EPERM);
        assert!(h.contains("hugetlb_shm_group"), "{h}");
    }

    #[test]
    fn null_mr_hint_names_device_and_reason() {
        let h = null_mr_hint("rxe0", libc::EOPNOTSUPP);
        assert!(h.contains("rxe0 refused a null MR"), "{h}");
        assert!(h.contains("does not implement"), "{h}");
        assert!(h.contains("drop --use-null-mr"), "{h}");
        let h = null_mr_hint("x", libc::ENOMEM);
        assert!(h.contains("memory"), "{h}");
    }

    #[test]
    fn file_map_maps_the_file_and_writes_reach_it() {
        let dir = std::env::temp_dir().join(format!("rdmaperf-membuf-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("buf");
        let page = crate::verbs::mr::page_size();
        std::fs::write(&f, vec![7u8; 3 * page]).unwrap();
        {
            let mut b = AlignedBuf::file_map(&f, page as u64, page).unwrap();
            assert_eq!(b.backing(), Backing::FileMap { map_len: page });
            assert!(b.as_slice().iter().all(|&x| x == 7));
            b.as_mut_slice()[0] = 9;
        }
        let back = std::fs::read(&f).unwrap();
        assert_eq!(
            back[page], 9,
            "a write through the mapping lands in the file"
        );
        assert_eq!(back[0], 7);
        let e = AlignedBuf::file_map(&f, 1, 16).unwrap_err().to_string();
        assert!(e.contains("multiple of the page size"), "{e}");
        let e = AlignedBuf::file_map(&f, 0, 4 * page)
            .unwrap_err()
            .to_string();
        assert!(e.contains("truncate -s"), "{e}");
        let e = AlignedBuf::file_map(&dir.join("none"), 0, 16)
            .unwrap_err()
            .to_string();
        assert!(e.contains("must exist"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn huge_shm_either_maps_or_names_the_fix() {
        // Hosts differ in reserved huge pages: both outcomes are checked.
        match AlignedBuf::huge_shm(4096) {
            Ok(b) => {
                assert_eq!(b.backing(), Backing::HugeShm);
                assert_eq!(b.addr() % HUGE_2M as u64, 0);
                assert!(b.as_slice().iter().all(|&x| x == 0));
            }
            Err(e) => {
                let s = e.to_string();
                assert!(
                    s.contains("nr_hugepages") || s.contains("hugetlb_shm_group"),
                    "{s}"
                );
            }
        }
    }
}
