//! What the command-line tests (here and in `fabric`) share.

/// `a` as the owned argument list the parsers take.
pub(crate) fn v(a: &[&str]) -> Vec<String> {
    a.iter().map(|s| s.to_string()).collect()
}
