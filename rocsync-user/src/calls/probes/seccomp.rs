//! Return probes and seccomp. On x86-64 from Linux 6.11 a uretprobe returns through a
//! system call of its own (`uretprobe`, 335), which seccomp filters see; until the kernel
//! let it through ("seccomp: passthrough uretprobe systemcall without filtering"), a
//! process whose filter does not allow that call — most containers' default profiles —
//! was killed at its first probed return. Which kernels carry the fix depends on stable
//! backports, so it is not read off the version: it is tried, once per rocsync process,
//! on a child of rocsync's own under such a filter.

use std::{path::PathBuf, sync::OnceLock};

use anyhow::{Context as _, Result, bail};
use aya::programs::uprobe::{UProbeAttachPoint, UProbeScope};

use super::{attach::links::uprobe, attach::programs::RETURN_CHECK};
/// `__NR_uretprobe` on x86-64.
const NR_URETPROBE: u32 = 335;
const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;

/// What a probed return does to a process under a seccomp filter that denies the
/// `uretprobe` call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Returns {
    /// It returns (the kernel lets it through, or returns without a system call).
    Pass,
    /// The filter kills it.
    Kill,
}

impl Returns {
    /// What the kernel does, tried once (the answer is the kernel's: it cannot change).
    pub(crate) fn of_kernel(ebpf: &mut aya::Ebpf) -> Result<Returns> {
        static VERDICT: OnceLock<Returns> = OnceLock::new();
        if let Some(v) = VERDICT.get() {
            return Ok(*v);
        }
        let v = try_return(ebpf)?;
        Ok(*VERDICT.get_or_init(|| v))
    }
}

/// Whether process `pid` runs under a seccomp filter (`Seccomp: 2`, or strict mode 1,
/// in which no `uretprobe` call passes either). Unreadable: assumed filtered.
pub fn filtered(pid: u32) -> bool {
    crate::os::procfs::status_field(Some(pid), "Seccomp").is_none_or(|mode| mode != "0")
}

/// The function the child returns from under its filter: in rocsync's own text.
#[inline(never)]
extern "C" fn probed_function(x: u64) -> u64 {
    std::hint::black_box(x).wrapping_add(1)
}

/// Its file and offset, from this process's maps (the binary may be stripped).
fn probed_location() -> Result<(PathBuf, u64)> {
    let addr = probed_function as *const () as u64;
    let maps = std::fs::read_to_string("/proc/self/maps").context("reading /proc/self/maps")?;
    for line in maps.lines() {
        let mut f = line.split_whitespace();
        let (Some(range), Some(_), Some(off), Some(_), Some(_), Some(path)) =
            (f.next(), f.next(), f.next(), f.next(), f.next(), f.next())
        else {
            continue;
        };
        let Some((start, end)) = range.split_once('-') else {
            continue;
        };
        let hex = |s: &str| u64::from_str_radix(s, 16).ok();
        if let (Some(start), Some(end), Some(off)) = (hex(start), hex(end), hex(off))
            && (start..end).contains(&addr)
        {
            return Ok((PathBuf::from(path), addr - start + off));
        }
    }
    bail!("rocsync's own code is not in a file mapping")
}

/// Forks a child that installs a filter killing on `uretprobe`, waits for the return
/// probe to be attached to it, and calls the probed function; how it ended is the answer.
fn try_return(ebpf: &mut aya::Ebpf) -> Result<Returns> {
    let (path, offset) = probed_location()?;
    let filter = [
        bpf_stmt(BPF_LD_W_ABS, 4), // seccomp_data.arch
        bpf_jump(BPF_JEQ_K, AUDIT_ARCH_X86_64, 0, 3),
        bpf_stmt(BPF_LD_W_ABS, 0), // seccomp_data.nr
        bpf_jump(BPF_JEQ_K, NR_URETPROBE, 0, 1),
        bpf_stmt(BPF_RET_K, libc::SECCOMP_RET_KILL_PROCESS),
        bpf_stmt(BPF_RET_K, libc::SECCOMP_RET_ALLOW),
    ];
    let program = libc::sock_fprog {
        len: filter.len() as u16,
        filter: filter.as_ptr().cast_mut(),
    };
    let mut gate = [0; 2];
    // SAFETY: pipe(2) into a two-int array.
    if unsafe { libc::pipe2(gate.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
        bail!("pipe: {}", std::io::Error::last_os_error());
    }
    // SAFETY: the child calls only async-signal-safe functions (close, prctl, read,
    // _exit) and the probed function (arithmetic), on memory prepared before the fork.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        bail!("fork: {}", std::io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: the fork's child, as said above.
        unsafe {
            libc::close(gate[1]);
            let mut b = 0u8;
            let filtered = libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
                && libc::prctl(
                    libc::PR_SET_SECCOMP,
                    libc::SECCOMP_MODE_FILTER,
                    &raw const program,
                ) == 0;
            // The attach is done once the parent closes its end.
            while libc::read(gate[0], (&raw mut b).cast(), 1) < 0 {}
            if !filtered {
                libc::_exit(3);
            }
            let x = probed_function(41);
            libc::_exit(if x == 42 { 0 } else { 4 });
        }
    }
    // SAFETY: the parent's read end, no longer needed.
    unsafe { libc::close(gate[0]) };
    let point = UProbeAttachPoint {
        location: offset.into(),
        cookie: None,
    };
    let child = std::num::NonZeroU32::new(pid as u32).expect("the fork's child's pid, above 0");
    let scope = UProbeScope::OneProcess(child);
    let attached = uprobe(ebpf, RETURN_CHECK).and_then(|p| Ok(p.attach(point, &path, scope)?));
    // SAFETY: closing our end lets the child go, attached or not.
    unsafe { libc::close(gate[1]) };
    let mut status = 0;
    // SAFETY: waiting for our own child, by its pid.
    let waited = unsafe { libc::waitpid(pid, &mut status, 0) };
    let id = attached.context("attaching the return check")?;
    uprobe(ebpf, RETURN_CHECK)?.detach(id)?;
    if waited != pid {
        bail!("waitpid: {}", std::io::Error::last_os_error());
    }
    let seen: aya::maps::Array<_, u64> = aya::maps::Array::try_from(
        ebpf.map("RETURN_CHECKS")
            .context("RETURN_CHECKS map missing")?,
    )?;
    let probed = seen.get(&0, 0)? > 0;
    match (libc::WIFEXITED(status), libc::WEXITSTATUS(status)) {
        // A return that was never probed says nothing.
        (true, 0) if !probed => bail!("the child's return was not probed"),
        (true, 0) => Ok(Returns::Pass),
        (true, 3) => bail!("the child could not install a seccomp filter"),
        _ if libc::WIFSIGNALED(status) && libc::WTERMSIG(status) == libc::SIGSYS => {
            Ok(Returns::Kill)
        }
        _ => bail!("the child ended with status {status:#x}"),
    }
}

const BPF_LD_W_ABS: u16 = (libc::BPF_LD | libc::BPF_W | libc::BPF_ABS) as u16;
const BPF_JEQ_K: u16 = (libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K) as u16;
const BPF_RET_K: u16 = (libc::BPF_RET | libc::BPF_K) as u16;

fn bpf_stmt(code: u16, k: u32) -> libc::sock_filter {
    libc::sock_filter {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

fn bpf_jump(code: u16, k: u32, jt: u8, jf: u8) -> libc::sock_filter {
    libc::sock_filter { code, jt, jf, k }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_not_filtered_and_a_missing_one_counts_as_filtered() {
        assert!(!filtered(std::process::id()));
        assert!(filtered(u32::MAX));
    }

    #[test]
    fn the_probed_function_is_found_in_rocsyncs_own_file() {
        let (path, offset) = probed_location().unwrap();
        let exe = std::fs::canonicalize("/proc/self/exe").unwrap();
        assert_eq!(path, exe);
        assert!(offset > 0);
    }
}
