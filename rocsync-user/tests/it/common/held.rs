//! A target that rocsync's loader probe stops hundreds of times a second, and how a test
//! sees whether it is left stopped.

use crate::common::End as _;
use std::{
    process::{Child, Command},
    time::{Duration, Instant},
};

use super::{rocsync, spawn_piped, spawn_ready};

/// The scheduler state of a process (`R`, `S`, `T`…), from /proc/PID/stat.
pub(crate) fn state(pid: u32) -> char {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &stat[stat.rfind(')').unwrap() + 2..];
    after.chars().next().unwrap()
}

/// Fails if the process is found stopped at any look over `over` (rocsync is gone, so
/// nothing should stop it any more).
pub(crate) fn assert_never_stopped(pid: u32, over: Duration) {
    let start = Instant::now();
    while start.elapsed() < over {
        assert_ne!(state(pid), 'T', "pid {pid} left stopped");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Fails unless the process, stopped when rocsync died, is continued within moments
/// (by the watchdog) and then stays running.
pub(crate) fn assert_continued(pid: u32, why: &str) {
    let dead = Instant::now();
    while state(pid) == 'T' {
        assert!(dead.elapsed() < Duration::from_secs(2), "{why}");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_never_stopped(pid, Duration::from_millis(300));
}

pub(crate) struct Target(Child);

impl Target {
    pub(crate) fn start() -> Self {
        Target(spawn_ready(&mut Command::new(rocsync_tests::dlopen_loop())))
    }
    pub(crate) fn pid(&self) -> u32 {
        self.0.id()
    }
}

impl Drop for Target {
    fn drop(&mut self) {
        self.0.end();
    }
}

pub(crate) fn attach_waiting(pid: u32) -> Child {
    spawn_piped(&mut attach_command(pid))
}

pub(crate) fn attach_command(pid: u32) -> Command {
    let mut cmd = rocsync();
    cmd.args(["attach", "--wait", "--no-status", "-o"])
        .arg(std::env::temp_dir().join(format!("rocsync-never-stopped-{pid}.json")))
        .args(["--pid", &pid.to_string()]);
    cmd
}
