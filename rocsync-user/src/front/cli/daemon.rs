//! `rocsync daemon`'s command line: its settings as typed, each also a TOML key, defined
//! once with the daemon's settings (`daemon/settings/keys.rs`).

use clap::Args;

use crate::daemon::config::ConfigFlags;

#[derive(Debug, Args)]
pub struct DaemonArgs {
    #[command(flatten)]
    pub settings: ConfigFlags,
    /// Check the configuration and the state directory (as the start would, making
    /// nothing), print the settings in effect, and exit
    #[arg(long)]
    pub check: bool,
}
