//! How `--check` shows values: the same words for the same cases across settings.

pub(crate) use crate::units::shown_duration as duration;

pub(crate) fn list(items: &[String], empty: &str) -> String {
    match items {
        [] => empty.into(),
        _ => items.join(", "),
    }
}

pub(crate) fn off() -> String {
    "off".into()
}

/// The value, or what stands for its default.
pub(crate) fn or(value: Option<String>, default: &str) -> String {
    value.unwrap_or_else(|| default.into())
}
