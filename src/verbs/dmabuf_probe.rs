//! Whether an RDMA device takes dma-buf MRs, without a GPU or a dma-buf:
//! NCCL's probe (nccl src/transport/net_ib/gdr.cc, gpu-memory.md §2) asks
//! `ibv_reg_dmabuf_mr(pd, 0, 0, 0, -1, 0)` and reads the errno: the verb
//! reaches the kernel and fails on the bad fd (EBADF) where dma-buf MRs
//! exist; EOPNOTSUPP (the provider has no `reg_dmabuf_mr`, e.g. rxe, or the
//! kernel driver none) or EPROTONOSUPPORT (the kernel's uverbs has no such
//! method: Linux before 5.12) where they do not.

use super::context::Context;
use super::error::{last_errno, strerror};
use super::pd::Pd;
use super::rdma_core::reg_dmabuf_mr;
use crate::sys;

/// `Ok(true)`: `dev` takes dma-buf MRs; `Ok(false)`: it does not; `Err`:
/// the device could not be opened, or the probe's answer means neither.
pub fn probe(dev: &str) -> Result<bool, String> {
    let ctx = Context::open(Some(dev)).map_err(|e| format!("not probed ({e})"))?;
    let pd = Pd::new(&ctx).map_err(|e| format!("not probed ({e})"))?;
    // rdma-core older than 34: no verb, so no dma-buf MRs whatever the device.
    let Ok(reg) = reg_dmabuf_mr() else {
        return Ok(false);
    };
    // SAFETY: `pd` is a live protection domain; fd -1 and length 0 make the
    // kernel (or the provider) refuse before any memory is touched.
    let mr = unsafe { reg(pd.raw(), 0, 0, 0, -1, 0) };
    if !mr.is_null() {
        // Not expected: a registration of nothing. It exists, so dma-buf
        // MRs do; release it.
        // SAFETY: `mr` was just returned by the verb and is used nowhere else.
        unsafe { sys::ibv_dereg_mr(mr) };
        return Ok(true);
    }
    answer(last_errno())
}

/// The errno's meaning (NCCL's reading).
fn answer(errno: i32) -> Result<bool, String> {
    match errno {
        libc::EBADF => Ok(true),
        libc::EOPNOTSUPP | libc::EPROTONOSUPPORT => Ok(false),
        e => Err(format!(
            "unknown (ibv_reg_dmabuf_mr probe gave errno {e}: {})",
            strerror(e)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errnos_read_as_nccl_reads_them() {
        assert_eq!(answer(libc::EBADF), Ok(true));
        assert_eq!(answer(libc::EOPNOTSUPP), Ok(false));
        assert_eq!(answer(libc::EPROTONOSUPPORT), Ok(false));
        assert!(answer(libc::EINVAL).unwrap_err().contains("errno 22"));
    }
}
