//! The AWS shared credentials file (`~/.aws/credentials`, or `AWS_SHARED_CREDENTIALS_FILE`),
//! profile `AWS_PROFILE` or `default`: `object_store` reads only the environment and the
//! metadata endpoints, and operators keep keys in this file.

use std::path::PathBuf;

use anyhow::{Context as _, Result, bail};

/// One profile's keys.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Keys {
    pub access_key_id: String,
    pub secret_access_key: String,
    pub session_token: Option<String>,
}

/// The keys of the profile in effect; `None` where there is no file (then the other
/// providers are tried). A file that exists but lacks the profile is an error: the
/// operator meant it to be used.
pub(super) fn from_shared_file() -> Result<Option<Keys>> {
    let path = match std::env::var_os("AWS_SHARED_CREDENTIALS_FILE") {
        Some(p) => PathBuf::from(p),
        None => match std::env::var_os("HOME") {
            Some(h) => PathBuf::from(h).join(".aws/credentials"),
            None => return Ok(None),
        },
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
    };
    let profile = std::env::var("AWS_PROFILE").unwrap_or_else(|_| "default".into());
    match profile_keys(&text, &profile) {
        Some(k) => Ok(Some(k)),
        None => bail!(
            "{}: no profile [{profile}] with aws_access_key_id and aws_secret_access_key",
            path.display()
        ),
    }
}

/// The keys of `[profile]` in an INI text.
fn profile_keys(text: &str, profile: &str) -> Option<Keys> {
    let (mut id, mut secret, mut token) = (None, None, None);
    let mut inside = false;
    for line in text.lines().map(str::trim) {
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            inside = name.trim() == profile;
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        if !inside {
            continue;
        }
        let value = Some(value.trim().to_string());
        match key.trim() {
            "aws_access_key_id" => id = value,
            "aws_secret_access_key" => secret = value,
            "aws_session_token" => token = value,
            _ => {}
        }
    }
    Some(Keys {
        access_key_id: id?,
        secret_access_key: secret?,
        session_token: token,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_profile_asked_for_and_only_it() {
        let text = "# keys\n[default]\naws_access_key_id = AKIA1\naws_secret_access_key=s1\n\n\
                    [ci]\naws_access_key_id=AKIA2\naws_secret_access_key = s2\naws_session_token = t\n";
        let k = profile_keys(text, "default").unwrap();
        assert_eq!(
            (k.access_key_id.as_str(), k.secret_access_key.as_str()),
            ("AKIA1", "s1")
        );
        assert_eq!(k.session_token, None);
        let k = profile_keys(text, "ci").unwrap();
        assert_eq!(k.session_token.as_deref(), Some("t"));
        assert_eq!(profile_keys(text, "other"), None);
        assert_eq!(
            profile_keys("[default]\naws_access_key_id=x\n", "default"),
            None
        );
    }
}
