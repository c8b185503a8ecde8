//! Lock files held with `flock` (so a process that dies releases its lock), each saying
//! which process holds it: one rocsync per target process, one daemon per node.

use std::{
    fs::File,
    io::{Read as _, Seek as _, Write as _},
    os::fd::AsFd as _,
    path::Path,
};

use anyhow::{Context as _, Result};
use rustix::fs::{FlockOperation, Mode, OFlags};

/// A held lock; released when dropped (or when this process dies).
pub struct LockFile(#[allow(dead_code)] File);

/// Who holds a lock another process took: its pid, if it wrote one.
#[derive(Debug)]
pub struct Held(pub Option<u32>);

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
    pub fn take(dir: &Path, name: &str) -> Result<std::result::Result<LockFile, Held>> {
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
        file.set_len(0)?;
        file.rewind()?;
        write!(file, "{}", std::process::id())?;
        Ok(Ok(LockFile(file)))
    }
}
