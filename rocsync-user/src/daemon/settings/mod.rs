//! The daemon's settings: each defined once (`keys.rs`), given as flags or in the
//! configuration file, turned into the settings in effect (`config.rs`), and `--check`.

pub mod check;
pub mod config;
pub mod defined;
pub mod effect;
pub mod keys;
pub mod shown;
