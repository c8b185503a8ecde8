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

/// The call ring of `run` and `attach` unless `--ring-size` says: room for 3 s of the
/// records of 150 000 calls a second (1 M slots), so that a reader kept from the CPU
/// by busy neighbours, or by attaching probes, catches up without losing any (the 8 MiB
/// it had, 0.4 s of them, lost 14 % at 120 000 calls/s beside two busy loops;
/// `bench/load.md`).
pub const CALL_RING_BYTES: u32 = 64 << 20;
pub use session::{Captured, Session, StopReason};
pub use settings::CaptureSettings;
