//! Traces being recorded: the sessions on the node, each trace's pipeline, the flight
//! recorder, the tracked processes' HSA queues, and the writing of what was recorded.

pub mod agent_filter;
pub mod flight;
pub mod queues;
pub mod selection;
pub mod sessions;
mod stacks;
pub mod traces;
pub mod writing;
