//! A job's processes: a launcher that makes no GPU call starts workers by fork+exec (one
//! linked against the runtime, one that loads it and forks a child that calls it too, one
//! that loads it with dlopen); rocsync writes one trace per process that made a call, each
//! holding exactly that process's calls and resolutions (by the processes' own logs) and
//! its rank. Needs root.

use std::{
    collections::{BTreeMap, BTreeSet},
    io::Write as _,
    path::{Path, PathBuf},
    process::{Command, Stdio},
};

use crate::common::*;
use rocsync_tests::{LoggedCall, launcher, read_log, scenario, scenario_dlopen, sim_hip};

/// The launcher's arguments: three workers, whose logs are DIR/rank<i>.log (and
/// DIR/rank1.log.child for the forked child).
fn launch(cmd: &mut Command, dir: &TempDir) {
    cmd.arg(dir.path(""))
        .arg(scenario())
        .args(["cross", "10", "--"])
        .arg(scenario())
        .args(["fork", "5", "--"])
        .arg(scenario_dlopen())
        .args(["threads", "2", "10"])
        .env("SCENARIO_HIP", sim_hip());
}

/// (log, rank) of each process the launcher's workers ran.
fn logs(dir: &TempDir) -> Vec<(Vec<LoggedCall>, u64)> {
    [
        ("rank0.log", 0),
        ("rank1.log", 1),
        ("rank1.log.child", 1),
        ("rank2.log", 2),
    ]
    .into_iter()
    .map(|(f, rank)| (read_log(&dir.path(f)), rank))
    .collect()
}

/// Checks the traces `out` (one per process, `<stem>_<pid>.json`) against the processes'
/// logs and the raw capture.
fn check_per_process(dir: &TempDir, out: &Path, raw: &Path, stderr: &str) {
    let (_, calls) = read_raw(raw);
    let files: BTreeSet<PathBuf> = std::fs::read_dir(out.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    let mut correlations = BTreeSet::new();
    let mut seen = BTreeSet::new();
    for (log, rank) in logs(dir) {
        assert!(!log.is_empty());
        let tids: BTreeSet<u32> = log.iter().map(|l| l.tid).collect();
        let pid = calls
            .iter()
            .find(|c| tids.contains(&c.tid))
            .expect("the process's calls are captured")
            .pid;
        let own: Vec<_> = calls.iter().filter(|c| c.pid == pid).cloned().collect();
        assert_same_calls(&log, own.clone());
        let file = out.with_file_name(format!("t_{pid}.json"));
        assert!(files.contains(&file), "{} in {files:?}", file.display());
        assert!(
            stderr.contains(&format!("{} (pid {pid}", file.display())),
            "{stderr}"
        );
        seen.insert(file.clone());
        let t = read_json(&file);
        let corr = assert_rows_match_log(&t, Some(pid), &log);
        let want: BTreeMap<u64, i64> = expected_edges(&log)
            .into_iter()
            .map(|(w, r)| (corr[&w], r.map_or(-1, |r| corr[&r] as i64)))
            .collect();
        assert!(!want.is_empty());
        assert_eq!(trace_edges(&t), want, "{}", file.display());
        // As the launcher set the worker's environment (tests/c/launcher.c); no
        // collective library, no backend.
        assert_eq!(
            t["distributedInfo"],
            serde_json::json!({
                "rank": rank, "rank_from": "RANK",
                "world_size": 3, "world_size_from": "WORLD_SIZE",
                "local_rank": rank, "local_rank_from": "LOCAL_RANK",
            }),
            "{}",
            file.display()
        );
        assert_eq!(t["rocsync"]["pid"], pid);
        for e in t["traceEvents"].as_array().unwrap() {
            if e["cat"] == "cuda_runtime" {
                assert_eq!(e["pid"], pid, "only its own process's rows");
                let c = e["args"]["correlation"].as_u64().unwrap();
                assert!(correlations.insert(c), "correlation {c} in two files");
            }
        }
    }
    assert_eq!(
        seen, files,
        "one file per process that called, none for the launcher"
    );
}

#[test]
fn run_writes_one_trace_per_worker_process_of_a_launcher() {
    if !can_trace("run_writes_one_trace_per_worker_process_of_a_launcher") {
        return;
    }
    let dir = TempDir::new();
    let traces = dir.path("traces");
    std::fs::create_dir(&traces).unwrap();
    let (out, raw) = (traces.join("t.json"), dir.path("calls.jsonl"));
    let mut cmd = rocsync();
    cmd.args(["run", "--no-status", "-o"])
        .arg(&out)
        .arg("--raw")
        .arg(&raw)
        .arg("--")
        .arg(launcher());
    launch(&mut cmd, &dir);
    let run = run_ok(&mut cmd);
    check_per_process(&dir, &out, &raw, &stderr_of(&run));
}

#[test]
fn attach_to_a_launcher_traces_the_workers_it_starts_later() {
    if !can_trace("attach_to_a_launcher_traces_the_workers_it_starts_later") {
        return;
    }
    let dir = TempDir::new();
    let traces = dir.path("traces");
    std::fs::create_dir(&traces).unwrap();
    let (out, raw) = (traces.join("t.json"), dir.path("calls.jsonl"));
    let mut target = Command::new(launcher());
    launch(&mut target, &dir);
    let mut target = target
        .env("LAUNCHER_GATE", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    Lines::of(target.stdout.take().unwrap()).wait_for("launcher ready");
    let mut tracer = spawn_piped(
        rocsync()
            .args(["attach", "--wait", "--no-status", "-o"])
            .arg(&out)
            .arg("--raw")
            .arg(&raw)
            .arg("--pid")
            .arg(target.id().to_string()),
    );
    let mut lines = Lines::of(tracer.stderr.take().unwrap());
    lines.wait_for("tracing pid");
    target.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert!(target.wait().unwrap().success());
    assert!(tracer.wait().unwrap().success());
    let stderr = lines.all().join("\n");
    check_per_process(&dir, &out, &raw, &stderr);
}

#[test]
fn no_follow_traces_the_launcher_alone() {
    if !can_trace("no_follow_traces_the_launcher_alone") {
        return;
    }
    let dir = TempDir::new();
    let out = dir.path("t.json");
    let mut cmd = rocsync();
    cmd.args(["run", "--no-follow", "--no-status", "-o"])
        .arg(&out)
        .arg("--")
        .arg(launcher());
    launch(&mut cmd, &dir);
    let run = run_ok(&mut cmd);
    let stderr = stderr_of(&run);
    assert!(stderr.contains("captured 0 calls"), "{stderr}");
    assert!(out.exists(), "one (empty) trace, under -o's own name");
    assert!(
        logs(&dir).iter().all(|(l, _)| !l.is_empty()),
        "the workers did call"
    );
}

/// The children of `pid` (any of its threads) whose name is `comm`.
fn children_named(pid: u32, comm: &str) -> Vec<u32> {
    std::fs::read_dir(format!("/proc/{pid}/task"))
        .unwrap()
        .flat_map(|t| {
            let kids = std::fs::read_to_string(t.unwrap().path().join("children")).unwrap();
            kids.split_whitespace()
                .map(|k| k.parse::<u32>().unwrap())
                .collect::<Vec<_>>()
        })
        .filter(|k| {
            std::fs::read_to_string(format!("/proc/{k}/comm")).is_ok_and(|c| c.trim() == comm)
        })
        .collect()
}

/// A forked child that calls and is gone before rocsync reads anything of it (rocsync,
/// our own process, is stopped meanwhile) is its parent's rank in its trace: a fork
/// copies the environment. (It had no rank when its `/proc` was gone first — one CI run
/// in a loaded moment.)
#[test]
fn a_forked_child_read_too_late_has_its_parents_rank() {
    if !can_trace("a_forked_child_read_too_late_has_its_parents_rank") {
        return;
    }
    let dir = TempDir::new();
    let traces = dir.path("traces");
    std::fs::create_dir(&traces).unwrap();
    let mut tracer = rocsync()
        .args(["run", "--no-status", "-o"])
        .arg(traces.join("t.json"))
        .arg("--")
        .arg(scenario())
        .args(["loaded", "fork", "5"])
        .env("SCENARIO_HIP", sim_hip())
        .env("SCENARIO_LOG", dir.path("rank1.log"))
        .env("RANK", "1")
        .env("WORLD_SIZE", "2")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = Lines::of(tracer.stderr.take().unwrap());
    Lines::of(tracer.stdout.take().unwrap()).wait_for("loaded");
    let rocsync_pid = tracer.id();
    let [target] = children_named(rocsync_pid, "scenario")[..] else {
        panic!("one scenario process under rocsync run");
    };
    // SAFETY: signals rocsync, which this test started.
    unsafe { libc::kill(rocsync_pid as i32, libc::SIGSTOP) };
    tracer.stdin.take().unwrap().write_all(b"go\n").unwrap();
    // The parent reaps its child, then exits itself: both gone before rocsync goes on.
    rocsync_tests::wait_until_zombie(target);
    // SAFETY: as above.
    unsafe { libc::kill(rocsync_pid as i32, libc::SIGCONT) };
    let status = tracer.wait().unwrap();
    let said = stderr.all().join("\n");
    assert!(status.success(), "{said}");
    let files: Vec<PathBuf> = std::fs::read_dir(&traces)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 2, "the parent's trace and the child's: {said}");
    for f in &files {
        let t = read_json(f);
        assert_eq!(t["distributedInfo"]["rank"], 1, "{}", f.display());
        assert_eq!(t["distributedInfo"]["world_size"], 2, "{}", f.display());
    }
}
