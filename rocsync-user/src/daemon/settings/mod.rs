//! The daemon's settings: each defined once (`keys.rs`, by `defined.rs`) with its type
//! (`value.rs`) and default, given as flags or in the configuration file, combined into
//! the settings in effect (`config.rs`, `effect.rs`), and `--check`.

pub mod check;
pub mod config;
pub mod defined;
pub mod effect;
pub mod keys;
pub mod shown;
pub mod value;
