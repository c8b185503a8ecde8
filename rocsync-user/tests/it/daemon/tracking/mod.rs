//! Which processes are tracked and what probing them costs.

mod budget;
mod cycle;
mod discovery;
mod flight_cycle;
mod hostile_files;
mod hsa;
pub(crate) mod pods;
mod unopened;
