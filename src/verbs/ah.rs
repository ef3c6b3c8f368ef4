//! Address handles (UD) and the address vector shared with QP RTR.

use std::ptr::NonNull;
use std::sync::Arc;

use super::error::{last_errno, warn_if_failed, Result, VerbsError};
use super::pd::Pd;
use crate::sys;

/// Global routing header fields (RoCE always; IB with `-x`).
/// perftest sets hop_limit 0xFF.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Grh {
    pub dgid: [u8; 16],
    pub sgid_index: u8,
    pub traffic_class: u8,
    pub flow_label: u32,
    pub hop_limit: u8,
}

impl Grh {
    /// perftest's defaults: hop_limit 0xFF, traffic class 0, no flow label.
    pub fn new(dgid: [u8; 16], sgid_index: u8) -> Self {
        Self {
            dgid,
            sgid_index,
            traffic_class: 0,
            flow_label: 0,
            hop_limit: 0xff,
        }
    }
}

/// An address vector: what RTR puts in `ah_attr` and what a UD AH is built from.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct AhAttr {
    pub port: u8,
    pub dlid: u16,
    pub sl: u8,
    pub grh: Option<Grh>,
}

impl AhAttr {
    pub(crate) fn to_raw(self) -> sys::ibv_ah_attr {
        let mut a = sys::ibv_ah_attr {
            dlid: self.dlid,
            sl: self.sl,
            src_path_bits: 0,
            static_rate: 0,
            port_num: self.port,
            ..Default::default()
        };
        if let Some(g) = self.grh {
            a.is_global = 1;
            a.grh.dgid = sys::ibv_gid { raw: g.dgid };
            a.grh.sgid_index = g.sgid_index;
            a.grh.hop_limit = g.hop_limit;
            a.grh.traffic_class = g.traffic_class;
            a.grh.flow_label = g.flow_label;
        }
        a
    }
}

/// A UD address handle. Holds its PD.
pub struct Ah {
    ah: NonNull<sys::ibv_ah>,
    pd: Arc<Pd>,
}

// SAFETY: AHs are immutable after creation; AH verbs are thread-safe.
unsafe impl Send for Ah {}
// SAFETY: as above.
unsafe impl Sync for Ah {}

impl Ah {
    pub fn new(pd: &Arc<Pd>, attr: &AhAttr) -> Result<Arc<Ah>> {
        Self::create(pd, attr.to_raw(), || {
            format!(
                "address handle to LID {:#x} port {} {}; on RoCE a GID is required and the \
                     source GID index must exist (-x)",
                attr.dlid,
                attr.port,
                match attr.grh {
                    Some(g) => format!("via sgid_index {}", g.sgid_index),
                    None => "without GRH".to_string(),
                }
            )
        })
    }

    /// An AH from an address vector computed elsewhere (the RDMA CM's UD
    /// reply, see [`super::cm::UdParam`]).
    pub fn from_raw(pd: &Arc<Pd>, attr: sys::ibv_ah_attr) -> Result<Arc<Ah>> {
        Self::create(pd, attr, || {
            "the address vector came from the RDMA CM's UD reply; check the route to the peer"
                .to_string()
        })
    }

    fn create(
        pd: &Arc<Pd>,
        mut raw: sys::ibv_ah_attr,
        hint: impl FnOnce() -> String,
    ) -> Result<Arc<Ah>> {
        // SAFETY: the PD is live; `raw` is a valid, fully initialised attr.
        let ah = unsafe { sys::ibv_create_ah(pd.raw(), &mut raw) };
        match NonNull::new(ah) {
            Some(ah) => Ok(Arc::new(Ah {
                ah,
                pd: Arc::clone(pd),
            })),
            None => Err(VerbsError::new("ibv_create_ah", last_errno(), hint())),
        }
    }

    /// The raw AH, valid while `self` lives.
    pub fn raw(&self) -> *mut sys::ibv_ah {
        self.ah.as_ptr()
    }

    pub fn pd(&self) -> &Arc<Pd> {
        &self.pd
    }
}

impl Drop for Ah {
    fn drop(&mut self) {
        // SAFETY: senders hold an Arc<Ah>, so none is left; destroyed once.
        let ret = unsafe { sys::ibv_destroy_ah(self.ah.as_ptr()) };
        warn_if_failed("ibv_destroy_ah", ret);
    }
}

/// Where a UD send goes: the peer's AH, QPN and Q_Key. Held by the UD send
/// queues (`crate::post`), keeping the AH alive.
#[derive(Clone)]
pub struct UdDest {
    pub ah: Arc<Ah>,
    pub remote_qpn: u32,
    pub remote_qkey: u32,
}

impl std::fmt::Debug for UdDest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "UdDest(qpn {:#08x}, qkey {:#x})",
            self.remote_qpn, self.remote_qkey
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ah_attr_raw_with_and_without_grh() {
        let plain = AhAttr {
            port: 1,
            dlid: 0x12,
            sl: 3,
            grh: None,
        }
        .to_raw();
        assert_eq!(
            (plain.dlid, plain.sl, plain.port_num, plain.is_global),
            (0x12, 3, 1, 0)
        );
        let mut dgid = [0u8; 16];
        dgid[15] = 9;
        let g = AhAttr {
            port: 1,
            dlid: 0,
            sl: 0,
            grh: Some(Grh::new(dgid, 3)),
        }
        .to_raw();
        assert_eq!(g.is_global, 1);
        assert_eq!(g.grh.sgid_index, 3);
        assert_eq!(g.grh.hop_limit, 0xff);
        // SAFETY: reading the byte view of a GID union.
        assert_eq!(unsafe { g.grh.dgid.raw }, dgid);
    }
}
