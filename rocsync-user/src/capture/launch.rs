//! Starting a command held before `exec`, so it can be hooked before it runs any code.

use std::{
    ffi::CString,
    os::fd::{FromRawFd as _, OwnedFd},
    path::{Path, PathBuf},
};

use anyhow::{Context as _, Result, bail};

use rocsync_common::Backend;

use super::Session;
use crate::{
    calls::{backend::Runtime, probes::elf::library::OpenedLibrary},
    os::users::Identity,
};
use tokio::io::{Interest, unix::AsyncFd};

/// A forked child waiting at a gate to exec its command.
pub(crate) struct HeldChild {
    pub pid: u32,
    gate: OwnedFd,
    exec_error: OwnedFd,
}

/// Hooks a held child's loader, and probes `hip_lib` (`run --hip-lib`) before it runs.
pub(crate) fn hook(
    session: &mut Session,
    pid: u32,
    interp: Option<PathBuf>,
    hip_lib: Option<&Path>,
) -> Result<()> {
    if interp.is_none() && hip_lib.is_none() {
        bail!(
            "the command is statically linked, so it cannot load libamdhip64 dynamically; \
             pass --hip-lib if it does"
        );
    }
    let loader = interp.as_deref().map(OpenedLibrary::at).transpose()?;
    session.add_target(pid, loader)?;
    if let Some(lib) = hip_lib {
        let lib = OpenedLibrary::at(lib)?;
        session.attach_library(Runtime::of(Backend::Hip), &lib, pid, false)?;
    }
    Ok(())
}

/// What failed in the child before the command ran.
const STAGE_EXEC: i32 = 1;
const STAGE_USER: i32 = 2;

/// Forks; the child blocks until [`HeldChild::release`], takes `user`'s identity if
/// given, restores SIGPIPE's default (rocsync ignores it; an ignored signal survives
/// `exec`), then execs `exe` with `argv`.
pub(crate) fn spawn_held(
    exe: &Path,
    argv: &[String],
    user: Option<&Identity>,
) -> Result<HeldChild> {
    let exe_c =
        CString::new(exe.as_os_str().as_encoded_bytes()).context("NUL in the command path")?;
    let args: Vec<CString> = argv
        .iter()
        .map(|a| CString::new(a.as_bytes()))
        .collect::<Result<_, _>>()
        .context("NUL in a command argument")?;
    let mut argv_ptrs: Vec<*const libc::c_char> = args.iter().map(|a| a.as_ptr()).collect();
    argv_ptrs.push(std::ptr::null());
    let (gate_r, gate_w) = pipe()?;
    let (err_r, err_w) = pipe()?;
    let ids = user.map(|u| (u.uid, u.gid, u.groups.as_ptr(), u.groups.len()));
    // SAFETY: between fork and exec the child calls only async-signal-safe functions
    // (close, read, write, signal, setgroups, setgid, setuid, execv, _exit) on memory
    // prepared before the fork.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        bail!("fork: {}", std::io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: the fork's child, as said above.
        unsafe {
            libc::close(gate_w);
            libc::close(err_r);
            let mut b = 0u8;
            // End-of-file (rocsync closed the gate, or died) lets the command go.
            while libc::read(gate_r, (&mut b as *mut u8).cast(), 1) < 0 {}
            let fail = |stage: i32| {
                let report = [stage, *libc::__errno_location()];
                libc::write(err_w, report.as_ptr().cast(), 8);
                libc::_exit(127);
            };
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
            if let Some((uid, gid, groups, n)) = ids
                && (libc::setgroups(n, groups) != 0
                    || libc::setgid(gid) != 0
                    || libc::setuid(uid) != 0)
            {
                fail(STAGE_USER);
            }
            libc::execv(exe_c.as_ptr(), argv_ptrs.as_ptr());
            fail(STAGE_EXEC);
        }
    }
    // SAFETY: the parent's copies of fds it no longer needs.
    unsafe {
        libc::close(gate_r);
        libc::close(err_w);
    }
    // SAFETY: fresh fds owned by nothing else.
    let (gate, exec_error) = unsafe { (OwnedFd::from_raw_fd(gate_w), OwnedFd::from_raw_fd(err_r)) };
    Ok(HeldChild {
        pid: pid as u32,
        gate,
        exec_error,
    })
}

impl HeldChild {
    /// Lets the child exec; fails if the exec failed.
    pub(crate) fn release(self) -> Result<Child> {
        let pid = self.pid;
        let exit = pidfd(pid)?;
        drop(self.gate);
        let mut report = [0i32; 2];
        // SAFETY: reading 8 bytes into two i32; returns 0 at end-of-file (exec succeeded).
        let n = unsafe {
            libc::read(
                std::os::fd::AsRawFd::as_raw_fd(&self.exec_error),
                report.as_mut_ptr().cast(),
                8,
            )
        };
        if n == 8 {
            let _ = wait(pid);
            let err = std::io::Error::from_raw_os_error(report[1]);
            match report[0] {
                STAGE_USER => bail!("cannot run the command as the -u user: {err}"),
                _ => bail!("cannot execute the command: {err}"),
            }
        }
        Ok(Child { pid, exit })
    }

    /// Ends a child that never ran its command.
    pub(crate) fn kill(self) {
        // SAFETY: kill(2) and waitpid(2) on our own child, by its pid.
        unsafe { libc::kill(self.pid as i32, libc::SIGKILL) };
        let _ = wait(self.pid);
    }
}

/// A running child: wait for it without blocking the event loop.
pub(crate) struct Child {
    pub pid: u32,
    exit: AsyncFd<OwnedFd>,
}

impl Child {
    /// Resolves once the child has exited (it is not reaped yet).
    pub(crate) async fn exit_ready(&self) -> Result<()> {
        let _ = self.exit.readable().await?;
        Ok(())
    }

    /// Waits until the child exits and reaps it; returns the shell-style exit code.
    pub(crate) async fn wait(&self) -> Result<i32> {
        self.exit_ready().await?;
        wait(self.pid)
    }
}

fn wait(pid: u32) -> Result<i32> {
    let mut status = 0;
    // SAFETY: waits for our own child.
    let r = unsafe { libc::waitpid(pid as i32, &mut status, 0) };
    if r < 0 {
        bail!("waitpid: {}", std::io::Error::last_os_error());
    }
    Ok(if libc::WIFEXITED(status) {
        libc::WEXITSTATUS(status)
    } else {
        128 + libc::WTERMSIG(status)
    })
}

fn pipe() -> Result<(i32, i32)> {
    let mut fds = [0i32; 2];
    // SAFETY: valid out array; O_CLOEXEC keeps both ends out of the exec'ed program.
    if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        bail!("pipe: {}", std::io::Error::last_os_error());
    }
    Ok((fds[0], fds[1]))
}

/// A pidfd that becomes readable when `pid` exits (works for processes we did not start).
pub(crate) fn pidfd(pid: u32) -> Result<AsyncFd<OwnedFd>> {
    // SAFETY: pidfd_open takes a pid and flags and returns a new fd or -1.
    let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if fd < 0 {
        bail!(
            "no process with id {pid}: {}",
            std::io::Error::last_os_error()
        );
    }
    // SAFETY: the fd was just returned to us and is owned by nothing else.
    let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
    // SAFETY: the pidfd is owned by the AsyncFd for its whole life.
    Ok(
        unsafe { AsyncFd::register_with_interest(fd, Interest::READABLE) }
            .map_err(std::io::Error::from)?,
    )
}
