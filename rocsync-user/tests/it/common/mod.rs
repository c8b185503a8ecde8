//! Helpers shared by the integration tests.
#![allow(dead_code, unused_imports)]

pub mod apis;
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

pub use capture::*;
pub use held::*;
pub use launch::*;
pub use raw::*;
pub use rows::*;
pub use window::*;
