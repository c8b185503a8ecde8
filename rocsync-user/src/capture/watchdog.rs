//! The watchdog: a small process that outlives rocsync and continues every target a probe
//! stopped if rocsync dies without doing so (SIGKILL, the OOM killer). It holds only the
//! map of stopped processes and the read end of a pipe rocsync never writes: end-of-file
//! means rocsync is gone. Holding no probe link, it keeps no probe attached.

use std::{
    io::Read as _,
    os::fd::{AsRawFd as _, BorrowedFd, FromRawFd as _, OwnedFd},
    process::{Child, Command, Stdio},
};

use anyhow::{Context as _, Result};
use aya::maps::{HashMap, Map, MapData};

/// The argument that runs this binary as the watchdog.
pub const ARG: &str = "__rocsync_watchdog";
/// Descriptors the watchdog receives: the STOPPED map and the pipe's read end.
const MAP_FD: i32 = 3;
const PIPE_FD: i32 = 4;

/// A running watchdog; dropping it (with rocsync's normal end) lets it exit.
pub struct Watchdog {
    alive: Option<OwnedFd>,
    child: Child,
}

impl Watchdog {
    pub fn spawn(stopped: BorrowedFd<'_>) -> Result<Self> {
        let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
        let (map, pipe) = (stopped.as_raw_fd(), read.as_raw_fd());
        let mut cmd = Command::new("/proc/self/exe");
        cmd.arg(ARG).stdin(Stdio::null()).stdout(Stdio::null());
        // SAFETY: between fork and exec only dup/fcntl, which are async-signal-safe.
        unsafe {
            use std::os::unix::process::CommandExt as _;
            cmd.pre_exec(move || {
                let m = libc::fcntl(map, libc::F_DUPFD, 10);
                let p = libc::fcntl(pipe, libc::F_DUPFD, 10);
                if m < 0 || p < 0 || libc::dup2(m, MAP_FD) < 0 || libc::dup2(p, PIPE_FD) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = cmd.spawn().context("starting the watchdog")?;
        Ok(Self {
            alive: Some(write),
            child,
        })
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        drop(self.alive.take());
        let _ = self.child.wait();
    }
}

/// The watchdog's own life: wait for rocsync to end, then continue what it left stopped.
pub fn run() -> i32 {
    // SAFETY: the descriptors the parent placed for this process.
    let (map, mut pipe) = unsafe {
        (
            OwnedFd::from_raw_fd(MAP_FD),
            std::fs::File::from_raw_fd(PIPE_FD),
        )
    };
    let mut byte = [0u8; 1];
    // Nothing is ever written: this returns when rocsync has exited, however.
    while matches!(pipe.read(&mut byte), Ok(n) if n > 0) {}
    let stopped = MapData::from_fd(map)
        .ok()
        .and_then(|d| Map::from_map_data(d).ok())
        .and_then(|m| HashMap::<_, u32, u64>::try_from(m).ok());
    let Some(stopped) = stopped else {
        eprintln!("rocsync watchdog: cannot read the map of stopped processes");
        return 1;
    };
    let pids: Vec<u32> = stopped.keys().filter_map(Result::ok).collect();
    for pid in pids {
        // SAFETY: kill(2) on a process rocsync's probe stopped and never continued.
        unsafe { libc::kill(pid as i32, libc::SIGCONT) };
        eprintln!("rocsync watchdog: continued pid {pid}, which rocsync left stopped");
    }
    0
}
