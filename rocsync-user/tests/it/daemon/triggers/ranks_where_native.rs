//! Where is each rank of a C job, under a daemon with no settings: the twin of
//! `ranks_where` (`tests/c/rank_job.c`), whose stacks are native frames only. Rank 1 sleeps
//! in `wait_for_data` before collective 21; rank 0 enters #21 and blocks in its
//! synchronisation inside `train_step`. Rank 0's hang trace names `train_step` (the
//! function the daemon's return probe hides, named by its caller's call) and `main`; the
//! laggard's names `wait_for_data`, `main` and the libc sleep; `/metrics` has both ranks'
//! collective numbers; `rocsync report` names rank 1 behind with its frame. Needs root.

use std::process::{Command, Stdio};

use crate::{
    collectives::{comm_id_of, job_lines},
    common::{daemon::*, rocsync, run_ok},
    daemon::triggers::{
        ranks_where::{collective_seq, laggard_of, rank_pids},
        stalls::{listed_trace, stall_traces},
    },
};

/// The symbols of a stacks object's blocked thread, innermost first.
fn native_symbols(stacks: &serde_json::Value) -> Vec<String> {
    let blocked = &stacks["threads"][0];
    assert_eq!(blocked["blocked"].as_bool(), Some(true), "{stacks}");
    (blocked["native_stack"]
        .as_array()
        .unwrap_or(&Vec::new())
        .iter())
    .map(|f| f["symbol"].as_str().unwrap_or("?").to_string())
    .collect()
}

/// Whether `names` holds each of `wanted` in that order (innermost first).
fn in_order(names: &[String], wanted: &[&str]) -> bool {
    let mut from = 0;
    wanted.iter().all(|w| {
        let found = names[from..].iter().position(|n| n == w);
        found.map(|i| from += i + 1).is_some()
    })
}

#[test]
fn a_hung_c_job_says_where_each_rank_is() {
    let name = "a_hung_c_job_says_where_each_rank_is";
    let Some((dir, _)) = daemon_test(name) else {
        return;
    };
    let exe = dir.path("rank_job");
    std::fs::copy(rocsync_tests::c_rank_job(), &exe).unwrap();
    // No stall or hang setting: the daemon's defaults (a hang after 5 s).
    let (daemon, mut lines) = start_daemon(&dir, &exe, &[]);
    let addr = metrics_addr(&lines);
    let mut job = Command::new(&exe)
        .args(["24", "21", "9"])
        .env("TMPDIR", dir.path(""))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = job_lines(&mut job);
    let uid = rx.recv().unwrap();
    // The ranks start once the daemon tracks the launcher, its libraries probed: each
    // rank sets its communicator up within a millisecond of its start, before the daemon
    // tracks it, and blocks a millisecond later. Started while the probes were still
    // being placed, a rank's set-up or its blocked call went unseen (comm unknown, no
    // hang), which no tracer can help.
    lines.wait_for(&format!("tracking pid {}", job.id()));
    let mut go = job.stdin.take().unwrap();
    std::io::Write::write_all(&mut go, b"go\n").unwrap();
    drop(go);
    let id = comm_id_of(uid.strip_prefix("uid ").unwrap());
    let [r0, r1] = rank_pids(&rx);
    let (step, wait) = ("train_step (rank_job)", "wait_for_data (rank_job)");
    lines.wait_for(&format!("hang: pid {r0}'s hipStreamSynchronize"));
    lines.wait_for_all(&[&format!("pid {r0} is in {step}")]);
    // The log names the trace by what it is, as `status` does.
    let said = (lines.1.iter()).find(|l| l.contains(&format!("pid {r0} is in")));
    assert!(said.unwrap().contains(": hang trace "), "{said:?}");
    // The laggard's read may be said before or after the hang's.
    lines.wait_for_all(&[&format!("pid {r1} is in {wait}")]);
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
    assert_eq!(hang["where"].as_str(), Some(step), "{hang}");
    assert_eq!(hang["stacks"]["python_version"], serde_json::Value::Null);
    let names = native_symbols(&hang["stacks"]);
    assert!(in_order(&names, &["train_step", "main"]), "{names:?}");
    // Under it, the runtime's frames, down to the libc sleep its synchronize polls in.
    let frames = hang["stacks"]["threads"][0]["native_stack"]
        .as_array()
        .unwrap();
    let step_at = names.iter().position(|n| n == "train_step").unwrap();
    assert!(
        (frames[..step_at].iter()).any(|f| f["object"]
            .as_str()
            .is_some_and(|o| o.contains("libamdhip64"))),
        "{frames:?}"
    );
    // The daemon's return probe holds train_step's return address: named by the call
    // into it.
    assert_eq!(frames[step_at]["named_by_call"], true, "{frames:?}");
    // Perfetto shows the native stack on the blocked thread's track.
    let rows = t["traceEvents"].as_array().unwrap();
    assert!(
        (rows.iter())
            .any(|r| r["cat"] == "native_stack" && r["tid"] == r0 && r["name"] == "train_step"),
        "no native_stack row train_step on thread {r0}"
    );

    let (file, laggard) = &laggard_of(&listed, r1);
    assert_eq!(laggard["where"].as_str(), Some(wait), "{laggard}");
    assert_eq!(laggard["seq"].as_u64(), Some(20), "{laggard}");
    let names = native_symbols(&laggard["stacks"]);
    let sleeping = (names.iter()).find(|n| matches!(n.as_str(), "nanosleep" | "clock_nanosleep"));
    assert!(
        sleeping.is_some()
            && in_order(
                &names,
                &[sleeping.unwrap(), "sleep", "wait_for_data", "main"]
            ),
        "{names:?}"
    );
    stop(daemon);

    // The job's answer over the daemon's own traces folder: rank 1 behind, with its frame.
    let folder = file.parent().unwrap();
    let text = run_ok(rocsync().arg("report").arg(folder));
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.contains(&format!("a rank behind: rank 1 (pid {r1}) at #20")),
        "{text}"
    );
    assert!(text.contains(wait), "{text}");
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
        (Some(1), Some(u64::from(r1)), Some(wait)),
        "{verdict}"
    );
}
