//! `rocsync daemon --check`: the settings in effect, one per line, named as the flags
//! and TOML keys that set them (not a Rust `Debug` dump).

use crate::daemon::settings::{effect::DaemonConfig, keys::SETTINGS};

impl DaemonConfig {
    /// The settings in effect, `key  value` per line.
    pub fn summary(&self) -> String {
        let width = SETTINGS.iter().map(|s| s.key.len()).max().unwrap_or(0);
        SETTINGS
            .iter()
            .map(|s| format!("{:width$}  {}\n", s.key, (s.shown)(self)))
            .collect()
    }
}

/// The docs' table of the settings (`docs/daemon.md`, "Settings"): made from their
/// definitions, so a setting added is documented or this fails.
#[cfg(test)]
mod docs {
    use crate::daemon::settings::keys::SETTINGS;

    fn table() -> String {
        let mut t = String::from(
            "| Key (TOML) | Flag | Value | On SIGHUP | What |\n|---|---|---|---|---|\n",
        );
        for s in SETTINGS {
            let help = s.help.split_whitespace().collect::<Vec<_>>().join(" ");
            let reload = if s.restart { "at restart" } else { "reloaded" };
            t += &format!(
                "| `{}` | `{}` | {} | {reload} | {} |\n",
                s.key,
                s.flag(),
                s.value,
                help.replace('|', "\\|")
            );
        }
        t
    }

    #[test]
    fn the_docs_table_is_the_settings_definitions() {
        let docs = include_str!("../../../../docs/daemon.md");
        let table = table();
        assert!(
            docs.contains(&table),
            "docs/daemon.md's settings table differs from the definitions: put in\n{table}"
        );
    }
}
