//! Capturing from target processes: launching a command held before `exec`
//! ([`launch`]), the capture's event loop ([`session`]: targets, library discovery,
//! the ring, stop), the signals that end it ([`signals`]), what each target says of
//! itself ([`environ`]), the clocks, the live status line, and the watchdog that
//! continues targets if rocsync is killed.

pub mod claim;
pub mod clock;
pub mod environ;
pub mod launch;
pub mod session;
pub mod signals;
pub mod status;
pub mod watchdog;

pub use session::{Captured, LEARN_FOR, Session, StopReason};
pub use signals::Signals;
