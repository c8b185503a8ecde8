//! What starts a trace: stalls, hangs, stuck ranks, dyno requests, sampled windows.

mod behind_slots;
mod collectives;
mod comm_neighbours;
mod dependency_lanes;
mod dyno_hostile;
mod dynolog;
mod hangs;
mod hangs_hidden;
mod job_keys;
mod ranks_where;
mod ranks_where_native;
mod slow_call;
pub(crate) mod stalls;
mod stuck;
mod windows;
