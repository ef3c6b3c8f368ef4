//! A peer that vanished mid-run: the one wording, and whether its exit
//! explains an error completion (shared by every tool's error text).

use crate::run::stop;

/// The one wording for a peer that vanished mid-run.
pub(crate) const PEER_EXITED: &str =
    "the peer exited during the run (its control connection closed)";

/// After an error completion: did the peer's exit cause it? Waits briefly
/// for the control connection's verdict (its end of file can trail the
/// error completions); never after our own stop request.
pub(crate) fn peer_exited_before(_wc: &crate::post::Completion) -> bool {
    !stop::requested() && crate::run::peer::gone_within(std::time::Duration::from_millis(1500))
}
