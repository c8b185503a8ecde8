//! Capturing from target processes: one front door for `run` and `attach` ([`Capture`]),
//! launching a command held before `exec` ([`launch`]), the capture's event loop ([`session`]: targets, library discovery,
//! the ring, stop), the live status line, and the watchdog that continues targets if
//! rocsync is killed.

pub(crate) mod claim;
mod front;
pub(crate) mod launch;
mod remedy;
pub(crate) mod running;
pub(crate) mod session;
mod settings;
pub(crate) mod status;
pub mod watchdog;

pub use front::Capture;

pub use session::{Captured, Session, StopReason};
pub use settings::{CALL_RING_BYTES, CaptureSettings};
