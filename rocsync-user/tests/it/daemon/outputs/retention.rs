//! Retention unset still bounds the state directory: a tenth of its file system, so the
//! traces of processes that hang now and then (up to --trace-max-bytes each) cannot fill
//! a node's disk. Needs root (a tmpfs of a known size as the state directory).

use std::{
    io::Write as _,
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, SystemTime},
};

use crate::common::{daemon::*, *};

/// A tmpfs mounted at a path, detached when dropped (a failed test leaves no mount).
struct Mounted(PathBuf);

impl Mounted {
    fn tmpfs(at: &Path, size: &str) -> Self {
        std::fs::create_dir(at).unwrap();
        run_ok(
            Command::new("mount")
                .args(["-t", "tmpfs", "-o"])
                .arg(format!("size={size},mode=0700"))
                .arg("rocsync-test")
                .arg(at),
        );
        Mounted(at.to_path_buf())
    }
}

impl Drop for Mounted {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

#[test]
fn unset_retention_keeps_a_tenth_of_the_state_directorys_file_system() {
    let name = "unset_retention_keeps_a_tenth_of_the_state_directorys_file_system";
    let Some((dir, exe)) = daemon_test(name) else {
        return;
    };
    let state = dir.path("state");
    let _mounted = Mounted::tmpfs(&state, "20m");
    let check = run_ok(&mut daemon_command(&dir, &exe, &["--check"]));
    let check = String::from_utf8_lossy(&check.stdout);
    assert!(
        check.lines().any(|l| l
            .split_whitespace()
            .eq(["retention_max_bytes", &(2u64 << 20).to_string()])),
        "{check}"
    );
    // Four traces of 1 MiB from before, an hour apart: 4 MiB, over the tenth.
    let traces = state.join("traces");
    std::fs::create_dir(&traces).unwrap();
    let hour = Duration::from_secs(3600);
    let old: Vec<PathBuf> = (0..4)
        .map(|i| {
            let path = traces.join(format!("old-{i}.json"));
            // Written, not sparse: retention counts what a file takes on disk.
            let mut file = std::fs::File::create(&path).unwrap();
            file.write_all(&vec![b' '; 1 << 20]).unwrap();
            file.set_modified(SystemTime::now() - hour * (5 - i))
                .unwrap();
            path
        })
        .collect();
    let (daemon, mut lines) = start_daemon(&dir, &exe, &[]);
    let mut target = tracked_loop(&dir, &exe, &mut lines, 1500);
    let pid = target.id().to_string();
    let written = ask_daemon(
        &dir.path("rocsync.sock"),
        &["trace", "--pid", &pid, "--duration", "100ms"],
    );
    let written = Path::new(written.trim());
    assert!(target.wait().unwrap().success());
    stop(daemon);
    // The oldest went first, until what is left fits 2 MiB; the new trace stays.
    let size = |p: &Path| std::fs::metadata(p).map_or(0, |m| m.len());
    assert!(written.exists(), "{}", written.display());
    let kept: Vec<bool> = old.iter().map(|p| p.exists()).collect();
    let gone = kept.iter().take_while(|k| !**k).count();
    assert!(kept[gone..].iter().all(|k| *k), "oldest first: {kept:?}");
    let left: u64 = size(written) + old.iter().map(|p| size(p)).sum::<u64>();
    assert!(left <= 2 << 20, "{left} bytes left: {kept:?}");
    // 4 MiB before: at least two had to go (none did while unset meant no limit).
    assert!(gone >= 2, "{kept:?}");
}
