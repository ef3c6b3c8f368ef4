//! Memory the CPU may not touch (a GPU's), as the verbs layer sees it: a
//! range with an address and a length, optionally exported as a dma-buf,
//! and copies in and out through its owner's runtime. There is no slice of
//! it anywhere, by construction: filling, validation and payloads go
//! through [`DeviceMemory::copy_from_host`] / [`DeviceMemory::copy_to_host`].
//! Registration (`Mr::device`, in `mr`, which imports this file and never
//! the reverse) takes ownership, so the memory is freed only after the MR
//! is deregistered.

use super::error::last_errno;
use super::pd::Pd;
use super::rdma_core::reg_dmabuf_mr;
use crate::sys;

/// A dma-buf export of a device range: the fd and where the range starts in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DmaBuf {
    pub fd: i32,
    pub offset: u64,
}

/// Device memory owned by its runtime (see `crate::gpu`).
pub trait DeviceMemory: Send + Sync {
    /// The device virtual address of the range (what the NIC addresses).
    fn va(&self) -> u64;
    fn len(&self) -> usize;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// The dma-buf export, when the memory was exported.
    fn dmabuf(&self) -> Option<DmaBuf>;
    /// Copies `src` into the range at `off` (a runtime copy, never a CPU store).
    fn copy_from_host(&self, off: usize, src: &[u8]) -> std::result::Result<(), String>;
    /// Copies the range at `off` into `dst`.
    fn copy_to_host(&self, off: usize, dst: &mut [u8]) -> std::result::Result<(), String>;
}

/// How a device MR was registered.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DevReg {
    /// `ibv_reg_mr` on the device address: a peer-memory client (nvidia-peermem) pins it.
    PeerMemory,
    /// `ibv_reg_dmabuf_mr` on the exported fd, iova = the device address.
    DmaBuf,
}

impl DevReg {
    pub fn name(self) -> &'static str {
        match self {
            DevReg::PeerMemory => "peer memory (ibv_reg_mr)",
            DevReg::DmaBuf => "dma-buf (ibv_reg_dmabuf_mr)",
        }
    }
}

/// The NCCL-style probe: does this PD's device (provider and kernel) take
/// dma-buf MRs? `ibv_reg_dmabuf_mr(pd, 0, 0, 0, -1, 0)` fails with EBADF
/// where it does and EOPNOTSUPP/EPROTONOSUPPORT where it does not.
/// A libibverbs older than rdma-core 34 has no such verb: EOPNOTSUPP.
pub fn dmabuf_probe(pd: &Pd) -> std::result::Result<(), i32> {
    let reg = reg_dmabuf_mr().map_err(|_| libc::EOPNOTSUPP)?;
    // SAFETY: a zero-length registration of fd -1 never maps anything; a
    // success (not expected) is deregistered at once.
    let p = unsafe { reg(pd.raw(), 0, 0, 0, -1, 0) };
    if !p.is_null() {
        // SAFETY: `p` is the MR just made.
        unsafe { sys::ibv_dereg_mr(p) };
        return Ok(());
    }
    match last_errno() {
        e if e == libc::EOPNOTSUPP || e == libc::EPROTONOSUPPORT => Err(e),
        _ => Ok(()),
    }
}
