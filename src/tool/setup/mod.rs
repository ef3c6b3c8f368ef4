//! Layer 2: set-up: choosing the post method (`method`), mlx5dv QPs for `--post direct`
//! (`direct_qp`), the buffers' memory (`memory`: hugepages, mmap, payload file, null MR, ODP) and
//! the resources (`resources`: device, buffers, MRs, QPs); for the raw Ethernet sender, its post
//! method (`raw_method`) and resources (`raw_res`: port check, raw packet QPs, frames). Imports
//! only `common`.

pub mod direct_qp;
pub mod gpu_mem;
pub mod memory;
pub mod method;
pub mod raw_lat_res;
pub mod raw_method;
pub mod raw_recv_method;
pub mod raw_recv_res;
pub mod raw_res;
pub mod resources;
