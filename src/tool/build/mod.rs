//! Layer 2: set-up: choosing the post method (`method`), mlx5dv QPs for `--post direct`
//! (`direct_qp`), the buffers' memory (`mem_setup`: hugepages, mmap, payload file, null MR, ODP) and
//! the resources (`setup`: device, buffers, MRs, QPs). Imports only `common`.

pub mod direct_qp;
pub mod mem_setup;
pub mod method;
pub mod setup;
