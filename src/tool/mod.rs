//! Per-tool flow (resources → choreography → run → report). Work in progress.
pub mod devices;
pub mod landing;
pub fn run(_p: crate::cli::params::Params) -> i32 {
    1
}
