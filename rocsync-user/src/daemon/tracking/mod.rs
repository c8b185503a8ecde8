//! Which processes the daemon tracks, and what it probes in them: discovery of new
//! processes, the library files probed (and their probes attached apart, for the budget
//! and the recordings to take off and put back), and pod identity. What probing costs,
//! and what is taken off to hold the budget, is the budget's (`daemon/budget/`).

pub mod apart;
pub mod discovery;
pub mod files;
pub mod filters;
pub mod fuse;
pub mod loading;
pub mod pods;
pub mod runtimes;
pub mod snapshot;
