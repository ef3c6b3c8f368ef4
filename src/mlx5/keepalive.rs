//! What keeps a queue's memory alive: every direct queue (SQ, CQ, RQ, SRQ)
//! holds one, so this sits below all of them.

use core::any::Any;
use std::sync::Arc;

/// Something that keeps the queue memory alive as long as a queue uses it
/// (the model's memory, or nothing for a real device whose lifetime the
/// caller manages).
pub type KeepAlive = Option<Arc<dyn Any + Send + Sync>>;
