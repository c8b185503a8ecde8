//! Traces being recorded: the sessions on the node, each trace's pipeline, the flight
//! recorder, the tracked processes' HSA queues, and the writing of what was recorded.

pub(super) mod agent_filter;
pub(super) mod files;
pub(super) mod flight;
pub(super) mod queues;
pub(super) mod selection;
pub(super) mod sessions;
mod stacks;
pub(super) mod traces;
pub(super) mod writing;
