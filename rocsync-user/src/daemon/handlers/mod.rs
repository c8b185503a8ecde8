//! What the daemon does when its loop wakes, one method of [`super::state::Daemon`] per
//! thing it waits for: the probes wrote, a trace was written, a signal or a timer came
//! (`events.rs`), a request (`requests.rs`), the budget's period (`budget.rs`), SIGHUP
//! (`reload.rs`), timed starts (`timed.rs`); what a trigger asked begins (`start.rs`),
//! unasked triggers (`unasked.rs`).

pub(super) mod budget;
pub(super) mod events;
pub(super) mod reload;
pub(super) mod requests;
pub(super) mod start;
pub(super) mod timed;
pub(super) mod triggered;
