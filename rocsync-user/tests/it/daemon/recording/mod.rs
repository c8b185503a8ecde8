//! Traces recorded: sessions side by side, their bounds, ids, packets, writing.

mod bounds;
mod flight_bounds;
mod hsa_agents;
mod hsa_windows;
mod ids;
mod interrupted;
mod sessions;
mod writing;
