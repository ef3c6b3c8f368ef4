//! A tool's failure, worded for the user: the error type every tool module
//! returns (the bottom of `tool/`, so it imports nothing from it).

use std::fmt;

/// A failure of a tool, already worded for the user (problem and fix).
#[derive(Debug)]
pub struct Fail {
    pub msg: String,
    /// Exit status to use: 1 for a failed run, 2 for a refusal before any
    /// run ([`Fail::refused`]), 128 + the signal when interrupted.
    pub status: i32,
}

impl Fail {
    pub fn new(msg: impl Into<String>) -> Fail {
        Fail {
            msg: msg.into(),
            status: 1,
        }
    }
    /// A refusal before any run (an option this build, tool or device cannot
    /// run, with the fix): exit status 2, as the CLI's own refusals.
    pub fn refused(msg: impl Into<String>) -> Fail {
        Fail {
            msg: msg.into(),
            status: 2,
        }
    }
    pub fn verbs(e: crate::verbs::VerbsError) -> Fail {
        Fail::new(e.to_string())
    }
    pub fn ctrl(e: crate::ctrl::CtrlError) -> Fail {
        Fail::new(e.to_string())
    }
}

impl fmt::Display for Fail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)
    }
}
