//! On a host without RDMA (like the build machines) the control path must
//! say why there is no device and how to get one. Skipped where a device exists.

use rdmaperf::verbs::{devices, Context};

fn has_devices() -> Option<String> {
    match devices() {
        Ok(list) => Some(
            list.iter()
                .map(|d| d.name.clone())
                .collect::<Vec<_>>()
                .join(", "),
        ),
        Err(_) => None,
    }
}

fn assert_no_device_message(msg: &str) {
    assert!(msg.contains("no RDMA devices"), "{msg}");
    assert!(msg.contains("rdma link add"), "{msg}");
    assert!(msg.contains("ibv_devices"), "{msg}");
}

#[test]
fn devices_reports_no_rdma_devices() {
    if let Some(names) = has_devices() {
        println!("SKIPPED: this host has RDMA devices ({names})");
        return;
    }
    let e = devices().unwrap_err();
    assert_eq!(e.verb, "ibv_get_device_list");
    assert_no_device_message(&e.to_string());
}

#[test]
fn open_reports_no_rdma_devices() {
    if let Some(names) = has_devices() {
        println!("SKIPPED: this host has RDMA devices ({names})");
        return;
    }
    for name in [None, Some("mlx5_0")] {
        let e = Context::open(name).unwrap_err();
        assert_no_device_message(&e.to_string());
    }
}
