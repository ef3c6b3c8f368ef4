//! An open device (`ibv_context`) and its device-wide attributes.

use std::sync::Arc;

use super::device::{c_chars, device_info, names, DeviceInfo, DeviceList};
use super::error::{errno_of, Result, VerbsError};
pub use super::values::AtomicCap;
use crate::sys;

/// `ibv_query_device` result, the fields the tools use plus the raw struct
/// (perftest ≥ 6.28 ships it, host-endian, in its parameter negotiation).
#[derive(Clone, Debug)]
pub struct DeviceAttr {
    /// Firmware version text.
    pub fw_ver: String,
    /// Host byte order.
    pub node_guid: u64,
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub max_qp: i32,
    pub max_qp_wr: i32,
    pub device_cap_flags: u32,
    pub max_sge: i32,
    pub max_cq: i32,
    pub max_cqe: i32,
    pub max_mr: i32,
    pub max_pd: i32,
    pub max_qp_rd_atom: i32,
    pub max_qp_init_rd_atom: i32,
    pub atomic_cap: AtomicCap,
    pub phys_port_cnt: u8,
    pub raw: sys::ibv_device_attr,
}

impl DeviceAttr {
    pub(crate) fn from_raw(a: &sys::ibv_device_attr) -> Self {
        Self {
            fw_ver: c_chars(&a.fw_ver),
            node_guid: u64::from_be(a.node_guid),
            max_mr_size: a.max_mr_size,
            page_size_cap: a.page_size_cap,
            vendor_id: a.vendor_id,
            vendor_part_id: a.vendor_part_id,
            hw_ver: a.hw_ver,
            max_qp: a.max_qp,
            max_qp_wr: a.max_qp_wr,
            device_cap_flags: a.device_cap_flags,
            max_sge: a.max_sge,
            max_cq: a.max_cq,
            max_cqe: a.max_cqe,
            max_mr: a.max_mr,
            max_pd: a.max_pd,
            max_qp_rd_atom: a.max_qp_rd_atom,
            max_qp_init_rd_atom: a.max_qp_init_rd_atom,
            atomic_cap: AtomicCap(a.atomic_cap),
            phys_port_cnt: a.phys_port_cnt,
            raw: *a,
        }
    }
}

/// An open RDMA device. Closed on drop, after every PD/CQ (they hold an
/// `Arc<Context>`).
pub struct Context {
    ctx: *mut sys::ibv_context,
    info: DeviceInfo,
    attr: DeviceAttr,
}

// SAFETY: libibverbs contexts are thread-safe for control verbs (rdma-core
// documents every verb except the per-QP/CQ data path as thread-safe); the
// struct only holds the pointer and immutable data.
unsafe impl Send for Context {}
// SAFETY: as above; `&Context` exposes no unsynchronised mutation.
unsafe impl Sync for Context {}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("name", &self.info.name)
            .finish()
    }
}

impl Context {
    /// Opens the named device, or the first one (perftest's default) when
    /// `name` is None. An unknown name is an error listing the devices present.
    pub fn open(name: Option<&str>) -> Result<Arc<Context>> {
        let list = DeviceList::get()?;
        let infos: Vec<DeviceInfo> = list.devices().map(device_info).collect();
        let pos = match name {
            None => 0,
            Some(n) => infos.iter().position(|d| d.name == n).ok_or_else(|| {
                VerbsError::new(
                    "ibv_open_device",
                    0,
                    format!(
                        "no RDMA device named '{n}'; devices present: {} (pass one with -d/--ib-dev)",
                        names(&infos)
                    ),
                )
            })?,
        };
        let dev = list.devices().nth(pos).unwrap_or(std::ptr::null_mut());
        let info = infos[pos].clone();
        // SAFETY: `dev` is a live entry of `list`; an opened context stays
        // valid after the list is freed (rdma-core refcounts the device).
        let ctx = unsafe { sys::ibv_open_device(dev) };
        if ctx.is_null() {
            return Err(VerbsError::last_os(
                "ibv_open_device",
                format!(
                    "could not open {}: check that /dev/infiniband/{} exists and is readable \
                     and writable by this user",
                    info.name, info.dev_name
                ),
            ));
        }
        let attr = match query_device_raw(ctx) {
            Ok(a) => a,
            Err(e) => {
                // SAFETY: `ctx` was just opened and nothing else refers to it.
                unsafe { sys::ibv_close_device(ctx) };
                return Err(e);
            }
        };
        Ok(Arc::new(Context { ctx, info, attr }))
    }

    /// Device name (`mlx5_0`).
    pub fn name(&self) -> &str {
        &self.info.name
    }

    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// Device attributes queried when the device was opened.
    pub fn attr(&self) -> &DeviceAttr {
        &self.attr
    }

    /// A fresh `ibv_query_device`.
    pub fn query_device(&self) -> Result<DeviceAttr> {
        query_device_raw(self.ctx)
    }

    /// The raw context, for `crate::post` and `crate::mlx5`. Valid while
    /// `self` lives.
    pub fn raw(&self) -> *mut sys::ibv_context {
        self.ctx
    }

    /// Valid port numbers, for error messages: "1" or "1..=2".
    pub fn port_range(&self) -> String {
        match self.attr.phys_port_cnt {
            0 => "none".to_string(),
            1 => "1".to_string(),
            n => format!("1..={n}"),
        }
    }
}

fn query_device_raw(ctx: *mut sys::ibv_context) -> Result<DeviceAttr> {
    let mut a = sys::ibv_device_attr::default();
    // SAFETY: `ctx` is an open context and `a` a valid out-struct.
    let ret = unsafe { sys::ibv_query_device(ctx, &mut a) };
    VerbsError::check(ret, "ibv_query_device", || {
        "the device did not report its attributes; check `ibv_devinfo`".into()
    })?;
    Ok(DeviceAttr::from_raw(&a))
}

impl Drop for Context {
    fn drop(&mut self) {
        // SAFETY: children hold an Arc<Context>, so none is left; closed once.
        let ret = unsafe { sys::ibv_close_device(self.ctx) };
        if ret != 0 {
            eprintln!(
                "warning: ibv_close_device({}) failed: errno {}",
                self.info.name,
                errno_of(ret)
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_attr_from_raw_converts_guid_and_fw() {
        let mut raw = sys::ibv_device_attr {
            node_guid: 0x0102_0304_0506_0708u64.to_be(),
            max_qp_wr: 32768,
            atomic_cap: sys::IBV_ATOMIC_HCA,
            ..Default::default()
        };
        for (d, s) in raw.fw_ver.iter_mut().zip(b"20.31.1014\0") {
            *d = *s as std::os::raw::c_char;
        }
        let a = DeviceAttr::from_raw(&raw);
        assert_eq!(a.node_guid, 0x0102_0304_0506_0708);
        assert_eq!(a.fw_ver, "20.31.1014");
        assert_eq!(a.max_qp_wr, 32768);
        assert_eq!(a.atomic_cap, AtomicCap::HCA);
    }
}
