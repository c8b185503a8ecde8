//! Output files, written safely as root into directories others may write.
//!
//! An output is created up front (so an unwritable path fails before any capture) as a
//! temporary file beside its final name — opened relative to the directory's descriptor
//! with `O_CREAT|O_EXCL|O_NOFOLLOW`, so nothing planted there is followed or reused — and
//! renamed into place within that directory only when complete, after `fsync`. A final
//! name that is a symbolic link or not a regular file is refused; `-` is standard output.
//! The folder is reached without following links root does not own ([`super::dirs`]).
//! Under `sudo`, outputs are created and renamed as the invoking user (`SUDO_UID`,
//! `SUDO_GID`, their groups): only where they may write, theirs, their mode from the
//! umask, as any file the user creates.
//! A temporary is `flock`ed while written; those a killed rocsync left are removed by the
//! next one that writes into the directory ([`super::stale`]).

use std::{
    ffi::OsString,
    fs::File,
    io::{BufWriter, Write},
    os::fd::{AsFd, OwnedFd},
    os::unix::ffi::OsStrExt as _,
    path::{Path, PathBuf},
};

use anyhow::{Context as _, Result, bail};
use rustix::fs::{AtFlags, FileType, Mode, OFlags, RenameFlags};

use crate::os::users::sudo::as_sudo_user;

pub struct PendingFile {
    path: PathBuf,
    target: Target,
    /// Refuse a final name that exists, whatever it is, and never rename over one (a
    /// name a peer chose must not replace anyone's file).
    never_replace: bool,
}

enum Target {
    /// `-o -`: written to standard output.
    Stdout,
    /// A temporary file in `dir`, renamed to the final name when complete.
    Atomic {
        dir: OwnedFd,
        tmp: OsString,
        file: File,
        /// Removed on drop unless persisted.
        persisted: bool,
    },
}

impl PendingFile {
    /// Reserves `path`: creates the temporary file beside it.
    pub fn create(path: &Path) -> Result<Self> {
        Self::reserve(path, false)
    }

    /// Reserves `path` as [`create`](Self::create) does, but as `O_EXCL` would: a final
    /// name that exists is refused, now and when the file is moved there; so are its
    /// siblings'.
    pub fn create_new(path: &Path) -> Result<Self> {
        Self::reserve(path, true)
    }

    fn reserve(path: &Path, never_replace: bool) -> Result<Self> {
        if path.as_os_str() == "-" {
            if crate::os::stdio::stdout_unwritable() {
                bail!(
                    "standard output is closed (or not open for writing): -o - would write nothing; name a file"
                );
            }
            return Ok(Self {
                path: path.to_path_buf(),
                target: Target::Stdout,
                never_replace: false,
            });
        }
        path.file_name()
            .with_context(|| format!("output path {} names no file", path.display()))?;
        let dir_path = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let dir = super::dirs::open(dir_path)
            .with_context(|| format!("cannot open the directory of output {}", path.display()))?;
        super::stale::sweep(&dir);
        Self::in_dir(dir, path.to_path_buf(), never_replace)
    }

    /// Creates the temporary file for `path` in `dir`, the directory `path` names.
    fn in_dir(dir: OwnedFd, path: PathBuf, never_replace: bool) -> Result<Self> {
        let name = path.file_name().context("output path names no file")?;
        match never_replace {
            true => check_absent(&dir, name.as_bytes(), &path)?,
            false => check_final(&dir, name.as_bytes(), &path)?,
        }
        check_replaceable(&dir, name.as_bytes(), &path)?;
        let tmp = OsString::from(format!(
            ".{}.rocsync-{}-{:x}.tmp",
            name.to_string_lossy(),
            std::process::id(),
            nonce()
        ));
        // Created as the sudo user: only where they may write, and theirs.
        let fd = as_sudo_user(|| {
            rustix::fs::openat(
                &dir,
                tmp.as_os_str(),
                OFlags::RDWR | OFlags::CREATE | OFlags::EXCL | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                Mode::from_raw_mode(0o600),
            )
            .with_context(|| {
                format!(
                    "cannot write output {}: directory not writable",
                    path.display()
                )
            })
        })?;
        super::stale::hold(&fd);
        let file = File::from(fd);
        Ok(Self {
            path,
            target: Target::Atomic {
                dir,
                tmp,
                file,
                persisted: false,
            },
            never_replace,
        })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reserves another output in the same directory (opened through this one's
    /// descriptor, so the directory is the one checked at `create`), named `name`.
    pub fn sibling(&self, name: &str) -> Result<Self> {
        let mut path = self.path.clone();
        path.set_file_name(name);
        match &self.target {
            Target::Stdout => Ok(Self {
                path,
                target: Target::Stdout,
                never_replace: false,
            }),
            Target::Atomic { dir, .. } => Self::in_dir(dir.try_clone()?, path, self.never_replace),
        }
    }

    /// Renames the final file within the same directory (names that depend on the
    /// target's pid are known only once it runs).
    pub fn set_file_name(&mut self, name: &str) {
        if matches!(self.target, Target::Atomic { .. }) {
            self.path.set_file_name(name);
        }
    }

    /// A writer for the content (gzip-compressed when the name ends in `.gz`); close it,
    /// then [`persist`](Self::persist).
    pub fn stream(&self) -> Result<FileStream> {
        let w: Box<dyn Write + Send> = match &self.target {
            Target::Stdout => Box::new(std::io::stdout()),
            Target::Atomic { file, .. } => Box::new(file.try_clone()?),
        };
        let w = BufWriter::with_capacity(1 << 20, w);
        Ok(if self.path.extension().is_some_and(|e| e == "gz") {
            FileStream::Gz(flate2::write::GzEncoder::new(
                w,
                flate2::Compression::fast(),
            ))
        } else {
            FileStream::Plain(w)
        })
    }

    /// After a write error: drops a last line left cut, so what is kept ends at a line's
    /// end. A compressed stream cannot be cut at a line: it stays as written.
    pub fn cut_to_last_line(&self) -> std::io::Result<()> {
        match &self.target {
            _ if self.path.extension().is_some_and(|e| e == "gz") => Err(std::io::Error::other(
                "a compressed stream cannot be cut at a line",
            )),
            Target::Atomic { file, .. } => cut_to_last_line(file),
            Target::Stdout => Ok(()),
        }
    }

    /// Moves the complete file into place: fsync, the mode from the umask, then a rename
    /// within the directory (which replaces whatever is at the final name, never follows
    /// it).
    pub fn persist(mut self) -> Result<PathBuf> {
        if let Target::Atomic {
            dir,
            tmp,
            file,
            persisted,
        } = &mut self.target
        {
            let name = self.path.file_name().expect("checked at create");
            check_final(dir, name.as_bytes(), &self.path)?;
            file.sync_all()
                .with_context(|| format!("writing {}", self.path.display()))?;
            rustix::fs::fchmod(&*file, Mode::from_raw_mode(0o666 & !umask()))?;
            let flags = if self.never_replace {
                check_absent(dir, name.as_bytes(), &self.path)?;
                RenameFlags::NOREPLACE
            } else {
                RenameFlags::empty()
            };
            // As the sudo user: a name in a sticky folder that is someone else's stays.
            as_sudo_user(|| {
                rustix::fs::renameat_with(&*dir, tmp.as_os_str(), &*dir, name, flags)
                    .with_context(|| format!("renaming into {}", self.path.display()))
            })?;
            let _ = rustix::fs::fsync(&*dir);
            *persisted = true;
        }
        Ok(self.path.clone())
    }
}

impl Drop for PendingFile {
    fn drop(&mut self) {
        if let Target::Atomic {
            dir,
            tmp,
            persisted: false,
            ..
        } = &self.target
        {
            let _ = rustix::fs::unlinkat(dir, tmp.as_os_str(), AtFlags::empty());
        }
    }
}

/// Truncates `file` after its last newline (to nothing if it has none), reading back from
/// the end a block at a time.
fn cut_to_last_line(file: &File) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt as _;
    let mut end = file.metadata()?.len();
    let mut block = vec![0u8; 64 << 10];
    while end > 0 {
        let start = end.saturating_sub(block.len() as u64);
        let chunk = &mut block[..(end - start) as usize];
        file.read_exact_at(chunk, start)?;
        if let Some(i) = chunk.iter().rposition(|&b| b == b'\n') {
            return file.set_len(start + i as u64 + 1);
        }
        end = start;
    }
    file.set_len(0)
}

/// The final name may be absent or a regular file; never a link, a FIFO, a device or a
/// directory.
fn check_final(dir: &impl AsFd, name: &[u8], path: &Path) -> Result<()> {
    let name = std::ffi::OsStr::from_bytes(name);
    match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Err(rustix::io::Errno::NOENT) => Ok(()),
        Err(e) => Err(e).with_context(|| format!("cannot check output {}", path.display())),
        Ok(st) => match FileType::from_raw_mode(st.st_mode) {
            FileType::RegularFile => Ok(()),
            FileType::Symlink => bail!(
                "output {} is a symbolic link; rocsync does not write through links (name the file itself)",
                path.display()
            ),
            FileType::Directory => {
                bail!("output path {} is a directory: name a file", path.display())
            }
            _ => bail!(
                "output {} is not a regular file (a FIFO or device); use -o - for standard output",
                path.display()
            ),
        },
    }
}

/// A file the user named that exists is refused unless `force` (as nsys refuses one
/// without `--force-overwrite`): checked before anything is traced, so no capture is
/// lost to it. What is no regular file is left to [`PendingFile::create`] to refuse.
pub(crate) fn refuse_existing(path: &Path, force: bool) -> Result<()> {
    let exists = path.as_os_str() != "-"
        && std::fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_file());
    if exists && !force {
        bail!(
            "output {} exists: add --force (-f) to replace it, or name another file",
            path.display()
        );
    }
    Ok(())
}

/// Nothing of any kind at the final name (checked before the rename says `EEXIST`, to
/// say what is there).
fn check_absent(dir: &impl AsFd, name: &[u8], path: &Path) -> Result<()> {
    check_final(dir, name, path)?;
    let name = std::ffi::OsStr::from_bytes(name);
    if rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW).is_ok() {
        bail!(
            "output {} exists: it is never replaced (name another file)",
            path.display()
        );
    }
    Ok(())
}

/// Under sudo, a file at the final name in a sticky folder (as /tmp) must be the user's
/// to replace (theirs, or the folder theirs), as the kernel decides at the rename: said
/// before any capture rather than after it.
fn check_replaceable(dir: &impl AsFd, name: &[u8], path: &Path) -> Result<()> {
    let Some(user) = crate::os::users::sudo::sudo_user() else {
        return Ok(());
    };
    let name = std::ffi::OsStr::from_bytes(name);
    let (Ok(d), Ok(f)) = (
        rustix::fs::fstat(dir),
        rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW),
    ) else {
        return Ok(());
    };
    let sticky = d.st_mode & 0o1000 != 0;
    if sticky && f.st_uid != user.uid && d.st_uid != user.uid {
        bail!(
            "output {} belongs to uid {} in a sticky folder: the sudo user (uid {}) may not replace it; name another file",
            path.display(),
            f.st_uid,
            user.uid
        );
    }
    Ok(())
}

/// The process's umask, read from /proc (setting and restoring it would race other
/// threads creating files).
fn umask() -> u32 {
    crate::os::procfs::status_field(None, "Umask")
        .and_then(|m| u32::from_str_radix(&m, 8).ok())
        .unwrap_or(0o022)
}

fn nonce() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos() as u64 ^ d.as_secs())
}

/// An output being written.
pub enum FileStream {
    Plain(BufWriter<Box<dyn Write + Send>>),
    Gz(flate2::write::GzEncoder<BufWriter<Box<dyn Write + Send>>>),
}

impl FileStream {
    /// Ends the compressed stream, if any, and flushes.
    pub fn close(self) -> std::io::Result<()> {
        match self {
            FileStream::Plain(mut w) => w.flush(),
            FileStream::Gz(z) => z.finish()?.flush(),
        }
    }
}

impl Write for FileStream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            FileStream::Plain(w) => w.write(buf),
            FileStream::Gz(z) => z.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            FileStream::Plain(w) => w.flush(),
            FileStream::Gz(z) => z.flush(),
        }
    }
}

#[cfg(test)]
#[path = "files_tests.rs"]
mod tests;
