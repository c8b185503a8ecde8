//! Helpers shared by the integration tests.
#![allow(dead_code, unused_imports)]

mod capture;
mod launch;
pub mod pipeline;

pub use capture::*;
pub use launch::*;
