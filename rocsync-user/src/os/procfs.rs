//! Every read of `/proc` goes through here: the live pids, the fields of
//! `/proc/PID/stat` rocsync uses (state, parent, job control, CPU time), and each
//! process's other files by name. The kernel writes these files, not the process: a name
//! it chose cannot shift a field. (`/proc/PID/environ` is the one the process wrote:
//! `environ.rs` reads it bounded.)

use std::{
    io,
    path::{Path, PathBuf},
    str::FromStr,
};

/// `/proc/PID/FILE` (`FILE` may be a path below it, e.g. `map_files/…`).
pub(crate) fn path(pid: u32, file: &str) -> PathBuf {
    PathBuf::from(format!("/proc/{pid}/{file}"))
}

/// A process's `/proc/PID/FILE` as text.
pub(crate) fn read(pid: u32, file: &str) -> io::Result<String> {
    // Lossily: paths and names in these files are their owners' bytes (an executable
    // named `rt\xff` made its process's maps unreadable as UTF-8, and it went untracked).
    // What is opened is opened by other means (`map_files`, `exe`).
    let bytes = std::fs::read(path(pid, file))?;
    Ok(match String::from_utf8(bytes) {
        Ok(text) => text,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

/// `/proc/PID/maps`, or why it cannot be read.
pub(crate) fn maps(pid: u32) -> io::Result<String> {
    read(pid, "maps")
}

/// `/proc/PID/cgroup`, `None` once the process is gone.
pub(crate) fn cgroup(pid: u32) -> Option<String> {
    read(pid, "cgroup").ok()
}

/// The executable as the process sees it (inside its container).
pub(crate) fn exe(pid: u32) -> Option<PathBuf> {
    std::fs::read_link(path(pid, "exe")).ok()
}

/// Whether `/proc/PID` exists (a zombie's does).
pub(crate) fn exists(pid: u32) -> bool {
    path(pid, "").exists()
}

/// The value of a `Name:` line of `/proc/PID/status` (`pid` `None`: rocsync's own).
pub(crate) fn status_field(pid: Option<u32>, name: &str) -> Option<String> {
    let text = match pid {
        Some(pid) => read(pid, "status"),
        None => std::fs::read_to_string("/proc/self/status"),
    };
    let text = text.ok()?;
    let line = text
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))?;
    Some(line.trim().to_string())
}

/// The real uid of `pid`, from its status.
pub(crate) fn uid(pid: u32) -> Option<u32> {
    let uids = status_field(Some(pid), "Uid")?;
    uids.split_whitespace().next()?.parse().ok()
}

/// A kernel setting, `/proc/sys/NAME` (e.g. `kernel/perf_event_paranoid`), trimmed.
pub(crate) fn sysctl(name: &str) -> io::Result<String> {
    Ok(std::fs::read_to_string(Path::new("/proc/sys").join(name))?
        .trim()
        .to_string())
}

/// The command line, argument by argument (empty for a kernel thread or a gone process).
pub(crate) fn cmdline(pid: u32) -> Vec<String> {
    std::fs::read(path(pid, "cmdline"))
        .map(|b| {
            b.split(|&c| c == 0)
                .filter(|s| !s.is_empty())
                .map(|s| String::from_utf8_lossy(s).into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// A thread's name as the kernel has it (`task/TID/comm`: procfs, no read blocks), `None`
/// once it is gone.
pub(crate) fn thread_name(pid: u32, tid: u32) -> Option<String> {
    let comm = read(pid, &format!("task/{tid}/comm")).ok()?;
    Some(comm.trim_end_matches('\n').to_string())
}

/// The thread ids of a process now.
pub(crate) fn threads(pid: u32) -> Vec<u32> {
    std::fs::read_dir(path(pid, "task"))
        .map(|d| {
            d.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// Every live descendant process of `pid`, parents before children (from each process's
/// parent in /proc/*/stat).
pub(crate) fn descendants(pid: u32) -> Vec<u32> {
    let parent_of: Vec<(u32, u32)> = pids()
        .into_iter()
        .filter_map(|p| Some((p, Stat::of(p)?.ppid)))
        .collect();
    let mut found = vec![pid];
    let mut i = 0;
    while i < found.len() {
        let p = found[i];
        found.extend(parent_of.iter().filter(|(_, pp)| *pp == p).map(|(c, _)| *c));
        i += 1;
    }
    found.remove(0);
    found
}

/// Every live process's id (the numeric entries of `/proc`).
pub(crate) fn pids() -> Vec<u32> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect()
}

/// The fields of a process's `/proc/PID/stat` that rocsync uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stat {
    /// `R`, `S`, `D`, `T`, `t`, `Z`, `X`, …
    pub state: char,
    pub ppid: u32,
    pub pgrp: u32,
    pub session: u32,
    /// The controlling terminal's device number; 0 for none.
    pub tty_nr: i64,
    /// The terminal's foreground process group; -1 for none.
    pub tpgid: i64,
    /// CPU time in user and kernel mode, in clock ticks.
    pub utime: u64,
    pub stime: u64,
}

impl Stat {
    /// `pid`'s stat, or `None` if it is gone (or unreadable).
    pub(crate) fn of(pid: u32) -> Option<Self> {
        Self::read(&Path::new("/proc").join(pid.to_string()).join("stat"))
    }

    /// This process's own.
    pub(crate) fn of_self() -> Option<Self> {
        Self::read(Path::new("/proc/self/stat"))
    }

    fn read(path: &Path) -> Option<Self> {
        Self::parse(&std::fs::read_to_string(path).ok()?)
    }

    /// Parses the file's one line. The name, second, is in parentheses and may itself
    /// hold spaces and parentheses: the fields start after the last `)`.
    pub(crate) fn parse(line: &str) -> Option<Self> {
        let mut f = line.get(line.rfind(')')? + 1..)?.split_whitespace();
        let state = f.next()?.chars().next()?;
        let (ppid, pgrp, session) = (field(&mut f)?, field(&mut f)?, field(&mut f)?);
        let (tty_nr, tpgid) = (field(&mut f)?, field(&mut f)?);
        // flags, minflt, cminflt, majflt, cmajflt
        f.nth(4)?;
        let (utime, stime) = (field(&mut f)?, field(&mut f)?);
        Some(Self {
            state,
            ppid,
            pgrp,
            session,
            tty_nr,
            tpgid,
            utime,
            stime,
        })
    }

    /// Whether the process has exited: a zombie not yet reaped, or dead.
    pub(crate) fn exited(&self) -> bool {
        matches!(self.state, 'Z' | 'X')
    }

    /// Whether it is in the foreground process group of a controlling terminal.
    pub(crate) fn in_foreground(&self) -> bool {
        self.tty_nr != 0 && self.tpgid == i64::from(self.pgrp)
    }
}

fn field<'a, T: FromStr>(f: &mut impl Iterator<Item = &'a str>) -> Option<T> {
    f.next()?.parse().ok()
}

/// Whether `pid` has exited: gone, or a zombie not yet reaped.
pub(crate) fn exited(pid: u32) -> bool {
    Stat::of(pid).is_none_or(|s| s.exited())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_found_after_a_name_with_spaces_and_parentheses() {
        let line = "4242 (a) b (c)) S 1 4242 4242 34816 4242 4194560 120 0 0 0 17 5 0 0 20 0 \
                    1 0 123 4096 100 18446744073709551615\n";
        let s = Stat::parse(line).unwrap();
        assert_eq!(
            s,
            Stat {
                state: 'S',
                ppid: 1,
                pgrp: 4242,
                session: 4242,
                tty_nr: 34816,
                tpgid: 4242,
                utime: 17,
                stime: 5,
            }
        );
        assert!(s.in_foreground() && !s.exited());
    }

    #[test]
    fn no_terminal_and_a_zombie_read_as_such() {
        let s = Stat::parse("7 (x) Z 1 7 7 0 -1 4194560 0 0 0 0 0 0").unwrap();
        assert!(s.exited());
        assert!(!s.in_foreground());
        assert_eq!(s.tpgid, -1);
    }

    #[test]
    fn a_truncated_or_nameless_line_is_none() {
        assert_eq!(Stat::parse("7 (x) S 1 7"), None);
        assert_eq!(Stat::parse("7 x S 1 7 7 0 -1 0 0 0 0 0 0 0"), None);
        assert_eq!(Stat::parse(""), None);
    }

    #[test]
    fn this_process_is_live_and_listed() {
        let own = std::process::id();
        let s = Stat::of(own).unwrap();
        assert!(!s.exited());
        assert_eq!(Stat::of_self().map(|s| s.ppid), Some(s.ppid));
        assert!(pids().contains(&own));
        assert!(!exited(own));
        assert!(exists(own) && threads(own).contains(&own));
        assert_eq!(status_field(Some(own), "Pid"), Some(own.to_string()));
        assert_eq!(status_field(None, "Pid"), Some(own.to_string()));
        assert_eq!(exe(own), std::env::current_exe().ok());
        assert_eq!(cmdline(own), std::env::args().collect::<Vec<_>>());
    }
}
