//! Which processes the daemon tracks, and what probing them costs: discovery of new
//! processes, the library files probed, the budget's shedding, and pod identity.

pub mod budget;
pub mod discovery;
pub mod files;
pub mod filters;
pub mod fuse;
pub mod pods;
pub mod polling;
pub mod returns;
pub mod snapshot;
