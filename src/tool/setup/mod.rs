//! Layer 2: set-up: choosing the post method (`method`), mlx5dv QPs for `--post direct`
//! (`direct_qp`), the buffers' memory (`memory`: hugepages, mmap, payload file, null MR, ODP) and
//! the resources (`resources`: device, buffers, MRs, QPs). Imports only `common`.

pub mod direct_qp;
pub mod gpu_mem;
pub mod memory;
pub mod method;
pub mod resources;
