//! Stall capture: a synchronisation longer than the threshold gets a trace of its
//! process on its own — the slow call with its duration and the records its wait
//! resolves to, against the scenario's log — and a burst of stalls within the interval
//! gives one trace and a count of them all (hangs: `daemon_hangs`). Needs root.

use std::{
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use rocsync_tests::read_log;

use crate::common::{daemon::*, *};

/// The listed stall or hang trace (`kind`) of `pid`'s `hipStreamSynchronize`, read.
pub(crate) fn listed_trace(listed: &[PathBuf], kind: &str, pid: u32) -> serde_json::Value {
    let prefix = format!("{kind}-hipStreamSynchronize-{pid}-");
    let file = listed
        .iter()
        .find(|f| {
            f.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(&prefix)
        })
        .unwrap_or_else(|| panic!("no {prefix}… in {listed:?}"));
    read_json(file)
}

/// The stall and hang traces `rocsync status` lists, once `n` are (at most 30 s).
pub(crate) fn stall_traces(sock: &Path, n: usize) -> Vec<PathBuf> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let text = ask_daemon(sock, &["status"]);
        let listed: Vec<PathBuf> = text
            .lines()
            .skip_while(|l| !l.starts_with("stall traces"))
            .skip(1)
            .take_while(|l| l.starts_with("  "))
            .map(|l| PathBuf::from(l.trim()))
            .collect();
        if listed.len() >= n {
            return listed;
        }
        assert!(Instant::now() < deadline, "no stall trace listed: {text}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The daemon (flight recorder on, stalls over 50 ms) and the scenario `stall N US`,
/// run to its end once tracked; the log, the pid, and what to ask the daemon by.
fn stalled(name: &str, n: &str, us: &str) -> Option<(TempDir, Daemon, String, u32)> {
    let (dir, _) = daemon_test(name)?;
    let exe = own_copy(&dir);
    let args = [
        "--flight-recorder",
        "10s",
        "--capture-on-stall",
        "50ms",
        "--stall-window-after",
        "500ms",
    ];
    let (daemon, mut lines) = start_daemon(&dir, &exe, &args);
    let addr = metrics_addr(&lines);
    let mut target = Gated::start(
        Command::new(&exe)
            .args(["gated", "stall", n, us])
            .env("SCENARIO_LOG", dir.path("stall.log")),
    );
    let pid = target.child.id();
    target.open_when_tracked(&mut lines);
    assert!(target.child.wait().unwrap().success());
    Some((dir, daemon, addr, pid))
}

#[test]
fn a_stall_is_traced_with_its_slow_call_and_what_its_wait_resolves_to() {
    let name = "a_stall_is_traced_with_its_slow_call_and_what_its_wait_resolves_to";
    let Some((dir, daemon, addr, pid)) = stalled(name, "1", "200000") else {
        return;
    };
    let traces = stall_traces(&dir.path("rocsync.sock"), 1);
    assert_eq!(traces.len(), 1, "{traces:?}");
    let file = traces[0].file_name().unwrap().to_string_lossy().to_string();
    assert!(
        file.starts_with(&format!("stall-hipStreamSynchronize-{pid}-")) && file.ends_with(".json"),
        "{file}"
    );
    let t = read_json(&traces[0]);
    let logged = read_log(&dir.path("stall.log"));
    // Every call of the process, from the flight recorder's span: the slow one, its
    // wait and the record that wait resolves to, each as the log has it.
    let window = assert_window_of_log(&t, pid, &logged);
    let sync = logged
        .iter()
        .find(|c| c.api == "hipStreamSynchronize")
        .unwrap();
    assert!(
        window.seqs.contains(&sync.seq),
        "the slow call is not in it"
    );
    for api in ["hipEventRecord", "hipStreamWaitEvent"] {
        let c = logged.iter().find(|c| c.api == api).unwrap();
        assert!(window.seqs.contains(&c.seq), "{api} is not in it");
    }
    // Its duration, as the probes measured it: over the 50 ms threshold (the 200 ms of
    // work began at its launch, a little before the synchronize) and within the log's
    // clock readings.
    let stall = &t["rocsync"]["parameters"]["stall"];
    assert_eq!(stall["api"], "hipStreamSynchronize", "{stall}");
    let ms = stall["duration_ms"].as_f64().unwrap();
    let logged_ms = (sync.after_ns - sync.before_ns) as f64 / 1e6;
    assert!(
        ms > 50.0 && ms <= logged_ms,
        "{ms} ms, logged {logged_ms} ms"
    );
    assert_eq!(
        metric(&addr, "rocsync_stalls_total{api=\"hipStreamSynchronize\""),
        1.0
    );
    assert_eq!(metric(&addr, "rocsync_stall_traces_total"), 1.0);
    stop(daemon);
}

#[test]
fn a_burst_of_stalls_gives_one_trace_and_a_count_of_them_all() {
    let name = "a_burst_of_stalls_gives_one_trace_and_a_count_of_them_all";
    let Some((dir, daemon, addr, pid)) = stalled(name, "50", "60000") else {
        return;
    };
    let stalls = "rocsync_stalls_total{api=\"hipStreamSynchronize\"";
    assert_eq!(metric(&addr, stalls), 50.0);
    let traces = stall_traces(&dir.path("rocsync.sock"), 1);
    assert_eq!(traces.len(), 1, "{traces:?}");
    assert_eq!(metric(&addr, "rocsync_stall_traces_total"), 1.0);
    assert_eq!(
        metric(
            &addr,
            "rocsync_stall_traces_skipped_total{reason=\"interval\"}"
        ),
        49.0
    );
    let files: Vec<_> = std::fs::read_dir(dir.path("state/traces"))
        .unwrap()
        .flatten()
        .filter(|e| {
            // Traces, not the owner files retention keeps beside them.
            let name = e.file_name().to_string_lossy().into_owned();
            name.starts_with("stall-") && name.ends_with(".json")
        })
        .collect();
    assert_eq!(files.len(), 1, "one stall trace of pid {pid}");
    stop(daemon);
}

/// `rocsync status` names a stall trace recording for what it is, `stall trace N of
/// pid(s) [P]`, not "trace N" as if someone had asked for it (issue 64; a hang trace's:
/// `hangs::a_daemon_with_no_settings_traces_a_hang`).
#[test]
fn status_names_a_stall_trace_recording_by_its_kind() {
    let name = "status_names_a_stall_trace_recording_by_its_kind";
    let Some((dir, exe)) = daemon_test(name) else {
        return;
    };
    // Its window after the stall outlasts the test: the trace records while asked.
    let args = ["--capture-on-stall", "50ms", "--stall-window-after", "60s"];
    let (daemon, mut lines) = start_daemon(&dir, &exe, &args);
    // One 200 ms stall, then 60 s asleep, alive: its trace goes on recording.
    let mut target = Gated::start(
        Command::new(&exe)
            .args(["gated", "stalls", "200000", "-60000000"])
            .env("SCENARIO_LOG", dir.path("stall.log")),
    );
    let pid = target.child.id();
    target.open_when_tracked(&mut lines);
    lines.wait_for(&format!("stall: pid {pid}'s hipStreamSynchronize"));
    let status = ask_daemon(&dir.path("rocsync.sock"), &["status"]);
    target.child.end();
    let recording: Vec<&str> = status
        .lines()
        .skip_while(|l| !l.starts_with("traces recording: "))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .collect();
    let of_pid = format!(" of pid(s) [{pid}]");
    assert!(
        (recording.iter()).any(|l| l.starts_with("  stall trace ") && l.ends_with(&of_pid)),
        "{status}"
    );
    assert!(
        !recording.iter().any(|l| l.starts_with("  trace ")),
        "{status}"
    );
    stop(daemon);
}
