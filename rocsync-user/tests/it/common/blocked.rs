//! Processes blocked where a test put them, and the stack reader run on them as the daemon
//! runs it: a child of the rocsync binary, under its bounds.

use std::{
    collections::BTreeSet,
    time::{Duration, Instant},
};

use rocsync::stacks::{Reader, Stacks};

/// The reader as the daemon runs it, but for the binary (this test binary is not rocsync).
pub(crate) fn reader() -> Reader {
    Reader {
        exe: env!("CARGO_BIN_EXE_rocsync").into(),
        ..Reader::default()
    }
}

/// `pid`'s stacks read by `reader`, `tid` the blocked thread.
pub(crate) fn read_stacks_with(reader: &Reader, pid: u32, tid: u32) -> Stacks {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(reader.read(pid, tid))
}

/// The same with room for a loaded machine: what these tests check is what is read.
pub(crate) fn read_stacks(pid: u32, tid: u32) -> Stacks {
    let generous = Reader {
        wall: Duration::from_secs(30),
        cpu_s: 20,
        ..reader()
    };
    read_stacks_with(&generous, pid, tid)
}

/// Waits until thread `tid` of `pid` sits in a system call (where it blocks).
pub(crate) fn wait_in_syscall(pid: u32, tid: u32) {
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
pub(crate) fn tids(pid: u32) -> BTreeSet<u32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_str().unwrap().parse().unwrap())
        .collect()
}

/// Whether the tests run as root (the reader opens other processes' mapped files).
pub(crate) fn can_read_stacks(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    root || !rocsync_tests::skip(test, "needs root (map_files)")
}

/// A return probe on `symbol` of the ELF file `path` for process `pid` alone, as the
/// daemon puts on a synchronisation: a counting perf event of the kernel's uprobe PMU (no
/// program), in place while the descriptor is open.
pub(crate) fn return_probe(pid: u32, path: &std::path::Path, symbol: &str) -> std::os::fd::OwnedFd {
    use object::{Object as _, ObjectSegment as _, ObjectSymbol as _};
    use std::os::fd::FromRawFd as _;
    let data = std::fs::read(path).unwrap();
    let elf = object::File::parse(&*data).unwrap();
    let sym = elf
        .dynamic_symbols()
        .find(|s| s.name() == Ok(symbol))
        .unwrap();
    let seg = elf
        .segments()
        .find(|s| (s.address()..s.address() + s.size()).contains(&sym.address()))
        .unwrap();
    let offset = sym.address() - seg.address() + seg.file_range().0;
    let pmu = std::fs::read_to_string("/sys/bus/event_source/devices/uprobe/type").unwrap();
    let c_path = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    // perf_event_attr, version 1 (72 bytes): type, size, config (bit 0: a return probe),
    // ..., config1 (the path), config2 (the offset); enabled, counting.
    let mut attr = [0u64; 9];
    attr[0] = u64::from(pmu.trim().parse::<u32>().unwrap()) | (72 << 32);
    attr[1] = 1;
    attr[7] = c_path.as_ptr() as u64;
    attr[8] = offset;
    // SAFETY: a perf_event_attr of the size given, its path alive across the call.
    let fd = unsafe {
        // PERF_FLAG_FD_CLOEXEC: 8.
        libc::syscall(
            libc::SYS_perf_event_open,
            attr.as_ptr(),
            pid as i32,
            -1,
            -1,
            8,
        )
    };
    assert!(
        fd >= 0,
        "perf_event_open: {}",
        std::io::Error::last_os_error()
    );
    // SAFETY: a descriptor the kernel just gave this process.
    unsafe { std::os::fd::OwnedFd::from_raw_fd(fd as i32) }
}
