//! Opening a library a target has mapped, safely as root: through the kernel's own link to
//! the mapped file (`/proc/PID/map_files/START-END`), never through a path the target
//! controls, without blocking, and only if it is a regular file of sane size whose device
//! and inode are the mapping's. Symbols are read and probes attached through the open
//! descriptor (`/proc/self/fd/N`), so both come from the same file even if the target
//! swaps the path meanwhile.

use std::{
    fs::File,
    os::unix::fs::MetadataExt as _,
    os::{fd::AsRawFd as _, unix::fs::OpenOptionsExt as _},
    path::{Path, PathBuf},
};

use anyhow::{Context as _, Result, bail};

use crate::calls::probes::maps::Mapping;

/// Larger files are refused (a GPU runtime is tens of MiB; a hostile target could map
/// something huge to make rocsync read it).
const MAX_LIBRARY: u64 = 1 << 30;

pub struct OpenedLibrary {
    file: File,
    /// Where the target sees it, for messages and the trace.
    pub shown: PathBuf,
    pub dev: u64,
    pub ino: u64,
    /// Size and modification time (ns): with device and inode, what a file is remembered
    /// by (a file rewritten in place is another file).
    pub size: u64,
    pub mtime_ns: i128,
}

impl OpenedLibrary {
    /// The file behind one of `pid`'s mappings.
    /// A mapping that is no longer there as it was read ([`Moved`]) is told apart: the
    /// loader may be mapping that library right now.
    pub fn of_mapping(pid: u32, m: &Mapping) -> Result<Self> {
        let link = crate::os::procfs::path(pid, &format!("map_files/{:x}-{:x}", m.start, m.end));
        let moved = || anyhow::Error::new(Moved(m.path.clone(), pid));
        let lib = match Self::open(&link, &m.path) {
            Err(e) if is_not_found(&e) => return Err(moved()),
            opened => opened?,
        };
        if lib.ino != m.inode || m.dev.is_some_and(|d| d != (major(lib.dev), minor(lib.dev))) {
            return Err(moved());
        }
        Ok(lib)
    }

    /// Whether `e` says the mapping moved between reading the maps and opening it.
    pub fn moved(e: &anyhow::Error) -> bool {
        e.downcast_ref::<Moved>().is_some()
    }

    /// A file named by the user (`--hip-lib`), with the same checks.
    pub fn at(path: &Path) -> Result<Self> {
        Self::open(path, path)
    }

    fn open(path: &Path, shown: &Path) -> Result<Self> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY)
            .open(path)
            .with_context(|| format!("cannot open {}", shown.display()))?;
        let meta = file.metadata()?;
        if !meta.is_file() {
            bail!("{} is not a regular file; not probed", shown.display());
        }
        if meta.len() > MAX_LIBRARY {
            bail!(
                "{} is {} bytes, more than a runtime library can be; not probed",
                shown.display(),
                meta.len()
            );
        }
        Ok(Self {
            file,
            shown: shown.to_path_buf(),
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.len(),
            mtime_ns: i128::from(meta.mtime()) * 1_000_000_000 + i128::from(meta.mtime_nsec()),
        })
    }

    /// A path to this open file, for reading symbols and attaching probes.
    /// The same file, on a descriptor of its own (kept to attach to it again).
    pub fn try_clone(&self) -> Option<Self> {
        Some(Self {
            file: self.file.try_clone().ok()?,
            shown: self.shown.clone(),
            ..*self
        })
    }

    pub fn path(&self) -> PathBuf {
        PathBuf::from(format!("/proc/self/fd/{}", self.file.as_raw_fd()))
    }

    /// The file's device as /proc/PID/maps writes it: (major, minor).
    pub fn dev_pair(&self) -> (u32, u32) {
        (major(self.dev), minor(self.dev))
    }
}

/// A mapping read from `/proc/PID/maps` that is gone or another file when opened: the
/// range was unmapped or mapped over since. `dlopen` does this to every library it loads
/// (the whole file reserved first, its segments mapped over it), so a process looked at
/// while it loads one is looked at again when its loader says the load is done.
#[derive(Debug)]
pub(crate) struct Moved(PathBuf, u32);

impl std::fmt::Display for Moved {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        let Self(path, pid) = self;
        let path = path.display();
        write!(
            f,
            "{path} (pid {pid}) changed since it was mapped; not probed"
        )
    }
}

impl std::error::Error for Moved {}

fn is_not_found(e: &anyhow::Error) -> bool {
    e.downcast_ref::<std::io::Error>()
        .is_some_and(|e| e.kind() == std::io::ErrorKind::NotFound)
}

fn major(dev: u64) -> u32 {
    ((dev >> 8) & 0xfff) as u32 | ((dev >> 32) & !0xfff) as u32
}

fn minor(dev: u64) -> u32 {
    (dev & 0xff) as u32 | ((dev >> 12) & !0xff) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::calls::probes::maps;

    #[test]
    fn opens_its_own_mapped_libraries_and_checks_them() {
        let pid = std::process::id();
        let text = crate::os::procfs::maps(pid).unwrap();
        let m = maps::parse(&text)
            .into_iter()
            .find(|m| m.path.to_string_lossy().contains("libc.so"))
            .expect("libc mapped");
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            rocsync_tests::skip("opens_its_own_mapped_libraries", "map_files needs root");
            return;
        }
        let lib = OpenedLibrary::of_mapping(pid, &m).unwrap();
        assert_eq!(lib.ino, m.inode);
        assert!(std::fs::metadata(lib.path()).unwrap().is_file());
        let other = maps::Mapping {
            inode: m.inode + 1,
            ..m
        };
        let err = OpenedLibrary::of_mapping(pid, &other)
            .err()
            .expect("refused");
        assert!(OpenedLibrary::moved(&err), "{err:#}");
    }

    /// A range read from the maps that no longer is one mapping (`dlopen` maps a library
    /// over its own reservation) is told from a file that cannot be opened.
    #[test]
    fn a_range_mapped_over_since_it_was_read_is_a_moved_mapping() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            rocsync_tests::skip("a_range_mapped_over", "map_files needs root");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("libamdhip64.so");
        std::fs::write(&path, vec![0u8; 3 * 4096]).unwrap();
        let file = File::open(&path).unwrap();
        let map = |at: *mut libc::c_void, len: usize, offset: i64, flags: i32| {
            // SAFETY: a fresh private read-only mapping of a file this test owns; MAP_FIXED
            // only over the test's own mapping.
            let p = unsafe {
                libc::mmap(
                    at,
                    len,
                    libc::PROT_READ,
                    libc::MAP_PRIVATE | flags,
                    file.as_raw_fd(),
                    offset,
                )
            };
            assert_ne!(p, libc::MAP_FAILED);
            p
        };
        let whole = map(std::ptr::null_mut(), 3 * 4096, 0, 0);
        let pid = std::process::id();
        let read = maps::parse(&crate::os::procfs::maps(pid).unwrap())
            .into_iter()
            .find(|m| m.path == path)
            .expect("mapped");
        assert!(OpenedLibrary::of_mapping(pid, &read).is_ok());
        // Its middle page mapped over, as the loader maps a segment (from another offset,
        // which the kernel cannot merge back): the range read is three mappings now.
        // SAFETY: inside the test's own mapping.
        let middle = unsafe { whole.cast::<u8>().add(4096) }.cast();
        map(middle, 4096, 0, libc::MAP_FIXED);
        let err = OpenedLibrary::of_mapping(pid, &read).err().expect("moved");
        assert!(OpenedLibrary::moved(&err), "{err:#}");
        let missing = OpenedLibrary::at(&dir.path().join("absent")).err().unwrap();
        assert!(!OpenedLibrary::moved(&missing), "{missing:#}");
        // SAFETY: the test's own mapping, unused from here.
        unsafe { libc::munmap(whole, 3 * 4096) };
    }

    #[test]
    fn fifos_devices_and_directories_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("libamdhip64.so");
        rustix::fs::mknodat(
            rustix::fs::CWD,
            &fifo,
            rustix::fs::FileType::Fifo,
            rustix::fs::Mode::from_raw_mode(0o600),
            0,
        )
        .unwrap();
        for p in [fifo.as_path(), Path::new("/dev/zero"), dir.path()] {
            let err = format!("{:#}", OpenedLibrary::at(p).err().expect("refused"));
            assert!(
                err.contains("not a regular file") || err.contains("cannot open"),
                "{err}"
            );
        }
    }
}
