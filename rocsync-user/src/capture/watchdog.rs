//! The watchdog: a small process that outlives rocsync and continues every target a probe
//! stopped if rocsync dies without doing so (SIGKILL, the OOM killer) — only where the
//! kernel cannot do it at rocsync's exit (`probes::release`: no BTF, or no
//! `bpf_send_signal_task` before Linux 6.13); a SIGKILL of rocsync's whole cgroup kills
//! the watchdog too. It holds only the target table, the map of stopped processes and the
//! read end of a pipe rocsync never writes: end-of-file means rocsync is gone. Holding no
//! probe link, it keeps no probe attached — but the probes outlive rocsync for a moment
//! while the kernel unregisters them, so it first turns every target's stops off, then
//! continues what is stopped.

use std::{
    io::Read as _,
    os::fd::{AsRawFd as _, BorrowedFd, FromRawFd as _, OwnedFd},
    process::{Child, Command, Stdio},
};

use anyhow::{Context as _, Result};
use aya::maps::{HashMap, Map, MapData};
use rocsync_common::Config;

/// The argument that runs this binary as the watchdog.
pub const ARG: &str = "__rocsync_watchdog";
/// Descriptors the watchdog receives: STOPPED, the pipe's read end, TARGETS, CONTINUED.
const MAP_FD: i32 = 3;
const PIPE_FD: i32 = 4;
const TARGETS_FD: i32 = 5;
const CONTINUED_FD: i32 = 6;

/// A running watchdog; dropping it (with rocsync's normal end) lets it exit.
pub struct Watchdog {
    alive: Option<OwnedFd>,
    child: Child,
}

impl Watchdog {
    pub fn spawn(
        stopped: BorrowedFd<'_>,
        targets: BorrowedFd<'_>,
        continued: BorrowedFd<'_>,
    ) -> Result<Self> {
        let (read, write) = rustix::pipe::pipe_with(rustix::pipe::PipeFlags::CLOEXEC)?;
        let (map, pipe, table) = (stopped.as_raw_fd(), read.as_raw_fd(), targets.as_raw_fd());
        let done = continued.as_raw_fd();
        let mut cmd = Command::new("/proc/self/exe");
        cmd.arg(ARG).stdin(Stdio::null()).stdout(Stdio::null());
        // A process group of its own: what job control does to rocsync's job — Ctrl-Z,
        // `kill -9 %1` — must not stop or kill the watchdog with it.
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        // SAFETY: between fork and exec only signal/dup/fcntl, which are async-signal-safe.
        unsafe {
            use std::os::unix::process::CommandExt as _;
            cmd.pre_exec(move || {
                // Nor what reaches it otherwise (a service manager's SIGTERM to the whole
                // cgroup, a signal to the session): the pipe alone ends it.
                for sig in [libc::SIGINT, libc::SIGQUIT, libc::SIGHUP, libc::SIGTERM] {
                    libc::signal(sig, libc::SIG_IGN);
                }
                let m = libc::fcntl(map, libc::F_DUPFD, 10);
                let p = libc::fcntl(pipe, libc::F_DUPFD, 10);
                let t = libc::fcntl(table, libc::F_DUPFD, 10);
                let c = libc::fcntl(done, libc::F_DUPFD, 10);
                if m < 0
                    || p < 0
                    || t < 0
                    || c < 0
                    || libc::dup2(m, MAP_FD) < 0
                    || libc::dup2(p, PIPE_FD) < 0
                    || libc::dup2(t, TARGETS_FD) < 0
                    || libc::dup2(c, CONTINUED_FD) < 0
                {
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

fn hash_map<V: aya::Pod>(fd: i32) -> Option<HashMap<MapData, u32, V>> {
    // SAFETY: a descriptor the parent placed for this process.
    let fd = unsafe { OwnedFd::from_raw_fd(fd) };
    let data = MapData::from_fd(fd).ok()?;
    HashMap::try_from(Map::from_map_data(data).ok()?).ok()
}

/// The watchdog's own life: wait for rocsync to end, then continue what it left stopped.
pub fn run() -> i32 {
    // SAFETY: the descriptor the parent placed for this process.
    let mut pipe = unsafe { std::fs::File::from_raw_fd(PIPE_FD) };
    let mut byte = [0u8; 1];
    // Nothing is ever written: this returns when rocsync has exited, however.
    while matches!(pipe.read(&mut byte), Ok(n) if n > 0) {}
    let (Some(mut targets), Some(stopped), Some(mut continued)) = (
        hash_map::<Config>(TARGETS_FD),
        hash_map::<u64>(MAP_FD),
        hash_map::<u64>(CONTINUED_FD),
    ) else {
        crate::say!("rocsync watchdog: cannot read rocsync's maps");
        return 1;
    };
    // No new stop from probes still registered; then continue every listed stop, twice:
    // the second sweep takes a probe that read the settings before they changed.
    let pids: Vec<u32> = targets.keys().filter_map(Result::ok).collect();
    for pid in pids {
        let _ = targets.insert(pid, Config::default(), 0);
    }
    for _ in 0..2 {
        let pids: Vec<u32> = stopped.keys().filter_map(Result::ok).collect();
        for pid in pids {
            let stop = stopped.get(&pid, 0).ok();
            if stop.is_none() || continued.get(&pid, 0).ok() == stop {
                continue;
            }
            crate::calls::probes::continue_process(pid);
            let _ = continued.insert(pid, stop.unwrap_or(0), 0);
            crate::say!("rocsync watchdog: continued pid {pid}, which rocsync left stopped");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    0
}
