//! The NIC's own count of frames dropped because no receive was posted:
//! on mlx5, the port's `out_of_buffer` hardware counter ("number of drops
//! occurred due to lack of WQE for the associated QPs/RQs", IB/mlx5 port
//! protocol stats; Ethernet and IB), read from
//! `<sysfs>/class/infiniband/<dev>/ports/<port>/hw_counters/out_of_buffer`.
//! Read before and after a run, the difference is what fills
//! `RawRecvCounts::rq_dry`. The counter is the port's default queue
//! counter, shared by every QP bound to it there: the difference is the
//! run's own only when nothing else receives on the port meanwhile.
//! Pure: imports nothing from the crate.

use std::path::{Path, PathBuf};

/// Where the counter of port `port` of RDMA device `dev` lives.
pub fn out_of_buffer_path(sysfs: &Path, dev: &str, port: u8) -> PathBuf {
    sysfs.join(format!(
        "class/infiniband/{dev}/ports/{port}/hw_counters/out_of_buffer"
    ))
}

/// The counter's value, or `None` where the device has no such counter
/// (rxe, siw, another driver) or it does not read as a number.
pub fn read_out_of_buffer(sysfs: &Path, dev: &str, port: u8) -> Option<u64> {
    let text = std::fs::read_to_string(out_of_buffer_path(sysfs, dev, port)).ok()?;
    text.trim().parse().ok()
}

/// The drops between two reads; `None` when either is unknown or the
/// counter went back (reset meanwhile).
pub fn drops_between(before: Option<u64>, after: Option<u64>) -> Option<u64> {
    after?.checked_sub(before?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_counter_is_read_where_mlx5_puts_it() {
        let root = std::env::temp_dir().join(format!("rdmaperf-rx-drops-{}", std::process::id()));
        let p = out_of_buffer_path(&root, "mlx5_0", 1);
        assert!(p.ends_with("class/infiniband/mlx5_0/ports/1/hw_counters/out_of_buffer"));
        assert_eq!(
            read_out_of_buffer(&root, "mlx5_0", 1),
            None,
            "no file: unknown"
        );
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, "1234\n").unwrap();
        let before = read_out_of_buffer(&root, "mlx5_0", 1);
        assert_eq!(before, Some(1234));
        std::fs::write(&p, "1240\n").unwrap();
        let after = read_out_of_buffer(&root, "mlx5_0", 1);
        assert_eq!(drops_between(before, after), Some(6));
        assert_eq!(drops_between(after, before), None, "a reset is not a count");
        assert_eq!(drops_between(None, after), None);
        std::fs::write(&p, "n/a\n").unwrap();
        assert_eq!(read_out_of_buffer(&root, "mlx5_0", 1), None);
        let _ = std::fs::remove_dir_all(&root);
    }
}
