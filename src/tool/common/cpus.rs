//! Which cores the worker threads run on: `--cpus LIST`, or by default the
//! cores NUMA-local to the device (sysfs `local_cpulist`), and how `-q` QPs are
//! spread over the threads.

use crate::cli::lists::parse_cpu_list;
use std::path::Path;

/// The cores local to an RDMA device, from `/sys/class/infiniband/<dev>/device/local_cpulist`.
pub fn device_local_cpus(sysfs_root: &Path, dev: &str) -> Option<Vec<usize>> {
    let p = sysfs_root
        .join("class/infiniband")
        .join(dev)
        .join("device/local_cpulist");
    parse_cpu_list(&std::fs::read_to_string(p).ok()?).ok()
}

/// Pick `threads` cores: the user's list, else the device-local ones, else all
/// online cores. Errors when there are fewer cores than threads (two threads
/// on one core would measure the scheduler, not the NIC).
pub fn pick(
    threads: usize,
    user: Option<&[usize]>,
    local: Option<&[usize]>,
    online: &[usize],
) -> Result<Vec<usize>, String> {
    let (from, what) = match (user, local) {
        (Some(u), _) => (u, "--cpus"),
        (None, Some(l)) if l.len() >= threads => (l, "the device's NUMA-local cores"),
        _ => (online, "the online cores"),
    };
    if from.len() < threads {
        return Err(format!(
            "--threads {threads}: {what} offer only {} core(s) ({from:?}); lower --threads or give more with --cpus",
            from.len()
        ));
    }
    Ok(from[..threads].to_vec())
}

/// `--cpus LIST` without `--threads`: the calling thread (the run's, or a
/// loopback side's) may run only on LIST's cores, as under `taskset -c LIST`;
/// threads it starts afterwards inherit that.
pub fn restrict_current(list: &[usize]) -> Result<(), String> {
    // The kernel's CPU mask: bit c of word c / BITS, as in a cpu_set_t.
    const BITS: usize = libc::c_ulong::BITS as usize;
    let mut mask = [0 as libc::c_ulong; libc::CPU_SETSIZE as usize / BITS];
    let max = mask.len() * BITS;
    if let Some(c) = list.iter().find(|&&c| c >= max) {
        return Err(format!(
            "--cpus: core {c} is past the {max} cores a CPU set holds"
        ));
    }
    for &c in list {
        mask[c / BITS] |= 1 << (c % BITS);
    }
    let size = std::mem::size_of_val(&mask);
    // SAFETY: the kernel reads `size` bytes of a CPU mask from the pointer, which
    // points at `mask`, live and exactly that long; pid 0 is the calling thread.
    let rc = unsafe { libc::sched_setaffinity(0, size, mask.as_ptr().cast()) };
    if rc != 0 {
        return Err(format!(
            "--cpus {}: the run cannot be pinned there ({}); give cores that are online and \
             allowed to this process (`taskset -cp $$` lists them)",
            crate::explain::doctor::cpulist(list),
            std::io::Error::last_os_error()
        ));
    }
    Ok(())
}

/// QP indices of thread `t` when `qps` QPs are spread over `threads` threads
/// (round-robin, so every thread gets ⌊qps/threads⌋ or one more).
pub fn qps_of(t: usize, threads: usize, qps: usize) -> Vec<usize> {
    (t..qps).step_by(threads.max(1)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restricting_the_run_to_a_list() {
        let allowed = core_affinity::get_core_ids().unwrap_or_default();
        let Some(first) = allowed.first().map(|c| c.id) else {
            println!("SKIPPED: no core list readable on this host");
            return;
        };
        // In a thread of its own, so the test harness's thread keeps its mask.
        std::thread::spawn(move || {
            restrict_current(&[first]).unwrap();
            let now: Vec<usize> = core_affinity::get_core_ids()
                .unwrap_or_default()
                .iter()
                .map(|c| c.id)
                .collect();
            assert_eq!(now, vec![first]);
            let e = restrict_current(&[100_000]).unwrap_err();
            assert!(e.contains("core 100000"), "{e}");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn picking_cores() {
        let online = [0, 1, 2, 3];
        assert_eq!(pick(2, None, Some(&[2, 3]), &online).unwrap(), vec![2, 3]);
        // Too few local cores: fall back to the online ones.
        assert_eq!(pick(3, None, Some(&[2]), &online).unwrap(), vec![0, 1, 2]);
        assert_eq!(pick(1, Some(&[3]), Some(&[0]), &online).unwrap(), vec![3]);
        let e = pick(2, Some(&[3]), None, &online).unwrap_err();
        assert!(e.contains("--cpus offer only 1"), "{e}");
    }

    #[test]
    fn qps_spread_round_robin() {
        assert_eq!(qps_of(0, 2, 5), vec![0, 2, 4]);
        assert_eq!(qps_of(1, 2, 5), vec![1, 3]);
        assert_eq!(qps_of(0, 1, 3), vec![0, 1, 2]);
    }

    #[test]
    fn sysfs_local_cpulist() {
        let d = std::env::temp_dir().join(format!("rdmaperf-sysfs-{}", std::process::id()));
        let dev = d.join("class/infiniband/mlx5_0/device");
        std::fs::create_dir_all(&dev).unwrap();
        std::fs::write(dev.join("local_cpulist"), "0-1,4\n").unwrap();
        assert_eq!(device_local_cpus(&d, "mlx5_0"), Some(vec![0, 1, 4]));
        assert_eq!(device_local_cpus(&d, "mlx5_1"), None);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
