//! The state directory: private to root (0700), with `traces/` (traces asked for on the
//! socket, sampled windows, flight recorder dumps) and `dyno/` (dynolog's traces, apart,
//! so that no dyno request can name another request's trace). Made by the same rules at
//! start and at a reload that moves it; retention covers both.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, Result, bail};

use crate::daemon::outputs::{
    destination::{Destination, Trace},
    retention::{self, Retention},
};
use crate::daemon::quiet::Quiet;

/// Where traces asked for on the socket, sampled windows and dumps go.
pub(crate) fn traces(state_dir: &Path) -> PathBuf {
    state_dir.join("traces")
}

/// Where dyno's traces go.
pub(crate) fn dyno(state_dir: &Path) -> PathBuf {
    state_dir.join("dyno")
}

/// Makes the state directory and its two (0700 each, where missing); refuses a link or
/// a non-directory at any of them.
pub(crate) fn make(state_dir: &Path) -> Result<()> {
    check_ancestors(state_dir)?;
    for dir in [state_dir.to_path_buf(), traces(state_dir), dyno(state_dir)] {
        make_private_dir(&dir)?;
    }
    Ok(())
}

/// What [`make`] would refuse, making nothing (`daemon --check`): the folders above,
/// and the state directory and its two where they exist.
pub(crate) fn check(state_dir: &Path) -> Result<()> {
    check_ancestors(state_dir)?;
    for dir in [state_dir.to_path_buf(), traces(state_dir), dyno(state_dir)] {
        existing_private_dir(&dir)?;
    }
    Ok(())
}

/// Removes the temporaries a killed daemon left in the trace folders (a trace cut by
/// the OOM killer could hold gigabytes no later trace would sweep soon).
pub(crate) fn sweep(state_dir: &Path) {
    for dir in trace_dirs(state_dir) {
        if let Ok(fd) = crate::calls::emit::dirs::open(&dir) {
            crate::calls::emit::stale::sweep(&fd);
        }
    }
}

/// Where the daemon writes traces.
pub(crate) fn trace_dirs(state_dir: &Path) -> [PathBuf; 2] {
    [traces(state_dir), dyno(state_dir)]
}

/// The state directory as a destination: whose each trace is recorded beside it, and
/// retention applied to everything the daemon wrote there, as one budget.
pub(crate) struct StateDir {
    retention: Retention,
    dir: PathBuf,
    /// Retention's removals said, bounded per user's share.
    log: Quiet,
}

impl StateDir {
    pub(crate) fn of(dir: &Path, retention: Retention) -> Self {
        Self {
            retention,
            dir: dir.to_path_buf(),
            log: Quiet::new("retention removals"),
        }
    }

    /// Reloaded settings: its log (what it holds back) kept.
    pub(crate) fn renew(&mut self, dir: &Path, retention: Retention) {
        (self.dir, self.retention) = (dir.to_path_buf(), retention);
    }
}

impl Destination for StateDir {
    /// Every file of `trace` stays (its client is about to be told of them); a trace that
    /// failed makes room too: a full disk fails every later trace unless room is made.
    fn take(&mut self, trace: &Trace<'_>) -> u64 {
        if trace.files.is_empty() && !trace.failed {
            return 0;
        }
        // Whose each file is, for retention's per-user shares.
        retention::record_owners(trace.files, trace.pids, trace.owners);
        let keep: Vec<&Path> = trace.files.iter().map(Path::new).collect();
        self.retention
            .apply(&trace_dirs(&self.dir), &keep, &mut self.log)
    }

    fn flush(&mut self) {
        self.log.flush(tokio::time::Instant::now());
    }

    fn say_held(&mut self) {
        self.log.say_held();
    }
}

/// The folders above the state directory: each root's or the daemon's, and none that
/// others may write unless sticky (as /tmp): whoever can rename the state directory
/// away could put a link of theirs where the daemon writes and names its traces.
fn check_ancestors(state_dir: &Path) -> Result<()> {
    use std::os::unix::fs::MetadataExt as _;
    let me = rustix::process::geteuid().as_raw();
    for a in state_dir.ancestors().skip(1) {
        if a.as_os_str().is_empty() {
            continue;
        }
        let Ok(link) = std::fs::symlink_metadata(a) else {
            continue; // made below, by the daemon
        };
        let m = match link.file_type().is_symlink() {
            true if link.uid() != 0 => bail!(
                "{} above the state directory is a link of uid {}: name a state directory reached through root's folders only",
                a.display(),
                link.uid()
            ),
            true => std::fs::metadata(a)?,
            false => link,
        };
        // Writable by others, or by a group besides root's, and not sticky.
        // An access list may let a user write where the mode says root's group.
        let writers = m.mode() & 0o002 != 0
            || (m.mode() & 0o020 != 0 && m.gid() != 0)
            || crate::os::acl::writer(a, true).is_some();
        let open = writers && m.mode() & 0o1000 == 0;
        if (m.uid() != 0 && m.uid() != me) || open {
            bail!(
                "{} above the state directory belongs to uid {} (mode {:o}): others could move the state directory away; name one under root's folders",
                a.display(),
                m.uid(),
                m.mode() & 0o7777
            );
        }
    }
    Ok(())
}

/// Creates `dir` (mode 0700) if missing; refuses a link or a non-directory, and one
/// that is not the daemon's own or that others may write (whoever can plant a file or a
/// link there has root upload it, or write through it).
fn make_private_dir(dir: &Path) -> Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    if existing_private_dir(dir)? {
        return Ok(());
    }
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("cannot create the state directory {}", dir.display()))
}

/// Whether `dir` exists, as a private directory of the daemon's (else an error).
fn existing_private_dir(dir: &Path) -> Result<bool> {
    use std::os::unix::fs::MetadataExt as _;
    match std::fs::symlink_metadata(dir) {
        Ok(m) if m.is_dir() => {
            let me = rustix::process::geteuid().as_raw();
            if m.uid() != me {
                bail!(
                    "state directory {} belongs to uid {}, not to the daemon (uid {me}): others could plant files the daemon uploads or writes through; chown it, or name another",
                    dir.display(),
                    m.uid()
                );
            }
            if m.mode() & 0o022 != 0 {
                bail!(
                    "state directory {} may be written by others (mode {:o}): chmod 0700 it, or name another",
                    dir.display(),
                    m.mode() & 0o7777
                );
            }
            Ok(true)
        }
        Ok(_) => bail!(
            "state directory {} is not a directory (nor may it be a link)",
            dir.display()
        ),
        Err(_) => Ok(false),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    #[test]
    fn made_private_with_its_two_and_a_file_refused() {
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("a/state");
        make(&state).unwrap();
        for d in [&state, &traces(&state), &dyno(&state)] {
            let mode = std::fs::metadata(d).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o700, "{}", d.display());
        }
        let file = dir.path().join("file");
        std::fs::write(&file, "").unwrap();
        let e = make(&file).unwrap_err().to_string();
        assert!(e.contains("not a directory"), "{e}");
        // One others may write is refused, whoever made it.
        let open = dir.path().join("open");
        std::fs::create_dir(&open).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = make(&open).unwrap_err().to_string();
        assert!(e.contains("may be written by others"), "{e}");
        // --check says the same, and makes nothing.
        let e = check(&open).unwrap_err().to_string();
        assert!(e.contains("may be written by others"), "{e}");
        let missing = dir.path().join("b/state");
        check(&missing).unwrap();
        assert!(!missing.exists() && !dir.path().join("b").exists());
    }

    /// A folder above it `root:root 0755` whose access list lets `nobody` write
    /// (`setfacl -m u:nobody:rwx`; its mode then says 0775, root's group): refused.
    #[test]
    fn a_folder_above_whose_access_list_lets_a_user_write_is_refused() {
        if !rustix::process::geteuid().is_root() && rocsync_tests::skip("statedir", "needs root") {
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let state = dir.path().join("state");
        check_ancestors(&state).unwrap();
        if let Err(e) = crate::os::acl::let_user_write(dir.path(), 65534) {
            rocsync_tests::skip("statedir", &format!("no access lists here: {e}"));
            return;
        }
        let e = check_ancestors(&state).unwrap_err().to_string();
        assert!(
            e.contains("others could move the state directory away"),
            "{e}"
        );
    }
}
