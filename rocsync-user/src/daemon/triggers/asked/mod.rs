//! Traces asked from outside the daemon's own watching: on its socket (`socket.rs`,
//! `rocsync trace`), by dyno (`dyno.rs`, and `scheduled.rs` for a synchronized start),
//! and by its configuration's sampling (`sampled.rs`); why these are not `Trigger`s is
//! in [`super`].

pub(crate) mod dyno;
pub(crate) mod sampled;
pub(crate) mod scheduled;
pub(crate) mod socket;
