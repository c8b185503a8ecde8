//! Captured calls and the files they are written to.

pub mod call;
pub mod kineto;
pub mod raw;
