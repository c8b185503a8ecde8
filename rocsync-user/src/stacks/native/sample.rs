//! The user registers and stack of a thread running on a CPU, from one perf sample: a
//! spinning synchronize (CUDA's default scheduling) sits in no system call, so
//! `/proc/PID/task/TID/syscall` says only `running`. A software task-clock event on the
//! thread samples it after 100 µs of its CPU time; the kernel copies its registers and the
//! top of its stack into our ring, and the event is closed at once. The thread is never
//! stopped; it pays one sample's copy (tens of µs at most).

use std::{
    os::fd::{AsRawFd, FromRawFd, OwnedFd},
    time::{Duration, Instant},
};

use perf_event_open_sys::bindings as perf;

/// x86-64's perf register indices (`arch/x86/include/uapi/asm/perf_regs.h`).
const REG_BP: u64 = 6;
const REG_SP: u64 = 7;
const REG_IP: u64 = 8;
/// The stack copied: a sample record's size is a u16, so under 64 KiB with the rest.
const STACK_BYTES: u32 = 60 * 1024;
/// The ring's data pages (a power of two), one record's room with margin.
const DATA_PAGES: usize = 32;
/// The thread's CPU time between samples.
const PERIOD_NS: u64 = 100_000;
const PAGE: usize = 4096;

/// One sample: the registers the unwinder starts from and the stack above `sp`.
#[derive(Debug)]
pub(super) struct Sampled {
    pub ip: u64,
    pub sp: u64,
    pub bp: u64,
    pub stack: Vec<u8>,
}

/// One sample of thread `tid` (a host tid) within `wait`; an error says why none came.
pub(super) fn user_stack(tid: u32, wait: Duration) -> Result<Sampled, String> {
    let event = open(tid)?;
    let ring = Ring::map(&event)?;
    let deadline = Instant::now() + wait;
    loop {
        if let Some(sampled) = ring.first_sample()? {
            return Ok(sampled);
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(format!(
                "running, but no sample of its stack came within {wait:?} (it left the CPU)"
            ));
        }
        let mut poll = libc::pollfd {
            fd: event.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one pollfd, ours, for the length given.
        unsafe { libc::poll(&mut poll, 1, left.as_millis().max(1) as i32) };
    }
}

fn open(tid: u32) -> Result<OwnedFd, String> {
    let mut attr = perf::perf_event_attr {
        type_: perf::PERF_TYPE_SOFTWARE,
        size: std::mem::size_of::<perf::perf_event_attr>() as u32,
        config: perf::PERF_COUNT_SW_TASK_CLOCK as u64,
        sample_type: (perf::PERF_SAMPLE_REGS_USER | perf::PERF_SAMPLE_STACK_USER) as u64,
        sample_regs_user: (1 << REG_BP) | (1 << REG_SP) | (1 << REG_IP),
        sample_stack_user: STACK_BYTES,
        ..Default::default()
    };
    attr.__bindgen_anon_1.sample_period = PERIOD_NS;
    attr.__bindgen_anon_2.wakeup_events = 1;
    attr.set_exclude_hv(1);
    // SAFETY: attr is a valid perf_event_attr of the size it says; the kernel checks the
    // rest (the thread, our right to sample it).
    let fd = unsafe {
        perf_event_open_sys::perf_event_open(
            &mut attr,
            tid as libc::pid_t,
            -1,
            -1,
            perf::PERF_FLAG_FD_CLOEXEC as libc::c_ulong,
        )
    };
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        return Err(format!(
            "cannot sample the running thread {tid} (perf_event_open: {e})"
        ));
    }
    // SAFETY: a descriptor the kernel just gave us, owned from here.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// The event's ring: a metadata page, then `DATA_PAGES` of records.
struct Ring {
    base: *mut u8,
    len: usize,
}

impl Ring {
    fn map(event: &OwnedFd) -> Result<Self, String> {
        let len = (1 + DATA_PAGES) * PAGE;
        // SAFETY: a fresh shared read-write mapping of the event's ring (the kernel wants
        // it writable to accept `data_tail`), unmapped in `drop`.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                event.as_raw_fd(),
                0,
            )
        };
        if base == libc::MAP_FAILED {
            let e = std::io::Error::last_os_error();
            return Err(format!("cannot map the sample ring ({e})"));
        }
        Ok(Self {
            base: base.cast(),
            len,
        })
    }

    /// The first sample record written, if one has been.
    fn first_sample(&self) -> Result<Option<Sampled>, String> {
        let meta = self.base.cast::<perf::perf_event_mmap_page>();
        // SAFETY: the metadata page is mapped; the kernel writes `data_head` concurrently,
        // read once, and the records below it only after an acquire fence.
        let head = unsafe { std::ptr::read_volatile(&raw const (*meta).data_head) } as usize;
        std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
        let size = DATA_PAGES * PAGE;
        // SAFETY: the data pages follow the metadata page inside the mapping.
        let data = unsafe { std::slice::from_raw_parts(self.base.add(PAGE), size) };
        let mut at = 0;
        // Records before the first sample (a throttle, say) are skipped; the ring is read
        // from its start, once: nothing wraps before a first record this size.
        while at + 8 <= head.min(size) {
            let kind = u32::from_ne_bytes(data[at..at + 4].try_into().unwrap_or_default());
            let len = u16::from_ne_bytes(data[at + 6..at + 8].try_into().unwrap_or_default());
            let end = at + len as usize;
            if len < 8 || end > size {
                return Err("a malformed record in the sample ring".into());
            }
            if kind == perf::PERF_RECORD_SAMPLE {
                return parse(&data[at + 8..end]).map(Some);
            }
            at = end;
        }
        Ok(None)
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // SAFETY: the mapping `map` made, of its length.
        unsafe { libc::munmap(self.base.cast(), self.len) };
    }
}

/// A sample's body: `abi, bp, sp, ip` (the registers in index order), then
/// `size, stack[size], dyn_size`.
fn parse(body: &[u8]) -> Result<Sampled, String> {
    let word = |i: usize| -> Option<u64> {
        Some(u64::from_ne_bytes(
            body.get(i * 8..i * 8 + 8)?.try_into().ok()?,
        ))
    };
    let short = || "a sample shorter than its fields".to_string();
    let abi = word(0).ok_or_else(short)?;
    if abi == 0 {
        return Err("the sample has no user registers (the thread ran in the kernel only)".into());
    }
    let (bp, sp, ip) = (
        word(1).ok_or_else(short)?,
        word(2).ok_or_else(short)?,
        word(3).ok_or_else(short)?,
    );
    let size = word(4).ok_or_else(short)? as usize;
    let stack = body.get(40..40 + size).ok_or_else(short)?;
    let dyn_size = word(5 + size / 8).ok_or_else(short)? as usize;
    Ok(Sampled {
        ip,
        sp,
        bp,
        stack: stack[..dyn_size.min(size)].to_vec(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sample_body_is_registers_then_the_stack_copied() {
        let mut body = Vec::new();
        for w in [2u64, 0x10, 0x7ff0, 0x4000, 16] {
            body.extend(w.to_ne_bytes());
        }
        body.extend([7u8; 16]);
        body.extend(8u64.to_ne_bytes());
        let s = parse(&body).unwrap();
        assert_eq!((s.bp, s.sp, s.ip), (0x10, 0x7ff0, 0x4000));
        assert_eq!(s.stack, vec![7u8; 8], "only dyn_size bytes are the stack");
        body[..8].copy_from_slice(&0u64.to_ne_bytes());
        assert!(parse(&body).unwrap_err().contains("no user registers"));
        assert!(parse(&body[..20]).is_err());
    }

    /// This thread's own spinning sibling, sampled: its instruction pointer is in this
    /// program's code and its stack pointer inside the copy's range.
    #[test]
    fn a_spinning_thread_is_sampled_without_stopping_it() {
        // SAFETY: geteuid has no preconditions.
        if unsafe { libc::geteuid() } != 0 {
            eprintln!("needs root (perf_event_open of a thread): run as root, as CI does");
            return;
        }
        use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
        static STOP: AtomicBool = AtomicBool::new(false);
        static SPINS: AtomicU64 = AtomicU64::new(0);
        let (tx, rx) = std::sync::mpsc::channel();
        let spinner = std::thread::spawn(move || {
            // SAFETY: gettid has no preconditions.
            tx.send(unsafe { libc::gettid() } as u32).unwrap();
            while !STOP.load(Ordering::Relaxed) {
                SPINS.fetch_add(1, Ordering::Relaxed);
            }
        });
        let tid = rx.recv().unwrap();
        let sampled = user_stack(tid, Duration::from_secs(2));
        let before = SPINS.load(Ordering::Relaxed);
        std::thread::sleep(Duration::from_millis(20));
        let running = SPINS.load(Ordering::Relaxed) > before;
        STOP.store(true, Ordering::Relaxed);
        spinner.join().unwrap();
        let sampled = sampled.unwrap();
        assert!(running, "the thread spins on after its sample");
        assert!(sampled.ip != 0 && sampled.sp != 0);
        assert!(!sampled.stack.is_empty());
    }
}
