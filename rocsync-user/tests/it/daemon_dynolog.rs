//! dynolog's protocol on `rocsync daemon --dynolog-addr`: `dyno gputrace` requests make
//! Kineto-named traces, confined to the state directory; a synchronized start
//! (`PROFILE_START_TIME`) is answered at once and recorded from that time, a past one is
//! refused; one that cannot start when due is counted in `/metrics`. Needs root.

use std::{
    path::Path,
    process::Child,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use crate::common::{daemon::*, *};
use rocsync_tests::read_log;

/// One request as `dyno gputrace` sends it (native-endian i32 length, then JSON); the
/// answer. `start_ms`: `PROFILE_START_TIME` (0: now).
fn dyno(addr: &str, pids: &[u32], log: &Path, ms: u64, start_ms: u64) -> serde_json::Value {
    let config = format!(
        "ACTIVITIES_LOG_FILE={}\nPROFILE_START_TIME={start_ms}\nACTIVITIES_DURATION_MSECS={ms}",
        log.display()
    );
    let req = serde_json::json!({
        "fn": "setKinetOnDemandRequest", "config": config, "job_id": 0, "pids": pids,
        "process_limit": 3,
    })
    .to_string();
    dyno_exchange(addr, &req)
}

/// A daemon answering dynolog's protocol, and a scenario process it tracks that calls
/// the runtime in a loop for `ms`.
struct Looping {
    dir: TempDir,
    daemon: Daemon,
    /// The daemon's stderr, read to its end (a closed pipe would end the daemon).
    lines: Lines,
    addr: String,
    target: Child,
    pid: u32,
}

fn looping(name: &str, ms: u32) -> Option<Looping> {
    let (dir, exe) = daemon_test(name)?;
    let (daemon, mut lines) = start_daemon(&dir, &exe, &["--dynolog-addr", "127.0.0.1:0"]);
    let addr = lines
        .1
        .iter()
        .find_map(|l| l.strip_prefix("rocsync daemon: dynolog requests on "))
        .unwrap()
        .to_string();
    let target = tracked_loop(&dir, &exe, &mut lines, ms);
    let pid = target.id();
    Some(Looping {
        dir,
        daemon,
        lines,
        addr,
        target,
        pid,
    })
}

impl Looping {
    /// The trace dyno names `<log>_<pid>.json`, once written; then the process's end and
    /// the daemon's. The trace is checked against the process's own log (it has exited,
    /// so the log is whole): an unbroken run of its calls, each row the call it is, each
    /// wait resolved as the log says; with the seqs of that run.
    fn finish(mut self, log: &Path) -> (serde_json::Value, Window) {
        let stem = log.file_stem().unwrap().to_str().unwrap();
        let file = log.with_file_name(format!("{stem}_{}.json", self.pid));
        let waited = Instant::now();
        while !file.exists() {
            assert!(
                waited.elapsed() < Duration::from_secs(20),
                "no {}",
                file.display()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        assert!(self.target.wait().unwrap().success());
        stop(self.daemon);
        let t = read_json(&file);
        let window = assert_window_of_log(&t, self.pid, &read_log(&self.dir.path("loop.log")));
        (t, window)
    }
}

#[test]
fn dyno_gputrace_requests_make_kineto_named_traces() {
    let Some(l) = looping("dyno_gputrace_requests_make_kineto_named_traces", 3000) else {
        return;
    };
    let pid = l.pid;
    // Log files must lie in the state directory.
    let refused = dyno(&l.addr, &[pid], Path::new("/tmp/t.json"), 300, 0);
    assert_eq!(refused["processesMatched"], serde_json::json!([]));
    assert!(
        refused["error"].as_str().unwrap().contains("outside"),
        "{refused}"
    );
    let asked = l.dir.path("state/dyno/t.json");
    let answer = dyno(&l.addr, &[pid], &asked, 400, 0);
    assert_eq!(
        answer["processesMatched"],
        serde_json::json!([pid]),
        "{answer}"
    );
    // Written when the window ends, where dyno says: <log>_<pid>.json.
    let (t, window) = l.finish(&asked);
    let rows = runtime_rows(&t);
    assert!(rows.iter().all(|e| e["pid"] == pid));
    assert!(window.seqs.len() >= 3, "not one iteration of the loop");
}

fn unix_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
}

#[test]
fn a_synchronized_start_records_from_its_time() {
    let Some(l) = looping("a_synchronized_start_records_from_its_time", 6000) else {
        return;
    };
    let pid = l.pid;
    let asked = l.dir.path("state/dyno/sync.json");
    // A window that has begun elsewhere cannot be joined.
    let late = dyno(&l.addr, &[pid], &asked, 400, unix_ms() - 5000);
    let e = late["error"].as_str().unwrap_or_default();
    assert!(e.contains("in the past"), "{late}");
    let start_ms = unix_ms() + 2000;
    let answer = dyno(&l.addr, &[pid], &asked, 400, start_ms);
    let answered_ms = unix_ms();
    assert!(answered_ms < start_ms, "answered only at {answered_ms}");
    assert_eq!(
        answer["processesMatched"],
        serde_json::json!([pid]),
        "{answer}"
    );
    let status = daemon_status(&l.dir.path("rocsync.sock"));
    assert_eq!(status["scheduled"][0]["session"], "sync", "{status}");
    assert_eq!(
        status["traces"],
        serde_json::json!([]),
        "not recording yet: {status}"
    );
    // Every row lies in the window asked for: from the start time, for 400 ms (and the
    // grace a trace gives calls in flight), though the process was calling since before.
    let (t, window) = l.finish(&asked);
    assert!(window.seqs.len() >= 3, "not one iteration of the loop");
    let base_ns = t["baseTimeNanoseconds"].as_u64().unwrap();
    let at_ms: Vec<f64> = runtime_rows(&t)
        .iter()
        .map(|e| (base_ns as f64 + e["ts"].as_f64().unwrap() * 1e3) / 1e6)
        .collect();
    let first = at_ms.iter().copied().fold(f64::MAX, f64::min);
    let last = at_ms.iter().copied().fold(f64::MIN, f64::max);
    // Timers may fire a little late, never early; the clocks agree within a millisecond.
    let start = start_ms as f64;
    assert!(
        first >= start - 5.0,
        "first row {:.1} ms before the start",
        start - first
    );
    assert!(
        first < start + 250.0,
        "first row {:.1} ms after the start",
        first - start
    );
    assert!(
        last < start + 400.0 + 400.0,
        "last row {:.1} ms after the start",
        last - start
    );
}

#[test]
fn a_scheduled_trace_that_cannot_start_is_counted() {
    let name = "a_scheduled_trace_that_cannot_start_is_counted";
    let Some(mut l) = looping(name, 500) else {
        return;
    };
    let Some(python) = prometheus_python(name) else {
        return;
    };
    let asked = l.dir.path("state/dyno/gone.json");
    let answer = dyno(&l.addr, &[l.pid], &asked, 300, unix_ms() + 2500);
    assert_eq!(
        answer["processesMatched"],
        serde_json::json!([l.pid]),
        "{answer}"
    );
    // Gone (and reaped) before its start time: nothing to record then.
    assert!(l.target.wait().unwrap().success());
    l.lines
        .wait_for("scheduled dyno trace \"gone\" not started");
    let said = l.lines.1.last().unwrap().clone();
    assert!(said.contains(&l.pid.to_string()), "{said}");
    let m = Metrics::scrape(&python, &metrics_addr(&l.lines));
    let not_started = |origin| m.labelled("rocsync_traces_not_started_total", "origin", origin);
    assert_eq!(not_started("dyno_scheduled"), Some(1.0));
    assert_eq!(not_started("sampled"), Some(0.0));
    assert_eq!(m.types["rocsync_traces_not_started"], "counter");
    assert_eq!(m.sum("rocsync_traces_written_total", ""), 0);
    let stem = format!("gone_{}.json", l.pid);
    assert!(!asked.with_file_name(stem).exists());
    stop(l.daemon);
}
