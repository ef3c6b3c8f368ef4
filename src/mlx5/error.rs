//! Control-path errors of the direct post path (set-up only: the hot path
//! reports `crate::post::PostError`). Every message names the problem and
//! the fix.

/// Why the direct post path cannot be set up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DirectError {
    /// `mlx5dv_init_obj` failed (EOPNOTSUPP: the device is not mlx5).
    #[error(
        "--post direct is not available on device {device}: mlx5dv_init_obj failed with \
         {} ({errno}){}; fix: use --post wr-api (or --post auto, which picks direct only \
         on mlx5 devices)",
        errno_name(*errno),
        if *errno == libc::EOPNOTSUPP {
            ", i.e. the device is not driven by the mlx5 provider (rxe, siw and other \
             providers have no mlx5dv objects)"
        } else {
            ""
        }
    )]
    InitObj { device: String, errno: i32 },

    /// `mlx5dv_is_supported(device)` is false but `--post direct` was asked for.
    #[error(
        "--post direct is not available on device {device}: it is not an mlx5 device \
         (mlx5dv_is_supported() is false); fix: use --post wr-api (or --post auto)"
    )]
    NotMlx5 { device: String },

    /// A verbs / mlx5dv set-up call failed.
    #[error("direct post path: {call} failed on device {device}: {} ({errno}); fix: {fix}",
        errno_name(*errno))]
    Call {
        call: &'static str,
        device: String,
        errno: i32,
        fix: &'static str,
    },

    /// `mlx5dv_init_obj` returned a queue this implementation cannot drive.
    #[error(
        "direct post path: mlx5dv_init_obj reported {what} = {value:#x}, expected {expected}; \
         fix: {fix}"
    )]
    Layout {
        what: &'static str,
        value: u64,
        expected: &'static str,
        fix: &'static str,
    },

    /// A set-up argument is out of range.
    #[error("direct post path: {problem}; fix: {fix}")]
    Config {
        problem: &'static str,
        fix: &'static str,
    },
}

/// The errno constant name for the errors set-up calls return, else "errno".
pub fn errno_name(e: i32) -> &'static str {
    match e {
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::EINVAL => "EINVAL",
        libc::ENOMEM => "ENOMEM",
        libc::ENOSYS => "ENOSYS",
        libc::EPERM => "EPERM",
        libc::EACCES => "EACCES",
        libc::EPROTONOSUPPORT => "EPROTONOSUPPORT",
        libc::ENODEV => "ENODEV",
        libc::EAGAIN => "EAGAIN",
        _ => "errno",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eopnotsupp_message_names_device_cause_and_fix() {
        let m = DirectError::InitObj {
            device: "rxe0".into(),
            errno: libc::EOPNOTSUPP,
        }
        .to_string();
        assert!(m.contains("rxe0"), "{m}");
        assert!(m.contains("EOPNOTSUPP"), "{m}");
        assert!(m.contains("not driven by the mlx5 provider"), "{m}");
        assert!(m.contains("--post wr-api"), "{m}");
    }
}
