//! The test buffer of one side as the memory options ask (see
//! `cli::mem_opts`): where it comes from (heap, huge pages, a mapped file),
//! what it holds (rdmaperf's pattern or the payload file), the MR access
//! (`--odp` after checking the device's `odp_caps`, as perftest's
//! `check_odp_support`), and the null MR.

use crate::cli::params::{Conn, Params, Verb};
use crate::sys;
use crate::tool::common::fail::Fail;
use crate::verbs::membuf::OdpCaps;
use crate::verbs::{Access, AlignedBuf, Context, Mr, Pd};
use std::sync::Arc;

/// A zeroed buffer of `len` bytes aligned to `align`, from the source asked for.
pub fn alloc(p: &Params, len: usize, align: usize) -> Result<AlignedBuf, Fail> {
    let m = &p.mem;
    let mut b = if m.hugepages {
        AlignedBuf::huge_shm(len)
    } else if let Some((file, off)) = &m.mmap {
        AlignedBuf::file_map(file, *off, len)
    } else {
        AlignedBuf::with_align(len, align)
    }
    .map_err(Fail::verbs)?;
    if m.mmap.is_some() {
        // The file's old bytes would pass for landed data: start from zero
        // like every other buffer (perftest overwrites it with random bytes).
        b.as_mut_slice().fill(0);
    }
    Ok(b)
}

/// Fills a buffer of `slots` send regions then `slots` remote-accessible
/// regions of `slot` bytes: with `--payload_file_path` the whole buffer
/// repeats the payload (perftest's `initialize_buffer_content`, both sides,
/// so a read test reads it from the peer); otherwise each send region of a
/// sending side carries rdmaperf's pattern from its own start (landing.rs).
/// `--data_validation` on read-bw: the server's remote-accessible regions
/// carry it instead and the reading client's stay zero, so what the client
/// finds there came over the wire.
pub fn fill(p: &Params, buf: &mut [u8], slot: usize, slots: usize) {
    let send_len = slot * slots;
    let regions = crate::tool::common::landing::fill_regions;
    match &p.mem.payload {
        Some(pat) => {
            for (d, s) in buf.iter_mut().zip(pat.iter().cycle()) {
                *d = *s;
            }
        }
        None if p.data_validation && p.tool.verb == Verb::Read && p.is_server() => {
            regions(&mut buf[send_len..2 * send_len], slot);
        }
        // The reading client's regions stay zero.
        None if p.data_validation && p.tool.verb == Verb::Read => {}
        None if !p.is_server() || p.duplex => regions(&mut buf[..send_len], slot),
        None => {}
    }
}

/// The MR access of this test (host and GPU buffers alike): the verb's,
/// plus ON_DEMAND with `--odp`, plus RELAXED_ORDERING unless
/// `--disable_pcie_relaxed` (perftest's `setup_mr_flags`). That flag is
/// optional: libibverbs drops it where the kernel cannot take optional
/// access flags, and a device without PCIe relaxed ordering ignores it.
pub fn access(p: &Params, base: Access) -> Access {
    let mut a = base;
    if p.mem.odp {
        a |= Access::ON_DEMAND;
    }
    if !p.mem.no_relaxed_ordering {
        a |= Access::RELAXED_ORDERING;
    }
    a
}

/// `--odp`: the device must report ODP and, for this transport, the
/// operation this side does (perftest's `check_odp_support`).
pub fn check_odp(ctx: &Context, p: &Params) -> Result<(), Fail> {
    if !p.mem.odp {
        return Ok(());
    }
    let caps = ctx.odp_caps().map_err(Fail::verbs)?;
    match odp_refusal(&caps, p.conn, p.tool.verb, p.is_server(), p.duplex) {
        None => Ok(()),
        Some(why) => Err(Fail::new(format!(
            "--odp: {} {why}; drop --odp (ibv_devinfo -v lists the device's ODP caps)",
            ctx.name()
        ))),
    }
}

/// Why `caps` cannot serve this side, or `None` (perftest's rules: UD's caps
/// are not checked, since devices under-report them).
pub fn odp_refusal(
    caps: &OdpCaps,
    conn: Conn,
    verb: Verb,
    server: bool,
    duplex: bool,
) -> Option<String> {
    if caps.general & sys::IBV_ODP_SUPPORT as u64 == 0 {
        return Some(
            "does not support On-Demand Paging (odp_caps.general_caps lacks IBV_ODP_SUPPORT)"
                .into(),
        );
    }
    let t = match conn {
        Conn::Rc => caps.rc,
        Conn::Uc => return Some("has no ODP on UC transport".into()),
        Conn::Ud => return None,
    };
    let recv = sys::IBV_ODP_SUPPORT_RECV | sys::IBV_ODP_SUPPORT_SRQ_RECV;
    let (ok, what) = match verb {
        Verb::Send if duplex => (
            t & sys::IBV_ODP_SUPPORT_SEND != 0 && t & recv != 0,
            "bidirectional Send",
        ),
        Verb::Send if server => (t & recv != 0, "Recv"),
        Verb::Send => (t & sys::IBV_ODP_SUPPORT_SEND != 0, "Send"),
        Verb::Write => (t & sys::IBV_ODP_SUPPORT_WRITE != 0, "Write"),
        Verb::Read => (t & sys::IBV_ODP_SUPPORT_READ != 0, "Read"),
        Verb::Atomic => (t & sys::IBV_ODP_SUPPORT_ATOMIC != 0, "Atomics"),
    };
    (!ok).then(|| format!("does not support ODP {what} for {} transport", conn.name()))
}

/// `--use-null-mr`: the null MR the sends use as their lkey.
pub fn null_mr(p: &Params, pd: &Arc<Pd>) -> Result<Option<Mr>, Fail> {
    if !p.mem.null_mr {
        return Ok(None);
    }
    Mr::null(pd).map(Some).map_err(Fail::verbs)
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: u32 = sys::IBV_ODP_SUPPORT_SEND
        | sys::IBV_ODP_SUPPORT_RECV
        | sys::IBV_ODP_SUPPORT_WRITE
        | sys::IBV_ODP_SUPPORT_READ
        | sys::IBV_ODP_SUPPORT_ATOMIC;

    fn caps(rc: u32) -> OdpCaps {
        OdpCaps {
            general: sys::IBV_ODP_SUPPORT as u64,
            rc,
            ..Default::default()
        }
    }

    fn params(f: impl FnOnce(&mut crate::cli::args::PerfArgs)) -> Params {
        let mut a = crate::cli::args::PerfArgs {
            post: "auto".into(),
            timeout: 30,
            cq_timeout: 10,
            ..Default::default()
        };
        f(&mut a);
        let tool = crate::cli::kinds::Tool {
            verb: Verb::Write,
            kind: crate::cli::kinds::Kind::Bw,
        };
        crate::cli::params::resolve(tool, &a).unwrap()
    }

    #[test]
    fn mrs_get_relaxed_ordering_unless_disabled_as_in_perftest() {
        let base = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
        let on = access(&params(|_| {}), base);
        assert_eq!(on, base | Access::RELAXED_ORDERING, "{}", on.describe());
        let off = access(&params(|a| a.disable_pcie_relaxed = true), base);
        assert_eq!(off, base, "{}", off.describe());
        let odp = access(&params(|a| a.odp = true), base);
        assert_eq!(
            odp,
            base | Access::ON_DEMAND | Access::RELAXED_ORDERING,
            "{}",
            odp.describe()
        );
    }

    #[test]
    fn odp_refusals_follow_perftest() {
        let none = OdpCaps::default();
        let e = odp_refusal(&none, Conn::Rc, Verb::Write, false, false).unwrap();
        assert!(e.contains("does not support On-Demand Paging"), "{e}");
        assert_eq!(
            odp_refusal(&caps(ALL), Conn::Rc, Verb::Write, false, false),
            None
        );
        let e = odp_refusal(
            &caps(sys::IBV_ODP_SUPPORT_READ),
            Conn::Rc,
            Verb::Write,
            false,
            false,
        )
        .unwrap();
        assert!(e.contains("ODP Write for RC"), "{e}");
        // A send server needs Recv (or SRQ recv), a client Send, duplex both.
        let send_only = caps(sys::IBV_ODP_SUPPORT_SEND);
        assert_eq!(
            odp_refusal(&send_only, Conn::Rc, Verb::Send, false, false),
            None
        );
        assert!(odp_refusal(&send_only, Conn::Rc, Verb::Send, true, false)
            .unwrap()
            .contains("ODP Recv"));
        assert!(odp_refusal(&send_only, Conn::Rc, Verb::Send, false, true)
            .unwrap()
            .contains("bidirectional"));
        let srq_recv = caps(sys::IBV_ODP_SUPPORT_SRQ_RECV);
        assert_eq!(
            odp_refusal(&srq_recv, Conn::Rc, Verb::Send, true, false),
            None
        );
        // UD's caps are not checked (devices under-report them); UC has none.
        assert_eq!(
            odp_refusal(&caps(0), Conn::Ud, Verb::Send, true, false),
            None
        );
        assert!(odp_refusal(&caps(ALL), Conn::Uc, Verb::Send, true, false).is_some());
        assert!(odp_refusal(
            &caps(ALL & !sys::IBV_ODP_SUPPORT_ATOMIC),
            Conn::Rc,
            Verb::Atomic,
            false,
            false
        )
        .unwrap()
        .contains("Atomics"));
    }
}
