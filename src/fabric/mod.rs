//! Fabric mode (`rdmaperf fabric <tool> ...`, feature `mpi` for the run
//! itself): every NIC pair of a cluster measured from one `mpirun`/`srun`
//! command, one rank per NIC.
//!
//! The pure parts build without MPI and are unit-tested: [`schedule`] (the
//! round-robin 1-factorisation), [`pattern`] (which pairs run in which step),
//! [`summary`] (min/median/max, outliers, thresholds), [`result`] (a pair's
//! values, read from the pair tool's own JSON record), [`matrix`] (rank 0's
//! N x N matrix, CSV), [`json_out`] (the streamed JSON file), [`alive`]
//! (rank 0's silent-rank tracker), `heatmap` (feature `heatmap`).

pub mod gpu_pick;
pub mod json_out;
pub mod matrix;
pub mod pattern;
pub mod result;
pub mod schedule;
pub mod summary;

#[cfg(feature = "heatmap")]
pub mod heatmap;
pub mod opts;

pub mod alive;
#[cfg(feature = "mpi")]
pub mod comm;
pub mod report;

pub mod cli;
#[cfg(feature = "mpi")]
pub mod mpi_link;
#[cfg(feature = "mpi")]
pub mod rank;
