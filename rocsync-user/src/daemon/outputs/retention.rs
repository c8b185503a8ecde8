//! The state directory's traces are kept within a total size and an age (traces asked
//! for, sampled and dyno's alike, as one budget shared between users: `policy`); the
//! trace just written (every per-process file of it) is always kept. With uploads on, a
//! trace still waiting for its upload is spared by age and removed for size only after
//! its user's uploaded ones: then it is lost, and counted.

mod owners;
mod policy;

pub(crate) use owners::{Owners, of as owners_of, record as record_owners};
use policy::{Entry, Removal, Why};

use std::{
    collections::HashMap,
    ffi::{OsStr, OsString},
    os::{fd::OwnedFd, unix::ffi::OsStrExt as _},
    path::{Path, PathBuf},
    time::{Duration, SystemTime},
};

use rustix::fs::{AtFlags, FileType};

use crate::daemon::{outputs::upload, quiet::Quiet};

/// The size limit when none is set: its file system's tenth, at most this (as journald's
/// `SystemMaxUse`). Without it, hang traces of up to `--trace-max-bytes` each, one a
/// minute, filled the disk in hours.
const DEFAULT_MAX_BYTES_CAP: u64 = 4 << 30;

/// The default size limit of traces kept in `state_dir`: a tenth of its file system
/// (the nearest folder that exists: the state directory is made at start), at most
/// 4 GiB; 4 GiB when none can be asked.
pub(crate) fn default_max_bytes(state_dir: &Path) -> u64 {
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
    let parent = crate::calls::emit::dirs::open(dir.parent()?).ok()?;
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
pub(crate) struct Retention {
    pub max_bytes: Option<u64>,
    pub max_age: Option<Duration>,
}

impl Retention {
    /// Applies the limits to the trace files in `dirs`, together; returns how many
    /// traces waiting for their upload it removed. Each folder is opened once, without
    /// following a link anywhere on its path, checked to be the daemon's own (none others
    /// may write), listed and emptied through that descriptor: a folder swapped for a
    /// link to root's files, even mid-pass, is never looked in. The files kept are known
    /// by (device, inode), whatever path named them; a file counts what it takes on disk
    /// (a sparse one, not its length). Each removal is said in `log`, bounded per user's
    /// share: a flood of traces made one line per removal, ~3 000 in the 10-minute soak.
    pub(crate) fn apply(&self, dirs: &[PathBuf], keep: &[&Path], log: &mut Quiet) -> u64 {
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
        // Owner files, by their folder and trace's name.
        let mut owner_files: HashMap<(usize, OsString), OsString> = HashMap::new();
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
                if FileType::from_raw_mode(m.st_mode) != FileType::RegularFile {
                    continue;
                }
                if let Some(trace) = owners::trace_of(&name) {
                    owner_files.insert((i, trace.to_os_string()), name);
                    continue;
                }
                if !name.as_bytes().ends_with(b".json") {
                    continue;
                }
                let path = dir.join(&name);
                if kept.contains(&(m.st_dev, m.st_ino)) {
                    keep_paths.push(path.clone());
                }
                let modified = SystemTime::UNIX_EPOCH
                    + Duration::new(m.st_mtime.max(0) as u64, m.st_mtime_nsec as u32);
                files.push(Entry {
                    path: path.clone(),
                    size: m.st_blocks as u64 * 512,
                    modified,
                    waiting: upload::waiting(&path),
                    owner: None,
                });
                at.insert(path, (i, name));
            }
        }
        for f in &mut files {
            let (i, name) = &at[&f.path];
            let owner_file = owner_files.remove(&(*i, name.clone()));
            f.owner = owner_file.and_then(|o| owners::read(&folders[*i].1, &o));
        }
        // Those left are of traces removed by hand.
        for ((i, _), name) in owner_files {
            let _ = rustix::fs::unlinkat(&folders[i].1, &name, AtFlags::empty());
        }
        let keep: Vec<&Path> = keep_paths.iter().map(PathBuf::as_path).collect();
        let limits = (self.max_bytes, self.max_age);
        let mut lost = 0;
        for removal in policy::expired(limits, files, SystemTime::now(), &keep) {
            let Some((i, name)) = at.get(&removal.path) else {
                continue;
            };
            let folder = &folders[*i].1;
            let path = removal.path.display();
            match rustix::fs::unlinkat(folder, name, AtFlags::empty()) {
                Ok(()) => {
                    lost += u64::from(removal.waiting);
                    if log.allow(&whose(&removal), tokio::time::Instant::now()) {
                        crate::say!("{}", said(&removal, self.max_bytes));
                    }
                    let mut owner_file = name.clone();
                    owner_file.push(owners::SUFFIX);
                    let _ = rustix::fs::unlinkat(folder, &owner_file, AtFlags::empty());
                }
                Err(e) => crate::say!("rocsync daemon: warning: removing {path}: {e}"),
            }
            upload::forget(&removal.path);
        }
        lost
    }
}

/// Whose removals a removal's log line is bounded with: the share it was taken from, and
/// apart, those lost before their upload (a warning).
fn whose(r: &Removal) -> String {
    let share = match r.why {
        Why::Share {
            owner, users: 2.., ..
        } => owner.map_or("the share of traces of no known user".into(), |u| {
            format!("uid {u}'s share")
        }),
        // Each user's apart too: another's aged traces, removed in the same pass, hid a
        // user's removals in one count (issue 60, round after 43671db).
        Why::Age { owner } => owner.map_or("aged traces of no known user".into(), |u| {
            format!("uid {u}'s aged traces")
        }),
        Why::Share { .. } => "the limits".into(),
    };
    match r.waiting {
        true => format!("{share}, before their upload"),
        false => share,
    }
}

/// The log line of a removal: the user whose share it was taken from (a size removal is
/// never another user's doing), and whether its upload is lost. Ends with the path.
fn said(r: &Removal, max_bytes: Option<u64>) -> String {
    let path = r.path.display();
    let why = match &r.why {
        // One user: the bound is theirs alone.
        Why::Age { .. } | Why::Share { users: 1, .. } => String::new(),
        Why::Share {
            owner,
            bytes,
            share,
            users,
        } => {
            let who = owner.map_or("traces of no known user".into(), |u| format!("uid {u}"));
            let max = max_bytes.unwrap_or_default();
            format!(
                "{who} held {bytes} bytes, over its share ({max} between {users} users: \
                 {share} each): "
            )
        }
    };
    match r.waiting {
        true => format!("rocsync daemon: warning: {why}retention removed {path} before its upload"),
        false => format!("rocsync daemon: {why}retention removed {path}"),
    }
}

#[cfg(test)]
mod tests;
