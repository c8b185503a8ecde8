//! `rocsync daemon --check`: the settings in effect, one per line, named as the flags
//! and TOML keys that set them (not a Rust `Debug` dump).

use crate::daemon::settings::{effect::DaemonConfig, keys::SETTINGS};

impl DaemonConfig {
    /// The settings in effect, `key  value` per line.
    pub(crate) fn summary(&self) -> String {
        let width = SETTINGS.iter().map(|s| s.key.len()).max().unwrap_or(0);
        SETTINGS
            .iter()
            .map(|s| format!("{:width$}  {}\n", s.key, (s.shown)(self)))
            .collect()
    }
}

/// The docs' table of the settings (`docs/daemon.md`, "Settings"): made from their
/// definitions, so a setting added is documented or this fails. And each help's
/// `[default: …]` is what loads with nothing set.
#[cfg(test)]
mod docs {
    use crate::daemon::settings::config::{ConfigFlags, DaemonConfig};
    use crate::daemon::settings::keys::SETTINGS;
    use crate::units::{parse_duration, parse_size};

    fn table() -> String {
        let mut t = String::from(
            "| Key (TOML) | Flag | Value | On SIGHUP | What |\n|---|---|---|---|---|\n",
        );
        for s in SETTINGS {
            let help = s.help();
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

    /// A default is defined once, in code; a help that says it is checked against it here,
    /// so the two cannot drift. Defaults that are descriptions (computed, or from the
    /// environment: `--check` shows them as "default") are not values to compare.
    #[test]
    fn each_helps_default_is_what_loads_with_nothing_set() {
        let c = DaemonConfig::load(&ConfigFlags::default()).unwrap();
        let mut checked = 0;
        for s in SETTINGS {
            let help = s.help();
            let Some((_, rest)) = help.split_once("[default: ") else {
                continue;
            };
            let said = rest.split([',', ';', ']']).next().unwrap().trim();
            let shown = (s.shown)(&c);
            if said.contains(' ') || shown == "default" {
                continue;
            }
            // The same value in another form: 60s and 1m, 512M and its bytes.
            let same = |parse: fn(&str) -> Result<u64, String>| {
                parse(said).is_ok_and(|v| parse(&shown) == Ok(v))
            };
            let duration = |v: &str| parse_duration(v).map(|d| d.as_nanos() as u64);
            assert!(
                said == shown || same(duration) || same(parse_size),
                "{}: the help says {said}, the default loaded is {shown}",
                s.key
            );
            checked += 1;
        }
        assert!(checked >= 10, "{checked} defaults checked");
    }
}
