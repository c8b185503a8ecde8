//! The subcommands.

mod attach;
mod convert;
mod finish;
mod run;

pub use attach::attach;
pub use convert::convert;
pub use run::run;
