//! The folder of an output, opened as root must open a path a user typed: each component
//! in turn, never through a symbolic link that root does not own (anyone may plant a link
//! in a folder they can write; only root can plant one that root owns, as `/var/run`),
//! and folders made on the way are made as the sudo user, so theirs. Not as root, the
//! kernel resolves the path as it would for any program of that user.

use std::{
    collections::VecDeque,
    ffi::{OsStr, OsString},
    os::fd::OwnedFd,
    os::unix::ffi::OsStrExt as _,
    path::{Component, Path},
};

use anyhow::{Context as _, Result, bail};
use rustix::{
    fs::{AtFlags, CWD, FileType, Mode, OFlags},
    io::Errno,
};

use crate::os::users::sudo::as_sudo_user;

/// Links followed in one path at most (the kernel's own limit).
const MAX_LINKS: usize = 40;

/// Opens the folder `path` (which must exist).
pub(crate) fn open(path: &Path) -> Result<OwnedFd> {
    walk(path, false)
}

/// Opens the folder `path`, making what is missing of it (mode 0777 less the umask).
pub(crate) fn make(path: &Path) -> Result<OwnedFd> {
    walk(path, true)
}

fn walk(path: &Path, create: bool) -> Result<OwnedFd> {
    if !rustix::process::geteuid().is_root() {
        if create {
            std::fs::create_dir_all(path)
                .with_context(|| format!("cannot create folder {}", path.display()))?;
        }
        return rustix::fs::open(
            path,
            OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .with_context(|| format!("cannot open the folder {}", path.display()));
    }
    let mut todo = components(path);
    let mut at = start(path)?;
    let mut links = 0;
    while let Some(name) = todo.pop_front() {
        let st = match rustix::fs::statat(&at, &name, AtFlags::SYMLINK_NOFOLLOW) {
            Err(Errno::NOENT) if create && name != ".." => {
                as_sudo_user(|| {
                    rustix::fs::mkdirat(&at, &name, Mode::from_raw_mode(0o777))
                        .or_else(|e| if e == Errno::EXIST { Ok(()) } else { Err(e) })
                        .with_context(|| format!("cannot create folder {}", path.display()))
                })?;
                at = open_dir(&at, &name).with_context(|| shown(path))?;
                continue;
            }
            r => r.with_context(|| shown(path))?,
        };
        match FileType::from_raw_mode(st.st_mode) {
            FileType::Symlink => {
                let link = rustix::fs::openat(
                    &at,
                    &name,
                    OFlags::PATH | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                    Mode::empty(),
                )
                .with_context(|| shown(path))?;
                // Owner and target read from the link opened, not from its name again.
                let owner = rustix::fs::fstat(&link)?.st_uid;
                if owner != 0 {
                    bail!(
                        "{}: {} is a symbolic link owned by uid {owner}; as root, rocsync follows only links root owns (name the folder itself)",
                        path.display(),
                        name.to_string_lossy()
                    );
                }
                links += 1;
                if links > MAX_LINKS {
                    bail!("{}: too many symbolic links", path.display());
                }
                let target = rustix::fs::readlinkat(&link, "", Vec::new())?;
                let target = Path::new(OsStr::from_bytes(target.as_bytes()));
                for c in components(target).into_iter().rev() {
                    todo.push_front(c);
                }
                if target.is_absolute() {
                    at = open_dir(CWD, Path::new("/"))?;
                }
            }
            FileType::Directory => at = open_dir(&at, &name).with_context(|| shown(path))?,
            _ => bail!(
                "{}: {} is not a folder",
                path.display(),
                name.to_string_lossy()
            ),
        }
    }
    Ok(at)
}

/// `/` for an absolute path, else the working folder.
fn start(path: &Path) -> Result<OwnedFd> {
    let from = if path.is_absolute() { "/" } else { "." };
    open_dir(CWD, Path::new(from)).with_context(|| format!("cannot open {from}"))
}

/// The names to walk: `.` and the root are no step.
fn components(path: &Path) -> VecDeque<OsString> {
    path.components()
        .filter_map(|c| match c {
            Component::Normal(n) => Some(n.to_os_string()),
            Component::ParentDir => Some("..".into()),
            Component::CurDir | Component::RootDir | Component::Prefix(_) => None,
        })
        .collect()
}

/// One folder, never through a link (a component swapped for one since it was looked at
/// is refused by the kernel).
fn open_dir(
    at: impl rustix::fd::AsFd,
    name: impl rustix::path::Arg,
) -> rustix::io::Result<OwnedFd> {
    rustix::fs::openat(
        at,
        name,
        OFlags::DIRECTORY | OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

fn shown(path: &Path) -> String {
    format!("cannot open the folder {}", path.display())
}
