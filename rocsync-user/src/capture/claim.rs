//! One rocsync per target process: two captures of the same process would each stop it at
//! library loads and continue it on their own schedule, so one could let it run before the
//! other had probed what it loaded. An `attach` claims its target with a lock file in
//! `/run/rocsync` (held with `flock`, so a rocsync that dies releases it); a second
//! capture of the same process is refused, naming the first.

use std::path::Path;

use anyhow::{Result, bail};

use crate::os::lockfile::LockFile;

/// Where claims live (root's: `/run` is root-owned).
const DIR: &str = "/run/rocsync";

/// A held claim; released when dropped (or when rocsync dies).
pub(crate) struct Claim(#[allow(dead_code)] LockFile);

/// Claims `pid` for this capture, or says which rocsync holds it.
pub(crate) fn claim(pid: u32) -> Result<Claim> {
    claim_in(Path::new(DIR), pid)
}

fn claim_in(dir: &Path, pid: u32) -> Result<Claim> {
    match LockFile::take(dir, &format!("pid-{pid}.lock"))? {
        Ok(lock) => Ok(Claim(lock)),
        Err(holder) => bail!(
            "process {pid} is already being traced by another rocsync ({holder}); two captures of \
             one process would release it from its library-load stops out of turn"
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_claim_on_a_pid_is_refused_and_released_with_the_first() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("claims");
        let first = claim_in(&d, 42).unwrap();
        let err = format!("{:#}", claim_in(&d, 42).err().expect("refused"));
        assert!(
            err.contains(&format!("pid {}", std::process::id())),
            "{err}"
        );
        assert!(claim_in(&d, 43).is_ok(), "another pid is free");
        drop(first);
        // Released with the last copy of its descriptor: a process another test spawns
        // meanwhile holds one from its fork until its exec closes it.
        let waited = std::time::Instant::now();
        while claim_in(&d, 42).is_err() {
            assert!(waited.elapsed().as_secs() < 5, "released");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    #[test]
    fn a_linked_claim_directory_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("claims");
        std::os::unix::fs::symlink(dir.path(), &link).unwrap();
        assert!(claim_in(&link, 1).is_err());
    }
}
