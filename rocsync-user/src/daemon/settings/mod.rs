//! The daemon's settings: the flags and the configuration file, and `--check`.

pub mod check;
pub mod config;
