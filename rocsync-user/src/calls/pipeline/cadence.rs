//! The pipeline's cadence, the same for a capture and the daemon's traces.

use std::time::Duration;

/// How often the ring is read when the probes have not woken the reader (call
/// records wake it only in bulk).
pub const DRAIN_EVERY: Duration = Duration::from_millis(10);
/// How often missing correlation ids are looked at (two looks in a row: lost).
pub const TICK_EVERY: Duration = Duration::from_millis(100);
/// How long a stop waits for calls already entered to return before writing them
/// in flight.
pub const IN_FLIGHT_GRACE: Duration = Duration::from_millis(300);
