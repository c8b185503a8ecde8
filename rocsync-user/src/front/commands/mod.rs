//! The subcommands: each turns what was typed into its settings (`settings.rs`) and runs.

mod annotate;
mod attach;
mod convert;
mod doctor;
mod generate;
mod read_stacks;
mod report;
mod run;
mod settings;
mod trace;

pub use annotate::annotate;
pub use attach::attach;
pub use convert::convert;
pub use doctor::doctor;
pub use generate::generate;
pub use read_stacks::read_stacks;
pub use report::report;
pub use run::run;
pub use trace::{status, trace};

use anyhow::Result;

use crate::{front::cli::DaemonArgs, os::signals::Signals};

/// `rocsync daemon`.
pub async fn daemon(args: DaemonArgs, signals: Signals) -> Result<i32> {
    let check = args.check;
    crate::daemon::run(args.settings, check, signals).await
}
