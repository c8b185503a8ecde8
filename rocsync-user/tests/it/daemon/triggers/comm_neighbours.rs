//! The daemon's communicator state against a neighbour (issue 60, items 5, 6, 12): a
//! process of the same user in another cgroup replaying a job's unique id, and one
//! user's many processes making communicators without end. Needs root.

use std::{
    os::unix::{fs::PermissionsExt, process::CommandExt},
    process::{Child, Command, Stdio},
    sync::mpsc,
};

use super::collectives::{STALLS, laggard_job, set_up};
use crate::{
    collectives::{comm_id_of, job_lines},
    common::{Reaped, TempDir, daemon::*, pod::PodCgroup, pod::cgroup2_mount},
};

/// Ranks are counted in a communicator with the waiter's user *and* cgroup: a root
/// process in another cgroup (another pod) joining the job's unique id, further behind
/// than the real laggard, is never named behind, and the real one is.
#[test]
fn a_process_of_the_same_user_in_another_cgroup_is_never_named_behind() {
    let name = "a_process_of_the_same_user_in_another_cgroup_is_never_named_behind";
    let Some((dir, _)) = daemon_test(name) else {
        return;
    };
    let Some(hierarchy) = cgroup2_mount() else {
        rocsync_tests::skip(name, "no cgroup v2 hierarchy");
        return;
    };
    let cgroup = PodCgroup::create(&hierarchy);
    let exe = own_nccl_ranks(&dir);
    let theirs = dir.path("theirs");
    std::fs::create_dir(&theirs).unwrap();
    let (daemon, mut lines) = start_daemon(&dir, &exe, &STALLS);
    let (mut job, rx) = laggard_job(&exe, &dir);
    let uid = rx.recv().unwrap();
    let hex = uid.strip_prefix("uid ").unwrap().to_string();
    let id = comm_id_of(&hex);
    // Rank 1 of the same unique id, one collective, then blocked (its own scratch:
    // nobody else enters), in a cgroup of its own; set up before the job's ranks.
    let mut cmd = Command::new(&exe);
    cmd.args(["rank", "1", "2", "1", "9", "0", "0", "1000", "0", &hex])
        .env("TMPDIR", &theirs)
        .stdout(Stdio::null());
    cgroup.enter_at_exec(&mut cmd);
    let other = Reaped(cmd.spawn().unwrap());
    let pids = set_up(&rx);
    let f = other.0.id();
    lines.wait_for(&format!("hang: pid {}'s hipStreamSynchronize", pids[0]));
    let said = lines.1.last().unwrap().clone();
    assert!(
        said.contains(&format!("comm {id}; rank 1 (pid {}) is at #2", pids[1])),
        "{said}"
    );
    assert!(!said.contains(&format!("pid {f})")), "named: {said}");
    assert!(job.wait().unwrap().success());
    drop(other);
    stop(daemon);
}

/// `n` processes of `nobody`'s, each a rank of its own making 64 communicators (its
/// world and 63 splits) and then a collective every 4 s, 3 of them; returned once each
/// has entered its first.
fn flood(dir: &TempDir, exe: &std::path::Path, n: usize) -> Vec<Reaped> {
    let theirs = dir.path("theirs");
    std::fs::create_dir(&theirs).unwrap();
    std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
    let mut flood = Vec::new();
    let mut logs = Vec::new();
    for _ in 0..n {
        let mut c: Child = Command::new(exe)
            .args(["1", "3", "9", "0", "0", "1500", "4000"])
            .env("TMPDIR", &theirs)
            .env("NCCL_RANKS_SPLITS", "63")
            .uid(65534)
            .gid(65534)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        logs.push(job_lines(&mut c));
        flood.push(Reaped(c));
    }
    for rx in &logs {
        wait_line(rx, "allreduce 1");
    }
    flood
}

fn wait_line(rx: &mpsc::Receiver<String>, end: &str) {
    while !rx.recv().unwrap().ends_with(end) {}
}

/// A daemon test's directory, readable by `nobody` (the flood's programs run from it),
/// and its copy of the rank program.
fn open_to_nobody(name: &str) -> Option<(TempDir, std::path::PathBuf)> {
    let (dir, _) = daemon_test(name)?;
    std::fs::set_permissions(dir.path(""), std::fs::Permissions::from_mode(0o755)).unwrap();
    let exe = own_nccl_ranks(&dir);
    Some((dir, exe))
}

/// 17 of `nobody`'s processes of 64 communicators each (1 088, past the user's 1 024)
/// get their user's share of the probes' state and no more, the rest counted; root's
/// job, set up after them, keeps its communicator, and its hang names the rank behind.
#[test]
fn one_users_many_processes_get_the_users_share_of_communicator_state() {
    let Some((dir, exe)) =
        open_to_nobody("one_users_many_processes_get_the_users_share_of_communicator_state")
    else {
        return;
    };
    let (daemon, mut lines) = start_daemon(&dir, &exe, &STALLS);
    let addr = metrics_addr(&lines);
    let flood = flood(&dir, &exe, 17);
    // Every tracked process's (root's job starts later): nobody's rank processes (the
    // flood's children), each launcher's none.
    let status = daemon_status(&dir.path("rocsync.sock"));
    let kept: usize = (status["tracked"].as_array().unwrap().iter())
        .map(|t| t["communicators"].as_array().map_or(0, Vec::len))
        .sum();
    // Their communicators and streams together: 1 024 at most.
    assert!(kept <= 1024, "{kept} kept");
    let dropped = metric(
        &addr,
        "rocsync_dropped_records_total{reason=\"comm_state\"}",
    );
    assert!(dropped >= (17 * 65 - 1024) as f64, "{dropped}");
    let (mut job, rx) = laggard_job(&exe, &dir);
    let id = comm_id_of(rx.recv().unwrap().strip_prefix("uid ").unwrap());
    let pids = set_up(&rx);
    lines.wait_for(&format!("hang: pid {}'s hipStreamSynchronize", pids[0]));
    let said = lines.1.last().unwrap().clone();
    let want = format!("comm {id}; rank 1 (pid {}) is at #2", pids[1]);
    assert!(said.contains(&want), "{said}");
    assert!(job.wait().unwrap().success());
    drop(flood);
    stop(daemon);
}

/// `rocsync_collective_seq` holds at most 256 series of one user's: `nobody`'s 17
/// processes of 64 communicators each show 256, the rest counted as left out, and
/// root's rank still shows.
#[test]
fn one_users_communicators_show_at_most_its_share_of_series() {
    let Some((dir, exe)) =
        open_to_nobody("one_users_communicators_show_at_most_its_share_of_series")
    else {
        return;
    };
    let (daemon, lines) = start_daemon(&dir, &exe, &[]);
    let addr = metrics_addr(&lines);
    let mut mine = Command::new(&exe)
        .args(["1", "3", "9", "0", "0", "1500", "4000"])
        .env("TMPDIR", dir.path(""))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = job_lines(&mut mine);
    let flood = flood(&dir, &exe, 17);
    wait_line(&rx, "allreduce 1");
    // nobody's rank processes' (the launchers' children) and root's one.
    let body = get(&addr, "/metrics");
    let series = (body.lines())
        .filter(|l| l.starts_with("rocsync_collective_seq{"))
        .count();
    assert_eq!(series, 256 + 1, "{body}");
    let left_out = metric(
        &addr,
        "rocsync_collective_seq_left_out_total{reason=\"user_limit\"}",
    );
    assert!(left_out >= 500.0, "{left_out}");
    assert!(mine.wait().unwrap().success());
    drop(flood);
    stop(daemon);
}
