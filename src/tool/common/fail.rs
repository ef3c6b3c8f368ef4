//! A tool's failure, worded for the user: the error type every tool module
//! returns (the bottom of `tool/`, so it imports nothing from it).

use std::fmt;

/// A failure of a tool, already worded for the user (problem and fix).
#[derive(Debug)]
pub struct Fail {
    pub msg: String,
    /// Exit status to use (1 unless interrupted).
    pub status: i32,
}

impl Fail {
    pub fn new(msg: impl Into<String>) -> Fail {
        Fail {
            msg: msg.into(),
            status: 1,
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
