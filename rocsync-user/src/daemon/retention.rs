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

/// `500ms`, `2s`, `5m`, `1h`, `7d`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (n, unit) = s.split_at(split);
    let n: u64 = n
        .parse()
        .map_err(|_| format!("{s:?}: expected a number and a unit (ms, s, m, h, d)"))?;
    let ms = match unit {
        "ms" => 1,
        "s" => 1000,
        "m" => 60_000,
        "h" => 3_600_000,
        "d" => 86_400_000,
        _ => return Err(format!("{s:?}: the unit is one of ms, s, m, h, d")),
    };
    n.checked_mul(ms)
        .map(Duration::from_millis)
        .filter(|d| !d.is_zero())
        .ok_or_else(|| format!("{s:?}: must be above zero and below 500 million years"))
}

/// `512M`, `10G`, `100K`, or bytes.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let (n, shift) = match s.as_bytes().last() {
        Some(b'K') => (&s[..s.len() - 1], 10),
        Some(b'M') => (&s[..s.len() - 1], 20),
        Some(b'G') => (&s[..s.len() - 1], 30),
        _ => (s, 0),
    };
    n.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(1 << shift))
        .ok_or_else(|| format!("{s:?}: expected bytes, or a number with K, M or G"))
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

    #[test]
    fn durations_and_sizes() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("5m"), Ok(Duration::from_secs(300)));
        assert!(parse_duration("5").is_err() && parse_duration("0s").is_err());
        assert!(parse_duration("99999999999999999d").is_err());
        assert_eq!(parse_size("10M"), Ok(10 << 20));
        assert_eq!(parse_size("2G"), Ok(2 << 30));
        assert_eq!(parse_size("100K"), Ok(100 << 10));
        assert_eq!(parse_size("123"), Ok(123));
        assert!(parse_size("1T").is_err());
    }
}
