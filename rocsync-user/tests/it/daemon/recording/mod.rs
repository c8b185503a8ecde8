//! Traces recorded: sessions side by side, their bounds, ids, packets, writing.

mod bounds;
mod hsa_agents;
mod hsa_windows;
mod ids;
mod sessions;
mod writing;
