//! `rocsync daemon`: a process started after the daemon is found (its exec announced by
//! the probes), its calls counted in the kernel, and `/metrics` — parsed by Prometheus's
//! own Python client — says exactly what the process's log says; SIGTERM ends the daemon
//! with status 0. Needs root, and `ROCSYNC_HTA_PYTHON` (a Python with prometheus_client;
//! `cargo xtask test` sets it).

use std::{
    collections::BTreeMap,
    path::Path,
    process::{Command, Stdio},
    time::Duration,
};

use crate::common::{daemon::*, *};
use rocsync_tests::{LoggedCall, read_log};

#[test]
fn the_daemon_counts_a_new_process_calls_exactly() {
    let name = "the_daemon_counts_a_new_process_calls_exactly";
    let Some((dir, exe, python)) = metrics_test(name) else {
        return;
    };
    // Only this test's program: others on the machine may map the same runtime.
    let (mut daemon, mut lines) = start_daemon(&dir, &exe, &[]);
    let addr = metrics_addr(&lines);

    // Started after the daemon, held at a gate until the daemon says it tracks it.
    let log = dir.path("scenario.log");
    let mut target = Gated::start(
        Command::new(&exe)
            .args(["gated", "basic"])
            .env("SCENARIO_LOG", &log),
    );
    lines.wait_for(&format!("tracking pid {}", target.child.id()));
    // Alive at its gate, and the only process of this test's program: one tracked.
    let tracked = |m: &Metrics| m.sum("rocsync_tracked_processes", "");
    assert_eq!(
        tracked(&Metrics::scrape(&python, &addr)),
        1,
        "alive, tracked"
    );
    target.open();
    assert!(target.child.wait().unwrap().success());

    let m = Metrics::scrape(&python, &addr);
    assert_eq!(m.types["rocsync_sync_wait_seconds"], "histogram");
    assert_eq!(m.types["rocsync_sync_calls"], "counter");
    let sum = |metric: &str, api: &str| m.sum(metric, api);
    let logged = probed(&read_log(&log));
    let mut apis: BTreeMap<&str, (usize, usize)> = BTreeMap::new();
    for l in &logged {
        let e = apis.entry(l.api.as_str()).or_default();
        e.0 += 1;
        e.1 += usize::from(l.ret != 0);
    }
    assert!(apis.len() > 5, "{apis:?}");
    for (api, (calls, errors)) in &apis {
        assert_eq!(sum("rocsync_sync_calls_total", api), *calls, "{api} calls");
        // Records', stream waits', destroys' and polls' returns are probed only while
        // something records (docs/daemon.md): a counted process pays one trap for them,
        // and their errors and times are not known.
        let one_trap = ["EventRecord", "StreamWaitEvent", "Destroy", "EventQuery"]
            .iter()
            .any(|k| api.contains(k));
        let errors = if one_trap { 0 } else { *errors };
        assert_eq!(
            sum("rocsync_sync_call_errors_total", api),
            errors,
            "{api} errors"
        );
        let timed = if api.contains("Synchronize") {
            *calls
        } else {
            0
        };
        assert_eq!(
            sum("rocsync_sync_wait_seconds_count", api),
            timed,
            "{api} timed"
        );
    }
    assert_metrics_follow_the_log(&m, &logged, daemon.id());
    // Reaped: forgotten at the daemon's next prune (every 5 s).
    let reaped = std::time::Instant::now();
    while tracked(&Metrics::scrape(&python, &addr)) != 0 {
        assert!(
            reaped.elapsed() < Duration::from_secs(30),
            "still tracked 30 s after it was reaped"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(get(&addr, "/healthz").ends_with("ok\n"));
    assert!(get(&addr, "/nope").starts_with("HTTP/1.1 404"));

    // SIGTERM: exits 0, promptly.
    // SAFETY: signals the daemon this test started.
    unsafe { libc::kill(daemon.id() as i32, libc::SIGTERM) };
    let status = wait_within(&mut daemon, Duration::from_secs(15), "the daemon");
    assert!(status.success(), "{status:?}");
}

/// The cross-stream waits, the wait histogram's buckets, the drops and the daemon's CPU
/// time, against the scenario's log and /proc.
fn assert_metrics_follow_the_log(m: &Metrics, logged: &[LoggedCall], daemon: u32) {
    assert_eq!(m.types["rocsync_tracked_processes"], "gauge");
    assert_eq!(m.types["rocsync_dropped_records"], "counter");
    // Stream waits on an event whose latest successful record was on another stream.
    let (mut recorded_on, mut cross) = (BTreeMap::new(), BTreeMap::<&str, usize>::new());
    for l in logged {
        if l.api.starts_with("hipEventRecord") && l.ret == 0 {
            recorded_on.insert(l.args[0], l.args[1]);
        } else if l.api.starts_with("hipStreamWaitEvent") {
            let other = recorded_on.get(&l.args[1]).is_some_and(|&s| s != l.args[0]);
            *cross.entry(l.api.as_str()).or_default() += usize::from(other);
        }
    }
    assert!(cross.values().sum::<usize>() > 0, "{cross:?}");
    for (api, n) in &cross {
        assert_eq!(
            m.sum("rocsync_cross_stream_waits_total", api),
            *n,
            "{api} cross-stream"
        );
    }
    // A call the kernel timed took at most what the scenario measured around it: each
    // bucket holds at least the calls the log puts under its bound, +Inf all of them.
    let buckets = m
        .samples
        .iter()
        .filter(|(n, _, _)| n == "rocsync_sync_wait_seconds_bucket");
    let mut by_bound: BTreeMap<(String, String), f64> = BTreeMap::new();
    for (_, labels, v) in buckets {
        let key = (
            labels["api"].as_str().unwrap().to_string(),
            labels["le"].as_str().unwrap().to_string(),
        );
        *by_bound.entry(key).or_default() += v;
    }
    assert!(!by_bound.is_empty());
    for ((api, le), count) in &by_bound {
        let calls = logged.iter().filter(|l| &l.api == api);
        let within = match le.as_str() {
            "+Inf" => calls.count(),
            b => {
                let ns = b.parse::<f64>().unwrap() * 1e9;
                calls
                    .filter(|l| ((l.after_ns - l.before_ns) as f64) <= ns)
                    .count()
            }
        };
        assert!(
            *count as usize >= within,
            "{api} le={le}: {count} < {within}"
        );
        if le == "+Inf" {
            assert_eq!(*count as usize, within, "{api}: every call timed");
        }
    }
    // Nothing dropped: every call was counted, by the log.
    let dropped: f64 = m
        .samples
        .iter()
        .filter(|s| s.0 == "rocsync_dropped_records_total")
        .map(|s| s.2)
        .sum();
    assert_eq!(dropped, 0.0);
    // The daemon's CPU time as the kernel accounts it, read just after.
    let stat = std::fs::read_to_string(format!("/proc/{daemon}/stat")).unwrap();
    let f: Vec<&str> = stat
        .rsplit(')')
        .next()
        .unwrap()
        .split_whitespace()
        .collect();
    let ticks: f64 = f[11].parse::<f64>().unwrap() + f[12].parse::<f64>().unwrap();
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let cpu = m
        .samples
        .iter()
        .find(|s| s.0 == "rocsync_daemon_cpu_seconds_total")
        .unwrap()
        .2;
    assert!(
        cpu > 0.0 && cpu <= ticks / hz,
        "{cpu} s against {} s in /proc",
        ticks / hz
    );
}

#[test]
fn a_trace_on_request_holds_a_window_of_the_process_calls() {
    let name = "a_trace_on_request_holds_a_window_of_the_process_calls";
    let Some((dir, exe)) = daemon_test(name) else {
        return;
    };
    // Members of nogroup may ask, besides root.
    let (daemon, mut lines) = start_daemon(&dir, &exe, &["--group", "65534"]);
    let log = dir.path("loop.log");
    let mut target = tracked_loop(&dir, &exe, &mut lines, 2500);
    let sock = dir.path("rocsync.sock");
    let trace = move |prefix: &[&str], pid: u32, ms: &str| {
        Command::new(prefix[0])
            .args(&prefix[1..])
            .arg(env!("CARGO_BIN_EXE_rocsync"))
            .args(["trace", "--duration"])
            .arg(format!("{ms}ms"))
            .args(["--name", "w", "--socket"])
            .arg(&sock)
            .arg("--pid")
            .arg(pid.to_string())
            .output()
            .unwrap()
    };
    // A member of the group asks; a second member's request on the same (all) agents
    // meanwhile is refused, naming the first (root's would end it: `neighbours`).
    let pid = target.id();
    let member = [
        "setpriv",
        "--reuid=65534",
        "--regid=65534",
        "--clear-groups",
    ];
    let first = {
        let trace = trace.clone();
        std::thread::spawn(move || trace(&member, pid, "700"))
    };
    lines.wait_for("trace 1: recording");
    let busy = trace(&member, pid, "100");
    assert!(!busy.status.success());
    let err = stderr_of(&busy);
    assert!(
        err.contains(&format!(
            "session \"trace 1 (w) of pid(s) [{pid}]\" already records all agents"
        )),
        "{err}"
    );
    let first = first.join().unwrap();
    assert_ok(&first);
    let files: Vec<String> = String::from_utf8_lossy(&first.stdout)
        .lines()
        .map(String::from)
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(files[0].starts_with(dir.path("state").to_str().unwrap()));
    // By cgroup and agents too; the metrics count the traces written.
    let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let cgroup = cgroup
        .lines()
        .next()
        .unwrap()
        .rsplit("::")
        .next()
        .unwrap()
        .to_string();
    let sock = dir.path("rocsync.sock");
    let by_cgroup = [
        "trace",
        "--duration",
        "200ms",
        "--agents",
        "0",
        "--cgroup",
        &cgroup,
    ];
    ask_daemon(&sock, &by_cgroup);
    let addr = metrics_addr(&lines);
    assert!(get(&addr, "/metrics").contains("rocsync_traces_written_total 2"));
    // Without a flight recorder, --flight says so.
    let flight = Command::new(env!("CARGO_BIN_EXE_rocsync"))
        .args(["trace", "--flight", "--socket"])
        .arg(dir.path("rocsync.sock"))
        .output()
        .unwrap();
    assert!(!flight.status.success());
    assert!(stderr_of(&flight).contains("flight recorder is off"));
    // Someone else cannot reach the socket at all.
    let other = trace(
        &[
            "setpriv",
            "--reuid=65533",
            "--regid=65533",
            "--clear-groups",
        ],
        pid,
        "100",
    );
    assert!(!other.status.success());
    assert!(stderr_of(&other).contains("cannot reach the daemon"));
    assert!(target.wait().unwrap().success());
    stop(daemon);

    // The trace is an unbroken window of the process's calls, by its own log: each row
    // the call it is, and each wait resolved as the log says.
    let t = read_json(std::path::Path::new(&files[0]));
    let window = assert_window_of_log(&t, pid, &read_log(&log));
    assert!(window.seqs.len() >= 3, "not one iteration of the loop");
}

/// The daemon's log going away (a pipe whose reader left, a log stream gone) does not end
/// it: requests are still answered and logged into the void, SIGTERM still stops it.
#[test]
fn the_daemon_outlives_its_closed_stderr() {
    let Some((dir, exe)) = daemon_test("the_daemon_outlives_its_closed_stderr") else {
        return;
    };
    let mut daemon = Daemon(
        daemon_command(&dir, &exe, &[])
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    );
    let mut stderr = std::io::BufReader::new(daemon.stderr.take().unwrap());
    let mut line = String::new();
    while !line.contains("SIGTERM stops") {
        line.clear();
        let n = std::io::BufRead::read_line(&mut stderr, &mut line).unwrap();
        assert!(n > 0, "the daemon ended before it was ready");
    }
    drop(stderr);
    // Each refusal is logged: the first write into the closed pipe fails.
    for _ in 0..3 {
        let out = rocsync()
            .args(["trace", "--pid", "1", "--socket"])
            .arg(dir.path("rocsync.sock"))
            .output()
            .unwrap();
        let said = stderr_of(&out);
        assert!(said.contains("pid 1 is not tracked"), "{said}");
    }
    assert!(ask_daemon(&dir.path("rocsync.sock"), &["status"]).contains("tracked processes: "));
    stop(daemon);
}

/// A daemon trace of several processes says of each what a capture says: its name and
/// its rank, from its environment (HTA reads the rank there; without one it takes every
/// file for rank 0). Retention of 1 byte keeps every file of the trace just written.
#[test]
fn a_daemon_trace_says_each_process_rank() {
    let Some((dir, exe)) = daemon_test("a_daemon_trace_says_each_process_rank") else {
        return;
    };
    let (daemon, mut lines) = start_daemon(&dir, &exe, &["--retention-max-bytes", "1"]);
    let mut ranks: Vec<(Reaped, u64)> = (0..2u64)
        .map(|r| {
            let env = [("RANK", &*r.to_string()), ("WORLD_SIZE", "2")];
            (tracked_loop_with(&dir, &exe, &mut lines, 1500, &env), r)
        })
        .collect();
    let sock = dir.path("rocsync.sock");
    let files = ask_daemon(
        &sock,
        &["trace", "--all", "--duration", "200ms", "--name", "job"],
    );
    let files: Vec<&str> = files.lines().collect();
    assert_eq!(files.len(), 2, "{files:?}");
    for (target, rank) in &mut ranks {
        let pid = target.id();
        let file = files
            .iter()
            .find(|f| f.ends_with(&format!("_{pid}.json")))
            .unwrap_or_else(|| panic!("pid {pid}'s trace in {files:?}"));
        let t = read_json(Path::new(file));
        assert_eq!(t["distributedInfo"]["rank"], *rank, "{file}");
        assert_eq!(t["distributedInfo"]["world_size"], 2, "{file}");
        assert!(
            t["traceEvents"]
                .as_array()
                .unwrap()
                .iter()
                .any(|e| e["name"] == "process_name" && e["args"]["name"] == "scenario"),
            "{file}: its process is named"
        );
        assert!(target.wait().unwrap().success());
    }
    stop(daemon);
}

/// A process that has ended is not traced, also while its parent has not reaped it (a
/// zombie keeps its `/proc` entry): the request says so and no empty trace is written.
#[test]
fn a_trace_of_an_ended_process_is_refused() {
    let Some((dir, exe)) = daemon_test("a_trace_of_an_ended_process_is_refused") else {
        return;
    };
    let (daemon, mut lines) = start_daemon(&dir, &exe, &[]);
    let mut target = tracked_loop(&dir, &exe, &mut lines, 300);
    let pid = target.id();
    // Ended, not reaped: this test is its parent.
    rocsync_tests::wait_until_zombie(pid);
    let out = rocsync()
        .args([
            "trace",
            "--duration",
            "100ms",
            "--pid",
            &pid.to_string(),
            "--socket",
        ])
        .arg(dir.path("rocsync.sock"))
        .output()
        .unwrap();
    let said = stderr_of(&out);
    assert!(!out.status.success(), "{said}");
    assert!(said.contains(&format!("pid {pid} has exited")), "{said}");
    let written = std::fs::read_dir(dir.path("state/traces")).map_or(0, |d| d.count());
    assert_eq!(written, 0, "no trace written");
    assert!(target.wait().unwrap().success());
    stop(daemon);
}
