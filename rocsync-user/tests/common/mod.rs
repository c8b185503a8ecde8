//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::{
    collections::BTreeMap,
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
    time::{Duration, Instant},
};

use rocsync::trace::{
    call::{ArgKind, Call, arg_kind},
    raw,
};
use rocsync_tests::LoggedCall;

/// Root-only tests call this first; it prints why a test is skipped.
pub fn can_trace(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped {test}: needs root to load eBPF programs (CI runs it as root)");
        return false;
    }
    true
}

pub fn rocsync() -> Command {
    Command::new(env!("CARGO_BIN_EXE_rocsync"))
}

pub fn run_ok(cmd: &mut Command) -> Output {
    let out = cmd.output().expect("spawn rocsync");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

pub fn read_raw(path: &Path) -> (raw::Header, Vec<Call>) {
    let f = std::fs::File::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    raw::read(BufReader::new(f)).expect("valid raw capture")
}

/// A call reduced to what the scenario can know: thread, API, arguments, return code.
/// Integer arguments are compared as the C `int`/`unsigned` they are.
pub fn key(c: &Call) -> (u32, String, [u64; 3], i64) {
    let mut args = [0u64; 3];
    for (i, name) in c.api.arg_names().iter().enumerate() {
        args[i] = match arg_kind(name) {
            ArgKind::Handle => c.args[i],
            _ => c.args[i] & 0xffff_ffff,
        };
    }
    (
        c.tid,
        c.api.symbol().to_string(),
        args,
        c.ret.expect("call returned"),
    )
}

pub fn logged_key(l: &LoggedCall) -> (u32, String, [u64; 3], i64) {
    (l.tid, l.api.clone(), l.args, l.ret)
}

/// Per thread, in call order.
pub fn by_thread<T, K: Ord>(
    items: impl IntoIterator<Item = T>,
    tid: impl Fn(&T) -> K,
) -> BTreeMap<K, Vec<T>> {
    let mut m: BTreeMap<K, Vec<T>> = BTreeMap::new();
    for i in items {
        m.entry(tid(&i)).or_default().push(i);
    }
    m
}

/// Asserts the capture holds exactly the scenario's calls, each once, in each thread's
/// order.
pub fn assert_same_calls(logged: &[LoggedCall], mut captured: Vec<Call>) {
    captured.sort_by_key(|c| c.correlation);
    let mut logged = logged.to_vec();
    logged.sort_by_key(|l| l.seq);
    let want = by_thread(logged.iter().map(logged_key), |k| k.0);
    let got = by_thread(captured.iter().map(key), |k| k.0);
    assert_eq!(got.len(), want.len(), "threads differ");
    for (tid, w) in &want {
        let g = got
            .get(tid)
            .unwrap_or_else(|| panic!("thread {tid} missing from the capture"));
        assert_eq!(
            g.len(),
            w.len(),
            "thread {tid}: {} captured, {} made",
            g.len(),
            w.len()
        );
        for (i, (a, b)) in g.iter().zip(w).enumerate() {
            assert_eq!(a, b, "thread {tid}, call {i}");
        }
    }
}

pub struct TempDir(pub tempfile::TempDir);

impl TempDir {
    pub fn new() -> Self {
        Self(tempfile::tempdir().unwrap())
    }
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.path().join(name)
    }
}

/// Reads a child's stderr lines until one contains `needle` (or panics after `timeout`);
/// returns the reader so the rest can be drained.
pub fn wait_for_line(child: &mut Child, needle: &str, timeout: Duration) -> Vec<String> {
    let stderr = child.stderr.take().expect("piped stderr");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let start = Instant::now();
    let mut seen = Vec::new();
    loop {
        let left = timeout.checked_sub(start.elapsed()).unwrap_or_else(|| {
            panic!("no line containing {needle:?} within {timeout:?}; saw {seen:#?}")
        });
        match rx.recv_timeout(left) {
            Ok(line) => {
                let hit = line.contains(needle);
                seen.push(line);
                if hit {
                    // Keep draining in the background so the child never blocks on stderr.
                    std::thread::spawn(move || while rx.recv().is_ok() {});
                    return seen;
                }
            }
            Err(_) => panic!("no line containing {needle:?}; saw {seen:#?}"),
        }
    }
}

pub fn spawn_piped(cmd: &mut Command) -> Child {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn")
}
