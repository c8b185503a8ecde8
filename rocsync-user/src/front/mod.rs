//! The command line: parsed as typed ([`cli`]) and run ([`commands`]), with `doctor`
//! ([`doctor`]) and `demo` ([`demo`]).

pub mod cli;
pub mod commands;
pub mod demo;
pub mod doctor;
