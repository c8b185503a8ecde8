//! Capturing calls from target processes.

pub mod clock;
pub mod launch;
pub mod loader;
pub mod probes;
pub mod sequence;
pub mod session;

pub use session::{Captured, Drops, Session, StopReason};
