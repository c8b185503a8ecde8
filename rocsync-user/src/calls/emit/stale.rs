//! Temporary outputs a killed rocsync left behind (`.NAME.rocsync-PID-NONCE.tmp`): removed
//! by the next rocsync that writes into the same directory.
//!
//! Chosen over `O_TMPFILE` + `linkat`: that needs a file system that has it (NFS has not,
//! so the named temporary stays as a fallback anyway), and `linkat` cannot replace the
//! final name, so a second named step would come back before the rename.
//!
//! A temporary is removed only when its name is rocsync's pattern, it is a regular file
//! (opened with `O_NOFOLLOW`: a link is never followed, nor removed), its pid is dead or
//! not a rocsync, and nobody holds its lock: every rocsync holds an `flock` on its own
//! temporaries while it writes them, which the kernel drops when it dies — so a live
//! writer whose pid means something else here (another pid namespace) keeps its file.

use std::{ffi::OsStr, os::fd::AsFd, os::unix::ffi::OsStrExt as _};

use rustix::fs::{AtFlags, FileType, FlockOperation, Mode, OFlags};

/// Locks a temporary rocsync is writing (see the module's doc); a file system without
/// locks only loses this guard, not the output.
pub(crate) fn hold(file: &impl AsFd) {
    let _ = rustix::fs::flock(file, FlockOperation::NonBlockingLockExclusive);
}

/// Removes the stale temporaries in `dir`; errors leave a file where it is.
pub(crate) fn sweep(dir: &impl AsFd) {
    let Ok(mut entries) = rustix::fs::Dir::read_from(dir) else {
        return;
    };
    // A directory is read once, whatever it holds.
    while let Some(Ok(entry)) = entries.next() {
        let name = OsStr::from_bytes(entry.file_name().to_bytes());
        if let Some(pid) = temporary_pid(name.as_bytes())
            && !is_live_rocsync(pid)
        {
            remove_if_unlocked(dir, name);
        }
    }
}

/// The pid in a name of rocsync's temporary pattern: `.NAME.rocsync-PID-HEX.tmp`.
pub(crate) fn temporary_pid(name: &[u8]) -> Option<u32> {
    let name = std::str::from_utf8(name).ok()?;
    let rest = name.strip_prefix('.')?.strip_suffix(".tmp")?;
    let (rest, nonce) = rest.rsplit_once('-')?;
    let (rest, pid) = rest.rsplit_once('-')?;
    let final_name = rest.strip_suffix(".rocsync")?;
    let hex = !nonce.is_empty() && nonce.bytes().all(|b| b.is_ascii_hexdigit());
    let digits = !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit());
    (hex && digits && !final_name.is_empty())
        .then(|| pid.parse().ok())
        .flatten()
}

/// Whether `pid` is a running rocsync (by its command name, as the kernel keeps it).
fn is_live_rocsync(pid: u32) -> bool {
    std::fs::read(format!("/proc/{pid}/comm")).is_ok_and(|c| c.starts_with(b"rocsync"))
}

fn remove_if_unlocked(dir: &impl AsFd, name: &OsStr) {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let Ok(fd) = rustix::fs::openat(dir, name, flags, Mode::empty()) else {
        return;
    };
    let Ok(st) = rustix::fs::fstat(&fd) else {
        return;
    };
    if FileType::from_raw_mode(st.st_mode) != FileType::RegularFile
        || rustix::fs::flock(&fd, FlockOperation::NonBlockingLockExclusive).is_err()
    {
        return;
    }
    // Still the file checked (a name swapped meanwhile is left alone).
    let same = rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW)
        .is_ok_and(|s| s.st_dev == st.st_dev && s.st_ino == st.st_ino);
    if same {
        let _ = rustix::fs::unlinkat(dir, name, AtFlags::empty());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_rocsyncs_own_pattern_is_a_temporary() {
        assert_eq!(temporary_pid(b".t.json.rocsync-42-1f.tmp"), Some(42));
        assert_eq!(temporary_pid(b".a-b.json.rocsync-7-abc.tmp"), Some(7));
        for other in [
            &b"t.json.rocsync-42-1f.tmp"[..],
            b".t.json.rocsync-42-1f.tmpx",
            b".t.json.rocsync-x-1f.tmp",
            b".t.json.rocsync-42-zz.tmp",
            b".rocsync-42-1f.tmp",
            b".t.json.other-42-1f.tmp",
            b".t.json.rocsync-99999999999-1f.tmp",
        ] {
            assert_eq!(temporary_pid(other), None, "{}", other.escape_ascii());
        }
    }
}
