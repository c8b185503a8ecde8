//! The daemon's sampled windows, retention and flight recorder: traces the daemon writes
//! without being asked at that moment, checked against the process's own log; a window
//! skipped because another session records is counted in `/metrics`. Needs root.

use std::time::{Duration, Instant};

use crate::common::{daemon::*, *};
use rocsync_tests::read_log;

/// Retention by size, judged on the filesystem: traces planted with known sizes and ages
/// go oldest first, the directory's traces end within the limit (or only the newest is
/// left), and what is not a trace stays.
#[test]
fn sampled_windows_are_written_and_retention_removes_the_oldest() {
    let name = "sampled_windows_are_written_and_retention_removes_the_oldest";
    let Some((dir, exe)) = daemon_test(name) else {
        return;
    };
    let traces = dir.path("state/traces");
    std::fs::create_dir_all(&traces).unwrap();
    let now = std::time::SystemTime::now();
    // (name, MiB, hours old): the oldest is not the largest.
    let planted = [("a.json", 2, 3), ("b.json", 6, 2), ("c.json", 1, 1)];
    for (file, mib, hours) in planted {
        // Written, not sparse: retention counts what a file takes on disk.
        std::fs::write(traces.join(file), vec![b' '; (mib as usize) << 20]).unwrap();
        let f = std::fs::File::options()
            .write(true)
            .open(traces.join(file))
            .unwrap();
        f.set_modified(now - Duration::from_secs(hours * 3600))
            .unwrap();
        // Root's, as the windows of root's loop are: one user's traces go oldest first
        // (between users, each keeps a share: retention's own tests).
        std::fs::write(traces.join(format!("{file}.owner")), "0\n").unwrap();
    }
    std::fs::write(traces.join("notes.txt"), "not a trace").unwrap();
    let (daemon, mut lines) = start_daemon(
        &dir,
        &exe,
        &[
            "--sample-window",
            "300ms",
            "--sample-every",
            "1s",
            "--retention-max-bytes",
            "8M",
        ],
    );
    let mut target = tracked_loop(&dir, &exe, &mut lines, 5000);
    // 9 MiB planted: the first window's trace takes the total past 8 MiB.
    lines.wait_for("retention removed");
    assert!(target.wait().unwrap().success());
    stop(daemon);
    let removed: Vec<String> = lines
        .all()
        .iter()
        .filter_map(|l| l.split("retention removed ").nth(1))
        .map(|p| p.rsplit('/').next().unwrap().to_string())
        .collect();
    // Oldest first: a.json, then b.json, then (once all planted are gone) samples.
    let order = |f: &str| removed.iter().position(|r| r == f);
    assert_eq!(order("a.json"), Some(0), "{removed:?}");
    if let Some(b) = order("b.json") {
        assert_eq!(b, 1, "{removed:?}");
    }
    let left: Vec<(String, u64)> = std::fs::read_dir(&traces)
        .unwrap()
        .map(|e| e.unwrap())
        .map(|e| {
            (
                e.file_name().to_string_lossy().into_owned(),
                e.metadata().unwrap().len(),
            )
        })
        .collect();
    let json: Vec<&(String, u64)> = left.iter().filter(|(n, _)| n.ends_with(".json")).collect();
    let total: u64 = json.iter().map(|(_, n)| n).sum();
    assert!(total <= 8 << 20 || json.len() == 1, "{left:?}");
    assert!(left.iter().any(|(n, _)| n == "notes.txt"), "{left:?}");
    // Every removal the daemon said is gone from the directory, and nothing else is.
    for (file, _, _) in planted {
        assert_eq!(
            json.iter().any(|(n, _)| n == file),
            order(file).is_none(),
            "{file}"
        );
    }
    // Each window left that caught the loop: an unbroken run of its calls, each as its
    // log says.
    let log = read_log(&dir.path("loop.log"));
    let mut checked = 0;
    for (n, _) in json.iter().filter(|(n, _)| n.starts_with("sample-")) {
        let t = read_json(&traces.join(n));
        if call_rows(&t)
            .iter()
            .any(|r| r.pid == u64::from(target.id()))
        {
            assert_window_of_log(&t, target.id(), &log);
            checked += 1;
        }
    }
    assert!(checked > 0, "no window of the loop left: {left:?}");
}

#[test]
fn sampled_windows_skipped_for_another_session_are_counted() {
    let name = "sampled_windows_skipped_for_another_session_are_counted";
    let Some((dir, exe, python)) = metrics_test(name) else {
        return;
    };
    let (daemon, mut lines) = start_daemon(
        &dir,
        &exe,
        &["--sample-window", "300ms", "--sample-every", "1s"],
    );
    let mut target = tracked_loop(&dir, &exe, &mut lines, 6000);
    let pid = target.id().to_string();
    // A 2.5 s trace on request holds every agent across at least two sample times. It is
    // itself refused while a sampled window records: asked again until it starts.
    let asked = Instant::now();
    loop {
        let out = rocsync()
            .args(["trace", "--duration", "2500ms", "--pid", &pid, "--socket"])
            .arg(dir.path("rocsync.sock"))
            .output()
            .unwrap();
        if out.status.success() {
            break;
        }
        let err = stderr_of(&out);
        // The sampled window is the only other session here; a refusal names it by its
        // session name ("trace N of pid(s) …"), which does not say "sample".
        assert!(
            err.contains("already records all agents"),
            "refused for another reason: {err}"
        );
        assert!(asked.elapsed() < Duration::from_secs(20), "{err}");
        std::thread::sleep(Duration::from_millis(100));
    }
    let m = Metrics::scrape(&python, &metrics_addr(&lines));
    let skipped = m
        .labelled("rocsync_traces_not_started_total", "origin", "sampled")
        .unwrap() as usize;
    assert!(skipped >= 1, "{skipped} windows skipped in 2.5 s");
    assert_eq!(
        m.labelled(
            "rocsync_traces_not_started_total",
            "origin",
            "dyno_scheduled"
        ),
        Some(0.0)
    );
    // The daemon first: a window due after the process ended would not start either.
    stop(daemon);
    target.kill().unwrap();
    let _ = target.wait();
    // Each skip the daemon said is counted, and no other.
    let said = lines
        .all()
        .iter()
        .filter(|l| l.contains("sampled window skipped"))
        .count();
    assert_eq!(skipped, said);
}

#[test]
fn the_flight_recorder_writes_the_last_seconds_on_request() {
    let name = "the_flight_recorder_writes_the_last_seconds_on_request";
    let Some((dir, exe)) = daemon_test(name) else {
        return;
    };
    let (daemon, mut lines) = start_daemon(&dir, &exe, &["--flight-recorder", "1s"]);
    let addr = metrics_addr(&lines);
    let log = dir.path("loop-RANK5.log");
    let mut target = tracked_loop_with(&dir, &exe, &mut lines, 4000, &[("RANK", "5")]);
    // On the log's clock: the daemon had tracked the loop by now.
    let tracked_ns = monotonic_ns();
    // Ask once the loop has been tracked for well over the recorder's second, and the
    // kernel has counted calls.
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(2500)
        || !get(&addr, "/metrics").lines().any(|l| {
            l.starts_with("rocsync_sync_calls_total{api=\"hipEventRecord\"")
                && l.rsplit(' ').next().and_then(|n| n.parse::<f64>().ok()) > Some(1000.0)
        })
    {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "no calls counted"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = ask_daemon(&dir.path("rocsync.sock"), &["trace", "--flight"]);
    let file = out.trim().to_string();
    assert!(file.contains("flight-"), "{file}");
    assert!(target.wait().unwrap().success());
    stop(daemon);
    let t = read_json(std::path::Path::new(&file));
    assert_eq!(
        t["distributedInfo"]["rank"], 5,
        "what the process said of itself"
    );
    // An unbroken run of the log's calls: at least the last second (records are dropped
    // by when they were read, which is never before they were made), and not what the
    // loop called in its first half second of being tracked, 2.5 s before the dump
    // (forgotten: that holds unless the reader fell a whole second behind).
    let window = assert_window_of_log(&t, target.id(), &read_log(&log));
    let logged = read_log(&log);
    let at = |seq: u64| logged.iter().find(|l| l.seq == seq).unwrap().before_ns;
    let (first, last) = (window.seqs.first().unwrap(), window.seqs.last().unwrap());
    let span = at(*last) - at(*first);
    assert!(span >= 900_000_000, "only {span} ns held");
    let forgotten = tracked_ns + 500_000_000;
    assert!(
        at(*first) > forgotten,
        "the recorder held calls from {} ms after the loop was tracked: it forgot nothing",
        at(*first).saturating_sub(tracked_ns) / 1_000_000
    );
}

/// CLOCK_MONOTONIC, the scenario log's clock, in ns.
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec it is given.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}
