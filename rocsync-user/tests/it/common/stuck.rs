//! Where a process that stopped answering is: for a test's failure message, so that a
//! daemon silent under load (seen once in a full run) says what held it.

use std::path::Path;

/// The process listening on TCP `addr` (`127.0.0.1:PORT`), and each of its threads' name,
/// kernel wait channel, system call and kernel stack.
pub(crate) fn listener_threads(addr: &str) -> String {
    let Some(pid) = addr
        .rsplit_once(':')
        .and_then(|(_, port)| port.parse().ok())
        .and_then(listening_inode)
        .and_then(owner)
    else {
        return format!("no process found listening on {addr}");
    };
    let mut out = format!("pid {pid}, listening on {addr}:\n");
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task"))
        .into_iter()
        .flatten();
    for task in tasks.flatten() {
        let dir = task.path();
        let read = |f: &str| std::fs::read_to_string(dir.join(f)).unwrap_or_default();
        out += &format!(
            "  {} {:?} wchan {:?} syscall {:?}\n{}",
            task.file_name().to_string_lossy(),
            read("comm").trim(),
            read("wchan"),
            read("syscall").trim(),
            read("stack")
        );
    }
    out
}

/// The inode of the socket listening on `port` (state 0A in /proc/net/tcp).
fn listening_inode(port: u16) -> Option<u64> {
    let table = std::fs::read_to_string("/proc/net/tcp").ok()?;
    table.lines().skip(1).find_map(|l| {
        let f: Vec<&str> = l.split_whitespace().collect();
        let local_port = u16::from_str_radix(f.get(1)?.rsplit_once(':')?.1, 16).ok()?;
        (local_port == port && f.get(3) == Some(&"0A")).then(|| f.get(9)?.parse().ok())?
    })
}

/// The process holding socket `inode`.
fn owner(inode: u64) -> Option<u32> {
    let wanted = format!("socket:[{inode}]");
    std::fs::read_dir("/proc").ok()?.flatten().find_map(|p| {
        let pid: u32 = p.file_name().to_str()?.parse().ok()?;
        let fds = std::fs::read_dir(Path::new("/proc").join(pid.to_string()).join("fd")).ok()?;
        fds.flatten()
            .any(|fd| std::fs::read_link(fd.path()).is_ok_and(|l| l.as_os_str() == wanted.as_str()))
            .then_some(pid)
    })
}
