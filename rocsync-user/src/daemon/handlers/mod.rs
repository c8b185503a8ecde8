//! What the daemon does when its loop wakes, one method of [`super::state::Daemon`] per
//! thing it waits for: the probes wrote or a timer came (`events.rs`), a request
//! (`requests.rs`), SIGHUP (`reload.rs`).

pub mod budget;
pub mod cycling;
pub mod events;
pub mod reload;
pub mod requests;
pub mod start;
pub mod timed;
pub mod triggered;
