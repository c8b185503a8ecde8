//! Acting as the user who ran `sudo`, on one thread and for one step: root creates an
//! output (a file, a folder) only where that user could, and it is theirs. The file
//! system ids and supplementary groups are per-thread credentials in the kernel (raw
//! syscalls: glibc's wrappers of `setgroups` would change every thread), so the rest of
//! the process keeps root's while one thread creates.

use std::sync::OnceLock;

use anyhow::{Result, bail};

use super::Identity;

/// The user behind `sudo` (`SUDO_UID`, `SUDO_GID`, the groups of `SUDO_USER`), when the
/// process runs as root under it; read once.
pub(crate) fn sudo_user() -> Option<&'static Identity> {
    static USER: OnceLock<Option<Identity>> = OnceLock::new();
    USER.get_or_init(|| {
        if !rustix::process::geteuid().is_root() {
            return None;
        }
        let id = |k: &str| std::env::var(k).ok()?.parse::<u32>().ok();
        let (uid, gid) = (id("SUDO_UID")?, id("SUDO_GID")?);
        // The groups that let the user write into a shared folder; only theirs: a name
        // that resolves to another uid is not trusted for them.
        let groups = std::env::var("SUDO_USER")
            .ok()
            .and_then(|n| Identity::of_user(&n).ok())
            .filter(|i| i.uid == uid)
            .map_or_else(|| vec![gid], |i| i.groups);
        Some(Identity { uid, gid, groups })
    })
    .as_ref()
}

/// Runs `f` with the sudo user's file system identity on this thread (the kernel checks
/// that user's permissions, and what `f` creates is owned by them), then root's again.
/// Without a sudo user, runs `f` as it is.
pub(crate) fn as_sudo_user<T>(f: impl FnOnce() -> Result<T>) -> Result<T> {
    match sudo_user() {
        Some(user) => {
            let _back = Acting::begin(user)?;
            f()
        }
        None => f(),
    }
}

/// The thread's file system identity and groups as they were, put back on drop.
struct Acting {
    fsuid: u32,
    fsgid: u32,
    groups: Vec<libc::gid_t>,
}

impl Acting {
    fn begin(user: &Identity) -> Result<Self> {
        let groups = thread_groups()?;
        // SAFETY: setfsgid/setfsuid take plain ids; -1 changes nothing and answers the
        // current one.
        let (fsuid, fsgid) = unsafe {
            (
                libc::syscall(libc::SYS_setfsuid, u32::MAX) as u32,
                libc::syscall(libc::SYS_setfsgid, u32::MAX) as u32,
            )
        };
        let back = Self {
            fsuid,
            fsgid,
            groups,
        };
        set_thread_groups(&user.groups)?;
        // SAFETY: as above.
        unsafe {
            libc::syscall(libc::SYS_setfsgid, user.gid);
            libc::syscall(libc::SYS_setfsuid, user.uid);
        }
        // setfsuid says no error: read back what holds.
        // SAFETY: as above.
        let now = unsafe {
            (
                libc::syscall(libc::SYS_setfsuid, u32::MAX) as u32,
                libc::syscall(libc::SYS_setfsgid, u32::MAX) as u32,
            )
        };
        if now != (user.uid, user.gid) {
            bail!(
                "cannot act as the sudo user (uid {}, gid {}) to create an output: the process lacks CAP_SETUID/CAP_SETGID",
                user.uid,
                user.gid
            );
        }
        Ok(back)
    }
}

impl Drop for Acting {
    fn drop(&mut self) {
        // SAFETY: as in `begin`; root's ids first, so the groups can be set back.
        unsafe {
            libc::syscall(libc::SYS_setfsuid, self.fsuid);
            libc::syscall(libc::SYS_setfsgid, self.fsgid);
        }
        let _ = set_thread_groups(&self.groups);
    }
}

fn thread_groups() -> Result<Vec<libc::gid_t>> {
    // SAFETY: a size of 0 asks only the count.
    let n = unsafe { libc::syscall(libc::SYS_getgroups, 0, std::ptr::null_mut::<u32>()) };
    let mut groups = vec![0 as libc::gid_t; n.max(0) as usize];
    // SAFETY: the buffer holds `n` ids.
    let n = unsafe { libc::syscall(libc::SYS_getgroups, groups.len(), groups.as_mut_ptr()) };
    if n < 0 {
        bail!("getgroups: {}", std::io::Error::last_os_error());
    }
    groups.truncate(n as usize);
    Ok(groups)
}

fn set_thread_groups(groups: &[libc::gid_t]) -> Result<()> {
    // SAFETY: the slice holds `len` ids; the raw syscall changes this thread only.
    let r = unsafe { libc::syscall(libc::SYS_setgroups, groups.len(), groups.as_ptr()) };
    if r != 0 {
        bail!("setgroups: {}", std::io::Error::last_os_error());
    }
    Ok(())
}
