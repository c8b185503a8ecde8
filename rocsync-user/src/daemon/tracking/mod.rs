//! Which processes the daemon tracks, and what probing them costs: discovery of new
//! processes, the library files probed, the budget's shedding and duty cycle, and pod identity.

pub mod apart;
pub mod budget;
pub mod cycle;
pub mod discovery;
pub mod estimate;
pub mod files;
pub mod filters;
pub mod fuse;
pub mod loading;
pub mod over;
pub mod pods;
pub mod polling;
pub mod returns;
pub mod runtimes;
pub mod snapshot;
