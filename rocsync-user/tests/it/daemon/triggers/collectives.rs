//! Which rank, which collective: a job of two rank processes over the simulated RCCL in
//! which rank 1 sleeps on the host before collective 3 while rank 0 enters it and blocks
//! in its stream's synchronisation. The daemon's hang trace of rank 0, its log line and
//! `/metrics` name the collective (#3 of the communicator whose id is the hash of the
//! job's unique id) and rank 1 behind at #2 — checked against the job's own log. Needs
//! root.

use std::process::{Command, Stdio};

use crate::{
    collectives::{comm_id_of, job_lines},
    common::daemon::*,
    daemon::triggers::stalls::{listed_trace, stall_traces},
};

#[test]
fn a_hang_names_the_collective_it_waits_on_and_the_rank_behind() {
    let name = "a_hang_names_the_collective_it_waits_on_and_the_rank_behind";
    let Some((dir, _)) = daemon_test(name) else {
        return;
    };
    let exe = own_nccl_ranks(&dir);
    let flags = [
        "--capture-on-stall",
        "50ms",
        "--stall-window-after",
        "300ms",
    ];
    let (daemon, mut lines) = start_daemon(&dir, &exe, &flags);
    let addr = metrics_addr(&lines);
    // 2 ranks, 4 collectives; rank 1 sleeps 5 s before #3. 1.5 s for the daemon to
    // track each rank before it sets its communicator up.
    let mut job = Command::new(&exe)
        .args(["2", "4", "1", "3", "5000", "1500"])
        .env("TMPDIR", dir.path(""))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let rx = job_lines(&mut job);
    let uid = rx.recv().unwrap();
    let id = comm_id_of(uid.strip_prefix("uid ").unwrap());
    let mut pids = [0u32; 2];
    while pids.contains(&0) {
        let line = rx.recv().unwrap();
        let w: Vec<&str> = line.split(' ').collect();
        if w[4] == "comm" {
            pids[w[1].parse::<usize>().unwrap()] = w[3].parse().unwrap();
        }
    }
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
