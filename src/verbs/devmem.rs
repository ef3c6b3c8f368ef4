//! Memory the CPU may not touch (a GPU's), as the verbs layer sees it: a
//! range with an address and a length, optionally exported as a dma-buf,
//! and copies in and out through its owner's runtime. There is no slice of
//! it anywhere, by construction: filling, validation and payloads go
//! through [`DeviceMemory::copy_from_host`] / [`DeviceMemory::copy_to_host`].
//! Registration ([`Mr::device`]) takes ownership, so the memory is freed
//! only after the MR is deregistered.

use super::error::{last_errno, Result, VerbsError};
use super::mr::{Access, Mr};
use super::pd::Pd;
use super::rdma_core::reg_dmabuf_mr;
use crate::sys;
use std::ptr::NonNull;
use std::sync::Arc;

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

impl Mr {
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
