//! The target is never left stopped when rocsync's whole cgroup is SIGKILLed at once
//! (`systemctl kill -s KILL`, Slurm ending a job, an OOM group kill): no helper process of
//! rocsync survives that, so the release of what its loader probe stopped must need none.
//! The capture runs in a cgroup v2 of the test's own, the target outside it; `cgroup.kill`
//! ends everything in the cgroup. Needs root (eBPF, cgroups) and `cgroup.kill` (Linux ≥
//! 5.14).

use std::{
    ffi::CString,
    os::unix::{ffi::OsStrExt as _, process::CommandExt as _},
    path::{Path, PathBuf},
    time::{Duration, Instant},
};

use crate::common::*;

#[test]
fn sigkill_of_rocsyncs_whole_cgroup_never_leaves_the_target_stopped() {
    let test = "sigkill_of_rocsyncs_whole_cgroup_never_leaves_the_target_stopped";
    if !can_trace(test) {
        return;
    }
    let Some(hierarchy) = cgroup2_mount() else {
        rocsync_tests::skip(test, "no cgroup v2 hierarchy is mounted");
        return;
    };
    if !hierarchy.join("cgroup.procs").exists() {
        rocsync_tests::skip(test, "the cgroup v2 hierarchy has no cgroup.procs");
        return;
    }
    let target = Target::start();
    for i in 0..5u64 {
        let cgroup = Cgroup::create(&hierarchy, i);
        if !cgroup.0.join("cgroup.kill").exists() {
            rocsync_tests::skip(test, "this kernel has no cgroup.kill (Linux < 5.14)");
            return;
        }
        let mut cmd = attach_command(target.pid());
        cgroup.enter_at_exec(&mut cmd);
        let mut tracer = spawn_piped(&mut cmd);
        drop(wait_for_line(
            &mut tracer,
            "waiting for process",
            Duration::from_secs(20),
        ));
        assert!(
            cgroup.holds(tracer.id()),
            "rocsync runs outside the test's cgroup"
        );
        // Let it answer stops for a while, then kill the cgroup at a varying point.
        std::thread::sleep(Duration::from_millis(20 + (i * 37) % 90));
        cgroup.kill();
        cgroup.wait_empty(Duration::from_secs(10));
        tracer.wait().unwrap();
        assert_continued(
            target.pid(),
            &format!("trial {i}: pid left stopped after cgroup.kill"),
        );
        assert_runs(target.pid());
    }
}

/// Fails unless the process makes progress (the loop sleeps, so each turn is a voluntary
/// context switch).
fn assert_runs(pid: u32) {
    let switches = || {
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap()
    };
    let before = switches();
    let start = Instant::now();
    while switches() < before + 10 {
        assert!(
            start.elapsed() < Duration::from_secs(2),
            "pid {pid} makes no progress"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Where the cgroup v2 hierarchy is mounted (`/sys/fs/cgroup`, or
/// `/sys/fs/cgroup/unified` on a hybrid host).
fn cgroup2_mount() -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
    mounts.lines().find_map(|line| {
        let (fields, fs) = line.split_once(" - ")?;
        let mount_point = fields.split(' ').nth(4)?;
        (fs.split(' ').next() == Some("cgroup2")).then(|| PathBuf::from(mount_point))
    })
}

/// A cgroup of this test's own, removed (after killing what is left in it) when dropped.
struct Cgroup(PathBuf);

impl Cgroup {
    fn create(hierarchy: &Path, trial: u64) -> Self {
        let dir = hierarchy.join(format!(
            "rocsync-test-cgroup-kill-{}-{trial}",
            std::process::id()
        ));
        std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("creating {}: {e}", dir.display()));
        Cgroup(dir)
    }

    /// The command's process moves itself into the cgroup before its exec, so everything
    /// it starts (rocsync's helpers) is born inside.
    fn enter_at_exec(&self, cmd: &mut std::process::Command) {
        let procs = CString::new(self.0.join("cgroup.procs").as_os_str().as_bytes()).unwrap();
        // SAFETY: between fork and exec only open/write/close, which are async-signal-safe.
        unsafe {
            cmd.pre_exec(move || {
                let fd = libc::open(procs.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
                if fd < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                // "0": the writing process itself.
                let written = libc::write(fd, b"0".as_ptr().cast(), 1);
                let error = std::io::Error::last_os_error();
                libc::close(fd);
                if written != 1 {
                    return Err(error);
                }
                Ok(())
            });
        }
    }

    fn holds(&self, pid: u32) -> bool {
        std::fs::read_to_string(self.0.join("cgroup.procs"))
            .unwrap_or_default()
            .lines()
            .any(|l| l.trim() == pid.to_string())
    }

    /// SIGKILLs every process in the cgroup at once.
    fn kill(&self) {
        std::fs::write(self.0.join("cgroup.kill"), "1").unwrap();
    }

    fn wait_empty(&self, timeout: Duration) {
        let start = Instant::now();
        loop {
            let events = std::fs::read_to_string(self.0.join("cgroup.events")).unwrap();
            if events.lines().any(|l| l == "populated 0") {
                return;
            }
            assert!(
                start.elapsed() < timeout,
                "cgroup still populated: {events}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        let _ = std::fs::write(self.0.join("cgroup.kill"), "1");
        let start = Instant::now();
        while std::fs::remove_dir(&self.0).is_err() && start.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}
