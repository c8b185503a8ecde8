//! The slots for tracing ranks behind are shared per user (issue 60): four hung jobs of
//! `nobody`'s, each with a laggard, then root's. Before, `nobody`'s four laggards took
//! the node's four slots and root's laggard went untraced, with no log line and no
//! counter. Now `nobody` gets its user's two, the other two are said and counted, and
//! root's laggard is traced. Needs root.

use std::{
    os::unix::process::CommandExt,
    process::{Command, Stdio},
};

use crate::{
    collectives::job_lines,
    common::daemon::*,
    daemon::triggers::collectives::{STALLS, laggard_job, set_up},
};

/// `nobody`'s jobs: 2 ranks, rank 1 paused 10 s before collective 3 (root's job comes
/// and hangs meanwhile).
const THEIR_JOBS: usize = 4;

#[test]
fn one_users_hung_jobs_leave_root_a_slot_for_its_rank_behind() {
    let name = "one_users_hung_jobs_leave_root_a_slot_for_its_rank_behind";
    let Some((dir, _)) = daemon_test(name) else {
        return;
    };
    let exe = own_nccl_ranks(&dir);
    let (daemon, mut lines) = start_daemon(&dir, &exe, &STALLS);
    let theirs: Vec<_> = (0..THEIR_JOBS)
        .map(|i| {
            // The job's program where `nobody` can run it, each job a scratch of its own.
            let scratch = nobodys_folder(&dir, &format!("theirs-{i}"));
            let mut job = Command::new(&exe)
                .args(["2", "4", "1", "3", "10000", "1500"])
                .env("TMPDIR", &scratch)
                .uid(65534)
                .gid(65534)
                .stdout(Stdio::piped())
                .spawn()
                .unwrap();
            let rx = job_lines(&mut job);
            (job, rx)
        })
        .collect();
    let their_pids: Vec<[u32; 2]> = theirs.iter().map(|(_, rx)| set_up(rx)).collect();
    let hung = |pids: &[u32; 2]| format!("hang: pid {}'s hipStreamSynchronize", pids[0]);
    let their_hangs: Vec<String> = their_pids.iter().map(hung).collect();
    lines.wait_for_all(&their_hangs.iter().map(String::as_str).collect::<Vec<_>>());
    // Two of theirs traced, two held back, said as such.
    let held = "not traced, 2 of its user's laggards are traced already (user_limit)";
    lines.wait_for_all(&[held]);
    // Root's job hangs while theirs do: its laggard is traced all the same.
    let (mut job, rx) = laggard_job(&exe, &dir);
    let _ = rx.recv().unwrap();
    let pids = set_up(&rx);
    let traced = format!("rank behind: pid {} is at #2 of comm", pids[1]);
    lines.wait_for_all(&[&hung(&pids), &traced]);
    let addr = metrics_addr(&lines);
    let untraced = |why: &str| {
        metric(
            &addr,
            &format!("rocsync_behind_untraced_total{{reason=\"{why}\"}}"),
        )
    };
    assert_eq!(untraced("user_limit"), 2.0);
    assert_eq!(untraced("node_limit"), 0.0);
    let said = lines.drain();
    for p in &their_pids {
        let tracing = format!("rank behind: pid {} is at #2", p[1]);
        assert_eq!(said.iter().filter(|l| l.contains(&tracing)).count(), 1);
    }
    assert!(job.wait().unwrap().success());
    for (mut job, _) in theirs {
        assert!(job.wait().unwrap().success());
    }
    stop(daemon);
}
