//! dynolog's protocol on `rocsync daemon --dynolog-addr`: `dyno gputrace` requests make
//! Kineto-named traces, confined to the state directory; a synchronized start
//! (`PROFILE_START_TIME`) is answered at once and recorded from that time, a past one is
//! refused; one that cannot start when due is counted in `/metrics`. Needs root.

use std::{
    path::Path,
    time::{Duration, Instant, SystemTime, UNIX_EPOCH},
};

use crate::common::apis::{has_runtime_row, traced_by_default};
use crate::common::{daemon::*, *};
use rocsync_tests::{LoggedCall, read_log};

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
    target: Reaped,
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
    fn finish(mut self, log: &Path) -> (serde_json::Value, Window, Vec<LoggedCall>) {
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
        let logged = read_log(&self.dir.path("loop.log"));
        let window = assert_window_of_log(&t, self.pid, &logged);
        (t, window, logged)
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
    let (t, window, _) = l.finish(&asked);
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
    // Far enough ahead that the answer, sent at once, comes well before it.
    let start_ms = unix_ms() + 3000;
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
    let (t, window, logged) = l.finish(&asked);
    assert!(window.seqs.len() >= 3, "not one iteration of the loop");
    let recorded = Recorded::of(&t);
    // Never before the time asked (timers fire late, never early; the clocks agree
    // within a millisecond), and for the time asked (switching on takes a moment of it).
    let start_us = start_ms * 1000;
    assert!(
        recorded.from_us + 1000 >= start_us,
        "recording began {} µs before the start",
        start_us.saturating_sub(recorded.from_us)
    );
    assert!(
        recorded.until_us - recorded.from_us >= 350_000,
        "recorded {} µs of 400 ms",
        recorded.until_us - recorded.from_us
    );
    // How late it began depends on the machine's load: said, and bounded only where a
    // start is lost rather than late (the whole window gone by).
    let late_ms = recorded.from_us.saturating_sub(start_us) / 1000;
    eprintln!("a_synchronized_start: recording began {late_ms} ms after the time asked");
    assert!(
        late_ms < 2000,
        "recording began {late_ms} ms after the start"
    );
    // Every row lies in what it recorded, though the process was calling since before;
    // and against the process's log, every call begun once recording was on is there up
    // to the window's last row (the tail is what was read before the switch-off).
    let rows_us: Vec<u64> = runtime_rows(&t)
        .iter()
        .map(|e| recorded.base_us + e["ts"].as_f64().unwrap().round() as u64)
        .collect();
    let first = rows_us.iter().copied().min().unwrap();
    let last = rows_us.iter().copied().max().unwrap();
    assert!(
        first + 5000 >= start_us,
        "first row {first} µs, start {start_us} µs"
    );
    assert!(
        last <= recorded.until_us + 1,
        "last row {last} µs, recorded until {}",
        recorded.until_us
    );
    let from_mono_ns = recorded.from_us as i64 * 1000 - recorded.offset_ns;
    let first_seq = *window.seqs.first().unwrap();
    let missed: Vec<_> = logged
        .iter()
        .filter(|c| traced_by_default(&c.api) && has_runtime_row(&c.api))
        .filter(|c| c.before_ns as i64 >= from_mono_ns && c.seq < first_seq)
        .collect();
    assert!(
        missed.is_empty(),
        "calls begun once recording was on, before the first row: {missed:?}"
    );
}

/// When a daemon trace's recording was on, as its `rocsync` object says (µs since the
/// epoch), and its rows' clock.
struct Recorded {
    from_us: u64,
    until_us: u64,
    base_us: u64,
    offset_ns: i64,
}

impl Recorded {
    fn of(t: &serde_json::Value) -> Self {
        let p = &t["rocsync"]["parameters"];
        let us = |k: &str| p[k].as_u64().unwrap_or_else(|| panic!("no {k}: {p}"));
        Self {
            from_us: us("recorded_from_unix_us"),
            until_us: us("recorded_until_unix_us"),
            base_us: t["baseTimeNanoseconds"].as_u64().unwrap() / 1000,
            offset_ns: t["rocsync"]["clock_offset_ns"].as_i64().unwrap(),
        }
    }
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
