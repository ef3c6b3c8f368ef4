//! `rdmaperf fabric ... --use_cuda auto|I,J,…`: which GPU each rank's buffers live on.
//!
//! `auto` gives each rank the GPU nearest its NIC by PCIe topology (the class sysfs gives,
//! `explain::gpu_topo`: PIX best, SYS worst); where several GPUs are equally near (a switch
//! with two GPUs and two NICs), the node-local ranks sharing that nearest class take them in
//! turn by bus id, so two ranks never land on one GPU while another as near stays idle. A
//! list gives local rank i the i-th CUDA ordinal. A single `--use_cuda=N` is the pair tool's
//! own flag (every rank on GPU N). Pure: the topology comes in as a [`Topo`].

use crate::explain::gpu_topo::Topo;
use crate::gpu::GpuSelect;

/// How the ranks pick their GPU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GpuPick {
    /// The GPU nearest the rank's NIC.
    Auto,
    /// Local rank i takes CUDA ordinal `list[i]`.
    PerLocalRank(Vec<u32>),
}

impl GpuPick {
    /// `auto` or a comma list of ordinals; `None` for anything else (a single ordinal is
    /// the pair tool's own `--use_cuda`).
    pub fn parse(v: &str) -> Result<Option<GpuPick>, String> {
        if v == "auto" {
            return Ok(Some(GpuPick::Auto));
        }
        if !v.contains(',') {
            return Ok(None);
        }
        v.split(',')
            .map(|x| x.trim().parse::<u32>())
            .collect::<Result<Vec<u32>, _>>()
            .map(|l| Some(GpuPick::PerLocalRank(l)))
            .map_err(|_| {
                format!("--use_cuda {v:?}: give auto, one CUDA ordinal, or one per local rank (0,1,2,3)")
            })
    }
}

/// The GPU of the `local`-th rank on `host`, whose NIC is `nic`.
pub fn choose(
    pick: &GpuPick,
    local: usize,
    host: &str,
    nic: &str,
    topo: &Topo,
) -> Result<GpuSelect, String> {
    match pick {
        GpuPick::PerLocalRank(list) => {
            list.get(local)
                .map(|&i| GpuSelect::Index(i))
                .ok_or_else(|| {
                    format!(
                "--use_cuda {}: local rank {local} on {host} has no GPU in the list; give one \
                 ordinal per rank started on the host",
                list.iter().map(u32::to_string).collect::<Vec<_>>().join(",")
            )
                })
        }
        GpuPick::Auto => nearest(topo, local, host, nic).map(GpuSelect::BusId),
    }
}

/// The bus id of the GPU nearest `nic`, ties shared out by local rank.
fn nearest(topo: &Topo, local: usize, host: &str, nic: &str) -> Result<String, String> {
    if topo.gpus.is_empty() {
        return Err(format!(
            "--use_cuda auto: no NVIDIA GPU on {host} (none in /sys/bus/pci/devices); start the \
             ranks on GPU hosts, or give --use_cuda=<idx>"
        ));
    }
    let Some(n) = topo.nic(nic) else {
        return Err(format!(
            "--use_cuda auto: {nic} is not in /sys/class/infiniband on {host}"
        ));
    };
    let classes: Vec<_> = topo
        .gpus
        .iter()
        .filter_map(|g| Topo::class(g, n).map(|c| (c, g)))
        .collect();
    let Some(best) = classes.iter().map(|(c, _)| c.rank()).min() else {
        return Err(format!(
            "--use_cuda auto: {nic} on {host} has no PCIe place ({}), so no GPU is nearer than \
             another; give one CUDA ordinal per local rank: --use_cuda 0,1,…",
            if n.software {
                "a software device"
            } else {
                "no PCI function in sysfs"
            }
        ));
    };
    let mut tied: Vec<&str> = classes
        .iter()
        .filter(|(c, _)| c.rank() == best)
        .map(|(_, g)| g.bdf.as_str())
        .collect();
    tied.sort_unstable();
    Ok(tied[local % tied.len()].to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::explain::sysfs::SysRoot;
    use std::path::PathBuf;

    fn fixture(name: &str) -> Topo {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/data/sysfs")
            .join(name);
        Topo::read(&SysRoot(root))
    }

    #[test]
    fn parse_takes_auto_and_lists_and_leaves_one_ordinal_to_the_tool() {
        assert_eq!(GpuPick::parse("auto").unwrap(), Some(GpuPick::Auto));
        assert_eq!(
            GpuPick::parse("0,1, 3").unwrap(),
            Some(GpuPick::PerLocalRank(vec![0, 1, 3]))
        );
        assert_eq!(GpuPick::parse("2").unwrap(), None);
        assert!(GpuPick::parse("0,x")
            .unwrap_err()
            .contains("one per local rank"));
    }

    #[test]
    fn auto_takes_the_nearest_gpu_by_class() {
        // gpu-far: mlx5_0 is PHB to 0000:82:00.0 and SYS to 0000:05:00.0.
        let t = fixture("gpu-far");
        let g = choose(&GpuPick::Auto, 0, "h", "mlx5_0", &t).unwrap();
        assert_eq!(g, GpuSelect::BusId("0000:82:00.0".into()));
        // mlx5_1 is NODE to 0000:05:00.0 and SYS to 0000:82:00.0.
        let g = choose(&GpuPick::Auto, 1, "h", "mlx5_1", &t).unwrap();
        assert_eq!(g, GpuSelect::BusId("0000:05:00.0".into()));
    }

    #[test]
    fn auto_refuses_with_the_reason() {
        let t = fixture("gpu-far");
        let e = choose(&GpuPick::Auto, 0, "h", "rxe0", &t).unwrap_err();
        assert!(
            e.contains("software device") && e.contains("--use_cuda 0,1"),
            "{e}"
        );
        let e = choose(&GpuPick::Auto, 0, "h", "mlx5_9", &t).unwrap_err();
        assert!(e.contains("mlx5_9"), "{e}");
        let none = Topo {
            gpus: Vec::new(),
            ..t
        };
        let e = choose(&GpuPick::Auto, 0, "h", "mlx5_0", &none).unwrap_err();
        assert!(e.contains("no NVIDIA GPU on h"), "{e}");
    }

    #[test]
    fn equally_near_gpus_are_shared_out_by_local_rank() {
        let mut t = fixture("gpu-far");
        // Two GPUs at mlx5_0's nearest class: the second a copy of the first at another bdf.
        let mut twin = t.gpu("0000:82:00.0").unwrap().clone();
        twin.bdf = "0000:83:00.0".into();
        t.gpus.push(twin);
        let a = choose(&GpuPick::Auto, 0, "h", "mlx5_0", &t).unwrap();
        let b = choose(&GpuPick::Auto, 1, "h", "mlx5_0", &t).unwrap();
        assert_ne!(a, b);
    }

    #[test]
    fn a_list_gives_each_local_rank_its_ordinal() {
        let t = fixture("gpu-far");
        let l = GpuPick::PerLocalRank(vec![3, 1]);
        assert_eq!(choose(&l, 1, "h", "rxe0", &t).unwrap(), GpuSelect::Index(1));
        let e = choose(&l, 2, "h", "rxe0", &t).unwrap_err();
        assert!(e.contains("local rank 2 on h"), "{e}");
    }
}
