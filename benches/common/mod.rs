//! What every bench in this folder shares: criterion's settings.

use std::time::Duration;

use criterion::Criterion;

/// Short warm-up and measurement, 30 samples; the command line can
/// override them (`-- --quick`, `--sample-size`).
pub fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30)
        .configure_from_args()
}
