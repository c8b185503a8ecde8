//! Sessions on one node: daemon traces on disjoint agent sets record the same process
//! together, each holding exactly its own devices' calls (by the process's own log); an
//! overlapping request, and a standalone `rocsync attach` on a recorded agent, are refused
//! naming the session they conflict with; `rocsync status` lists what is tracked and
//! recording; `rocsync trace -o` writes the trace where the client says, as the client.
//! Needs root.

use std::{
    collections::BTreeSet,
    os::unix::fs::MetadataExt as _,
    process::{Command, Output},
    time::Duration,
};

use crate::common::{daemon::*, *};
use rocsync_tests::read_log;

// 3 s: the refusals and the status below are asked while both traces record, even on a
// busy machine (each is a process of its own).
fn trace(sock: &std::path::Path, pid: u32, agents: &str, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_rocsync"))
        .args(["trace", "--duration", "3000ms", "--agents", agents, "--pid"])
        .arg(pid.to_string())
        .arg("--socket")
        .arg(sock)
        .args(extra)
        .output()
        .unwrap()
}

#[test]
fn traces_on_disjoint_agents_record_together_and_overlaps_are_refused() {
    let name = "traces_on_disjoint_agents_record_together_and_overlaps_are_refused";
    let Some((dir, exe)) = daemon_test(name) else {
        return;
    };
    let (daemon, mut lines) = start_daemon(&dir, &exe, &[]);
    let log = dir.path("loop.log");
    // Held until tracked: the daemon learns each thread's device from its hipSetDevice.
    let mut target = Gated::start(
        Command::new(&exe)
            .args(["gated", "loop", "8000", "2"])
            .env("SCENARIO_LOG", &log),
    );
    let pid = target.child.id();
    target.open_when_tracked(&mut lines);
    target.said.wait_for("looping");
    let sock = dir.path("rocsync.sock");

    let on_0 = {
        let sock = sock.clone();
        std::thread::spawn(move || trace(&sock, pid, "0", &[]))
    };
    lines.wait_for("trace 1: recording");
    // Agent 1 is free: a second trace of the same process records with the first; this
    // one is written where the client says, and named.
    let out = dir.path("mine.json");
    let on_1 = {
        let (sock, out) = (sock.clone(), out.clone());
        std::thread::spawn(move || {
            let args = ["-o", out.to_str().unwrap(), "--name", "step-9"];
            trace(&sock, pid, "1", &args)
        })
    };
    lines.wait_for("trace 2: recording");

    let overlap = trace(&sock, pid, "1,2", &[]);
    assert!(!overlap.status.success());
    let err = stderr_of(&overlap);
    assert!(
        err.contains(&format!(
            "session \"trace 2 (step-9) of pid(s) [{pid}]\" already records agents 1"
        )),
        "{err}"
    );
    // A standalone capture goes through the same registry.
    let attach = rocsync()
        .args([
            "attach",
            "--no-status",
            "--agents",
            "0",
            "--duration",
            "1",
            "--pid",
        ])
        .arg(pid.to_string())
        .arg("--daemon-socket")
        .arg(&sock)
        .arg("-o")
        .arg(dir.path("attach.json"))
        .output()
        .unwrap();
    assert!(!attach.status.success());
    let err = stderr_of(&attach);
    assert!(err.contains("session \"trace 1 of pid(s)"), "{err}");
    assert!(!dir.path("attach.json").exists());
    // An output that cannot be written is refused before anything is recorded.
    let bad = trace(&sock, pid, "3", &["-o", "/nonexistent/dir/t.json"]);
    assert!(!bad.status.success());
    assert!(
        stderr_of(&bad).contains("/nonexistent/dir"),
        "{}",
        stderr_of(&bad)
    );
    // Status lists the process and both traces.
    let s = daemon_status(&sock);
    assert_eq!(s["tracked"][0]["pid"], pid);
    assert_eq!(s["traces"].as_array().unwrap().len(), 2, "{s}");

    let (a, b) = (on_0.join().unwrap(), on_1.join().unwrap());
    assert_ok(&a);
    assert_ok(&b);
    assert_eq!(
        String::from_utf8_lossy(&b.stdout).trim(),
        out.to_str().unwrap()
    );
    assert!(target.child.wait().unwrap().success());
    // Both agents free again: an unrestricted trace would now start (the target ended).
    stop(daemon);

    // Each trace: only its device's thread's syncs and records, a contiguous run of them.
    let logged = read_log(&log);
    let thread_of = |d: u64| {
        logged
            .iter()
            .find(|l| l.api == "hipSetDevice" && l.args[0] == d)
            .unwrap()
            .tid
    };
    let file_a = String::from_utf8_lossy(&a.stdout).trim().to_string();
    for (file, device) in [(file_a.as_str(), 0), (out.to_str().unwrap(), 1)] {
        let t = read_json(std::path::Path::new(file));
        // Once every thread is set up ("looping"), each makes only records, waits and
        // syncs, the calls an agent set filters: only device's thread's are here, an
        // unbroken run of them, by the log.
        let window = assert_window_of_log(&t, pid, &logged);
        let tids: BTreeSet<u32> = logged
            .iter()
            .filter(|l| window.seqs.contains(&l.seq))
            .map(|l| l.tid)
            .collect();
        assert_eq!(
            tids,
            [thread_of(device)].into(),
            "{file}: only device {device}'s thread"
        );
        let filtered: u64 = t["rocsync"]["filtered_by_agents"]
            .as_object()
            .unwrap()
            .values()
            .map(|v| v.as_u64().unwrap())
            .sum();
        assert!(
            filtered > 0,
            "{file}: the other device's calls are counted filtered"
        );
    }
    // Written by the client, as the client (root here): a regular file of its own.
    let meta = std::fs::symlink_metadata(&out).unwrap();
    assert!(meta.file_type().is_file());
    // SAFETY: geteuid has no preconditions.
    assert_eq!(meta.uid(), unsafe { libc::geteuid() });
}

#[test]
fn sigterm_during_a_trace_finishes_and_writes_it() {
    let name = "sigterm_during_a_trace_finishes_and_writes_it";
    let Some((dir, exe)) = daemon_test(name) else {
        return;
    };
    let (mut daemon, mut lines) = start_daemon(&dir, &exe, &[]);
    let mut target = tracked_loop(&dir, &exe, &mut lines, 30000);
    let pid = target.id();
    let sock = dir.path("rocsync.sock");
    // Asked for a minute; the daemon is told to stop once the trace has recorded some.
    let (answered, asked) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let out = Command::new(env!("CARGO_BIN_EXE_rocsync"))
            .args(["trace", "--duration", "60000ms", "--all", "--socket"])
            .arg(&sock)
            .output()
            .unwrap();
        let _ = answered.send(out);
    });
    let addr = metrics_addr(&lines);
    lines.wait_for("trace 1: recording");
    // Every record the kernel counts from here on is made while the trace records.
    let from = calls_counted(&addr, "hipEventRecord");
    let counted = wait_for_calls(&addr, "hipEventRecord", from, 100) - from;
    // SAFETY: signals the daemon this test started.
    unsafe { libc::kill(daemon.id() as i32, libc::SIGTERM) };
    // Answered well before the minute asked for: the trace was finished at the SIGTERM.
    let answer = asked
        .recv_timeout(Duration::from_secs(30))
        .expect("no answer within 30 s of the SIGTERM (a minute was asked)");
    assert_ok(&answer);
    let status = wait_within(&mut daemon, Duration::from_secs(30), "the daemon");
    assert!(status.success(), "{status}");
    // The process goes on, running (not stopped).
    assert!(
        target.try_wait().unwrap().is_none(),
        "the target still runs"
    );
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let state = stat.rsplit(')').next().unwrap().split_whitespace().next();
    assert!(matches!(state, Some("R" | "S")), "{stat}");
    let file = String::from_utf8_lossy(&answer.stdout).trim().to_string();
    let t = read_json(std::path::Path::new(&file));
    let rows = t["traceEvents"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["name"] == "hipEventRecord" && e["pid"] == pid)
        .count() as u64;
    assert!(
        rows >= counted,
        "{rows} records traced, {counted} counted meanwhile"
    );
    // SAFETY: ends the process this test started.
    unsafe { libc::kill(pid as i32, libc::SIGKILL) };
    let _ = target.wait();
}

#[test]
fn returns_counting_does_not_need_are_probed_only_while_a_trace_records() {
    let name = "returns_counting_does_not_need_are_probed_only_while_a_trace_records";
    let Some((dir, exe)) = daemon_test(name) else {
        return;
    };
    let (daemon, mut lines) = start_daemon(&dir, &exe, &[]);
    let sock = dir.path("rocsync.sock");
    let returns = || daemon_status(&sock)["returns_probed"].clone();
    // Only counted: records, waits and destroys pay their entry trap alone.
    assert_eq!(returns(), "needed");
    let target = tracked_loop(&dir, &exe, &mut lines, 4000);
    let pid = target.id();
    let client = rocsync()
        .args([
            "trace",
            "-p",
            &pid.to_string(),
            "--duration",
            "1s",
            "--socket",
        ])
        .arg(&sock)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    lines.wait_for(&format!("recording pid(s) [{pid}]"));
    assert_eq!(returns(), "all", "while a trace records");
    let out = client.wait_with_output().unwrap();
    assert_ok(&out);
    // The trace's calls are whole: every record and wait has its return.
    let file = String::from_utf8(out.stdout).unwrap();
    let t = read_json(std::path::Path::new(file.trim()));
    let drops = &t["rocsync"]["drops"];
    assert_eq!(drops["unpaired_entries"].as_u64(), Some(0), "{drops}");
    assert_eq!(drops["unpaired_exits"].as_u64(), Some(0), "{drops}");
    let records = runtime_rows(&t)
        .into_iter()
        .filter(|r| r["name"] == "hipEventRecord")
        .count();
    assert!(records > 0, "the loop's records are rows");
    // Back to one trap once nothing records.
    until(5, "the returns to come off", || returns() == "needed");
    drop(target);
    stop(daemon);
}

#[test]
fn every_return_stays_probed_when_the_operator_asks() {
    let name = "every_return_stays_probed_when_the_operator_asks";
    let Some((dir, exe)) = daemon_test(name) else {
        return;
    };
    let (daemon, _lines) = start_daemon(&dir, &exe, &["--return-probes", "all"]);
    let status = daemon_status(&dir.path("rocsync.sock"));
    assert_eq!(status["returns_probed"], "all");
    stop(daemon);
    let out = rocsync()
        .args(["daemon", "--check", "--return-probes", "some"])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = stderr_of(&out);
    assert!(
        err.contains("return_probes: \"some\": expected needed or all"),
        "{err}"
    );
}
