//! Whether another user could have replaced the rocsync that root is running: a wheel
//! installed into a user's environment and run with `sudo $(command -v rocsync)` runs, as
//! root, a file that user can write (or one in a folder they can write).

use std::{os::unix::fs::MetadataExt as _, path::Path};

use super::check::{Check, Status};

const WHAT: &str = "rocsync's own file";
const NEEDED: &str = "running as root safely";
const FIX: &str = "run a copy only root can change: the static binary in /usr/local/bin, the \
                   .deb's /usr/bin/rocsync, or the wheel installed into an environment root \
                   owns (not your job's)";

/// One row, as root only (another user's rocsync run as that user gains nothing).
pub(super) fn checks() -> Vec<Check> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Vec::new();
    }
    let row = match std::env::current_exe() {
        Ok(exe) => match others_can_replace(&exe) {
            None => Check::ok(
                WHAT,
                format!("{}: only root can change it", exe.display()),
                NEEDED,
            ),
            Some(why) => Check::ok(WHAT, why, NEEDED).not(Status::Warning, FIX),
        },
        Err(e) => Check::ok(WHAT, format!("unknown: {e}"), NEEDED).unknown(),
    };
    vec![row]
}

/// Why someone other than root could replace `path` (its file, or a folder on the way to
/// it); `None` if no one could. A folder writable by all with the sticky bit (`/tmp`) lets
/// no one replace root's entries; one writable by a group other than root's does.
pub(super) fn others_can_replace(path: &Path) -> Option<String> {
    let mut at = Some(path);
    while let Some(p) = at {
        let m = match std::fs::symlink_metadata(p) {
            Ok(m) => m,
            Err(e) => return Some(format!("{}: {e}", p.display())),
        };
        let mode = m.mode();
        let sticky = m.is_dir() && mode & 0o1000 != 0;
        if m.uid() != 0 {
            return Some(format!("{} belongs to uid {}", p.display(), m.uid()));
        }
        if (mode & 0o002 != 0 && !sticky) || (mode & 0o020 != 0 && m.gid() != 0 && !sticky) {
            return Some(format!(
                "{} can be written by others (mode {:o})",
                p.display(),
                mode & 0o7777
            ));
        }
        if !sticky && let Some(who) = crate::os::acl::writer(p, false) {
            return Some(format!(
                "{} can be written by {who} (its access list)",
                p.display()
            ));
        }
        at = p.parent().filter(|q| !q.as_os_str().is_empty());
    }
    None
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use super::*;

    #[test]
    fn a_file_in_a_folder_others_write_is_replaceable_and_root_s_own_is_not() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 && rocsync_tests::skip("doctor::exe", "needs root") {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("rocsync");
        std::fs::write(&exe, b"").unwrap();
        let open = |p: &Path, mode| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap()
        };
        open(dir.path(), 0o755);
        assert_eq!(others_can_replace(&exe), None);
        open(dir.path(), 0o777);
        let why = others_can_replace(&exe).expect("a folder all may write");
        assert!(why.contains("can be written by others (mode 777)"), "{why}");
        // Sticky (as /tmp): no one but root replaces root's file.
        open(dir.path(), 0o1777);
        assert_eq!(others_can_replace(&exe), None);
        open(dir.path(), 0o755);
        std::os::unix::fs::chown(&exe, Some(65534), None).unwrap();
        let why = others_can_replace(&exe).expect("a file of another user");
        assert!(why.ends_with("belongs to uid 65534"), "{why}");
    }

    /// `setfacl -m u:65534:rwx DIR` on a folder `root:root 0755`: its mode says 0775
    /// (the mask), its group root's, and the user may replace the file all the same.
    #[test]
    fn a_folder_whose_access_list_lets_a_user_write_is_replaceable() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 && rocsync_tests::skip("doctor::exe", "needs root") {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let exe = dir.path().join("rocsync");
        std::fs::write(&exe, b"").unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        assert_eq!(others_can_replace(&exe), None);
        if let Err(e) = crate::os::acl::let_user_write(dir.path(), 65534) {
            rocsync_tests::skip("doctor::exe", &format!("no access lists here: {e}"));
            return;
        }
        let why = others_can_replace(&exe).expect("a folder a user may write");
        assert!(
            why.ends_with("can be written by uid 65534 (its access list)"),
            "{why}"
        );
    }
}
