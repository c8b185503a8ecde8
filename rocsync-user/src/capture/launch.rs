//! Starting a command held before `exec`, so it can be hooked before it runs any code.

use std::{
    ffi::CString,
    os::fd::{FromRawFd as _, OwnedFd},
    path::Path,
};

use anyhow::{Context as _, Result, bail};
use tokio::io::{Interest, unix::AsyncFd};

/// A forked child waiting at a gate to exec its command.
pub struct HeldChild {
    pub pid: u32,
    gate: OwnedFd,
    exec_error: OwnedFd,
}

/// Forks; the child blocks until [`HeldChild::release`], then execs `exe` with `argv`.
pub fn spawn_held(exe: &Path, argv: &[String]) -> Result<HeldChild> {
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
    // SAFETY: between fork and exec the child calls only async-signal-safe functions
    // (close, read, write, execv, _exit) on memory prepared before the fork.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        bail!("fork: {}", std::io::Error::last_os_error());
    }
    if pid == 0 {
        unsafe {
            libc::close(gate_w);
            libc::close(err_r);
            let mut b = 0u8;
            // End-of-file (rocsync closed the gate, or died) lets the command go.
            while libc::read(gate_r, (&mut b as *mut u8).cast(), 1) < 0 {}
            libc::execv(exe_c.as_ptr(), argv_ptrs.as_ptr());
            let errno = *libc::__errno_location();
            libc::write(err_w, (&errno as *const i32).cast(), 4);
            libc::_exit(127);
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
    pub fn release(self) -> Result<Child> {
        let pid = self.pid;
        let exit = pidfd(pid)?;
        drop(self.gate);
        let mut errno = 0i32;
        // SAFETY: reading 4 bytes into an i32; returns 0 at end-of-file (exec succeeded).
        let n = unsafe {
            libc::read(
                std::os::fd::AsRawFd::as_raw_fd(&self.exec_error),
                (&mut errno as *mut i32).cast(),
                4,
            )
        };
        if n == 4 {
            let _ = wait(pid);
            bail!(
                "cannot execute the command: {}",
                std::io::Error::from_raw_os_error(errno)
            );
        }
        Ok(Child { pid, exit })
    }

    /// Ends a child that never ran its command.
    pub fn kill(self) {
        // SAFETY: kill(2) and waitpid(2) on our own child, by its pid.
        unsafe { libc::kill(self.pid as i32, libc::SIGKILL) };
        let _ = wait(self.pid);
    }
}

/// A running child: wait for it without blocking the event loop.
pub struct Child {
    pub pid: u32,
    exit: AsyncFd<OwnedFd>,
}

impl Child {
    /// Resolves once the child has exited (it is not reaped yet).
    pub async fn exit_ready(&self) -> Result<()> {
        let _ = self.exit.readable().await?;
        Ok(())
    }

    /// Waits until the child exits and reaps it; returns the shell-style exit code.
    pub async fn wait(&self) -> Result<i32> {
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
pub fn pidfd(pid: u32) -> Result<AsyncFd<OwnedFd>> {
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
