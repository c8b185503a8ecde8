//! Users and groups by name, as root resolves them (local files, or LDAP/sssd where
//! the host's NSS provides them). The portable binary is static: glibc's NSS there would
//! dlopen the host's modules into a libc of another version, so it asks the host's own
//! `getent` instead (`getent.rs`); the dynamic build asks its C library.

// Built (and unit-tested) in both builds; used by the static one.
#[cfg_attr(not(target_feature = "crt-static"), allow(dead_code))]
mod getent;
pub(crate) mod sudo;

use anyhow::{Result, bail};
#[cfg(not(target_feature = "crt-static"))]
use {anyhow::Context as _, std::ffi::CString};

/// The user a command runs as (`run -u USER`, as `strace -u`): ids and supplementary
/// groups, resolved before the fork.
pub(crate) struct Identity {
    pub uid: libc::uid_t,
    pub gid: libc::gid_t,
    pub groups: Vec<libc::gid_t>,
}

impl Identity {
    #[cfg(target_feature = "crt-static")]
    pub(crate) fn of_user(name: &str) -> Result<Self> {
        match getent::user(name)? {
            Some((uid, gid, groups)) => Ok(Self { uid, gid, groups }),
            None => bail!("no user named {name:?} (-u takes a user name)"),
        }
    }

    #[cfg(not(target_feature = "crt-static"))]
    pub(crate) fn of_user(name: &str) -> Result<Self> {
        let c = CString::new(name).context("NUL in the user name")?;
        let mut buf = vec![0 as libc::c_char; 1 << 16];
        // SAFETY: getpwnam_r and getgrouplist with valid buffers and out-pointers.
        unsafe {
            let mut pw: libc::passwd = std::mem::zeroed();
            let mut found: *mut libc::passwd = std::ptr::null_mut();
            let rc = libc::getpwnam_r(c.as_ptr(), &mut pw, buf.as_mut_ptr(), buf.len(), &mut found);
            if rc != 0 || found.is_null() {
                bail!("no user named {name:?} (-u takes a user name)");
            }
            let mut groups = vec![0 as libc::gid_t; 1024];
            let mut n = groups.len() as libc::c_int;
            if libc::getgrouplist(c.as_ptr(), pw.pw_gid, groups.as_mut_ptr(), &mut n) < 0 {
                bail!("user {name:?} is in more than {} groups", groups.len());
            }
            groups.truncate(n.max(0) as usize);
            Ok(Self {
                uid: pw.pw_uid,
                gid: pw.pw_gid,
                groups,
            })
        }
    }
}

/// A user by name or uid: the uid. A name no lookup knows is refused (a filter on it
/// would silently match no process).
pub(crate) fn user_id(u: &str) -> Result<u32> {
    if let Ok(id) = u.parse() {
        return Ok(id);
    }
    match Identity::of_user(u) {
        Ok(id) => Ok(id.uid),
        Err(_) => bail!("no user named {u:?}"),
    }
}

/// A group by name or id.
pub(crate) fn group_id(g: &str) -> Result<u32> {
    if let Ok(id) = g.parse() {
        return Ok(id);
    }
    group_by_name(g)
}

#[cfg(target_feature = "crt-static")]
fn group_by_name(g: &str) -> Result<u32> {
    match getent::group(g)? {
        Some(gid) => Ok(gid),
        None => bail!("no group named {g:?}"),
    }
}

#[cfg(not(target_feature = "crt-static"))]
fn group_by_name(g: &str) -> Result<u32> {
    let name = std::ffi::CString::new(g).context("group names hold no NUL")?;
    // SAFETY: getgrnam with a valid C string; the result is read at once.
    let gr = unsafe { libc::getgrnam(name.as_ptr()) };
    if gr.is_null() {
        bail!("no group named {g:?}");
    }
    // SAFETY: non-null result of getgrnam.
    Ok(unsafe { (*gr).gr_gid })
}
