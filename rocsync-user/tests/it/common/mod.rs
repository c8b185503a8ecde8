//! Helpers shared by the integration tests.
#![allow(dead_code, unused_imports)]

mod capture;
pub mod daemon;
mod held;
mod launch;
pub mod pipeline;

pub use capture::*;
pub use held::*;
pub use launch::*;
