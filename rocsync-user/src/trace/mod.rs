//! Captured calls and the files they are written to.

pub mod call;
pub mod json;
pub mod kineto;
pub mod packet;
pub mod raw;
pub mod stream;
