//! Where is each rank, under a daemon with no settings: a two-rank Python job (ctypes over
//! the simulated HIP runtime and RCCL, `tests/python/rank_job.py`) whose ranks set their
//! communicator up as they start; rank 1 sleeps in `wait_for_data` before collective 21,
//! rank 0 enters #21 and blocks in its synchronisation inside `train_step`. The daemon's
//! hang trace of rank 0 names `train_step` with its file and line, the laggard's trace
//! names `wait_for_data`, `/metrics` has both ranks' collective numbers, `rocsync status`
//! and the log say where rank 0 is — checked against the job's own source. Needs root.

use std::process::{Command, Stdio};

use crate::{
    collectives::{comm_id_of, job_lines},
    common::{daemon::*, read_json, rocsync, run_ok},
    daemon::triggers::stalls::{listed_trace, stall_traces},
};

/// The Python interpreter itself (not a shim): the daemon tracks it by its executable.
fn python() -> std::path::PathBuf {
    let out = Command::new("python3")
        .args([
            "-c",
            "import os, sys; print(os.path.realpath(sys.executable))",
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "python3: {out:?}");
    String::from_utf8(out.stdout).unwrap().trim().into()
}

/// The line of `needle` in the job's source, 1-based.
fn line_of(needle: &str) -> usize {
    let source = std::fs::read_to_string(rocsync_tests::python_rank_job()).unwrap();
    1 + source.lines().position(|l| l.contains(needle)).unwrap()
}

#[test]
fn a_hung_python_job_says_where_each_rank_is() {
    let name = "a_hung_python_job_says_where_each_rank_is";
    let Some((dir, _)) = daemon_test(name) else {
        return;
    };
    let python = python();
    // No stall or hang setting: the daemon's defaults (a hang after 5 s).
    let (daemon, mut lines) = start_daemon(&dir, &python, &[]);
    let addr = metrics_addr(&lines);
    let mut job = Command::new(&python)
        .arg(rocsync_tests::python_rank_job())
        .arg(rocsync_tests::sim_hip())
        .arg(rocsync_tests::sim_rccl())
        .args(["24", "21", "9"])
        .env("TMPDIR", dir.path(""))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = job_lines(&mut job);
    let uid = rx.recv().unwrap();
    let id = comm_id_of(uid.strip_prefix("uid ").unwrap());
    let [r0, r1] = rank_pids(&rx);
    let step = format!("train_step (rank_job.py:{})", line_of("rank 0 blocks here"));
    let wait = format!(
        "wait_for_data (rank_job.py:{})",
        line_of("time.sleep(seconds)")
    );
    lines.wait_for(&format!("hang: pid {r0}'s hipStreamSynchronize"));
    // The two reads end in either order (the laggard's was said first in a full run).
    lines.wait_for_all(&[
        &format!("pid {r0} is in {step}"),
        &format!("pid {r1} is in {wait}"),
    ]);
    // Each rank set its communicator up as it started, yet both are known by it.
    let seq = |rank, pid| collective_seq(&addr, &id, rank, pid);
    assert_eq!((seq(0, r0), seq(1, r1)), (21.0, 20.0));
    let status = ask_daemon(&dir.path("rocsync.sock"), &["status"]);
    assert!(
        status.contains(&format!(
            "pid {r0} thread {r0} hipStreamSynchronize blocked in {step}"
        )),
        "{status}"
    );
    assert!(job.wait().unwrap().success());

    let listed = stall_traces(&dir.path("rocsync.sock"), 2);
    let t = listed_trace(&listed, "hang", r0);
    let hang = &t["rocsync"]["parameters"]["hang"];
    assert_eq!(hang["where"].as_str(), Some(step.as_str()), "{hang}");
    let blocked = &hang["stacks"]["threads"][0];
    assert_eq!(
        (blocked["tid"].as_u64(), blocked["blocked"].as_bool()),
        (Some(r0.into()), Some(true))
    );
    let functions: Vec<&str> = (blocked["python_stack"].as_array().unwrap().iter())
        .map(|f| f["function"].as_str().unwrap())
        .collect();
    assert_eq!(
        functions,
        ["train_step", "rank_main", "main", "<module>"],
        "{blocked}"
    );
    // Perfetto shows the stack on the blocked thread's track.
    let rows = t["traceEvents"].as_array().unwrap();
    assert!(
        (rows.iter())
            .any(|r| r["cat"] == "python_stack" && r["tid"] == r0 && r["name"] == "train_step"),
        "no python_stack row train_step on thread {r0}"
    );

    let (file, laggard) = &laggard_of(&listed, r1);
    assert_eq!(laggard["where"].as_str(), Some(wait.as_str()), "{laggard}");
    assert_eq!(laggard["seq"].as_u64(), Some(20), "{laggard}");
    stop(daemon);

    // The job's answer over the daemon's own traces folder: rank 1 behind, with its frame.
    let folder = file.parent().unwrap();
    let text = run_ok(rocsync().arg("report").arg(folder));
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains(&format!("a rank behind: rank 1 (pid {r1}) at #20")),
        "{text}"
    );
    assert!(text.contains(&wait), "{text}");
    let json = run_ok(rocsync().args(["report", "--json"]).arg(folder));
    let report: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    let comm = (report["communicators"].as_array().unwrap().iter())
        .find(|c| (c["ranks"].as_array().unwrap().iter()).any(|r| r["pid"] == r1))
        .unwrap_or_else(|| panic!("no communicator of pid {r1} in {report}"));
    let verdict = &comm["verdict"];
    assert_eq!(verdict["kind"], "rank_behind", "{verdict}");
    let behind = &verdict["behind"][0];
    assert_eq!(
        (
            behind["rank"].as_u64(),
            behind["pid"].as_u64(),
            behind["where"].as_str()
        ),
        (Some(1), Some(u64::from(r1)), Some(wait.as_str())),
        "{verdict}"
    );
}

/// The laggard `pid`'s trace among `listed`, and its word there: as a rank behind the
/// hang, or found stuck first.
pub(super) fn laggard_of(
    listed: &[std::path::PathBuf],
    pid: u32,
) -> (&std::path::Path, serde_json::Value) {
    let file = (listed.iter())
        .find(|f| {
            f.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with(&format!("behind-{pid}-"))
        })
        .unwrap_or_else(|| panic!("no behind-{pid}-… in {listed:?}"));
    let mut p = read_json(file)["rocsync"]["parameters"].take();
    let word = match p["behind"].is_null() {
        true => p["stuck"].take(),
        false => p["behind"].take(),
    };
    (file, word)
}

/// The two ranks' pids, as the job says them (`rank R pid P comm …`).
pub(crate) fn rank_pids(rx: &std::sync::mpsc::Receiver<String>) -> [u32; 2] {
    let mut pids = [0u32; 2];
    while pids.contains(&0) {
        let line = rx.recv().unwrap();
        let w: Vec<&str> = line.split(' ').collect();
        if w.get(4) == Some(&"comm") {
            pids[w[1].parse::<usize>().unwrap()] = w[3].parse().unwrap();
        }
    }
    pids
}

/// `rocsync_collective_seq` of one rank of communicator `id` on `/metrics`.
pub(crate) fn collective_seq(addr: &str, id: &str, rank: usize, pid: u32) -> f64 {
    let series = format!("rocsync_collective_seq{{comm=\"{id}\",rank=\"{rank}\",pid=\"{pid}\"}}");
    metric(addr, &series)
}
