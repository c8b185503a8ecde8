//! The daemon's side of a read: the reader runs as a child process of its own (`rocsync
//! read-stacks`), so a target whose memory lies can cost it at most the bounds — address
//! space, CPU time, wall time (then it is killed by its pid), bytes printed — and never
//! hang or crash the daemon. Whatever it printed before it failed is kept, and the failure
//! is said where it happened.

use std::{
    path::PathBuf,
    process::{ExitStatus, Stdio},
    time::{Duration, Instant, SystemTime},
};

use tokio::io::AsyncReadExt as _;

use super::{
    bounds,
    model::Stacks,
    reader::{Line, Phase, unix_us},
};

/// The hidden subcommand that runs the reader.
pub const COMMAND: &str = "read-stacks";

/// How a read is run and bounded.
#[derive(Clone, Debug)]
pub struct Reader {
    /// The binary to run as the reader (rocsync itself).
    pub exe: PathBuf,
    pub wall: Duration,
    pub cpu_s: u64,
    pub address_space: u64,
    pub output: usize,
}

impl Default for Reader {
    fn default() -> Self {
        Self {
            exe: PathBuf::from("/proc/self/exe"),
            wall: bounds::WALL,
            cpu_s: bounds::CPU_S,
            address_space: bounds::ADDRESS_SPACE,
            // The reader bounds what it prints; this bounds a reader that does not.
            output: 2 * bounds::OUTPUT,
        }
    }
}

impl Reader {
    /// `pid`'s stacks, `blocked_tid` (a host tid) the thread the trace is for.
    pub async fn read(&self, pid: u32, blocked_tid: u32) -> Stacks {
        let started = Instant::now();
        let mut cmd = tokio::process::Command::new(&self.exe);
        cmd.arg(COMMAND)
            .args(["--pid", &pid.to_string(), "--tid", &blocked_tid.to_string()]);
        let (out, failed) = self.run(cmd).await;
        let mut stacks = assemble(pid, &out, failed);
        stacks.read_at_unix_us = unix_us(SystemTime::now() - started.elapsed());
        stacks.took_ms = started.elapsed().as_secs_f64() * 1e3;
        stacks
    }

    /// Runs `cmd` under the bounds: what it printed, and why it failed if it did.
    pub async fn run(&self, mut cmd: tokio::process::Command) -> (Vec<u8>, Option<String>) {
        let (address_space, cpu_s) = (self.address_space, self.cpu_s);
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .kill_on_drop(true);
        // SAFETY: between fork and exec only setrlimit and prctl, async-signal-safe.
        unsafe {
            cmd.pre_exec(move || limit(address_space, cpu_s));
        }
        let mut child = match cmd.spawn() {
            Ok(child) => child,
            Err(e) => return (Vec::new(), Some(format!("could not start: {e}"))),
        };
        let mut stdout = child.stdout.take();
        let mut out = Vec::new();
        let ended = tokio::time::timeout(self.wall, async {
            let mut chunk = [0u8; 16 << 10];
            while let Some(pipe) = stdout.as_mut() {
                match pipe.read(&mut chunk).await {
                    Ok(0) | Err(_) => break,
                    Ok(n) if out.len() + n > self.output => {
                        return Err(format!("printed more than {} bytes", self.output));
                    }
                    Ok(n) => out.extend_from_slice(&chunk[..n]),
                }
            }
            child.wait().await.map_err(|e| e.to_string())
        })
        .await;
        let failed = match ended {
            Ok(Ok(status)) => died(status),
            Ok(Err(why)) => Some(why),
            Err(_) => Some(format!("timed out after {} s", self.wall.as_secs_f64())),
        };
        if failed.is_some() {
            // Killed by its pid (a no-op once it is reaped).
            let _ = child.start_kill();
            let _ = child.wait().await;
        }
        (out, failed)
    }
}

/// The reader's limits, set in the child before it runs.
fn limit(address_space: u64, cpu_s: u64) -> std::io::Result<()> {
    let set = |resource, soft: u64, hard: u64| {
        let l = libc::rlimit {
            rlim_cur: soft,
            rlim_max: hard,
        };
        // SAFETY: a plain system call on a stack value.
        match unsafe { libc::setrlimit(resource, &l) } {
            0 => Ok(()),
            _ => Err(std::io::Error::last_os_error()),
        }
    };
    set(libc::RLIMIT_AS, address_space, address_space)?;
    // SIGXCPU at the soft limit, SIGKILL a second later.
    set(libc::RLIMIT_CPU, cpu_s, cpu_s + 1)?;
    // A reader that aborts leaves no core file behind.
    set(libc::RLIMIT_CORE, 0, 0)?;
    // And it dies with the daemon.
    // SAFETY: prctl with integer arguments.
    unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) };
    Ok(())
}

/// Why a reader that ended failed, if it did.
fn died(status: ExitStatus) -> Option<String> {
    use std::os::unix::process::ExitStatusExt as _;
    if let Some(signal) = status.signal() {
        let name = match signal {
            libc::SIGABRT => " (SIGABRT)",
            libc::SIGBUS => " (SIGBUS)",
            libc::SIGKILL => " (SIGKILL)",
            libc::SIGSEGV => " (SIGSEGV)",
            libc::SIGXCPU => " (SIGXCPU: out of CPU time)",
            _ => "",
        };
        return Some(format!("died of signal {signal}{name}"));
    }
    (!status.success()).then(|| format!("exited with {status}"))
}

/// The stacks from the reader's last complete line, each part it did not finish saying
/// why.
pub fn assemble(pid: u32, out: &[u8], failed: Option<String>) -> Stacks {
    let last = out
        .split(|&b| b == b'\n')
        .rev()
        .find_map(|l| serde_json::from_slice::<Line>(l).ok());
    let why = failed.unwrap_or_else(|| "ended before it was done".into());
    let Some(Line { phase, mut stacks }) = last else {
        return Stacks::failed(pid, format!("unreadable: the reader {why}"));
    };
    stacks.pid = pid;
    match phase {
        Phase::Native => {}
        Phase::Threads => {
            for thread in &mut stacks.threads {
                thread.python_error = Some(format!(
                    "unreadable: the reader {why} while reading Python stacks"
                ));
                if thread.blocked {
                    thread.native_error = Some(format!("not read: the reader {why} before"));
                }
            }
        }
        Phase::Python => {
            if let Some(thread) = stacks.threads.iter_mut().find(|t| t.blocked) {
                thread.native_error = Some(format!("unreadable: the reader {why} while unwinding"));
            }
        }
    }
    stacks
}
