//! The control-path error: which verb failed, the errno it reported, and what
//! to do about it.

use std::fmt;

/// A failed verbs call. `errno` is 0 when the failure is not an OS error
/// (e.g. a device name that does not exist); the Display then omits it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerbsError {
    pub verb: &'static str,
    pub errno: i32,
    pub hint: String,
}

pub type Result<T> = std::result::Result<T, VerbsError>;

impl VerbsError {
    pub fn new(verb: &'static str, errno: i32, hint: impl Into<String>) -> Self {
        Self {
            verb,
            errno,
            hint: hint.into(),
        }
    }

    /// `Ok` for an int-returning verb's 0; otherwise its errno (see
    /// [`errno_of`]) with the hint, which is built only on failure.
    pub fn check(ret: i32, verb: &'static str, hint: impl FnOnce() -> String) -> Result<()> {
        if ret == 0 {
            return Ok(());
        }
        Err(Self::new(verb, errno_of(ret), hint()))
    }

    /// The provider's entry point `op` from its ops table, or EOPNOTSUPP for
    /// `verb` with the hint (built only when the provider lacks it).
    pub fn provided<F>(
        op: Option<F>,
        verb: &'static str,
        hint: impl FnOnce() -> String,
    ) -> Result<F> {
        op.ok_or_else(|| Self::new(verb, libc::EOPNOTSUPP, hint()))
    }

    /// A failure of `verb` that set the thread's `errno` (NULL-returning verbs).
    pub fn last_os(verb: &'static str, hint: impl Into<String>) -> Self {
        Self::new(verb, last_errno(), hint)
    }
}

/// A destroy verb's result in a `Drop`: there is no caller to hand a failure
/// to, so it is said on stderr (the resource leaks; nothing else breaks).
pub fn warn_if_failed(verb: &str, ret: i32) {
    if ret != 0 {
        eprintln!("warning: {verb} failed: errno {ret}");
    }
}

/// The calling thread's current `errno` (0 if none is set).
pub fn last_errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

/// Normalises an int-returning verb's result to an errno. libibverbs returns
/// a positive errno, but some providers return -1 with `errno` set or a
/// negated errno; all three are accepted.
pub fn errno_of(ret: i32) -> i32 {
    match ret {
        0 => 0,
        -1 => match last_errno() {
            0 => libc::EIO,
            e => e,
        },
        r if r < 0 => -r,
        r => r,
    }
}

/// `strerror(errno)` without the "(os error N)" suffix std adds.
pub fn strerror(errno: i32) -> String {
    let s = std::io::Error::from_raw_os_error(errno).to_string();
    let suffix = format!(" (os error {errno})");
    match s.strip_suffix(&suffix) {
        Some(t) => t.to_string(),
        None => s,
    }
}

impl fmt::Display for VerbsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.errno == 0 {
            write!(f, "{}: {}", self.verb, self.hint)
        } else if self.hint.is_empty() {
            write!(
                f,
                "{} failed: {} (errno {})",
                self.verb,
                strerror(self.errno),
                self.errno
            )
        } else {
            write!(
                f,
                "{} failed: {} (errno {}) — {}",
                self.verb,
                strerror(self.errno),
                self.errno,
                self.hint
            )
        }
    }
}

impl std::error::Error for VerbsError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_with_errno_and_hint() {
        let e = VerbsError::new("ibv_create_qp", libc::ENOMEM, "lower -t/--tx-depth");
        assert_eq!(
            e.to_string(),
            "ibv_create_qp failed: Cannot allocate memory (errno 12) — lower -t/--tx-depth"
        );
    }

    #[test]
    fn display_without_errno() {
        let e = VerbsError::new("ibv_open_device", 0, "no RDMA device named 'x'");
        assert_eq!(e.to_string(), "ibv_open_device: no RDMA device named 'x'");
    }

    #[test]
    fn display_without_hint() {
        let e = VerbsError::new("ibv_alloc_pd", libc::EINVAL, "");
        assert_eq!(
            e.to_string(),
            "ibv_alloc_pd failed: Invalid argument (errno 22)"
        );
    }

    #[test]
    fn errno_normalisation() {
        assert_eq!(errno_of(0), 0);
        assert_eq!(errno_of(libc::EINVAL), libc::EINVAL);
        assert_eq!(errno_of(-libc::ENOMEM), libc::ENOMEM);
        assert_ne!(errno_of(-1), 0);
    }
}
