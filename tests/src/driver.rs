//! Drives a HIP or CUDA runtime from Rust: the library is loaded with `libloading` (the
//! simulated one or a real `libamdhip64`/`libcudart`), its sync family called through
//! typed wrappers, and every hooked call logged as the C scenarios log theirs
//! ([`crate::read_log`] reads both), so new scenarios are written in Rust.

use std::{
    ffi::c_void,
    io::Write as _,
    path::Path,
    sync::{
        Mutex,
        atomic::{AtomicU64, Ordering},
    },
};

use libloading::{Library, Symbol};

/// A stream or event handle, as the runtime hands it out.
pub type Handle = usize;

type Status = i32;

/// One logged call: seq, tid, API, arguments, return code, CLOCK_MONOTONIC before/after.
struct Line {
    seq: u64,
    tid: i32,
    api: String,
    args: [u64; 3],
    ret: Status,
    before: u64,
    after: u64,
}

/// A loaded runtime. `prefix` is `hip` or `cuda`, found from the library's exports.
pub struct Runtime {
    lib: Library,
    prefix: &'static str,
    seq: AtomicU64,
    log: Mutex<Vec<Line>>,
}

/// CLOCK_MONOTONIC in ns, as the C programs' logs and the probes (`bpf_ktime_get_ns`)
/// read it.
pub fn mono_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

impl Runtime {
    /// Loads the runtime at `path`; HIP or CUDA by which `*EventRecord` it exports.
    pub fn load(path: &Path) -> Result<Self, String> {
        // SAFETY: loading a runtime library runs its initialisers, as linking it would.
        let lib = unsafe { Library::new(path) }.map_err(|e| format!("{}: {e}", path.display()))?;
        let has = |name: &[u8]| {
            // SAFETY: only the symbol's presence is checked; it is not called.
            unsafe { lib.get::<*const c_void>(name) }.is_ok()
        };
        let prefix = if has(b"hipEventRecord") {
            "hip"
        } else if has(b"cudaEventRecord") {
            "cuda"
        } else {
            return Err(format!("{}: exports no *EventRecord", path.display()));
        };
        Ok(Runtime {
            lib,
            prefix,
            seq: AtomicU64::new(0),
            log: Mutex::new(Vec::new()),
        })
    }

    fn symbol<T>(&self, name: &str) -> Symbol<'_, T> {
        let full = format!("{}{name}", self.prefix);
        // SAFETY: every caller names the type of the runtime's own prototype for `name`.
        unsafe { self.lib.get(full.as_bytes()) }
            .unwrap_or_else(|e| panic!("{full} not exported: {e}"))
    }

    /// Makes one call and logs it (hooked calls only: the log is what a tracer should see).
    /// `call` returns the status and the arguments to log, read after the call so that
    /// out-parameters log the value written.
    fn logged(&self, name: &str, call: impl FnOnce() -> (Status, [u64; 3])) -> Status {
        let seq = self.seq.fetch_add(1, Ordering::SeqCst) + 1;
        let before = mono_ns();
        let (ret, args) = call();
        let after = mono_ns();
        // SAFETY: gettid has no preconditions.
        let tid = unsafe { libc::gettid() };
        let api = format!("{}{name}", self.prefix);
        let line = Line {
            seq,
            tid,
            api,
            args,
            ret,
            before,
            after,
        };
        self.log.lock().unwrap().push(line);
        ret
    }

    pub fn set_device(&self, device: i32) -> Status {
        let f = self.symbol::<unsafe extern "C" fn(i32) -> Status>("SetDevice");
        self.logged("SetDevice", || {
            // SAFETY: (int device) -> error.
            (unsafe { f(device) }, [device as u64, 0, 0])
        })
    }

    pub fn stream_create(&self) -> Handle {
        let f = self.symbol::<unsafe extern "C" fn(*mut Handle) -> Status>("StreamCreate");
        let mut s: Handle = 0;
        let ret = self.logged("StreamCreate", || {
            // SAFETY: (stream_t *out) -> error; `s` outlives the call.
            let ret = unsafe { f(&mut s) };
            (ret, [s as u64, 0, 0])
        });
        assert_eq!(ret, 0, "StreamCreate");
        s
    }

    /// Not hooked by rocsync, so not logged.
    pub fn event_create(&self) -> Handle {
        let f = self.symbol::<unsafe extern "C" fn(*mut Handle) -> Status>("EventCreate");
        let mut e: Handle = 0;
        // SAFETY: (event_t *out) -> error; `e` outlives the call.
        assert_eq!(unsafe { f(&mut e) }, 0, "EventCreate");
        e
    }

    pub fn event_record(&self, event: Handle, stream: Handle) -> Status {
        let f = self.symbol::<unsafe extern "C" fn(Handle, Handle) -> Status>("EventRecord");
        let args = [event as u64, stream as u64, 0];
        // SAFETY: (event, stream) -> error.
        self.logged("EventRecord", || (unsafe { f(event, stream) }, args))
    }

    pub fn stream_wait_event(&self, stream: Handle, event: Handle) -> Status {
        let f =
            self.symbol::<unsafe extern "C" fn(Handle, Handle, u32) -> Status>("StreamWaitEvent");
        let args = [stream as u64, event as u64, 0];
        // SAFETY: (stream, event, flags) -> error.
        self.logged("StreamWaitEvent", || (unsafe { f(stream, event, 0) }, args))
    }

    /// Handle-only calls: `*EventSynchronize`, `*EventQuery`, `*EventDestroy`,
    /// `*StreamSynchronize`, `*StreamDestroy`.
    pub fn on(&self, name: &str, handle: Handle) -> Status {
        let f = self.symbol::<unsafe extern "C" fn(Handle) -> Status>(name);
        // SAFETY: each of these takes one handle and returns an error code.
        self.logged(name, || (unsafe { f(handle) }, [handle as u64, 0, 0]))
    }

    pub fn device_synchronize(&self) -> Status {
        let f = self.symbol::<unsafe extern "C" fn() -> Status>("DeviceSynchronize");
        // SAFETY: (void) -> error.
        self.logged("DeviceSynchronize", || (unsafe { f() }, [0; 3]))
    }

    /// Simulated device work on `stream` (the simulated runtimes' `*SimLaunch`); a no-op on
    /// a real runtime, which has no such export. Not hooked, not logged.
    pub fn launch(&self, stream: Handle, work_us: u32) {
        let full = format!("{}SimLaunch", self.prefix);
        // SAFETY: (stream, work_us) -> error, where exported.
        if let Ok(f) = unsafe {
            self.lib
                .get::<unsafe extern "C" fn(Handle, u32) -> Status>(full.as_bytes())
        } {
            // SAFETY: as above.
            unsafe { f(stream, work_us) };
        }
    }

    /// Writes the log in the C scenarios' format, ordered by seq.
    pub fn write_log(&self, path: &Path) -> std::io::Result<()> {
        let mut lines = self.log.lock().unwrap();
        lines.sort_by_key(|l| l.seq);
        let mut out = std::io::BufWriter::new(std::fs::File::create(path)?);
        for l in lines.iter() {
            writeln!(
                out,
                "{} {} {} {:#x} {:#x} {:#x} {} {} {}",
                l.seq, l.tid, l.api, l.args[0], l.args[1], l.args[2], l.ret, l.before, l.after
            )?;
        }
        out.flush()
    }
}
