//! The daemon's settings: the file, reloads, the unit's capabilities.

mod capabilities;
mod config;
mod reload;
