//! Which rank, which collective: a job of two rank processes over the simulated RCCL in
//! which rank 1 sleeps on the host before collective 3 while rank 0 enters it and blocks
//! in its stream's synchronisation. The daemon's hang trace of rank 0, its log line and
//! `/metrics` name the collective (#3 of the communicator whose id is the hash of the
//! job's unique id) and rank 1 behind at #2 — checked against the job's own log. Needs
//! root.

use std::{
    process::{Command, Stdio},
    sync::mpsc,
};

use crate::{
    collectives::{comm_id_of, job_lines},
    common::{Reaped, TempDir, daemon::*},
    daemon::triggers::stalls::{listed_trace, stall_traces},
};

/// The job of 2 ranks, 4 collectives, whose rank 1 sleeps 5 s before #3 (1.5 s first for
/// the daemon to track each rank before it sets its communicator up), and its log.
pub(super) fn laggard_job(
    exe: &std::path::Path,
    dir: &TempDir,
) -> (std::process::Child, mpsc::Receiver<String>) {
    let mut job = Command::new(exe)
        .args(["2", "4", "1", "3", "5000", "1500"])
        .env("TMPDIR", dir.path(""))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = job_lines(&mut job);
    (job, rx)
}

/// The pids of the two ranks, in rank order, once each has set its communicator up.
pub(super) fn set_up(rx: &mpsc::Receiver<String>) -> [u32; 2] {
    let mut pids = [0u32; 2];
    while pids.contains(&0) {
        let line = rx.recv().unwrap();
        let w: Vec<&str> = line.split(' ').collect();
        if w.len() > 4 && w[4] == "comm" {
            pids[w[1].parse::<usize>().unwrap()] = w[3].parse().unwrap();
        }
    }
    pids
}

/// The daemon's stall and hang settings in these tests: a 50 ms stall traced for 300 ms
/// after; a hang past 1 s (the laggard's pause is 5 s).
pub(super) const STALLS: [&str; 6] = [
    "--capture-on-stall",
    "50ms",
    "--stall-window-after",
    "300ms",
    "--hang-after",
    "1s",
];

#[test]
fn a_hang_names_the_collective_it_waits_on_and_the_rank_behind() {
    let name = "a_hang_names_the_collective_it_waits_on_and_the_rank_behind";
    let Some((dir, _)) = daemon_test(name) else {
        return;
    };
    let exe = own_nccl_ranks(&dir);
    let (daemon, mut lines) = start_daemon(&dir, &exe, &STALLS);
    let addr = metrics_addr(&lines);
    let (mut job, rx) = laggard_job(&exe, &dir);
    let uid = rx.recv().unwrap();
    let id = comm_id_of(uid.strip_prefix("uid ").unwrap());
    let pids = set_up(&rx);
    let said = format!(
        "waits on ncclAllReduce #3 of comm {id}; rank 1 (pid {}) is at #2",
        pids[1]
    );
    lines.wait_for(&format!("hang: pid {}'s hipStreamSynchronize", pids[0]));
    assert!(
        lines.1.last().unwrap().contains(&said),
        "{:?}",
        lines.1.last()
    );
    // While it hangs, each rank's last collective.
    let seq = |rank: usize| {
        metric(
            &addr,
            &format!(
                "rocsync_collective_seq{{comm=\"{id}\",rank=\"{rank}\",pid=\"{}\"}}",
                pids[rank]
            ),
        )
    };
    assert_eq!((seq(0), seq(1)), (3.0, 2.0));
    // `rocsync status` says each rank's communicator and where it is.
    let status = ask_daemon(&dir.path("rocsync.sock"), &["status"]);
    for (rank, at) in [(0, 3), (1, 2)] {
        let want = format!("comm {id}  rank {rank} of 2  at #{at}");
        assert!(status.contains(&want), "no {want:?} in {status}");
    }
    assert!(
        job.try_wait().unwrap().is_none(),
        "read after the hang ended"
    );
    assert!(job.wait().unwrap().success());
    // The job's own log: rank 1 entered #3 only after rank 0 had.
    let log: Vec<String> = rx.try_iter().collect();
    let at = |needle: &str| log.iter().position(|l| l == needle).unwrap();
    let (r0, r1) = (pids[0], pids[1]);
    assert!(
        at(&format!("rank 0 pid {r0} allreduce 3")) < at(&format!("rank 1 pid {r1} allreduce 3"))
    );

    let listed = stall_traces(&dir.path("rocsync.sock"), 2);
    let t = listed_trace(&listed, "hang", r0);
    let hang = &t["rocsync"]["parameters"]["hang"];
    let c = &hang["collective"];
    assert_eq!(
        (c["api"].as_str(), c["seq"].as_u64(), c["comm"].as_str()),
        (Some("ncclAllReduce"), Some(3), Some(id.as_str())),
        "{hang}"
    );
    assert_eq!(
        (c["rank"].as_u64(), c["nranks"].as_u64()),
        (Some(0), Some(2))
    );
    let behind = hang["behind"].as_array().unwrap();
    assert_eq!(behind.len(), 1, "{hang}");
    assert_eq!(
        (
            behind[0]["pid"].as_u64(),
            behind[0]["rank"].as_u64(),
            behind[0]["seq"].as_u64()
        ),
        (Some(u64::from(r1)), Some(1), Some(2))
    );
    // The chain's last step is the collective on the blocked stream.
    let steps = hang["waits_on"].as_array().unwrap();
    assert!(
        steps.last().unwrap().get("collective").is_some(),
        "{steps:?}"
    );
    stop(daemon);
}

/// A communicator id is a hash anyone can forge (the unique id's bytes are whatever a
/// process passes): another user's process joining the same id, further behind than the
/// real laggard, is never named behind in the hang, nor traced for it.
#[test]
fn another_users_process_forging_the_communicator_is_never_named_behind() {
    use std::os::unix::{fs::PermissionsExt, process::CommandExt};
    let name = "another_users_process_forging_the_communicator_is_never_named_behind";
    let Some((dir, _)) = daemon_test(name) else {
        return;
    };
    // The job's files where the other user can run them, its own scratch apart.
    std::fs::set_permissions(dir.path(""), std::fs::Permissions::from_mode(0o755)).unwrap();
    let exe = own_nccl_ranks(&dir);
    let theirs = dir.path("theirs");
    std::fs::create_dir(&theirs).unwrap();
    std::os::unix::fs::chown(&theirs, Some(65534), Some(65534)).unwrap();
    let (daemon, mut lines) = start_daemon(&dir, &exe, &STALLS);
    let (mut job, rx) = laggard_job(&exe, &dir);
    let uid = rx.recv().unwrap();
    let hex = uid.strip_prefix("uid ").unwrap().to_string();
    let id = comm_id_of(&hex);
    // The forger: rank 1 of the same unique id, one collective, then blocked (its own
    // scratch file: nobody else enters). It sets up before the job's ranks do.
    let forger = Reaped(
        Command::new(&exe)
            .args(["rank", "1", "2", "1", "9", "0", "0", "1000", "0", &hex])
            .env("TMPDIR", &theirs)
            .uid(65534)
            .gid(65534)
            .stdout(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let pids = set_up(&rx);
    let f = forger.0.id();
    lines.wait_for(&format!("hang: pid {}'s hipStreamSynchronize", pids[0]));
    let said = lines.1.last().unwrap().clone();
    assert!(
        said.contains(&format!("comm {id}; rank 1 (pid {}) is at #2", pids[1])),
        "{said}"
    );
    assert!(
        !said.contains(&format!("pid {f})")),
        "the forger is named: {said}"
    );
    // Its forged entry is there all the same: /metrics shows every communicator.
    let forged = format!("rocsync_collective_seq{{comm=\"{id}\",rank=\"1\",pid=\"{f}\"}}");
    assert_eq!(metric(&metrics_addr(&lines), &forged), 1.0);
    assert!(job.wait().unwrap().success());
    let listed = stall_traces(&dir.path("rocsync.sock"), 2);
    let hang = &listed_trace(&listed, "hang", pids[0])["rocsync"]["parameters"]["hang"];
    let behind: Vec<u64> = (hang["behind"].as_array().unwrap().iter())
        .map(|b| b["pid"].as_u64().unwrap())
        .collect();
    assert_eq!(behind, [u64::from(pids[1])], "{hang}");
    let traced_forger = listed.iter().any(|p| {
        let n = p.file_name().unwrap().to_string_lossy();
        n.starts_with(&format!("behind-{f}-"))
    });
    assert!(!traced_forger, "{listed:?}");
    drop(forger);
    stop(daemon);
}

/// One process making communicators without end gets its quota of the probes' shared
/// maps (64) and no more: the rest are counted as dropped, and another process's
/// communicator is still there.
#[test]
fn a_process_making_communicators_without_end_gets_its_quota_and_the_rest_is_counted() {
    let name = "a_process_making_communicators_without_end_gets_its_quota_and_the_rest_is_counted";
    let Some((dir, _)) = daemon_test(name) else {
        return;
    };
    let exe = own_nccl_ranks(&dir);
    let (daemon, lines) = start_daemon(&dir, &exe, &[]);
    let addr = metrics_addr(&lines);
    // One rank of its own (nobody late), 200 splits before its 3 collectives, a second
    // apart (read while they live: a process gone is no longer shown).
    let run = |splits: &str| {
        Command::new(&exe)
            .args(["1", "3", "9", "0", "0", "1500", "1000"])
            .env("TMPDIR", dir.path(""))
            .env("NCCL_RANKS_SPLITS", splits)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap()
    };
    let mut greedy = run("200");
    let mut modest = run("0");
    let (g, m) = (job_lines(&mut greedy), job_lines(&mut modest));
    // Its pid as it started; returned once it has entered its 2nd collective.
    let pid_of = |rx: &mpsc::Receiver<String>| -> u32 {
        let mut pid = 0;
        loop {
            let line = rx.recv().unwrap();
            if line.ends_with("started") {
                pid = line.split(' ').nth(3).unwrap().parse().unwrap();
            }
            if line.ends_with("allreduce 2") {
                return pid;
            }
        }
    };
    let (gp, mp) = (pid_of(&g), pid_of(&m));
    let body = get(&addr, "/metrics");
    let series = |pid: u32| {
        body.lines()
            .filter(|l| {
                l.starts_with("rocsync_collective_seq{") && l.contains(&format!("pid=\"{pid}\""))
            })
            .count()
    };
    // Its world and 63 splits; the others refused, and counted.
    assert_eq!(series(gp), 64, "{body}");
    assert_eq!(series(mp), 1, "{body}");
    let dropped = metric(
        &addr,
        "rocsync_dropped_records_total{reason=\"comm_state\"}",
    );
    assert_eq!(dropped, (1 + 200 - 64) as f64);
    assert!(greedy.wait().unwrap().success());
    assert!(modest.wait().unwrap().success());
    stop(daemon);
}
