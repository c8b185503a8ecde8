//! The daemon's tests, in folders as its source (`src/daemon/`): `basics` counts a new
//! process's calls and records a trace on request, end to end.

mod basics;
pub(crate) mod outputs;
mod recording;
mod serving;
mod settings;
pub(crate) mod tracking;
pub(crate) mod triggers;
