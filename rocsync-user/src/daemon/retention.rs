//! The state directory's traces are kept within a total size and an age, oldest removed
//! first (traces asked for, sampled and dyno's alike, as one budget); the trace just
//! written is always kept.

use std::{
    path::{Path, PathBuf},
    time::{Duration, SystemTime},
};

/// The limits; `None` is no limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Retention {
    pub max_bytes: Option<u64>,
    pub max_age: Option<Duration>,
}

/// A trace file: (path, size, modification time).
pub type Entry = (PathBuf, u64, SystemTime);

impl Retention {
    /// Which of `files` to remove at `now`, sparing `keep`.
    pub fn expired(&self, mut files: Vec<Entry>, now: SystemTime, keep: &Path) -> Vec<PathBuf> {
        files.sort_by_key(|f| f.2);
        let mut total: u64 = files.iter().map(|f| f.1).sum();
        let mut gone = Vec::new();
        for (path, size, time) in files {
            if path == keep {
                continue;
            }
            let old = self
                .max_age
                .is_some_and(|a| now.duration_since(time).unwrap_or_default() > a);
            let over = self.max_bytes.is_some_and(|m| total > m);
            if old || over {
                total -= size;
                gone.push(path);
            }
        }
        gone
    }

    /// Applies the limits to the trace files in `dirs`, together.
    pub fn apply(&self, dirs: &[PathBuf], keep: &Path) {
        let files: Vec<Entry> = dirs
            .iter()
            .flat_map(std::fs::read_dir)
            .flatten()
            .flatten()
            .filter_map(|e| {
                let m = e.metadata().ok()?;
                let json = m.is_file() && e.file_name().to_string_lossy().ends_with(".json");
                json.then_some((e.path(), m.len(), m.modified().ok()?))
            })
            .collect();
        for path in self.expired(files, SystemTime::now(), keep) {
            match std::fs::remove_file(&path) {
                Ok(()) => crate::say!("rocsync daemon: retention removed {}", path.display()),
                Err(e) => crate::say!("rocsync daemon: warning: removing {}: {e}", path.display()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oldest_first_within_size_and_age_and_never_the_newest() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let f = |n: &str, size, age_s| (PathBuf::from(n), size, t0 - Duration::from_secs(age_s));
        let files = vec![
            f("a", 10, 300),
            f("b", 10, 200),
            f("c", 10, 100),
            f("d", 10, 0),
        ];
        let by_size = Retention {
            max_bytes: Some(25),
            max_age: None,
        };
        assert_eq!(
            by_size.expired(files.clone(), t0, Path::new("d")),
            ["a", "b"].map(PathBuf::from)
        );
        let by_age = Retention {
            max_bytes: None,
            max_age: Some(Duration::from_secs(150)),
        };
        assert_eq!(
            by_age.expired(files.clone(), t0, Path::new("d")),
            ["a", "b"].map(PathBuf::from)
        );
        let tiny = Retention {
            max_bytes: Some(1),
            max_age: None,
        };
        assert_eq!(
            tiny.expired(files, t0, Path::new("d")).len(),
            3,
            "the newest stays"
        );
    }
}
