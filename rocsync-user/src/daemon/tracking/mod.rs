//! Which processes the daemon tracks, and what it probes in them: discovery of new
//! processes, the library files probed (and their probes attached apart, for the budget
//! and the recordings to take off and put back), and pod identity. What probing costs,
//! and what is taken off to hold the budget, is the budget's (`daemon/budget/`).

pub(super) mod apart;
pub(super) mod claims;
pub(super) mod discovery;
pub(super) mod files;
pub(super) mod filters;
pub(super) mod fuse;
pub(super) mod loading;
pub(super) mod pods;
pub(super) mod runtimes;
pub(super) mod snapshot;
