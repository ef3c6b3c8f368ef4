//! RDMA device discovery: `ibv_get_device_list` behind a safe, owning list.

use std::ffi::CStr;
use std::os::raw::c_int;

use super::error::{last_errno, Result, VerbsError};
pub use super::values::{NodeType, TransportType};
use crate::sys;

/// Why there is no device, and how to get one. Shown when the list is empty
/// or NULL (a kernel without RDMA returns NULL with n = 0).
pub const NO_DEVICES_HINT: &str = "no RDMA devices: the kernel has no RDMA support or no RDMA \
driver is loaded; load one (soft-RoCE: `modprobe rdma_rxe && rdma link add rxe0 type rxe netdev \
<iface>`), then check with `ibv_devices`";

/// One entry of the device list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Kernel RDMA device name (`mlx5_0`, `rxe0`).
    pub name: String,
    /// Node GUID, host byte order.
    pub guid: u64,
    pub node_type: NodeType,
    pub transport_type: TransportType,
    /// uverbs char device name (`uverbs0`).
    pub dev_name: String,
    /// sysfs path of the RDMA device.
    pub ibdev_path: String,
}

/// The list from `ibv_get_device_list`, freed on drop. `ibv_device` pointers
/// stay valid while it lives; contexts opened from them outlive it.
pub(crate) struct DeviceList {
    ptr: *mut *mut sys::ibv_device,
    len: usize,
}

impl DeviceList {
    pub(crate) fn get() -> Result<Self> {
        let mut n: c_int = 0;
        // SAFETY: `n` is a valid out-pointer for the call's duration.
        let ptr = unsafe { sys::ibv_get_device_list(&mut n) };
        if ptr.is_null() {
            return Err(VerbsError::new(
                "ibv_get_device_list",
                last_errno(),
                NO_DEVICES_HINT,
            ));
        }
        let list = Self {
            ptr,
            len: usize::try_from(n).unwrap_or(0),
        };
        if list.len == 0 {
            return Err(VerbsError::new("ibv_get_device_list", 0, NO_DEVICES_HINT));
        }
        Ok(list)
    }

    pub(crate) fn devices(&self) -> impl Iterator<Item = *mut sys::ibv_device> + '_ {
        (0..self.len).map(move |i| {
            // SAFETY: `ptr` holds `len` valid entries until the list is freed
            // in Drop, which cannot happen while `self` is borrowed.
            unsafe { *self.ptr.add(i) }
        })
    }
}

impl Drop for DeviceList {
    fn drop(&mut self) {
        // SAFETY: `ptr` came from ibv_get_device_list and is freed once.
        unsafe { sys::ibv_free_device_list(self.ptr) }
    }
}

pub(crate) fn c_chars(s: &[std::os::raw::c_char]) -> String {
    let bytes: Vec<u8> = s
        .iter()
        .take_while(|&&c| c != 0)
        // c_char is i8 on x86-64 and u8 on aarch64: take its byte either way.
        .map(|&c| c.to_ne_bytes()[0])
        .collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Device name via `ibv_get_device_name`.
pub(crate) fn device_name(dev: *mut sys::ibv_device) -> String {
    // SAFETY: `dev` is a live entry of a device list (or an open context's
    // device); the returned string is owned by it and copied at once.
    let p = unsafe { sys::ibv_get_device_name(dev) };
    if p.is_null() {
        return String::new();
    }
    // SAFETY: non-NULL, NUL-terminated, lives as long as `dev`.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

pub(crate) fn device_info(dev: *mut sys::ibv_device) -> DeviceInfo {
    // SAFETY: `dev` is a live entry of a device list.
    let guid = u64::from_be(unsafe { sys::ibv_get_device_guid(dev) });
    // SAFETY: as above; the struct is read, not kept.
    let d = unsafe { &*dev };
    DeviceInfo {
        name: device_name(dev),
        guid,
        node_type: NodeType(d.node_type),
        transport_type: TransportType(d.transport_type),
        dev_name: c_chars(&d.dev_name),
        ibdev_path: c_chars(&d.ibdev_path),
    }
}

/// All RDMA devices on this host. An empty or NULL list is an error whose
/// hint says why there are none and how to load a driver.
pub fn devices() -> Result<Vec<DeviceInfo>> {
    let list = DeviceList::get()?;
    Ok(list.devices().map(device_info).collect())
}

/// Comma-separated names, for error messages.
pub(crate) fn names(list: &[DeviceInfo]) -> String {
    list.iter()
        .map(|d| d.name.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn c_chars_stops_at_nul() {
        let raw: Vec<std::os::raw::c_char> = b"rxe0\0junk"
            .iter()
            .map(|&b| b as std::os::raw::c_char)
            .collect();
        assert_eq!(c_chars(&raw), "rxe0");
    }

    #[test]
    fn names_joined() {
        let d = |n: &str| DeviceInfo {
            name: n.into(),
            guid: 0,
            node_type: NodeType::CA,
            transport_type: TransportType::IB,
            dev_name: String::new(),
            ibdev_path: String::new(),
        };
        assert_eq!(names(&[d("mlx5_0"), d("mlx5_1")]), "mlx5_0, mlx5_1");
    }
}
