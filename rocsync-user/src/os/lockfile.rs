//! Lock files held with `flock` (so a process that dies releases its lock), each saying
//! which process holds it: one rocsync per target process, one daemon per node. A lock
//! released is removed (a file per traced pid would otherwise pile up in /run); a taker
//! that locked a file just removed sees that its path names another file, and retries.

use std::{
    fs::File,
    io::{Read as _, Seek as _, Write as _},
    os::fd::AsFd as _,
    path::Path,
};

use anyhow::{Context as _, Result};
use rustix::fs::{FlockOperation, Mode, OFlags};

/// A held lock; released and removed when dropped (or released when this process dies,
/// its file then left for the next taker).
pub(crate) struct LockFile {
    file: File,
    dir: rustix::fd::OwnedFd,
    name: String,
}

impl Drop for LockFile {
    fn drop(&mut self) {
        // Still ours at that path (nobody may take it while we hold it): removed before
        // the lock goes with the descriptor.
        if is_at(&self.file, &self.dir, &self.name) {
            let _ =
                rustix::fs::unlinkat(&self.dir, self.name.as_str(), rustix::fs::AtFlags::empty());
        }
    }
}

/// Whether `dir/name` is `file` (not removed, nor made again since it was opened).
fn is_at(file: &File, dir: &rustix::fd::OwnedFd, name: &str) -> bool {
    let (Ok(held), Ok(there)) = (
        rustix::fs::fstat(file),
        rustix::fs::statat(dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW),
    ) else {
        return false;
    };
    (held.st_dev, held.st_ino) == (there.st_dev, there.st_ino)
}

/// Who holds a lock another process took: its pid, if it wrote one.
#[derive(Debug)]
pub(crate) struct Held(pub Option<u32>);

impl std::fmt::Display for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.0 {
            Some(pid) => write!(f, "pid {pid}"),
            None => f.write_str("pid unknown"),
        }
    }
}

impl LockFile {
    /// Takes `dir/name` (the directory made if missing), or says who holds it. Neither the
    /// directory nor the file is followed through a link.
    pub(crate) fn take(dir: &Path, name: &str) -> Result<std::result::Result<LockFile, Held>> {
        match std::fs::create_dir(dir) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
            Err(e) => return Err(e).with_context(|| format!("creating {}", dir.display())),
        }
        let dir_fd = rustix::fs::open(
            dir,
            OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .with_context(|| format!("opening {}", dir.display()))?;
        loop {
            let fd = rustix::fs::openat(
                &dir_fd,
                name,
                OFlags::RDWR | OFlags::CREATE | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::from_raw_mode(0o644),
            )
            .with_context(|| format!("creating {name} in {}", dir.display()))?;
            let mut file = File::from(fd);
            if rustix::fs::flock(file.as_fd(), FlockOperation::NonBlockingLockExclusive).is_err() {
                let mut holder = String::new();
                let _ = file.take(32).read_to_string(&mut holder);
                return Ok(Err(Held(holder.trim().parse().ok())));
            }
            // Its holder removed it as we opened it: the lock is on a file nobody sees.
            if !is_at(&file, &dir_fd, name) {
                continue;
            }
            file.set_len(0)?;
            file.rewind()?;
            write!(file, "{}", std::process::id())?;
            return Ok(Ok(LockFile {
                file,
                dir: dir_fd,
                name: name.to_string(),
            }));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_released_lock_is_removed_and_taken_again() {
        let dir = tempfile::tempdir().unwrap();
        let lock = LockFile::take(dir.path(), "a.lock").unwrap().ok().unwrap();
        let path = dir.path().join("a.lock");
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            std::process::id().to_string()
        );
        let held = LockFile::take(dir.path(), "a.lock").unwrap().err().unwrap();
        assert_eq!(held.0, Some(std::process::id()));
        // A taker that opened the file before its removal sees it is no longer there.
        let stale = File::open(&path).unwrap();
        drop(lock);
        assert!(!path.exists(), "removed at release");
        let dir_fd = rustix::fs::open(dir.path(), OFlags::DIRECTORY, Mode::empty()).unwrap();
        assert!(!is_at(&stale, &dir_fd, "a.lock"));
        let again = LockFile::take(dir.path(), "a.lock").unwrap();
        assert!(again.is_ok());
    }
}
