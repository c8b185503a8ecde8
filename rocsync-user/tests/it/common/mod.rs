//! Helpers shared by the integration tests.
#![allow(dead_code, unused_imports)]

pub mod apis;
mod calls;
mod capture;
pub mod daemon;
pub mod daemon_hsa;
mod held;
pub mod kineto;
mod launch;
pub mod packets;
pub mod pipeline;
pub mod pod;
mod raw;
mod rows;
mod window;

pub use calls::*;
pub use capture::*;
pub use held::*;
pub use launch::*;
pub use raw::*;
pub use rows::*;
pub use window::*;

/// `rocsync doctor` looks for runtimes wherever users have them, `/opt` too. The test
/// that plants copies there holds this for writing, and every doctor run holds it for
/// reading: on several test threads a run would otherwise see files being planted or
/// removed.
pub static DOCTOR_SEARCH: std::sync::RwLock<()> = std::sync::RwLock::new(());

/// `cmd` (a `rocsync doctor`) run to its end, no test planting runtimes meanwhile.
pub fn doctor_output(cmd: &mut std::process::Command) -> std::process::Output {
    let _search = DOCTOR_SEARCH.read().unwrap_or_else(|e| e.into_inner());
    cmd.output().unwrap()
}
