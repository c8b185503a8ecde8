//! The subcommands.

mod attach;
mod finish;
mod run;

pub use attach::attach;
pub use run::run;
