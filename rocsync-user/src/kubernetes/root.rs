//! Reading a small file as a process sees it, in its own root (`/proc/PID/root`), as root.
//!
//! Everything under that root belongs to the process: any name in the path may be a
//! symlink, and an absolute one resolves against the *reader's* root when the path is
//! opened through `/proc/PID/root/…` (`var/run -> /run` in every image would then read the
//! node's `/run`; `namespace -> /etc/shadow` the node's shadow file). So the path is
//! resolved by the kernel inside that root (`openat2` with `RESOLVE_IN_ROOT`: `/` and
//! `..` stop at it, as they would for the process) and never through a magic link;
//! opened `O_PATH` first, so that naming a FIFO or a device has no effect (a FIFO's open
//! would wait for a writer; a device's open may act); read only when it is a regular
//! file, and at most a few KiB.

use std::{
    io::Read as _,
    os::fd::{AsFd, AsRawFd as _, BorrowedFd, OwnedFd},
};

use rustix::fs::{FileType, Mode, OFlags, ResolveFlags, fstat, open, openat2};

/// The longest file read: a namespace or a host name is under 256 bytes.
pub const MAX_READ: usize = 4096;

/// `/proc/PID/root`, to resolve paths in; `None` once the process is gone.
pub fn of_process(pid: u32) -> Option<OwnedFd> {
    let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC;
    open(format!("/proc/{pid}/root"), flags, Mode::empty()).ok()
}

/// The content of `path` (relative to `root`, or absolute inside it) if it is a regular
/// file of at most [`MAX_READ`] bytes; `None` for anything else.
pub fn read_small(root: BorrowedFd<'_>, path: &str) -> Option<Vec<u8>> {
    let how = ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS;
    let found = openat2(
        root,
        path,
        OFlags::PATH | OFlags::CLOEXEC,
        Mode::empty(),
        how,
    )
    .ok()?;
    if FileType::from_raw_mode(fstat(&found).ok()?.st_mode) != FileType::RegularFile {
        return None;
    }
    // Reopened through the descriptor: the very inode checked, whatever the name is now.
    let reopened = open(
        format!("/proc/self/fd/{}", found.as_fd().as_raw_fd()),
        OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    let mut bytes = Vec::new();
    std::fs::File::from(reopened)
        .take(MAX_READ as u64 + 1)
        .read_to_end(&mut bytes)
        .ok()?;
    (bytes.len() <= MAX_READ).then_some(bytes)
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    /// A directory standing for a container's root, and a file outside it.
    fn container() -> (tempfile::TempDir, OwnedFd, std::path::PathBuf) {
        let outside = tempfile::tempdir().unwrap().keep();
        std::fs::write(outside.join("shadow"), "kube-system").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let sa = dir.path().join("run/secrets/kubernetes.io/serviceaccount");
        std::fs::create_dir_all(&sa).unwrap();
        std::fs::write(sa.join("namespace"), "ml-team").unwrap();
        std::fs::create_dir_all(dir.path().join("var")).unwrap();
        symlink("/run", dir.path().join("var/run")).unwrap();
        let root = open(dir.path(), OFlags::PATH | OFlags::DIRECTORY, Mode::empty()).unwrap();
        (dir, root, outside)
    }

    const NAMESPACE: &str = "var/run/secrets/kubernetes.io/serviceaccount/namespace";

    #[test]
    fn an_absolute_symlink_resolves_inside_the_root() {
        let (_dir, root, outside) = container();
        assert_eq!(read_small(root.as_fd(), NAMESPACE).unwrap(), b"ml-team");
        assert_eq!(
            read_small(root.as_fd(), &format!("/{NAMESPACE}")).unwrap(),
            b"ml-team"
        );
        std::fs::remove_dir_all(outside).unwrap();
    }

    #[test]
    fn nothing_outside_the_root_is_read() {
        let (dir, root, outside) = container();
        let sa = dir.path().join("run/secrets/kubernetes.io/serviceaccount");
        let shadow = outside.join("shadow");
        std::fs::remove_file(sa.join("namespace")).unwrap();
        // Absolute, and relative climbing past the root: both stay inside it.
        symlink(&shadow, sa.join("namespace")).unwrap();
        assert_eq!(read_small(root.as_fd(), NAMESPACE), None);
        let up = format!("../../../../../../../../..{}", shadow.display());
        std::fs::remove_file(sa.join("namespace")).unwrap();
        symlink(&up, sa.join("namespace")).unwrap();
        assert_eq!(read_small(root.as_fd(), NAMESPACE), None);
        std::fs::remove_dir_all(outside).unwrap();
    }

    #[test]
    fn a_fifo_a_directory_and_a_big_file_are_not_read() {
        let (dir, root, outside) = container();
        let sa = dir.path().join("run/secrets/kubernetes.io/serviceaccount");
        std::fs::remove_file(sa.join("namespace")).unwrap();
        rustix::fs::mknodat(
            rustix::fs::CWD,
            sa.join("namespace"),
            FileType::Fifo,
            Mode::from_raw_mode(0o644),
            0,
        )
        .unwrap();
        // Returns at once: no writer is waited for.
        assert_eq!(read_small(root.as_fd(), NAMESPACE), None);
        assert_eq!(read_small(root.as_fd(), "run/secrets"), None);
        std::fs::write(dir.path().join("big"), vec![b'a'; MAX_READ + 1]).unwrap();
        assert_eq!(read_small(root.as_fd(), "big"), None);
        std::fs::write(dir.path().join("fits"), vec![b'a'; MAX_READ]).unwrap();
        assert_eq!(read_small(root.as_fd(), "fits").unwrap().len(), MAX_READ);
        assert_eq!(read_small(root.as_fd(), "missing"), None);
        std::fs::remove_dir_all(outside).unwrap();
    }

    #[test]
    fn a_magic_link_is_not_followed() {
        let root = of_process(std::process::id()).unwrap();
        let own = std::fs::read("/proc/self/comm").unwrap();
        assert_eq!(read_small(root.as_fd(), "/proc/self/comm").unwrap(), own);
        // `/proc/PID/root` is a magic link: it would leave any root.
        assert_eq!(
            read_small(root.as_fd(), "/proc/self/root/proc/self/comm"),
            None
        );
        assert!(of_process(u32::MAX).is_none());
    }
}
