//! Helpers shared by the integration tests.
#![allow(dead_code)]

use crate::common::End as _;
use std::{
    collections::{BTreeMap, BTreeSet},
    io::{BufRead, BufReader},
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
    time::{Duration, Instant},
};

use rocsync_tests::LoggedCall;

/// Root-only tests call this first; it prints why a test is skipped.
pub(crate) fn can_trace(test: &str) -> bool {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        rocsync_tests::skip(
            test,
            "needs root to load eBPF programs (CI runs it as root)",
        );
        return false;
    }
    true
}

/// The rocsync binary, run in a scratch directory: a capture without `-o` writes its
/// default-named trace into the working directory. A standalone capture (`run`,
/// `attach`) claims its agents at a socket nothing listens on, unless the test names one:
/// a daemon running on the host never answers it (`rocsync_tests::standalone`).
pub(crate) fn rocsync() -> Command {
    static CWD: std::sync::OnceLock<PathBuf> = std::sync::OnceLock::new();
    let cwd = CWD.get_or_init(|| {
        tempfile::Builder::new()
            .prefix("rocsync-test-cwd")
            .tempdir()
            .unwrap()
            .keep()
    });
    let mut cmd = Command::new(rocsync_tests::standalone());
    cmd.arg(env!("CARGO_BIN_EXE_rocsync"))
        .arg(cwd.join("none.sock"))
        .current_dir(cwd);
    with_signals(&mut cmd, &[]);
    cmd
}

/// `rocsync run --no-status -o OUT --raw RAW -- PROGRAM`: the program's arguments and
/// environment are the caller's to add.
pub(crate) fn rocsync_run_raw(out: &Path, raw: &Path, program: &Path) -> Command {
    let mut cmd = rocsync();
    (cmd.args(["run", "--no-status", "-o"]).arg(out))
        .arg("--raw")
        .arg(raw)
        .arg("--")
        .arg(program);
    cmd
}

/// The signals that end a capture, for which rocsync keeps an inherited SIG_IGN.
pub(crate) const ENDING: [i32; 4] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP, libc::SIGQUIT];

/// Starts `cmd` with the ending signals at their default but for `ignored`: a test runs
/// alike however the test harness was started (`nohup`, a background job ignoring
/// SIGINT and SIGQUIT).
pub(crate) fn with_signals(cmd: &mut Command, ignored: &'static [i32]) {
    use std::os::unix::process::CommandExt as _;
    // SAFETY: signal(2) is async-signal-safe; the closure touches nothing else.
    unsafe {
        cmd.pre_exec(move || {
            for sig in ENDING {
                let how = if ignored.contains(&sig) {
                    libc::SIG_IGN
                } else {
                    libc::SIG_DFL
                };
                libc::signal(sig, how);
            }
            Ok(())
        });
    }
}

/// The signal numbers set in a /proc/PID/status mask line (`SigIgn:`, `SigCgt:`).
pub(crate) fn signal_mask(status: &str, field: &str) -> Vec<i32> {
    let hex = status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .unwrap_or_else(|| panic!("no {field} in {status}"));
    let bits = u64::from_str_radix(hex.trim(), 16).unwrap();
    (1..=64).filter(|s| bits & (1 << (s - 1)) != 0).collect()
}

/// The same, of a live process.
pub(crate) fn process_signal_mask(pid: u32, field: &str) -> Vec<i32> {
    signal_mask(
        &std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap(),
        field,
    )
}

/// Waits for `child` at most `timeout`; past it, kills and reaps it and fails, so a test
/// never hangs on a process that should have ended.
pub(crate) fn wait_within(
    child: &mut Child,
    timeout: Duration,
    what: &str,
) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if start.elapsed() > timeout {
            child.end();
            panic!("{what}: still running after {timeout:?} (killed)");
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

pub(crate) struct TempDir(pub tempfile::TempDir);

impl TempDir {
    pub(crate) fn new() -> Self {
        Self(tempfile::tempdir().unwrap())
    }
    pub(crate) fn path(&self, name: &str) -> PathBuf {
        self.0.path().join(name)
    }
}

/// A FIFO at `path` (mode 0666): an output or input that must never be opened blocking.
pub(crate) fn make_fifo(path: &Path) {
    rustix::fs::mknodat(
        rustix::fs::CWD,
        path,
        rustix::fs::FileType::Fifo,
        rustix::fs::Mode::from_raw_mode(0o666),
        0,
    )
    .unwrap();
}

/// Reads a child's stderr lines until one contains `needle` (or panics after `timeout`);
/// returns the reader so the rest can be drained.
pub(crate) fn wait_for_line(child: &mut Child, needle: &str, timeout: Duration) -> Vec<String> {
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

pub(crate) fn spawn_piped(cmd: &mut Command) -> Child {
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn")
}

/// The edges a scenario's own log implies: for each successful-or-not wait on an event
/// (hipStreamWaitEvent*, hipEventSynchronize, hipEventQuery), the latest successful record of that
/// handle made before it with no successful destroy in between. Keyed by wait seq.
pub(crate) fn expected_edges(logged: &[LoggedCall]) -> BTreeMap<u64, Option<u64>> {
    let mut log = logged.to_vec();
    log.sort_by_key(|l| l.seq);
    let mut last_record: BTreeMap<u64, u64> = BTreeMap::new();
    let mut edges = BTreeMap::new();
    for l in &log {
        // The CUDA twins under their HIP names (the scenarios are one source).
        let api = l.api.replacen("cuda", "hip", 1).replace("_ptsz", "_spt");
        match api.as_str() {
            "hipEventRecord" | "hipEventRecord_spt" | "hipEventRecordWithFlags" if l.ret == 0 => {
                last_record.insert(l.args[0], l.seq);
            }
            "hipEventDestroy" if l.ret == 0 => {
                last_record.remove(&l.args[0]);
            }
            // A wait that failed waited on nothing: no edge (a query's NotReady, 600, is
            // an answer).
            "hipStreamWaitEvent" | "hipStreamWaitEvent_spt" if l.ret == 0 => {
                edges.insert(l.seq, last_record.get(&l.args[1]).copied());
            }
            "hipEventSynchronize" if l.ret == 0 => {
                edges.insert(l.seq, last_record.get(&l.args[0]).copied());
            }
            "hipEventQuery" if l.ret == 0 || l.ret == 600 => {
                edges.insert(l.seq, last_record.get(&l.args[0]).copied());
            }
            _ => {}
        }
    }
    edges
}

/// Edges in a Kineto trace: wait correlation → record correlation (−1 unresolved), from
/// the device-side sync rows. Checks that the runtime rows agree, and that every arrow is
/// right at both ends: each `hip_sync_dep` starts inside the record's runtime row and ends
/// inside the wait's sync row, each `ac2g` joins a call's runtime row to its own sync row.
pub(crate) fn trace_edges(trace: &serde_json::Value) -> BTreeMap<u64, i64> {
    let events = trace["traceEvents"].as_array().expect("traceEvents");
    let mut edges = BTreeMap::new();
    let mut runtime = BTreeMap::new();
    for e in events {
        let a = &e["args"];
        match (e["ph"].as_str(), e["cat"].as_str()) {
            (Some("X"), Some("cuda_sync"))
                if a.get("wait_on_cuda_event_record_corr_id").is_some() =>
            {
                edges.insert(
                    a["correlation"].as_u64().unwrap(),
                    a["wait_on_cuda_event_record_corr_id"].as_i64().unwrap(),
                );
            }
            (Some("X"), Some("cuda_runtime")) => {
                let field =
                    a.as_object().unwrap().keys().find(|k| {
                        k.starts_with("wait_on_") && k.ends_with("_event_record_corr_id")
                    });
                if let Some(k) = field {
                    runtime.insert(a["correlation"].as_u64().unwrap(), a[k].as_i64().unwrap());
                }
            }
            _ => {}
        }
    }
    assert_eq!(edges, runtime, "runtime and device rows disagree");
    let want: BTreeSet<(u64, u64)> = edges
        .iter()
        .filter(|(_, r)| **r >= 0)
        .map(|(w, r)| (*w, *r as u64))
        .collect();
    assert_eq!(
        arrows(events, "hip_sync_dep", "cuda_runtime", "cuda_sync")
            .into_iter()
            .map(|(record, wait)| (wait, record))
            .collect::<BTreeSet<_>>(),
        want,
        "record→wait arrows, by the rows at their two ends"
    );
    for (from, to) in arrows(events, "ac2g", "cuda_runtime", "cuda_sync") {
        assert_eq!(from, to, "an ac2g arrow joins a call's own two rows");
    }
    edges
}

/// The arrows of one category as (correlation of the row its start lies in, correlation
/// of the row its end lies in), the rows of the given categories on the same track.
pub(crate) fn arrows(
    events: &[serde_json::Value],
    cat: &str,
    start_cat: &str,
    end_cat: &str,
) -> Vec<(u64, u64)> {
    // Each track's rows of a category, in event order, as plain numbers: a search of
    // the JSON values for every arrow end is quadratic in a large trace's rows.
    // (category, pid, tid), the ids as JSON text: numbers or strings alike.
    type Track = (String, String, String);
    let track_of = |c: &str, e: &serde_json::Value| {
        (c.to_string(), e["pid"].to_string(), e["tid"].to_string())
    };
    let mut rows: BTreeMap<Track, Vec<(f64, f64, u64)>> = BTreeMap::new();
    for r in events.iter().filter(|r| r["ph"] == "X") {
        let Some(c) = r["cat"].as_str() else {
            continue;
        };
        if c == start_cat || c == end_cat {
            let (t, d) = (r["ts"].as_f64().unwrap(), r["dur"].as_f64().unwrap());
            let corr = r["args"]["correlation"].as_u64().unwrap();
            rows.entry(track_of(c, r))
                .or_default()
                .push((t, t + d, corr));
        }
    }
    let row_at = |e: &serde_json::Value, row_cat: &str| -> u64 {
        let ts = e["ts"].as_f64().unwrap();
        rows.get(&track_of(row_cat, e))
            .and_then(|rs| {
                rs.iter()
                    .find(|(t, end, _)| t - 0.0005 <= ts && ts <= end + 0.0005)
            })
            .unwrap_or_else(|| panic!("no {row_cat} row under the {cat} arrow end {e}"))
            .2
    };
    let mut ends: BTreeMap<u64, (Option<u64>, Option<u64>)> = BTreeMap::new();
    for e in events.iter().filter(|e| e["cat"] == cat) {
        let id = e["id"].as_u64().unwrap();
        match e["ph"].as_str() {
            Some("s") => ends.entry(id).or_default().0 = Some(row_at(e, start_cat)),
            Some("f") => ends.entry(id).or_default().1 = Some(row_at(e, end_cat)),
            _ => {}
        }
    }
    ends.into_iter()
        .map(|(id, (s, f))| {
            (
                s.unwrap_or_else(|| panic!("{cat} {id} has no start")),
                f.unwrap_or_else(|| panic!("{cat} {id} has no end")),
            )
        })
        .collect()
}

pub(crate) fn read_json(path: &Path) -> serde_json::Value {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice(&bytes).expect("valid JSON")
}
