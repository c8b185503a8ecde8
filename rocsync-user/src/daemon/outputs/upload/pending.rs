//! A trace's upload state lives beside it in the state directory, so that a restart
//! resumes what was waiting: `NAME.json.upload` holds the object key while the trace
//! waits; it is renamed `NAME.json.uploaded` once the store confirmed the object.
//! Retention removes both with their trace. The state directory is root's alone (0700),
//! so nothing else can plant a file or a link here.

use std::{
    io,
    path::{Path, PathBuf},
    time::SystemTime,
};

const WAITING: &str = "upload";
const DONE: &str = "uploaded";

fn beside(trace: &Path, what: &str) -> PathBuf {
    let mut name = trace.as_os_str().to_owned();
    name.push(".");
    name.push(what);
    PathBuf::from(name)
}

/// Records that `trace` waits to be uploaded as `key`.
pub(super) fn wait(trace: &Path, key: &str) -> io::Result<()> {
    std::fs::write(beside(trace, WAITING), key)
}

/// Records that `trace` is in the store.
pub(super) fn done(trace: &Path) -> io::Result<()> {
    std::fs::rename(beside(trace, WAITING), beside(trace, DONE))
}

/// Whether `trace` waits to be uploaded.
pub(crate) fn waiting(trace: &Path) -> bool {
    beside(trace, WAITING).exists()
}

/// Removes `trace`'s upload state (with the trace).
pub(crate) fn forget(trace: &Path) {
    for what in [WAITING, DONE] {
        let _ = std::fs::remove_file(beside(trace, what));
    }
}

/// The traces in `dirs` waiting to be uploaded, oldest first, with their keys. A state
/// file whose trace is gone (removed by hand) is dropped.
pub(super) fn all_waiting(dirs: &[PathBuf]) -> Vec<(PathBuf, String)> {
    let mut found: Vec<(SystemTime, PathBuf, String)> = Vec::new();
    for entry in dirs.iter().flat_map(std::fs::read_dir).flatten().flatten() {
        let path = entry.path();
        let Some(trace) = path
            .to_str()
            .and_then(|p| p.strip_suffix(&format!(".{WAITING}")))
            .map(PathBuf::from)
        else {
            continue;
        };
        // A regular file, never a link; a key naming that file (what `submit` made).
        let meta = std::fs::symlink_metadata(&trace)
            .ok()
            .filter(|m| m.is_file());
        let key = std::fs::read_to_string(&path)
            .ok()
            .filter(|k| key_names(k, &trace));
        let (Some(meta), Some(key)) = (meta, key) else {
            let _ = std::fs::remove_file(&path);
            continue;
        };
        found.push((
            meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
            trace,
            key,
        ));
    }
    found.sort();
    found.into_iter().map(|(_, t, k)| (t, k)).collect()
}

/// Whether `key` is one the daemon makes for `trace`: it ends with the trace's file
/// name, and no part of it climbs or is empty.
fn key_names(key: &str, trace: &Path) -> bool {
    let Some(name) = trace.file_name().and_then(|n| n.to_str()) else {
        return false;
    };
    let parts: Vec<&str> = key.split('/').collect();
    parts.last() == Some(&name)
        && parts
            .iter()
            .all(|p| !p.is_empty() && *p != ".." && *p != "." && !p.contains(char::is_control))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_or_a_key_not_of_its_trace_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real.json");
        std::fs::write(&real, "{}").unwrap();
        wait(&real, "p/node/real.json").unwrap();
        // A link where a trace would be, and a key naming another object.
        let leak = dir.path().join("leak.json");
        std::os::unix::fs::symlink("/etc/hostname", &leak).unwrap();
        wait(&leak, "p/node/leak.json").unwrap();
        let other = dir.path().join("other.json");
        std::fs::write(&other, "{}").unwrap();
        wait(&other, "p/../victim/other.json").unwrap();
        let found = all_waiting(&[dir.path().to_path_buf()]);
        assert_eq!(found, [(real, "p/node/real.json".to_string())]);
        assert!(!waiting(&leak) && !waiting(&other));
    }

    #[test]
    fn waiting_then_done_and_found_again_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.json");
        let b = dir.path().join("b.json");
        for t in [&a, &b] {
            std::fs::write(t, "{}").unwrap();
        }
        wait(&a, "p/node/a.json").unwrap();
        wait(&b, "p/node/b.json").unwrap();
        // A state file whose trace was removed by hand.
        wait(&dir.path().join("gone.json"), "p/node/gone.json").unwrap();
        assert!(waiting(&a));
        done(&a).unwrap();
        assert!(!waiting(&a));
        let found = all_waiting(&[dir.path().to_path_buf()]);
        assert_eq!(found, vec![(b.clone(), "p/node/b.json".to_string())]);
        assert!(!dir.path().join("gone.json.upload").exists());
        forget(&a);
        forget(&b);
        assert_eq!(
            std::fs::read_dir(dir.path()).unwrap().count(),
            2,
            "the traces only"
        );
    }
}
