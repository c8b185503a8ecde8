//! Processes blocked where a test put them, and the stack reader run on them as the daemon
//! runs it: a child of the rocsync binary, under its bounds.

use std::{
    collections::BTreeSet,
    time::{Duration, Instant},
};

use rocsync::stacks::{Reader, Stacks};

/// The reader as the daemon runs it, but for the binary (this test binary is not rocsync).
pub fn reader() -> Reader {
    Reader {
        exe: env!("CARGO_BIN_EXE_rocsync").into(),
        ..Reader::default()
    }
}

/// `pid`'s stacks read by `reader`, `tid` the blocked thread.
pub fn read_stacks_with(reader: &Reader, pid: u32, tid: u32) -> Stacks {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(reader.read(pid, tid))
}

/// The same with room for a loaded machine: what these tests check is what is read.
pub fn read_stacks(pid: u32, tid: u32) -> Stacks {
    let generous = Reader {
        wall: Duration::from_secs(30),
        cpu_s: 20,
        ..reader()
    };
    read_stacks_with(&generous, pid, tid)
}

/// Waits until thread `tid` of `pid` sits in a system call (where it blocks).
pub fn wait_in_syscall(pid: u32, tid: u32) {
    let since = Instant::now();
    let file = format!("/proc/{pid}/task/{tid}/syscall");
    while std::fs::read_to_string(&file)
        .unwrap_or_default()
        .starts_with("running")
    {
        assert!(
            since.elapsed() < Duration::from_secs(30),
            "{tid} never blocked"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// `pid`'s threads now (host tids).
pub fn tids(pid: u32) -> BTreeSet<u32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_str().unwrap().parse().unwrap())
        .collect()
}

/// Whether the tests run as root (the reader opens other processes' mapped files).
pub fn can_read_stacks(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    root || !rocsync_tests::skip(test, "needs root (map_files)")
}
