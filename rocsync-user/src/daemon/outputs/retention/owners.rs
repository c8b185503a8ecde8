//! Whose a trace is, for retention's per-user shares: the real uid of the process it
//! traced, read when its recording began (a hung process may be gone, or its uid's pid
//! reused, by the time its trace is written). Kept beside the trace as `NAME.json.owner`,
//! so that shares hold across restarts, in the state directory that is root's alone: no
//! user can plant or change one. Not the trace file's owner: a trace chowned to its user
//! could be made writable by them through the descriptor `rocsync trace -o` hands out.

use std::{
    collections::BTreeMap,
    ffi::OsStr,
    io::{self, Write as _},
    os::{fd::OwnedFd, unix::ffi::OsStrExt as _},
    path::{Path, PathBuf},
};

use rustix::fs::{Mode, OFlags};

/// Appended to a trace's file name.
pub(super) const SUFFIX: &str = ".owner";

/// Each traced pid's uid.
pub(crate) type Owners = BTreeMap<u32, u32>;

/// The uids of `pids` now (those gone are left out: their traces are no known user's).
pub(crate) fn of(pids: impl IntoIterator<Item = u32>) -> Owners {
    (pids.into_iter())
        .filter_map(|p| Some((p, crate::os::procfs::uid(p)?)))
        .collect()
}

/// Records whose each of `files` is: its process's user. A file of no single process
/// is its processes' user where they have one; no one's otherwise.
pub(crate) fn record(files: &[String], pids: &[Option<u32>], owners: &Owners) {
    let mut uids = owners.values();
    let common = uids.next().filter(|&u| uids.all(|v| v == u));
    for (file, pid) in files.iter().zip(pids) {
        let owner = pid.map_or(common, |p| owners.get(&p));
        if let Some(uid) = owner
            && let Err(e) = write(Path::new(file), *uid)
        {
            crate::say!("rocsync daemon: warning: recording whose {file} is: {e}");
        }
    }
}

fn beside(trace: &Path) -> PathBuf {
    let mut name = trace.as_os_str().to_owned();
    name.push(SUFFIX);
    PathBuf::from(name)
}

fn write(trace: &Path, uid: u32) -> io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW)
        .open(beside(trace))?;
    writeln!(file, "{uid}")
}

/// The trace whose owner file `name` is, if it is one (`NAME.json.owner`: no trace the
/// daemon writes is so named, its per-process names end `_<pid><ext>`).
pub(super) fn trace_of(name: &OsStr) -> Option<&OsStr> {
    let trace = name.as_bytes().strip_suffix(SUFFIX.as_bytes())?;
    trace.ends_with(b".json").then(|| OsStr::from_bytes(trace))
}

/// The uid owner file `name` of folder `dir` holds: read without following a link, a
/// few bytes at most.
pub(super) fn read(dir: &OwnedFd, name: &OsStr) -> Option<u32> {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let file = rustix::fs::openat(dir, name, flags, Mode::empty()).ok()?;
    let mut buf = [0u8; 16];
    let n = rustix::io::read(&file, &mut buf).ok()?;
    std::str::from_utf8(&buf[..n]).ok()?.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_file_is_its_processs_users_and_a_shared_file_its_processes_one_user() {
        let dir = tempfile::tempdir().unwrap();
        let path = |n: &str| dir.path().join(n).display().to_string();
        let files = [path("a.json"), path("b.json"), path("shared.json")];
        let owners: Owners = [(10, 0), (11, 65534)].into();
        record(&files, &[Some(10), Some(11), None], &owners);
        let fd = crate::calls::emit::dirs::open(dir.path()).unwrap();
        let read = |n: &str| read(&fd, OsStr::new(&format!("{n}{SUFFIX}")));
        assert_eq!((read("a.json"), read("b.json")), (Some(0), Some(65534)));
        assert_eq!(read("shared.json"), None, "two users: no one's");
        let same: Owners = [(10, 7), (11, 7)].into();
        record(&files[2..], &[None], &same);
        assert_eq!(read("shared.json"), Some(7));
        assert_eq!(
            trace_of(OsStr::new("a.json.owner")),
            Some(OsStr::new("a.json"))
        );
        assert_eq!(trace_of(OsStr::new("a.json")), None);
        assert_eq!(trace_of(OsStr::new("x_12.owner")), None, "not a trace's");
    }
}
