//! The state directory's traces are kept within a total size and an age, oldest removed
//! first (traces asked for, sampled and dyno's alike, as one budget); the trace just
//! written (every per-process file of it) is always kept. With uploads on, a trace still waiting for its upload is
//! spared by age and removed for size only after every uploaded one: then it is lost,
//! and counted.

use std::{
    collections::HashMap,
    ffi::{OsStr, OsString},
    os::{fd::OwnedFd, unix::ffi::OsStrExt as _},
    path::{Path, PathBuf},
    time::{Duration, SystemTime},
};

use rustix::fs::{AtFlags, FileType};

use crate::daemon::outputs::upload;

/// The size limit when none is set: its file system's tenth, at most this (as journald's
/// `SystemMaxUse`). Without it, hang traces of up to `--trace-max-bytes` each, one a
/// minute, filled the disk in hours.
const DEFAULT_MAX_BYTES_CAP: u64 = 4 << 30;

/// The default size limit of traces kept in `state_dir`: a tenth of its file system
/// (the nearest folder that exists: the state directory is made at start), at most
/// 4 GiB; 4 GiB when none can be asked.
pub fn default_max_bytes(state_dir: &Path) -> u64 {
    let fs = state_dir
        .ancestors()
        .find_map(|d| rustix::fs::statvfs(d).ok());
    fs.map_or(DEFAULT_MAX_BYTES_CAP, |s| {
        (s.f_blocks.saturating_mul(s.f_frsize) / 10).min(DEFAULT_MAX_BYTES_CAP)
    })
}

/// The folder `dir`, itself no link (the state directory above it may be reached through
/// root's: `dirs::open`).
fn open_folder(dir: &Path) -> Option<OwnedFd> {
    use rustix::fs::{Mode, OFlags};
    let parent = crate::emit::dirs::open(dir.parent()?).ok()?;
    let flags = OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::RDONLY | OFlags::CLOEXEC;
    rustix::fs::openat(&parent, dir.file_name()?, flags, Mode::empty()).ok()
}

/// Whether the folder open at `fd` is the daemon's own: root's or the daemon's, and
/// none others may write.
fn own_folder(fd: &OwnedFd) -> bool {
    let me = rustix::process::geteuid().as_raw();
    rustix::fs::fstat(fd).is_ok_and(|m| {
        FileType::from_raw_mode(m.st_mode) == FileType::Directory
            && (m.st_uid == 0 || m.st_uid == me)
            && m.st_mode & 0o022 == 0
    })
}

/// The limits; `None` is no limit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Retention {
    pub max_bytes: Option<u64>,
    pub max_age: Option<Duration>,
}

/// A trace file: (path, size, modification time, waiting for its upload).
pub type Entry = (PathBuf, u64, SystemTime, bool);

impl Retention {
    /// Which of `files` to remove at `now`, sparing `keep`, each with whether it was
    /// still waiting for its upload.
    pub fn expired(
        &self,
        mut files: Vec<Entry>,
        now: SystemTime,
        keep: &[&Path],
    ) -> Vec<(PathBuf, bool)> {
        // Uploaded (or never to be uploaded) traces first, oldest first.
        files.sort_by_key(|f| (f.3, f.2));
        let mut total: u64 = files.iter().map(|f| f.1).sum();
        let mut gone = Vec::new();
        for (path, size, time, waiting) in files {
            if keep.contains(&path.as_path()) {
                continue;
            }
            let old = !waiting
                && self
                    .max_age
                    .is_some_and(|a| now.duration_since(time).unwrap_or_default() > a);
            let over = self.max_bytes.is_some_and(|m| total > m);
            if old || over {
                total -= size;
                gone.push((path, waiting));
            }
        }
        gone
    }

    /// Applies the limits to the trace files in `dirs`, together; returns how many
    /// traces waiting for their upload it removed. Each folder is opened once, without
    /// following a link anywhere on its path, checked to be the daemon's own (none others
    /// may write), listed and emptied through that descriptor: a folder swapped for a
    /// link to root's files, even mid-pass, is never looked in. The files kept are known
    /// by (device, inode), whatever path named them; a file counts what it takes on disk
    /// (a sparse one, not its length).
    pub fn apply(&self, dirs: &[PathBuf], keep: &[&Path]) -> u64 {
        use std::os::unix::fs::MetadataExt as _;
        let kept: Vec<(u64, u64)> = (keep.iter())
            .filter_map(|p| std::fs::metadata(p).ok())
            .map(|m| (m.dev(), m.ino()))
            .collect();
        let folders: Vec<(&PathBuf, OwnedFd)> = dirs
            .iter()
            .filter_map(|d| Some((d, open_folder(d)?)))
            .filter(|(_, fd)| own_folder(fd))
            .collect();
        // Path → (its folder, its name there).
        let mut at: HashMap<PathBuf, (usize, OsString)> = HashMap::new();
        let mut keep_paths = Vec::new();
        let mut files: Vec<Entry> = Vec::new();
        for (i, (dir, fd)) in folders.iter().enumerate() {
            let Ok(mut entries) = rustix::fs::Dir::read_from(fd) else {
                continue;
            };
            while let Some(Ok(e)) = entries.next() {
                let name = OsStr::from_bytes(e.file_name().to_bytes()).to_os_string();
                // Not followed: a link is no file here.
                let Ok(m) = rustix::fs::statat(fd, &*name, AtFlags::SYMLINK_NOFOLLOW) else {
                    continue;
                };
                let regular = FileType::from_raw_mode(m.st_mode) == FileType::RegularFile;
                if !regular || !name.as_bytes().ends_with(b".json") {
                    continue;
                }
                let path = dir.join(&name);
                if kept.contains(&(m.st_dev, m.st_ino)) {
                    keep_paths.push(path.clone());
                }
                let modified = SystemTime::UNIX_EPOCH
                    + Duration::new(m.st_mtime.max(0) as u64, m.st_mtime_nsec as u32);
                let waiting = upload::waiting(&path);
                files.push((path.clone(), m.st_blocks as u64 * 512, modified, waiting));
                at.insert(path, (i, name));
            }
        }
        let keep: Vec<&Path> = keep_paths.iter().map(PathBuf::as_path).collect();
        let mut lost = 0;
        for (path, waiting) in self.expired(files, SystemTime::now(), &keep) {
            let Some((i, name)) = at.get(&path) else {
                continue;
            };
            match rustix::fs::unlinkat(&folders[*i].1, name, AtFlags::empty()) {
                Ok(()) if waiting => {
                    lost += 1;
                    crate::say!(
                        "rocsync daemon: warning: retention removed {} before its upload",
                        path.display()
                    );
                }
                Ok(()) => crate::say!("rocsync daemon: retention removed {}", path.display()),
                Err(e) => crate::say!("rocsync daemon: warning: removing {}: {e}", path.display()),
            }
            upload::forget(&path);
        }
        lost
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A folder swapped for a link to someone's files is not looked in, and the files
    /// kept are known whatever path named them (a state directory reached through a
    /// link had every file of the trace just written removed).
    #[test]
    fn only_the_daemons_folders_are_looked_in_and_kept_files_are_known_by_inode() {
        use std::os::unix::fs::PermissionsExt as _;
        let root = tempfile::tempdir().unwrap();
        let dir = |name: &str| {
            let d = root.path().join(name);
            std::fs::create_dir(&d).unwrap();
            std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
            d
        };
        let (traces, victim) = (dir("traces"), dir("victim"));
        let dyno = root.path().join("dyno");
        std::os::unix::fs::symlink(&victim, &dyno).unwrap();
        let write = |p: &Path| std::fs::write(p, vec![b'x'; 64 << 10]).unwrap();
        let (old, new, theirs) = (
            traces.join("old.json"),
            traces.join("new.json"),
            victim.join("a.json"),
        );
        for p in [&old, &new, &theirs] {
            write(p);
        }
        // The new trace named through a link to its folder.
        let via = root.path().join("via");
        std::os::unix::fs::symlink(&traces, &via).unwrap();
        let limit = Retention {
            max_bytes: Some(0),
            max_age: None,
        };
        limit.apply(&[traces.clone(), dyno], &[&via.join("new.json")]);
        assert!(!old.exists(), "over the limit: removed");
        assert!(new.exists(), "the trace just written stays");
        assert!(theirs.exists(), "a linked folder's file was removed");
    }

    #[test]
    fn oldest_first_within_size_and_age_and_never_the_newest() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let f = |n: &str, size, age_s| {
            (
                PathBuf::from(n),
                size,
                t0 - Duration::from_secs(age_s),
                false,
            )
        };
        let names = |gone: Vec<(PathBuf, bool)>| gone.into_iter().map(|g| g.0).collect::<Vec<_>>();
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
            names(by_size.expired(files.clone(), t0, &[Path::new("d")])),
            ["a", "b"].map(PathBuf::from)
        );
        let by_age = Retention {
            max_bytes: None,
            max_age: Some(Duration::from_secs(150)),
        };
        assert_eq!(
            names(by_age.expired(files.clone(), t0, &[Path::new("d")])),
            ["a", "b"].map(PathBuf::from)
        );
        let tiny = Retention {
            max_bytes: Some(1),
            max_age: None,
        };
        assert_eq!(
            tiny.expired(files, t0, &[Path::new("d")]).len(),
            3,
            "the newest stays"
        );
    }

    #[test]
    fn a_trace_waiting_for_its_upload_goes_last_and_never_for_age() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let f = |n: &str, age_s, waiting| {
            (
                PathBuf::from(n),
                10,
                t0 - Duration::from_secs(age_s),
                waiting,
            )
        };
        let files = vec![
            f("a", 300, true),
            f("b", 200, false),
            f("c", 100, false),
            f("d", 0, false),
        ];
        let both = Retention {
            max_bytes: Some(25),
            max_age: Some(Duration::from_secs(50)),
        };
        let gone = both.expired(files.clone(), t0, &[Path::new("d")]);
        // b and c by age (a is spared by age); then 20 bytes left: within the size.
        assert_eq!(gone, vec![("b".into(), false), ("c".into(), false)]);
        let tight = Retention {
            max_bytes: Some(15),
            max_age: None,
        };
        let gone = tight.expired(files, t0, &[Path::new("d")]);
        assert_eq!(
            gone,
            vec![("b".into(), false), ("c".into(), false), ("a".into(), true)],
            "the waiting one last, counted as such"
        );
    }

    #[test]
    fn every_file_of_the_trace_just_written_stays() {
        let t0 = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let f = |n: &str, age_s| (PathBuf::from(n), 10, t0 - Duration::from_secs(age_s), false);
        // One trace of three processes, its files written over a second, and an old one.
        let files = vec![f("old", 300), f("p1", 2), f("p2", 1), f("p3", 0)];
        let tiny = Retention {
            max_bytes: Some(1),
            max_age: Some(Duration::from_secs(1)),
        };
        let keep = ["p1", "p2", "p3"].map(Path::new);
        let gone = tiny.expired(files, t0, &keep);
        assert_eq!(gone, vec![("old".into(), false)]);
    }
}
