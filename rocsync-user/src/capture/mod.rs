//! Capturing from target processes: launching a command held before `exec`
//! ([`launch`]), the capture's event loop ([`session`]: targets, library discovery,
//! the ring, stop), the clocks, and the live status line.

pub mod clock;
pub mod launch;
pub mod session;
pub mod status;

pub use session::{Captured, Session, StopReason};
