//! How `--check` shows values: the same words for the same cases across settings.

pub use crate::units::shown_duration as duration;

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
