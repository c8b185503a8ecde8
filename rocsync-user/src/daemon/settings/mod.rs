//! The daemon's settings: each defined once (`keys.rs`, by `defined.rs`) with its type
//! (`value.rs`) and default, given as flags or in the configuration file, combined into
//! the settings in effect (`config.rs`, `effect.rs`), and `--check`.

pub(super) mod check;
pub(crate) mod config;
pub(super) mod defined;
pub(super) mod effect;
pub(super) mod keys;
pub(super) mod shown;
pub(super) mod value;
