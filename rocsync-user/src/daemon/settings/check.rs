//! `rocsync daemon --check`: the settings in effect, one per line, named as the flags
//! and TOML keys that set them (not a Rust `Debug` dump).

use std::time::Duration;

use crate::daemon::settings::{config::DaemonConfig, keys::SETTINGS};

/// A duration as the flags take it: the largest unit that divides it (`2m`, `1500ms`).
pub fn duration(d: Duration) -> String {
    let ms = d.as_millis();
    for (unit, per) in [
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("m", 60_000),
        ("s", 1000),
    ] {
        if ms >= per && ms.is_multiple_of(per) {
            return format!("{}{unit}", ms / per);
        }
    }
    format!("{ms}ms")
}

pub fn list(items: &[String], empty: &str) -> String {
    match items {
        [] => empty.into(),
        _ => items.join(", "),
    }
}

pub fn off() -> String {
    "off".into()
}

/// The value, or what stands for its default.
pub fn or(value: Option<String>, default: &str) -> String {
    value.unwrap_or_else(|| default.into())
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_in_the_largest_unit_that_divides_them() {
        let d = |ms| duration(Duration::from_millis(ms));
        assert_eq!(d(120_000), "2m");
        assert_eq!(d(1500), "1500ms");
        assert_eq!(d(2000), "2s");
        assert_eq!(d(7 * 86_400_000), "7d");
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
